//! netbench-loadgen library: load engines and report formats. No Kubernetes dependency.
//!
//! - [`http`]: the HTTP load engine (closed loop like wrk, open loop like wrk2).
//! - [`report`]: the versioned JSON report envelope, the HTTP report and its exact merge.
//! - [`tcp`]: the TCP stream engine (iperf3-style client/server) and its mergeable report.
//! - [`offload`]: ethtool offload features read and changed over netlink.
//! - [`worker`]: the worker protocol client (register, barrier, progress, report).
#![deny(rust_2018_idioms)]
// Only `tcp::sys` (TCP_INFO, getrusage, poll: one libc call per function) opts out.
#![deny(unsafe_code)]

pub mod http;
pub mod offload;
pub mod report;
pub mod tcp;
pub mod worker;
