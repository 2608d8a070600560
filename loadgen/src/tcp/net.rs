//! Socket set-up: resolution, binding to a source address or interface, listening.

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::TcpError;

/// Where outgoing connections come from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Source {
    pub addr: Option<IpAddr>,
    pub device: Option<String>,
}

/// Resolves `host`, preferring an address of the same family as the source address, if any.
pub(crate) fn resolve(host: &str, port: u16, source: &Source) -> Result<SocketAddr, TcpError> {
    let resolve_error = |reason: String| TcpError::Resolve {
        host: host.to_string(),
        reason,
    };
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| resolve_error(e.to_string()))?
        .collect();
    let same_family = |a: &&SocketAddr| source.addr.is_none_or(|s| s.is_ipv4() == a.is_ipv4());
    addrs
        .iter()
        .find(same_family)
        .or(addrs.first())
        .copied()
        .ok_or_else(|| resolve_error("no address".into()))
}

pub(crate) fn connect(
    addr: SocketAddr,
    source: &Source,
    timeout: Duration,
) -> Result<TcpStream, TcpError> {
    let fail = |cause: io::Error| TcpError::Connect { addr, cause };
    let sock =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(fail)?;
    if let Some(dev) = &source.device {
        sock.bind_device(Some(dev.as_bytes()))
            .map_err(|e| TcpError::io(format!("binding to interface {dev}"), e))?;
    }
    if let Some(ip) = source.addr {
        sock.bind(&SocketAddr::new(ip, 0).into())
            .map_err(|e| TcpError::io(format!("binding to source address {ip}"), e))?;
    }
    sock.connect_timeout(&addr.into(), timeout).map_err(fail)?;
    Ok(sock.into())
}

/// Listens on `addr:port`, or on every address (IPv6 dual-stack, falling back to IPv4 where IPv6
/// is unavailable, e.g. a namespace with IPv6 disabled).
pub(crate) fn listen(
    addr: Option<IpAddr>,
    port: u16,
    device: Option<&str>,
) -> Result<TcpListener, TcpError> {
    match addr {
        Some(ip) => listen_on(SocketAddr::new(ip, port), device),
        None => listen_on(
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
            device,
        )
        .or_else(|_| listen_on(SocketAddr::new([0, 0, 0, 0].into(), port), device)),
    }
}

fn listen_on(addr: SocketAddr, device: Option<&str>) -> Result<TcpListener, TcpError> {
    let fail = |cause: io::Error| TcpError::Listen {
        addr: addr.to_string(),
        cause,
    };
    let sock =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(fail)?;
    sock.set_reuse_address(true).map_err(fail)?;
    if addr.is_ipv6() {
        sock.set_only_v6(false).map_err(fail)?;
    }
    if let Some(dev) = device {
        sock.bind_device(Some(dev.as_bytes()))
            .map_err(|e| TcpError::io(format!("binding to interface {dev}"), e))?;
    }
    sock.bind(&addr.into()).map_err(fail)?;
    sock.listen(128).map_err(fail)?;
    Ok(sock.into())
}
