//! When a finished run stops trying to write its BenchmarkResult: tried again every
//! [`RETRY`] until [`gives_up`] says so (`--result-write-timeout` after the first failure), then
//! only when something wakes the benchmark. The run keeps its phase either way.
//!
//! The time of the first failure comes from the ResultRecorded condition in status, which a
//! benchmark author can write: one in the future is not believed (the operator gives up at
//! once), one in the past only makes this run give up sooner. Nothing waits forever.

use std::time::Duration;

use jiff::Timestamp;

/// How soon a result that could not be written is tried again, before giving up.
pub const RETRY: Duration = Duration::from_secs(10);

/// Whether a result failing since `since` (None: this is the first failure) should be given up
/// `now`, with `bound` the operator's --result-write-timeout.
pub fn gives_up(since: Option<Timestamp>, now: Timestamp, bound: Duration) -> bool {
    let Some(since) = since else {
        return bound.is_zero();
    };
    if since > now {
        return true;
    }
    Duration::try_from(now.duration_since(since)).map_or(true, |failing| failing >= bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    #[test]
    fn gives_up_once_the_bound_has_passed_since_the_first_failure() {
        let bound = Duration::from_secs(300);
        assert!(!gives_up(None, at(0), bound), "the first failure retries");
        assert!(!gives_up(Some(at(0)), at(10), bound));
        assert!(!gives_up(Some(at(0)), at(299), bound));
        assert!(gives_up(Some(at(0)), at(300), bound));
        assert!(gives_up(Some(at(0)), at(86_400), bound));
        assert!(
            gives_up(None, at(0), Duration::ZERO),
            "a zero bound tries once"
        );
    }

    /// A forged first-failure time cannot keep the operator retrying.
    #[test]
    fn a_first_failure_in_the_future_is_not_believed() {
        let bound = Duration::from_secs(300);
        assert!(gives_up(Some(at(1)), at(0), bound));
        let far = Timestamp::MAX;
        assert!(gives_up(Some(far), at(0), bound));
        assert!(gives_up(Some(Timestamp::MIN), at(0), bound));
    }
}
