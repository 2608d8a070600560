use std::io;
use std::net::SocketAddr;

/// Everything that can stop a TCP test. Each variant renders as one line meant for a human.
#[derive(Debug, thiserror::Error)]
pub enum TcpError {
    #[error("invalid test: {0}")]
    Config(String),
    #[error("cannot resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
    #[error("cannot connect to {addr}: {source}")]
    Connect { addr: SocketAddr, source: io::Error },
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: String, source: io::Error },
    #[error("{context}: {source}")]
    Io { context: String, source: io::Error },
    #[error(
        "control protocol version mismatch: this side speaks version {ours}, the peer speaks version {theirs}; \
         run the same netbench-loadgen release on both ends"
    )]
    VersionMismatch { ours: u32, theirs: u32 },
    #[error("the peer is not a netbench-loadgen tcp-server/tcp-client: {0}")]
    NotNetbench(String),
    #[error("the server refused the test: {0}")]
    Rejected(String),
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl TcpError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        TcpError::Io {
            context: context.into(),
            source,
        }
    }
}
