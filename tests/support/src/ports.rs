//! Ports for tests without the bind-probe, drop, reuse race: a port found free by binding and
//! released again can be taken by anyone (another test, an outgoing connection) before the
//! test uses it. So a test keeps what it bound, or lets the server bind port 0 and tells it,
//! and only a program that can do neither (iperf3, nginx) gets a candidate port, checked to be
//! its own afterwards.

use std::net::{Ipv4Addr, SocketAddr};

use socket2::{Domain, Protocol, Socket, Type};

/// A TCP port on 127.0.0.1 that refuses connections for as long as this value lives: its socket
/// is bound but not listening, so a connect gets a reset and nobody else can listen there.
pub struct ClosedPort {
    _socket: Socket,
    pub port: u16,
}

impl ClosedPort {
    #[allow(clippy::new_without_default)] // it binds a socket: no default value
    pub fn new() -> ClosedPort {
        let socket =
            Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("a TCP socket");
        socket
            .bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, 0)).into())
            .expect("binding 127.0.0.1:0");
        let port = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .expect("the bound address")
            .port();
        ClosedPort {
            _socket: socket,
            port,
        }
    }
}

/// Starts a server that can only be given a port number: `start(port)` with candidate ports
/// (free a moment ago) until it returns `Some`, which it must do only once it has checked that
/// the listener on that port is its own (`None`: the port was taken meanwhile, try another).
pub fn start_on_free_port<T>(what: &str, mut start: impl FnMut(u16) -> Option<T>) -> (T, u16) {
    const ATTEMPTS: usize = 5;
    for _ in 0..ATTEMPTS {
        let port = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("finding a candidate port")
            .port();
        if let Some(server) = start(port) {
            return (server, port);
        }
    }
    panic!("{what} did not start on any of {ATTEMPTS} free ports");
}
