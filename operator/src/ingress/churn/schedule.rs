//! When a sample's route changes are due: how many it makes, the schedule of the next one, and
//! the operator's clock in µs (the instants in status and on the routes).

use std::time::Duration;

use crds::ingress::{IngressBenchmarkSpec, MadeChange, MAX_ROUTE_CHANGES};

pub(super) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

pub(in crate::ingress) fn now_unix_us() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    micros(now)
}

/// How many changes one sample makes: one per `every` of load.duration (the measured time,
/// after the warm-up).
pub fn count(spec: &IngressBenchmarkSpec) -> u64 {
    let Some(changes) = &spec.route_changes else {
        return 0;
    };
    let every = micros(changes.every.as_std()).max(1);
    (micros(spec.load.duration.as_std()) / every).min(MAX_ROUTE_CHANGES)
}

/// When the next change is due (Unix µs), or None when the sample has made all it can: change
/// `n` at the window's start + n·every (a few late milliseconds of one reconcile do not add up
/// over the next ones), at least every/2 after the one before (a late operator does not squeeze
/// them together), and with at least every/2 left before the changes' share of the window
/// ends (start + count·every).
pub fn next_due(anchor_us: u64, every_us: u64, made: &[MadeChange], count: u64) -> Option<u64> {
    let n = u64::try_from(made.len()).unwrap_or(u64::MAX);
    if n >= count {
        return None;
    }
    let half = every_us / 2;
    let scheduled = anchor_us.saturating_add(n.saturating_mul(every_us));
    let after_last = made.last().map_or(0, |m| m.at_unix_us.saturating_add(half));
    let due = scheduled.max(after_last);
    let window_end = anchor_us.saturating_add(count.saturating_mul(every_us));
    (due.saturating_add(half) <= window_end).then_some(due)
}
