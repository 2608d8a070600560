//! The loadgen's arguments of a case's workers: the client's (`tcp-client` and its protocol's
//! flags), the server's, the port each server listens on and the `listen` address it may
//! register (what its arguments advertise, checked by the registry).
//!
//! Invariants: a client gets only the flags of its case's protocol (the loadgen refuses the
//! others); a server advertises only what the operator can vouch for (its Service's name on
//! the Service path, otherwise its own address), and `server_listen` allows exactly that and
//! its port.

use std::net::IpAddr;

use crds::egress::EgressCase;

use crate::egress::protocols;
use crate::store::registry::{Listen, ListenHost};

/// What pair `pair`'s server may register for its client: the port it was given and a host
/// the operator can vouch for (`server_args` says which it advertises). A worker speaks only
/// for itself: it cannot send its client anywhere else.
pub fn server_listen(case: &EgressCase, service: Option<&str>, pair: u32) -> Listen {
    let server = &case.server;
    let bind = server
        .bind_address
        .as_deref()
        .and_then(|a| a.parse::<IpAddr>().ok())
        .filter(|ip| !ip.is_unspecified());
    let host = match (service, bind) {
        (Some(name), _) => ListenHost::Service(name.to_string()),
        (None, Some(ip)) => ListenHost::OwnOr(ip),
        // The address of a host interface (a vxlan device) the API server does not know.
        (None, None) if server.host_network && server.bind_interface.is_some() => {
            ListenHost::NodeInterface
        }
        (None, None) => ListenHost::Own,
    };
    Listen {
        host,
        // validate refuses ports past 65535; 0 then matches no registration.
        port: u16::try_from(server_port(case, pair)).unwrap_or(0),
    }
}

/// `netbench-loadgen tcp-client --protocol P ...`: an external server is named here; an
/// in-cluster one comes from the barrier (the address it registered: its pod IP, or its
/// Service's name on the Service path).
pub fn client_args(case: &EgressCase) -> Vec<String> {
    let mut args = vec![
        "tcp-client".to_string(),
        "--protocol".into(),
        case.protocol.as_str().into(),
        "-t".into(),
        format!("{}", std::time::Duration::from(case.duration).as_secs_f64()),
        "-P".into(),
        case.streams.to_string(),
    ];
    args.extend(protocols::client_flags(case));
    args.extend(["--output".into(), "json".into()]);
    if let Some(address) = &case.server.address {
        args.extend([
            "-c".into(),
            address.clone(),
            "-p".into(),
            case.server.port.to_string(),
        ]);
    }
    if let Some(dev) = &case.client.bind_interface {
        args.extend(["--bind-dev".into(), dev.clone()]);
    }
    if let Some(addr) = &case.client.bind_address {
        args.extend(["-B".into(), addr.clone()]);
    }
    args
}

/// `netbench-loadgen server ...`: serves the one test of this case (any protocol), then exits.
/// On the Service path it registers its Service's name instead of its own address, so the
/// client's connections go through the Service.
pub fn server_args(case: &EgressCase, service: Option<&str>, pair: u32) -> Vec<String> {
    let mut args = vec![
        "server".to_string(),
        "-p".into(),
        server_port(case, pair).to_string(),
    ];
    if let Some(name) = service {
        args.extend(["--advertise".into(), name.to_string()]);
    }
    if let Some(dev) = &case.server.bind_interface {
        args.extend(["--bind-dev".into(), dev.clone()]);
    }
    if let Some(addr) = &case.server.bind_address {
        args.extend(["-B".into(), addr.clone()]);
    }
    args
}

/// The port pair `pair`'s server listens on: the case's port, or on the host network (where
/// several servers of a topology may share a node) the case's port plus the pair's index.
/// `validate` refuses a topology whose ports would pass 65535.
pub fn server_port(case: &EgressCase, pair: u32) -> u32 {
    let port = u32::from(case.server.port);
    if case.server.host_network && case.topology.is_some() {
        port.saturating_add(pair)
    } else {
        port
    }
}
