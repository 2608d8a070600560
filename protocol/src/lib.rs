//! netbench's wire formats, shared by `netbench-loadgen` (which produces them) and
//! `netbench-operator` (which receives, validates, stores and merges them). Pure data and pure
//! functions: no runtime, no network, no Kubernetes.
//!
//! - [`worker`]: the worker <-> operator API messages (register, barrier, progress, final
//!   report) and [`worker::validate_final`], which checks a worker's final report in full.
//! - [`report`]: the versioned JSON report envelope, the HTTP report (with its HDR latency
//!   histogram, encoded and decoded with bounds), its exact merge and its validation.
//! - [`tcp`]: the TCP report (iperf3-style streams, both ends' view), its merge and validation.
//! - [`udp`]: the UDP stream report (loss, reordering, duplicates, jitter, paced rate), its merge
//!   and validation.
//! - [`rr`]: the request/response report (tcp-rr, tcp-crr, udp-rr: transactions, exact
//!   latency percentiles, failures and losses by class, CPU per transaction), its merge and
//!   validation, and the latency probe a stream report may carry.
//! - [`ReportKind`]: the `"kind"` of a worker's engine report (`http`, `tcp`, `rr`, `udp`), which
//!   [`worker::validate_final`] dispatches on and [`Protocol::report_kind`] names per protocol.
//! - [`Protocol`]: which test a server runs for a client (`tcp-stream`, `tcp-rr`, `tcp-crr`,
//!   `udp-rr`, `udp-stream`), shared by the control protocol, the reports and the CRD.
//! - [`cpu`]: CPU figures of both ends: the worker process's and the node's (/proc/stat), and
//!   the costs per unit of work computed from them over the meter's window.
//! - [`offload`]: a device's offload feature state as the operator records it, the state line
//!   that carries it and ethtool's legacy feature names.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod cpu;
pub mod offload;
pub mod report;
mod report_kind;
pub mod rr;
pub mod tcp;
mod test_protocol;
pub mod udp;
mod wire_names;
pub mod worker;

pub use report::ErrorCounts;
pub use report_kind::{ReportKind, UnknownReportKind};
pub use test_protocol::{Protocol, UnknownProtocol};
