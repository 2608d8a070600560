//! UDP stream engine (`--protocol udp-stream`, iperf3 `-u` style), served by the common
//! `netbench-loadgen server` through the test's control connection.
//!
//! The client asks for the test on the control connection (streams, duration, datagram length,
//! direction, paced rate), opens one UDP socket per stream towards the server's port (the
//! number of its TCP port) and announces each stream with "open" datagrams until the server,
//! which gives every stream a socket of its own ([`net`]), answers `start`. Senders then stamp
//! a sequence number and their clock into every datagram ([`datagram`]), paced on a schedule
//! of intended send times ([`pacer`]) or as fast as the socket takes them; receivers count
//! each datagram ([`tally`]: unique, out of order, duplicate, invalid, RFC 3550 jitter) and
//! read the socket's drop counter. The server's figures travel back on the control connection,
//! so the client's report ([`::protocol::udp::UdpReport`]) holds both ends of every stream.

pub mod cli;
pub mod client;
mod config;
mod datagram;
mod net;
mod pacer;
pub(crate) mod server;
mod stream;
mod summary;
mod sys;
mod tally;

use serde::{Deserialize, Serialize};

pub use client::UdpProgress;
pub use config::{Pace, UdpClientConfig, DEFAULT_BITRATE, DEFAULT_LEN};
pub use net::DEFAULT_RECV_BUFFER;
pub(crate) use stream::StreamSide;
pub use summary::render_text;

/// What a udp-stream test request carries besides the common test parameters (`len` is the
/// datagram size there).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UdpParams {
    /// Datagrams per second of each sending stream; None: as fast as possible.
    pub packets_per_second: Option<f64>,
    /// Receive buffer to ask for on each receiving socket (SO_RCVBUF's argument); None:
    /// [`DEFAULT_RECV_BUFFER`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf: Option<usize>,
}
