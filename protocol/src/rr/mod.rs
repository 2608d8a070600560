//! The request/response report (kind `"rr"`, `mode` `tcp-rr` | `tcp-crr` | `udp-rr`):
//! transactions, transactions per second, exact latency percentiles from an HDR histogram
//! (the HTTP report's encoding: V2 + DEFLATE, base64, decoded with bounds), failures by class,
//! UDP losses, the CPU use of both ends and the CPU each spent per transaction: the worker
//! process's, and the node's (netperf's service demand: see [`crate::cpu`]). [`merge`] combines clients that ran at the same time (counts add up,
//! histograms merge exactly, percentiles are recomputed, never averaged); [`validate_rr`]
//! refuses impossible figures and names the field.
//!
//! Invariants the engines guarantee and validation checks, per stream and in total:
//! - `attempted = transactions + errors (every class) + lost`: every request sent (every
//!   connection attempted, tcp-crr) in the measured window is answered, failed or lost; the
//!   engines wait up to the timeout for the answers still in flight when the window closes.
//! - Open loop: `attempted + skipped` = the stream's schedule (its rate times the window, give
//!   or take one for the phase): every intended send time is used or counted as skipped, so
//!   a client that falls behind (short of CPU, or its window full) says so instead of quietly
//!   sending less. `skipped = 0` in closed loop.
//! - `transactions` = the histogram's samples; `late <= lost` (a late answer is one to a
//!   request already counted lost, and is discarded); only udp-rr loses, answers late, sees
//!   duplicates or invalid datagrams.
//! - `port_exhausted` exactly when `errors.address_not_available > 0` (EADDRNOTAVAIL: no free
//!   local port, i.e. ephemeral port or TIME_WAIT exhaustion).
//!
//! The latency probe of a stream test ([`LatencyProbe`], latency under load) is a small
//! request/response measurement of the same shape; it lives in the TCP report.

mod conntrack;
mod merge;
mod probe;
mod report;
mod validate;
mod window;

pub use conntrack::{conntrack_warnings, ConntrackUse, MAX_CONNTRACK_ENTRIES, NEAR_FULL_PERCENT};
pub use merge::{merge, RrMergeError};
pub(crate) use probe::check_probe;
pub use probe::{LatencyProbe, ProbeCounts};
#[cfg(test)]
pub(crate) use report::fixtures::rr_report as report_fixture;
pub use report::{RrCounts, RrErrors, RrReport, RrRun, RrSetup, RrStream};
pub use validate::validate_rr;
pub use window::{in_flight_window, window_shortfall, MAX_OPEN_LOOP_WINDOW};

/// Version of the rr report; readers refuse other versions.
pub const REPORT_VERSION: u32 = 1;

/// Bytes of a udp-rr datagram that carry its sequence number (big-endian u64), so the
/// smallest udp-rr request or response.
pub const SEQUENCE_BYTES: u32 = 8;
/// Largest UDP payload over IPv4.
pub const MAX_UDP_MESSAGE: u32 = 65_507;
/// Largest tcp-rr / tcp-crr request or response.
pub const MAX_TCP_MESSAGE: u32 = 1 << 20;
/// Most extra requests in flight per stream (netperf `-b`).
pub const MAX_BURST: u32 = 1024;
/// Longest per-request timeout, in milliseconds.
pub const MAX_TIMEOUT_MS: u64 = 60_000;
/// Highest open-loop rate of one stream, transactions per second.
pub const MAX_STREAM_RATE: f64 = 10_000_000.0;
