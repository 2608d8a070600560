//! Connectors: plain TCP (TCP_NODELAY) and TLS over it. The HTTP loops are generic over them,
//! so the plain path is monomorphized without TLS indirection.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use std::io::Write as _;

use rustls::pki_types::ServerName;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncRead, AsyncWrite, Interest};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

pub(crate) trait Connector: Clone + 'static {
    type Stream: AsyncRead + AsyncWrite + PeerClosed + Unpin + 'static;
    fn connect(&self) -> impl Future<Output = io::Result<Self::Stream>>;

    /// Connects and may already send (a prefix of) `request`; returns the bytes sent.
    fn connect_send(
        &self,
        request: &[u8],
    ) -> impl Future<Output = io::Result<(Self::Stream, usize)>> {
        let _ = request;
        async { Ok((self.connect().await?, 0)) }
    }
}

/// Whether the peer's FIN has already been seen, without a syscall.
pub(crate) trait PeerClosed {
    fn peer_closed(&self) -> bool {
        false
    }
}

impl PeerClosed for TcpStream {
    /// The reactor keeps the "read closed" flag (EPOLLRDHUP) after a read cleared readability,
    /// so a FIN that came with or just after the response is known without one more read.
    fn peer_closed(&self) -> bool {
        let ready = pin!(self.ready(Interest::READABLE));
        let mut cx = Context::from_waker(Waker::noop());
        matches!(ready.poll(&mut cx), Poll::Ready(Ok(r)) if r.is_read_closed())
    }
}

impl PeerClosed for TlsStream<TcpStream> {}

#[derive(Clone)]
pub(crate) struct Plain {
    pub addr: SocketAddr,
    /// Off only for one-request plain connections, where one write per connection never
    /// meets Nagle's algorithm and the setsockopt would be a wasted syscall.
    pub nodelay: bool,
}

impl Connector for Plain {
    type Stream = TcpStream;

    async fn connect(&self) -> io::Result<TcpStream> {
        let s = TcpStream::connect(self.addr).await?;
        if self.nodelay {
            s.set_nodelay(true)?;
        }
        Ok(s)
    }

    /// On loopback the handshake completes inside connect(2) even though it reports
    /// EINPROGRESS, so the request can be written at once instead of after a reactor turn
    /// (wrk waits for writability). If the socket is still connecting, the write says EAGAIN
    /// and we wait for writability as usual.
    async fn connect_send(&self, request: &[u8]) -> io::Result<(TcpStream, usize)> {
        let socket = Socket::new(
            Domain::for_address(self.addr),
            Type::STREAM.nonblocking().cloexec(),
            Some(Protocol::TCP),
        )?;
        if self.nodelay {
            socket.set_tcp_nodelay(true)?;
        }
        match socket.connect(&self.addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        let std_stream = std::net::TcpStream::from(socket);
        let sent = match (&std_stream).write(request) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        let stream = TcpStream::from_std(std_stream)?;
        if sent == 0 {
            stream.writable().await?;
            if let Some(e) = stream.take_error()? {
                return Err(e);
            }
        }
        Ok((stream, sent))
    }
}

#[derive(Clone)]
pub(crate) struct Tls {
    pub plain: Plain,
    pub connector: TlsConnector,
    pub name: ServerName<'static>,
}

impl Connector for Tls {
    type Stream = TlsStream<TcpStream>;

    async fn connect(&self) -> io::Result<Self::Stream> {
        let tcp = TcpStream::connect(self.plain.addr).await?;
        tcp.set_nodelay(true)?;
        self.connector.connect(self.name.clone(), tcp).await
    }
}
