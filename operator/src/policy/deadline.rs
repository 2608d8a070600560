//! Every run's overall deadline, derived from its spec and the operator's timeouts: what each
//! step (or case) may take, summed, plus a generous margin. It counts from the moment the run
//! leaves the queue (`status.startTime`) and is checked in Preparing, Running and Collecting;
//! past it the run ends Failed naming the phase and what it waited for. A queued run waits
//! only for runs that have deadlines of their own. Durations come from the benchmark object,
//! so every sum saturates: an absurd duration gives a far deadline, never an overflow.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crds::egress::{EgressBenchmarkSpec, EgressCase};
use crds::ingress::IngressBenchmarkSpec;
use crds::{Phase, RunStatus};

use crate::base::clock::elapsed_since;

/// Condition and Event reason of a run past its deadline.
pub const REASON: &str = "DeadlineExceeded";
/// Per step or case: the last progress push, the report, the merge and status writes.
const REPORTING: Duration = Duration::from_secs(30);
/// An offload Job's activeDeadlineSeconds (egress::offload), on top of its pod's start.
const OFFLOAD_JOB: Duration = Duration::from_secs(120);
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

fn with_margin(budget: Duration) -> Duration {
    budget.saturating_add((budget / 4).max(MIN_MARGIN))
}

/// How long one ingress step may run once its workers exist: start, warm-up, measurement,
/// the last requests' timeout, reporting.
pub fn ingress_step(spec: &IngressBenchmarkSpec, worker_start: Duration) -> Duration {
    let load = &spec.load;
    sum([
        worker_start,
        load.warmup.into(),
        load.duration.into(),
        load.timeout.into(),
        REPORTING,
    ])
}

/// How long one egress case may run once its pods exist: start, measurement, reporting.
pub fn egress_case(case: &EgressCase, worker_start: Duration) -> Duration {
    // Request/response tests wait for the answers still in flight at the end, up to their
    // timeout (udp-rr's, else the engine's 10 s for TCP).
    let answers = match case.protocol {
        p if p.is_request_response() => case.timeout.map_or(RR_TCP_TIMEOUT, Duration::from),
        _ => Duration::ZERO,
    };
    sum([worker_start, case.duration.into(), answers, REPORTING])
}

/// How long netbench-loadgen waits for a TCP request/response answer.
const RR_TCP_TIMEOUT: Duration = Duration::from_secs(10);

/// The whole ingress run: every step, with a sweep's rollout and settle time per step.
pub fn ingress(spec: &IngressBenchmarkSpec, t: Timeouts) -> Duration {
    let step = ingress_step(spec, t.worker_start);
    let (per_step, steps) = match &spec.sweep {
        Some(s) => (sum([step, t.rollout, s.settle.into()]), s.steps.len()),
        None => (step, 1),
    };
    let steps = u32::try_from(steps.max(1)).unwrap_or(u32::MAX);
    with_margin(per_step.saturating_mul(steps))
}

/// The whole egress run: every run of every case (a swept case runs once per value), with an
/// apply and a restore Job around each that names an offload profile, and one more restore at
/// the end.
pub fn egress(spec: &EgressBenchmarkSpec, t: Timeouts) -> Duration {
    let job = sum([t.worker_start, OFFLOAD_JOB]);
    let cases = spec.measured().into_iter().map(|m| {
        let offload = if m.spec.offload_profile.is_some() {
            job.saturating_mul(2)
        } else {
            Duration::ZERO
        };
        sum([egress_case(&m.spec, t.worker_start), offload])
    });
    with_margin(sum(cases).saturating_add(job))
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

    const T: Timeouts = Timeouts {
        worker_start: Duration::from_secs(120),
        rollout: Duration::from_secs(300),
    };

    fn ingress_spec(yaml: &str) -> IngressBenchmarkSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn ingress_budget_sums_steps_with_a_margin() {
        let spec = ingress_spec(
            "{target: {url: 'http://t/'}, load: {duration: 30s, warmup: 5s, timeout: 2s}}",
        );
        // 120 + 5 + 30 + 2 + 30 = 187s, margin max(46s, 300s).
        assert_eq!(ingress(&spec, T), Duration::from_secs(187 + 300));
        let sweep = ingress_spec(
            "{target: {url: 'http://t/'}, load: {duration: 30s, warmup: 5s, timeout: 2s},
              sweep: {targetRef: {name: web}, settle: 10s, steps: [{cpu: '1'}, {cpu: '2'}, {cpu: '4'}, {cpu: '8'}]}}",
        );
        // 4 x (187 + 300 rollout + 10 settle) = 1988s, margin 497s.
        assert_eq!(ingress(&sweep, T), Duration::from_secs(1988 + 497));
    }

    #[test]
    fn egress_budget_counts_offload_jobs() {
        let spec: EgressBenchmarkSpec = serde_yaml::from_str(
            "{cases: [{name: a, client: {}, server: {}, duration: 10s},
                      {name: b, client: {}, server: {}, duration: 10s, offloadProfile: off}]}",
        )
        .unwrap();
        // Cases: 2 x (120 + 10 + 30) = 320; b's apply and restore 2 x 240; the last restore 240.
        let budget = 320 + 480 + 240;
        assert_eq!(egress(&spec, T), Duration::from_secs(budget + 300));
    }

    #[test]
    fn absurd_durations_saturate_instead_of_overflowing() {
        // What a duration parser may hand over for "99999999999999999h" (or a far-off value
        // the schema let through): the largest Duration.
        let huge = crds::Duration::from(Duration::MAX);
        let mut spec = ingress_spec(
            "{target: {url: 'http://t/'}, sweep: {targetRef: {name: web}, steps: [{cpu: '1'}, {cpu: '2'}]}}",
        );
        spec.load.duration = huge;
        spec.load.warmup = huge;
        spec.load.timeout = huge;
        if let Some(s) = spec.sweep.as_mut() {
            s.settle = huge;
        }
        let t = Timeouts {
            worker_start: Duration::MAX,
            rollout: Duration::MAX,
        };
        assert_eq!(ingress(&spec, t), Duration::MAX);
        assert_eq!(ingress_step(&spec, Duration::MAX), Duration::MAX);
        let mut eg: EgressBenchmarkSpec = serde_yaml::from_str(
            "{cases: [{name: a, client: {}, server: {}, offloadProfile: p}, {name: b, client: {}, server: {}}]}",
        )
        .unwrap();
        for c in &mut eg.cases {
            c.duration = huge;
        }
        assert_eq!(egress_case(&eg.cases[0], t.worker_start), Duration::MAX);
        assert_eq!(egress(&eg, t), Duration::MAX);
        assert_eq!(sum([Duration::MAX, Duration::MAX]), Duration::MAX);
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
