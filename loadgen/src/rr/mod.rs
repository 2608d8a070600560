//! Request/response engines: tcp-rr, tcp-crr and udp-rr (netperf TCP_RR, TCP_CRR, UDP_RR),
//! served by the one `netbench-loadgen server` and reported as [`protocol::rr::RrReport`]
//! (kind `"rr"`).
//!
//! - [`client::run`] runs a test against a server ([`RrClientConfig`]); [`serve`] is the
//!   server's side, which [`crate::tcp::server`] runs through [`crate::protocols`].
//! - One thread per stream, blocking sockets, one HDR histogram per stream merged at the end;
//!   closed loop by default, open loop with a per-stream rate (latency from the intended send
//!   time). Every transaction started in the window ends answered, failed (by class) or lost.
//! - [`tcp_rr`]: `1 + burst` requests in flight per connection; `crr`: a connection per
//!   transaction, the server closes first (see there for why); [`udp`]: numbered datagrams, a
//!   per-request timeout, losses counted and never stalling.

pub mod cli;
pub mod client;
mod config;
mod conntrack;
pub(crate) mod crr;
pub(crate) mod net;
pub mod pace;
pub(crate) mod probe;
pub mod record;
pub(crate) mod serve;
mod summary;
pub mod tcp_rr;
pub mod udp;
mod wire;

pub use config::{RrClientConfig, DEFAULT_TCP_TIMEOUT, DEFAULT_UDP_TIMEOUT, MAX_PIPELINE_BYTES};
pub use summary::render_text;
