//! TCP stream throughput engine, iperf3-style.
//!
//! A client ([`client::run`]) opens a control connection to a server ([`server::serve`]), agrees on
//! a test (streams, duration, message size, direction), opens one data connection per stream and
//! pushes bytes for the duration with plain blocking `write`/`read` loops, one thread per stream and
//! one reusable buffer each. The receiving side's figures travel back over the control connection,
//! so a report carries the sender's and the receiver's view of every stream, TCP_INFO
//! (retransmits, RTT) of each sending socket, and the CPU use of both ends. The report, its merge and
//! its validation are the `protocol` crate's ([`::protocol::tcp`]).

pub mod cli;
pub mod client;
pub(crate) mod config;
pub(crate) mod cpu;
mod error;
pub(crate) mod net;
pub(crate) mod protocol;
pub mod server;
mod stream;
pub(crate) mod stream_server;
pub(crate) mod summary;
pub(crate) mod sys;

pub use self::protocol::PROTOCOL_VERSION;
pub(crate) use config::MAX_DURATION;
pub use config::{TcpClientConfig, TcpServerConfig, DEFAULT_LEN, DEFAULT_PORT};
pub use error::TcpError;
pub use summary::render_text;
