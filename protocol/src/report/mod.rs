//! Versioned, mergeable run reports.
//!
//! Every report is a JSON object with `"version": 1` and a `"kind"` tag (`"http"` here; the TCP
//! report, `"tcp"`, is [`crate::tcp::TcpReport`] with its own merge). Latency is carried as a serialized HDR histogram, so
//! reports from many workers merge exactly: [`merge_http`] sums counters, adds histograms and
//! recomputes percentiles from the merged histogram (never averaging percentiles).
//!
//! Reports come from workers and stored objects, so they are hostile until validated:
//! [`validate_http`] checks every invariant the engine guarantees and names the field it finds
//! broken; [`merge_http`] validates its inputs and refuses overflowing sums; [`histogram::decode`]
//! reads the HDR V2 header itself and refuses claims the input cannot back (limits in that
//! module) before hdrhistogram allocates anything.

pub mod answers;
mod envelope;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod histogram;
pub(crate) mod http;
mod merge;
mod runs;
pub(crate) mod validate;

pub use envelope::{Report, ReportError, REPORT_VERSION};
pub use http::{
    Counters, ErrorCounts, HttpReport, HttpRunConfig, LatencySummary, RateSummary, StatusCounts,
    ThreadSummary,
};
pub use merge::merge_http;
pub(crate) use runs::{concat_runs, time_span};
pub use validate::{
    check_close, check_number, check_text, invalid, validate_http, InvalidReport, MAX_DURATION_S,
    MAX_RATE, MAX_TEXT_BYTES, MAX_WORKERS,
};

/// Percent of an open loop's schedule (`used` intended sends taken plus `missed` never made)
/// that was never sent; 0 for an empty schedule. One definition for udp-stream and rr.
pub fn missed_percent(missed: u64, used: u64) -> f64 {
    let schedule = used.saturating_add(missed);
    if schedule == 0 {
        0.0
    } else {
        missed as f64 * 100.0 / schedule as f64
    }
}

/// Merges HTTP reports exactly (alias of [`merge_http`]).
pub fn merge(reports: &[HttpReport]) -> Result<HttpReport, ReportError> {
    merge_http(reports)
}
