use std::io;
use std::net::SocketAddr;

/// Everything that can stop a TCP test. Each variant renders as one self-contained line meant
/// for a human (the OS error is part of the message, not a separate `source`, so error chains
/// do not print it twice).
#[derive(Debug, thiserror::Error)]
pub enum TcpError {
    #[error("invalid test: {0}")]
    Config(String),
    #[error("cannot resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
    #[error("cannot connect to {addr}: {cause}")]
    Connect { addr: SocketAddr, cause: io::Error },
    #[error("cannot listen on {addr}: {cause}")]
    Listen { addr: String, cause: io::Error },
    #[error("{context}: {cause}")]
    Io { context: String, cause: io::Error },
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
    #[error(
        "no client started a test within {} s{}",
        waited.as_secs(),
        last_refusal.as_ref().map(|r| format!(" (last refused connection: {r})")).unwrap_or_default()
    )]
    NoTest {
        waited: std::time::Duration,
        last_refusal: Option<String>,
    },
}

impl TcpError {
    pub(crate) fn io(context: impl Into<String>, cause: io::Error) -> Self {
        TcpError::Io {
            context: context.into(),
            cause,
        }
    }
}
