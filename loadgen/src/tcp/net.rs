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
    bind_to_source(&sock, source)?;
    sock.connect_timeout(&addr.into(), timeout).map_err(fail)?;
    Ok(sock.into())
}

/// Binds an outgoing socket to the source's interface and address, where it names them.
pub(crate) fn bind_to_source(sock: &Socket, source: &Source) -> Result<(), TcpError> {
    if let Some(dev) = &source.device {
        sock.bind_device(Some(dev.as_bytes()))
            .map_err(|e| TcpError::io(format!("binding to interface {dev}"), e))?;
    }
    if let Some(ip) = source.addr {
        sock.bind(&SocketAddr::new(ip, 0).into())
            .map_err(|e| TcpError::io(format!("binding to source address {ip}"), e))?;
    }
    Ok(())
}

/// How long a control connection is retried while the path refuses it.
pub(crate) const PATH_READY_WAIT: Duration = Duration::from_secs(10);

/// Opens a test's control connection: [`connect`], retried for up to [`PATH_READY_WAIT`]
/// while the connection is refused or the host unreachable. The server listened before it
/// registered (and a standalone one before its address was handed out), so a refusal right
/// after means the path to it is not in place yet: a Service whose rules kube-proxy has not
/// written, a route not yet up. Any other error, or one that lasts, ends the test.
pub(crate) fn connect_control(
    addr: SocketAddr,
    source: &Source,
    timeout: Duration,
) -> Result<TcpStream, TcpError> {
    connect_retrying(addr, source, timeout, PATH_READY_WAIT)
}

fn connect_retrying(
    addr: SocketAddr,
    source: &Source,
    timeout: Duration,
    wait: Duration,
) -> Result<TcpStream, TcpError> {
    let deadline = std::time::Instant::now() + wait;
    let mut pause = Duration::from_millis(50);
    loop {
        match connect(addr, source, timeout) {
            Err(TcpError::Connect { cause, .. })
                if path_not_ready(&cause) && std::time::Instant::now() + pause < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            other => return other,
        }
    }
}

fn path_not_ready(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A free port on 127.0.0.1 (bound, then released).
    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap()
    }

    #[test]
    fn a_control_connection_waits_for_a_path_that_comes_up() {
        let port = free_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        // The path comes up a little later (as a Service's rules do).
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let l = TcpListener::bind(addr).unwrap();
            l.accept().map(drop)
        });
        let c = connect_retrying(
            addr,
            &Source::default(),
            Duration::from_secs(1),
            Duration::from_secs(5),
        );
        assert!(c.is_ok(), "{c:?}");
        late.join().unwrap().unwrap();
    }

    #[test]
    fn a_path_that_stays_closed_ends_the_test_with_the_refusal() {
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let start = std::time::Instant::now();
        let e = connect_retrying(
            addr,
            &Source::default(),
            Duration::from_secs(1),
            Duration::from_millis(400),
        )
        .unwrap_err();
        assert!(
            matches!(&e, TcpError::Connect { cause, .. } if cause.kind() == io::ErrorKind::ConnectionRefused),
            "{e}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "bounded: {:?}",
            start.elapsed()
        );
    }
}
