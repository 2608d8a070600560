//! Sockets of the request/response data path: a tcp-crr connection whose failure keeps its
//! OS error (the report classifies it), and udp-rr sockets on both ends.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use crate::tcp::net::Source;
use crate::tcp::sys;

/// Opens one TCP connection to `addr` from `source`, or the OS error of the step that failed
/// (bind, connect; a connect slower than `timeout` is `TimedOut`). Reads and writes of the
/// connection time out after `timeout` too. A blocking connect bounded by SO_SNDTIMEO: fewer
/// system calls per connection than a non-blocking connect and poll.
pub fn connect_once(
    addr: SocketAddr,
    source: &Source,
    timeout: Duration,
    nodelay: bool,
) -> io::Result<TcpStream> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_write_timeout(Some(timeout))?;
    bind_source(&sock, source, true)?;
    sock.connect(&addr.into()).map_err(|e| {
        // A blocking connect that hits SO_SNDTIMEO says EINPROGRESS.
        if e.raw_os_error() == Some(libc::EINPROGRESS) {
            io::Error::from(io::ErrorKind::TimedOut)
        } else {
            e
        }
    })?;
    sock.set_read_timeout(Some(timeout))?;
    if nodelay {
        sock.set_tcp_nodelay(true)?;
    }
    Ok(sock.into())
}

/// A UDP socket bound like the client's connections and connected to `server` (the kernel
/// then drops datagrams from anyone else).
pub fn udp_connect(server: SocketAddr, source: &Source) -> io::Result<UdpSocket> {
    let sock = Socket::new(
        Domain::for_address(server),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    bind_source(&sock, source, false)?;
    if source.addr.is_none() {
        let any = match server {
            SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        sock.bind(&SocketAddr::new(any, 0).into())?;
    }
    sock.connect(&server.into())?;
    Ok(sock.into())
}

/// The server's UDP socket on exactly `local` (the address the client reached over TCP, so
/// answers leave from the address the client sends to).
pub fn udp_bind(local: SocketAddr, device: Option<&str>) -> io::Result<UdpSocket> {
    let local = SocketAddr::new(local.ip().to_canonical(), local.port());
    let sock = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
    if let Some(dev) = device {
        sock.bind_device(Some(dev.as_bytes()))?;
    }
    sock.bind(&local.into())?;
    Ok(sock.into())
}

fn bind_source(sock: &Socket, source: &Source, tcp: bool) -> io::Result<()> {
    if let Some(dev) = &source.device {
        sock.bind_device(Some(dev.as_bytes()))?;
    }
    if let Some(ip) = source.addr {
        if tcp {
            sys::set_bind_address_no_port(sock)?;
        }
        sock.bind(&SocketAddr::new(ip, 0).into())?;
    }
    Ok(())
}
