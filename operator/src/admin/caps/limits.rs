//! Sizes and durations against the admin's caps, the parts every kind uses (each kind sums its
//! own: ingress::limits, egress::limits). Pure: a value and the cap become Ok or the refusal's
//! message, naming the field, the value and the cap. Every count and sum saturates, so an
//! absurd spec (from an object the schema did not check) is refused, never a panic.

use std::time::Duration;

use crate::admin::config::AdminCaps;

/// `value` of `what` must not exceed `cap` (Helm value `helm`).
pub fn at_most(what: &str, value: u64, cap: u64, unit: &str, helm: &str) -> Result<(), String> {
    if value <= cap {
        return Ok(());
    }
    Err(format!(
        "{what} is {value}, above the cluster admin's cap of {cap} {unit} (Helm value {helm})"
    ))
}

/// The run's whole time `total` (summed as `how`) must not exceed the admin's cap.
pub fn run_duration(total: Duration, how: &str, caps: &AdminCaps) -> Result<(), String> {
    let cap = caps.max_run_duration();
    if total <= cap {
        return Ok(());
    }
    Err(format!(
        "the run would take {total:?} ({how}), above the cluster admin's cap of {cap:?} per run (Helm value caps.maxRunSeconds)"
    ))
}

/// A count as u64 (saturating).
pub fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A run's time with every step or case sampled `spec.samples` times, pauses included.
pub fn sampled(
    once: Duration,
    how: String,
    plan: &crds::history::Samples,
    measurements: u32,
) -> (Duration, String) {
    if plan.max() <= 1 {
        return (once, how);
    }
    let total = crate::policy::samples::budget(once, plan, measurements);
    let pause = Duration::from(plan.pause).as_secs();
    let how = format!(
        "{how}, x {} samples (spec.samples) with {pause}s pauses",
        plan.max()
    );
    (total, how)
}

/// Property-test strategies for the caps and durations every kind's limits are checked with.
#[cfg(test)]
pub(crate) mod strategies {
    use std::time::Duration;

    use proptest::prelude::*;

    use crate::admin::config::{AdminCaps, Config};

    pub fn any_duration() -> impl Strategy<Value = crds::Duration> {
        prop_oneof![
            (0u64..100_000, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
            (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        ]
        .prop_map(crds::Duration::from)
    }

    pub fn any_caps() -> impl Strategy<Value = AdminCaps> {
        let small_or_any = || prop_oneof![1u64..100_000, 1u64..=u64::MAX];
        (
            small_or_any(),
            small_or_any(),
            small_or_any(),
            small_or_any(),
        )
            .prop_map(|(workers, per_worker, total, seconds)| {
                let mut c = Config::for_tests().caps;
                c.max_workers = workers;
                c.max_connections_per_worker = per_worker;
                c.max_total_connections = total;
                c.max_run_seconds = seconds;
                c
            })
    }

    pub fn nanos(d: crds::Duration) -> u128 {
        Duration::from(d).as_nanos()
    }

    pub fn cap_nanos(c: &AdminCaps) -> u128 {
        c.max_run_duration().as_nanos()
    }
}
