//! The loadgen's arguments of a case's workers: the client's (`tcp-client` and its protocol's
//! flags), the server's, the port each server listens on and the `listen` address it may
//! register (what its arguments advertise, checked by the registry).
//!
//! Invariants: a client gets only the flags of its case's protocol (the loadgen refuses the
//! others); a server advertises only what the operator can vouch for (its Service's name on
//! the Service path, otherwise its own address), and `server_listen` allows exactly that and
//! its port.

use std::net::IpAddr;

use protocol::Protocol;

use crds::egress::{Direction, EgressCase};

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
    args.extend(protocol_args(case));
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

/// The flags of the case's protocol (the loadgen refuses a flag of another protocol).
fn protocol_args(case: &EgressCase) -> Vec<String> {
    let mut args = vec![];
    let mut flag = |name: &str, value: String| args.extend([name.to_string(), value]);
    let direction = match case.direction {
        Direction::Send => "send",
        Direction::Receive => "receive",
        Direction::Both => "both",
    };
    match case.protocol {
        Protocol::TcpStream => {
            flag(
                "-l",
                case.shown_message_size().unwrap_or_default().to_string(),
            );
            flag("--direction", direction.into());
            if let Some(rate) = case.latency_probe {
                flag("--latency-probe", rate.to_string());
            }
        }
        Protocol::UdpStream => {
            if let Some(len) = case.message_size {
                flag("-l", len.to_string());
            }
            flag("--direction", direction.into());
            if let Some(b) = &case.bitrate {
                flag("-b", b.clone());
            }
            if let Some(pps) = case.packets_per_second {
                flag("--pps", pps.to_string());
            }
        }
        Protocol::TcpRr | Protocol::TcpCrr | Protocol::UdpRr => {
            let default = crds::cases::default_rr_size(case.protocol);
            let size = |s: Option<u32>| s.unwrap_or(default).to_string();
            flag("--request-size", size(case.request_size));
            flag("--response-size", size(case.response_size));
            if let Some(burst) = case.burst.filter(|b| *b > 0) {
                flag("--burst", burst.to_string());
            }
            if let Some(rate) = case.rate {
                flag("--rate", rate.to_string());
            }
            if let Some(t) = case.timeout {
                // Whole milliseconds, rounded up (what the loadgen takes).
                let ms = std::time::Duration::from(t).as_nanos().div_ceil(1_000_000);
                flag("--timeout", format!("{ms}ms"));
            }
        }
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
