//! netbench-loadgen library: the load engines and the worker client. No Kubernetes dependency.
//! The reports they produce and the worker API they speak are the `protocol` crate's, which the
//! operator shares without linking any engine.
//!
//! - [`http`]: the HTTP load engine (closed loop like wrk, open loop like wrk2).
//! - [`report`]: the human summary of an HTTP report ([`protocol::report`] has the report).
//! - [`tcp`]: the TCP stream engine (iperf3-style client/server); its report is
//!   [`protocol::tcp`].
//! - [`udp`]: the UDP stream engine (paced datagrams: loss, reordering, duplicates, jitter);
//!   its report is [`protocol::udp`].
//! - [`rr`]: the request/response engines (tcp-rr, tcp-crr, udp-rr); their report is
//!   [`protocol::rr`].
//! - [`protocols`]: the one place a protocol is matched to its client, its server side and its
//!   report's merge.
//! - [`offload`]: ethtool offload features read and changed over netlink.
//! - [`responder`]: `http-server`, a small HTTP target (status, body size, delay).
//! - [`worker`]: the worker protocol client (register, barrier, progress, report).
#![deny(rust_2018_idioms)]
// Only `tcp::sys` and `udp::sys` (one libc call per function) opt out.
#![deny(unsafe_code)]

pub mod http;
pub mod offload;
pub mod protocols;
pub mod report;
pub mod responder;
pub mod rr;
pub mod tcp;
pub mod udp;
pub mod worker;
