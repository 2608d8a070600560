//! The UDP sockets of a test. The server uses ONE port, the number of its TCP listener (as
//! iperf3 does), so a firewall rule or a Service port opened for it covers UDP too: a set-up
//! socket receives each stream's first ("open") datagram, and the stream then gets a socket of
//! its own, bound to the same address and port (SO_REUSEADDR) and connected to the client's
//! stream address, which the kernel prefers for that peer. Every stream thus has its own
//! socket, receive buffer and drop counter at both ends, and works through NAT (the client
//! always speaks first).

use std::io;
use std::net::{SocketAddr, UdpSocket};

use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::sys;
use crate::tcp::net::{bind_to_source, Source};
use crate::tcp::TcpError;

/// Receive buffer asked for on every receiving socket unless the test names one; what the
/// kernel granted is reported.
pub const DEFAULT_RECV_BUFFER: usize = 4 << 20;
/// Largest receive buffer a test may ask for.
pub(crate) const MAX_RECV_BUFFER: usize = 1 << 30;

/// A client stream's socket: bound to the source address/interface, connected to `server`.
pub(crate) fn client_socket(server: SocketAddr, source: &Source) -> Result<UdpSocket, TcpError> {
    let fail =
        |what: &str, cause: io::Error| TcpError::io(format!("{what} (udp to {server})"), cause);
    let sock = Socket::new(
        Domain::for_address(server),
        Type::DGRAM,
        Some(Protocol::UDP),
    )
    .map_err(|e| fail("opening a socket", e))?;
    bind_to_source(&sock, source)?;
    sock.connect(&server.into())
        .map_err(|e| fail("connecting", e))?;
    Ok(sock.into())
}

/// A socket on the server's test port, shared with the other sockets of the test; connected
/// to `peer` when given.
pub(crate) fn server_socket(
    local: SocketAddr,
    device: Option<&str>,
    peer: Option<SocketAddr>,
) -> Result<UdpSocket, TcpError> {
    let fail = |cause: io::Error| TcpError::Listen {
        addr: format!("udp {local}"),
        cause,
    };
    let sock =
        Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP)).map_err(fail)?;
    sock.set_reuse_address(true).map_err(fail)?;
    if let Some(dev) = device {
        sock.bind_device(Some(dev.as_bytes()))
            .map_err(|e| TcpError::io(format!("binding to interface {dev}"), e))?;
    }
    sock.bind(&local.into()).map_err(fail)?;
    if let Some(peer) = peer {
        sock.connect(&peer.into())
            .map_err(|e| TcpError::io(format!("connecting the udp stream to {peer}"), e))?;
    }
    Ok(sock.into())
}

/// Asks for a receive buffer of `bytes` (as SO_RCVBUF takes it: the kernel doubles it),
/// forced past `rmem_max` where allowed, before any datagram can arrive for the socket. Best
/// effort: [`recv_buffer`] reports what was granted.
pub(crate) fn grow_recv_buffer(sock: &UdpSocket, bytes: usize) {
    if sys::force_recv_buffer(sock, bytes).is_err() {
        let _ = SockRef::from(sock).set_recv_buffer_size(bytes);
    }
}

/// The receive buffer the kernel granted (as SO_RCVBUF reads back: twice the payload space
/// it accounts for).
pub(crate) fn recv_buffer(sock: &UdpSocket) -> Option<u64> {
    SockRef::from(sock)
        .recv_buffer_size()
        .ok()
        .and_then(|b| u64::try_from(b).ok())
}

/// The address to use for the UDP side of a control connection's local or peer address
/// (an IPv4 client of a dual-stack listener shows up as ::ffff:a.b.c.d).
pub(crate) fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

/// The largest datagram that fits the path MTU of a connected socket without fragmenting,
/// at most `cap`.
pub(crate) fn fitting_len(sock: &UdpSocket, cap: usize) -> Option<usize> {
    let ipv6 = sock.peer_addr().ok()?.ip().is_ipv6();
    let headers = if ipv6 { 40 + 8 } else { 20 + 8 };
    let mtu = sys::path_mtu(sock, ipv6).ok()?;
    Some(mtu.saturating_sub(headers).min(cap))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connected_stream_socket_takes_its_peers_datagrams_from_the_shared_port() {
        let setup = server_socket("127.0.0.1:0".parse().unwrap(), None, None).unwrap();
        let local = setup.local_addr().unwrap();
        let a = client_socket(local, &Source::default()).unwrap();
        let b = client_socket(local, &Source::default()).unwrap();
        let stream_a = server_socket(local, None, Some(a.local_addr().unwrap())).unwrap();
        a.send(b"to a").unwrap();
        b.send(b"to setup").unwrap();
        let mut buf = [0u8; 16];
        stream_a
            .set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        setup
            .set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let n = stream_a.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"to a");
        let (n, from) = setup.recv_from(&mut buf).unwrap();
        assert_eq!(
            (&buf[..n], from),
            (&b"to setup"[..], b.local_addr().unwrap())
        );
        // And back: the stream socket's replies reach the client socket.
        stream_a.send(b"back").unwrap();
        a.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let n = a.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"back");
        grow_recv_buffer(&stream_a, 100_000);
        assert!(recv_buffer(&stream_a).unwrap() >= 100_000);
        assert!(fitting_len(&a, 1472).unwrap() <= 1472);
        assert_eq!(
            canonical("[::ffff:10.0.0.1]:5".parse().unwrap()),
            "10.0.0.1:5".parse::<SocketAddr>().unwrap()
        );
    }
}
