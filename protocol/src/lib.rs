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
//! - `protocols.rs`, the registration, the one place each protocol and report kind is named
//!   in this crate: [`Protocol`], which test a server runs for a client (`tcp-stream`,
//!   `tcp-rr`, `tcp-crr`, `udp-rr`, `udp-stream`), shared by the control protocol, the reports
//!   and the CRD, with its facts (report kind, transport, default message size, main figures);
//!   [`ReportKind`], the `"kind"` of a worker's engine report (`http`, `tcp`, `rr`, `udp`), with
//!   its live figures ([`LiveFigures`]) and how [`worker::validate_final`] checks a report of it
//!   ([`CheckedReport`]).
//! - [`cpu`]: CPU figures of both ends: the worker process's and the node's (/proc/stat), and
//!   the costs per unit of work computed from them over the meter's window.
//! - [`offload`]: a device's offload feature state as the operator records it, the state line
//!   that carries it and ethtool's legacy feature names.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod cpu;
pub mod offload;
mod protocols;
pub mod report;
pub mod rr;
pub mod tcp;
pub mod udp;
mod wire_names;
pub mod worker;

pub use protocols::{
    CheckedReport, LiveFigures, Protocol, ReportKind, UnknownProtocol, UnknownReportKind,
    DEFAULT_RR_SIZE, DEFAULT_STREAM_MESSAGE_SIZE, MIN_UDP_RR_SIZE,
};
pub use report::ErrorCounts;
