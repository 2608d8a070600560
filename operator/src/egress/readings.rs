//! What the readers of every protocol family (`protocols/`) share: figures rounded as status
//! shows them, both ends' CPU, a latency summary in milliseconds, a reported address made
//! safe, the warning of an open loop that fell behind. Pure.

use crds::egress::CaseResult;
use crds::LatencyMillis;
use protocol::cpu::{CpuReport, CpuUsage};
use protocol::report::LatencySummary;

/// What a reader gives: the figures into `r`, and why streams ended early (if they did).
pub type Errors = Vec<String>;

/// An open loop that did not send all it was asked to (`skipped` intended sends never used).
pub(super) fn behind_schedule(who: &str, skipped: u64, attempted: u64) -> String {
    format!(
        "{who} fell behind its open-loop schedule: {skipped} of {} intended transactions were never sent (the client was short of CPU, its window was full, or a stream ended early on an error); the rate asked was not offered and the latency leaves them out",
        attempted.saturating_add(skipped)
    )
}

/// The one run of a report, if it has exactly one (node figures are per node: a merge of runs
/// has none).
pub(super) fn single_run<R, T>(runs: &[R], of: impl Fn(&R) -> T) -> Option<T> {
    match runs {
        [one] => Some(of(one)),
        _ => None,
    }
}

/// Both ends' CPU: the worker processes' (summed over runs) and, for one run, each node's.
pub(super) fn cpu(total: &CpuReport, one_run: Option<CpuReport>, r: &mut CaseResult) {
    r.client_cpu_percent = round2(total.client.total_percent);
    r.server_cpu_percent = round2(total.server.total_percent);
    let node = |u: Option<CpuUsage>| Some(round2(u?.node?.busy_percent));
    r.client_node_cpu_percent = node(one_run.map(|c| c.client));
    r.server_node_cpu_percent = node(one_run.map(|c| c.server));
}

/// A reported address as status shows it: at most 64 characters (the schema's bound), no
/// control characters (a report is hostile input until the schema and this say otherwise).
pub(super) fn address(reported: &str) -> String {
    reported
        .chars()
        .filter(|c| !c.is_control())
        .take(64)
        .collect()
}

pub(super) fn millis(l: &LatencySummary) -> LatencyMillis {
    let ms = |us: u64| round4(us as f64 / 1000.0);
    LatencyMillis {
        p50: ms(l.p50_us),
        p90: ms(l.p90_us),
        p99: ms(l.p99_us),
        p999: ms(l.p999_us),
        max: ms(l.max_us),
        mean: round4(l.mean_us / 1000.0),
    }
}

pub(super) fn round(v: f64) -> f64 {
    v.round()
}

pub fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

pub(super) fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}
