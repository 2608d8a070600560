//! Who a request to the registry comes from and what it may claim: the caller as the
//! authenticator established it (a worker pod, which speaks only for itself), the node it runs
//! on, and the `listen` address a server may register.
//!
//! Invariants: a caller's node and addresses are the API server's, never the request's; a
//! claim of another node or of an address the caller does not own (or the operator did not
//! give it) is refused with why; hosts compare as addresses (IPv4-mapped IPv6 as IPv4).

use std::net::IpAddr;

use super::error::RegistryError;

/// The `listen` address a server may register: a host it owns and the port the plan gave it.
#[derive(Clone, Debug, PartialEq)]
pub struct Listen {
    pub host: ListenHost,
    pub port: u16,
}

/// Which hosts a server may name in `listen`.
#[derive(Clone, Debug, PartialEq)]
pub enum ListenHost {
    /// One of its pod's addresses as the API server reports them (see [`Caller::addresses`]).
    Own,
    /// Its pod's addresses, or this one (the case's `bindAddress`, which the benchmark's
    /// author chose, not the worker).
    OwnOr(IpAddr),
    /// The name of the Service the operator made in front of it (the Service path).
    Service(String),
    /// On the host network, bound to an interface (`bindInterface`) whose addresses the API
    /// server does not know (a vxlan device): its pod's addresses, or any unicast address
    /// literal. The port is still checked; see [`check_listen`].
    NodeInterface,
}

/// Who sent a request, as the authenticator established it before any body was read: a worker
/// pod, which may speak only for itself.
#[derive(Clone, Debug, PartialEq)]
pub struct Caller {
    pub namespace: String,
    /// The worker pod's name (worker names are pod names).
    pub worker: String,
    /// The pod's node (spec.nodeName) as the API server reports it; None when unknown.
    pub node: Option<String>,
    /// The pod's addresses as the API server reports them: status.podIPs, and on the host
    /// network also status.hostIPs (the node's).
    pub addresses: Vec<IpAddr>,
}

impl Caller {
    /// A caller known by name only (no node, no address): tests and tools.
    pub fn named(namespace: &str, worker: &str) -> Caller {
        Caller {
            namespace: namespace.to_string(),
            worker: worker.to_string(),
            node: None,
            addresses: vec![],
        }
    }

    /// True when this caller may speak for `worker`.
    pub(super) fn may_speak_for(&self, worker: &str) -> bool {
        self.worker == worker
    }

    /// The node a request of this caller names, checked against its pod's: a claim of another
    /// node is refused; no claim, or the pod's own, gives the pod's node (None when the
    /// operator does not know it: an unchecked claim is never kept).
    pub fn own_node(&self, claimed: Option<&str>) -> Result<Option<String>, RegistryError> {
        match (claimed, &self.node) {
            (Some(claim), Some(node)) if claim != node => Err(RegistryError::NodeNotOwn(format!(
                "worker {} says it runs on node {claim:?}, but its pod runs on node {node:?}",
                self.worker
            ))),
            _ => Ok(self.node.clone()),
        }
    }
}

/// Ok when `listen` is an address a server `caller` may register under `rule`; Err says why
/// not. Hosts compare as addresses (IPv4-mapped IPv6 as IPv4), so "[fd00::1]:5201" and
/// "[fd00:0::1]:5201" are the same.
pub fn check_listen(
    rule: Option<&Listen>,
    caller: &Caller,
    listen: Option<&str>,
) -> Result<(), RegistryError> {
    let refuse = |why: String| Err(RegistryError::ListenNotOwn(why));
    let Some(listen) = listen else {
        return refuse(format!(
            "server {} registered no listen address",
            caller.worker
        ));
    };
    let Some(rule) = rule else {
        return refuse(format!(
            "server {} may not register an address in this run (it has none to give)",
            caller.worker
        ));
    };
    let Some((host, port)) = protocol::worker::split_host_port(listen) else {
        return refuse(format!("listen {listen:?} is not host:port"));
    };
    if port != rule.port {
        return refuse(format!(
            "listen {listen:?}: the operator gave server {} port {}, not {port}",
            caller.worker, rule.port
        ));
    }
    let ip = host.parse::<IpAddr>().ok().map(canonical);
    let own = |ip: IpAddr| caller.addresses.iter().any(|a| canonical(*a) == ip);
    if caller.addresses.is_empty() && !matches!(rule.host, ListenHost::Service(_)) {
        return Err(RegistryError::AddressUnknown);
    }
    let allowed = match (&rule.host, ip) {
        (ListenHost::Service(name), _) => host == *name,
        (ListenHost::Own, Some(ip)) => own(ip),
        (ListenHost::OwnOr(bind), Some(ip)) => own(ip) || canonical(*bind) == ip,
        (ListenHost::NodeInterface, Some(ip)) => own(ip) || is_unicast(ip),
        (_, None) => false,
    };
    if allowed {
        return Ok(());
    }
    let owned: Vec<String> = caller.addresses.iter().map(ToString::to_string).collect();
    let expected = match &rule.host {
        ListenHost::Service(name) => format!("its Service {name}"),
        ListenHost::OwnOr(bind) => format!("its pod's {} or bindAddress {bind}", owned.join(", ")),
        ListenHost::Own | ListenHost::NodeInterface => format!("its pod's {}", owned.join(", ")),
    };
    refuse(format!(
        "listen {listen:?} is not server {}'s own address: the operator expects {expected}, port {}",
        caller.worker, rule.port
    ))
}

/// IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) as the IPv4 address they reach.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// An address one host owns: not unspecified, loopback, link-local, multicast or broadcast.
fn is_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast())
        }
        IpAddr::V6(v6) => {
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || v6.is_unicast_link_local())
        }
    }
}
