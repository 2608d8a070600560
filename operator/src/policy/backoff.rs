//! How long a benchmark whose reconcile failed waits before the next try: exponential per
//! object, with a cap that depends on what failed (see `base::error::Retry`).
//!
//! Anything the API server answered or failed to answer (a refusal by RBAC, an admission policy
//! or a webhook, a conflict, overload, a 5xx, no answer at all) is capped at [`SOON_CAP`]: such a
//! refusal is often lifted without any change of the object (a policy removed, a permission
//! granted, the server back), and a run that finished meanwhile must reach its final status
//! seconds after, not minutes. The cap still spaces the tries, so a refusal that never ends
//! costs one request per object every 5-10 s, not a hot loop. Errors of the operator's own
//! records (a restore record not as it was left, a wait that timed out) back off to
//! [`SLOW_CAP`].

use std::time::Duration;

use crate::base::error::Retry;

/// The first delay.
pub const BASE: Duration = Duration::from_secs(1);
/// Longest delay between tries of an API error (un-jittered; jittered: 5-10 s).
pub const SOON_CAP: Duration = Duration::from_secs(10);
/// Longest delay between tries of any other error.
pub const SLOW_CAP: Duration = Duration::from_secs(300);

/// The un-jittered delay after `failures` consecutive failures (the first is 1): 1 s, 2 s,
/// 4 s ... up to the cap of `retry`.
pub fn delay(failures: u32, retry: Retry) -> Duration {
    let cap = match retry {
        Retry::Soon => SOON_CAP,
        Retry::Slowly => SLOW_CAP,
    };
    let exp = failures.saturating_sub(1).min(16);
    BASE.checked_mul(1u32 << exp).unwrap_or(cap).min(cap)
}

/// `delay` scaled by `jitter`, kept in [0.5, 1.0] (objects that failed together do not retry
/// together; a jitter outside that range, or not a number, is clamped).
pub fn jittered(delay: Duration, jitter: f64) -> Duration {
    let j = if jitter.is_nan() {
        1.0
    } else {
        jitter.clamp(0.5, 1.0)
    };
    delay.mul_f64(j)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(failures: impl IntoIterator<Item = u32>, retry: Retry) -> Vec<u64> {
        failures
            .into_iter()
            .map(|n| delay(n, retry).as_secs())
            .collect()
    }

    #[test]
    fn api_errors_are_retried_within_ten_seconds() {
        assert_eq!(secs(1..=8, Retry::Soon), [1, 2, 4, 8, 10, 10, 10, 10]);
        assert_eq!(delay(u32::MAX, Retry::Soon), SOON_CAP);
        assert_eq!(
            delay(0, Retry::Soon),
            BASE,
            "no failure counts as the first"
        );
    }

    #[test]
    fn other_errors_back_off_to_minutes() {
        assert_eq!(
            secs(1..=11, Retry::Slowly),
            [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]
        );
        assert_eq!(delay(u32::MAX, Retry::Slowly), SLOW_CAP);
    }

    /// The case: a status write refused for 25 s. The tries come at most 10 s apart,
    /// so the write lands within 10 s of the refusal's end, however long it lasted.
    #[test]
    fn a_refusal_of_25_seconds_costs_at_most_10_more() {
        let mut at = Duration::ZERO;
        let mut n = 0;
        while at < Duration::from_secs(25) {
            n += 1;
            at += delay(n, Retry::Soon);
        }
        assert!(at <= Duration::from_secs(35), "{at:?}");
        for n in 1..100 {
            assert!(delay(n, Retry::Soon) <= SOON_CAP);
            assert!(delay(n, Retry::Soon) >= delay(n.saturating_sub(1), Retry::Soon));
        }
    }

    #[test]
    fn jitter_stays_between_half_and_all_of_the_delay() {
        let d = Duration::from_secs(10);
        assert_eq!(jittered(d, 0.75), Duration::from_millis(7500));
        assert_eq!(jittered(d, 0.0), Duration::from_secs(5));
        assert_eq!(jittered(d, 7.0), d);
        assert_eq!(jittered(d, f64::NAN), d);
    }
}
