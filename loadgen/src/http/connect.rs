//! Connectors: plain TCP (TCP_NODELAY) and TLS over it. The HTTP loops are generic over them,
//! so the plain path is monomorphized without TLS indirection.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

pub(crate) trait Connector: Clone + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + 'static;
    fn connect(&self) -> impl Future<Output = io::Result<Self::Stream>>;
}

#[derive(Clone)]
pub(crate) struct Plain {
    pub addr: SocketAddr,
}

impl Connector for Plain {
    type Stream = TcpStream;

    async fn connect(&self) -> io::Result<TcpStream> {
        let s = TcpStream::connect(self.addr).await?;
        s.set_nodelay(true)?;
        Ok(s)
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
        let tcp = self.plain.connect().await?;
        self.connector.connect(self.name.clone(), tcp).await
    }
}
