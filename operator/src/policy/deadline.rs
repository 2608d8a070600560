//! Every run's overall deadline, derived from its spec and the operator's timeouts: what each
//! step (or case) may take, summed by its kind (ingress::plan, egress::plan), plus a generous
//! margin. It counts from the moment the run
//! leaves the queue (`status.startTime`) and is checked in Preparing, Running and Collecting;
//! past it the run ends Failed naming the phase and what it waited for. A queued run waits
//! only for runs that have deadlines of their own. Durations come from the benchmark object,
//! so every sum saturates: an absurd duration gives a far deadline, never an overflow.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crds::{Phase, RunStatus};

use crate::base::clock::elapsed_since;

/// Per step or case: the last progress push, the report, the merge and status writes.
pub const REPORTING: Duration = Duration::from_secs(30);
/// The margin is a quarter of the budget, and at least this.
const MIN_MARGIN: Duration = Duration::from_secs(300);

/// The operator's timeouts a budget depends on.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub worker_start: Duration,
    pub rollout: Duration,
}

/// Saturating sum.
pub fn sum(parts: impl IntoIterator<Item = Duration>) -> Duration {
    parts
        .into_iter()
        .fold(Duration::ZERO, Duration::saturating_add)
}

/// A run's summed budget with its margin: a quarter of it, and at least [`MIN_MARGIN`].
pub fn with_margin(budget: Duration) -> Duration {
    budget.saturating_add((budget / 4).max(MIN_MARGIN))
}

/// Some(message) when a run in a deadline-bound phase has spent its budget since it left the
/// queue; the message names the phase and what the run was waiting for.
pub fn exceeded(run: &RunStatus, budget: Duration) -> Option<String> {
    let phase = run.phase.unwrap_or_default();
    if !matches!(phase, Phase::Preparing | Phase::Running | Phase::Collecting) {
        return None;
    }
    let started: &Option<Time> = &run.start_time;
    started.as_ref()?;
    let elapsed = elapsed_since(started);
    (elapsed > budget).then(|| {
        format!(
            "deadline exceeded in phase {phase:?}: {} (the run took {}s; its spec allows {}s)",
            run.message.as_deref().unwrap_or("no progress recorded"),
            elapsed.as_secs(),
            budget.as_secs()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_saturate_and_margins_are_a_quarter_or_five_minutes() {
        assert_eq!(sum([Duration::MAX, Duration::MAX]), Duration::MAX);
        assert_eq!(
            with_margin(Duration::from_secs(100)),
            Duration::from_secs(400)
        );
        assert_eq!(
            with_margin(Duration::from_secs(4000)),
            Duration::from_secs(5000)
        );
        assert_eq!(with_margin(Duration::MAX), Duration::MAX);
    }

    #[test]
    fn exceeded_names_the_phase_and_what_the_run_waited_for() {
        let started = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(100);
        let mut run = RunStatus {
            phase: Some(Phase::Running),
            start_time: Some(Time(started)),
            message: Some("step 0: 2 worker(s) started".into()),
            ..Default::default()
        };
        assert_eq!(exceeded(&run, Duration::from_secs(3600)), None);
        let m = exceeded(&run, Duration::from_secs(60)).unwrap();
        assert!(
            m.starts_with("deadline exceeded in phase Running: step 0: 2 worker(s) started"),
            "{m}"
        );
        assert!(m.contains("allows 60s"), "{m}");
        // Queued and finished runs are not bound by it; nor a run that never left the queue.
        run.phase = Some(Phase::Queued);
        assert_eq!(exceeded(&run, Duration::ZERO), None);
        run.phase = Some(Phase::Failed);
        assert_eq!(exceeded(&run, Duration::ZERO), None);
        run.phase = Some(Phase::Preparing);
        run.start_time = None;
        assert_eq!(exceeded(&run, Duration::ZERO), None);
    }
}
