//! The schedule applied to a run, in the open (driver::apply calls each of these as a step;
//! `policy::schedule` makes the pure decision): which run the object should have now, the
//! schedule's Events and the wait before the first scheduled run, a refused schedule failing
//! the run, and `status.schedule` with the wake-up at the next scheduled time.

use jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::ResourceExt;

use crds::{Phase, RunStatus};

use super::metrics::RunMetrics;
use super::start::begin_run;
use super::transition::{fail, set_phase};
use crate::base::conditions::{INVALID, READY};
use crate::base::error::Result;
use crate::base::labels;
use crate::base::outcome::{Failure, Reason};
use crate::policy::schedule::{decide, spec_hash, Decision, Input, Scheduled};
use crate::run::{Hooks, Plan, Run, RunState};

/// The schedule's decision for `obj` at `now`.
pub fn decide_for<K: Plan>(obj: &K, status: &RunStatus, now: Timestamp) -> Decision {
    let repetition = obj.outline().repetition;
    let uid = obj.uid().unwrap_or_default();
    let hash = match repetition.schedule {
        Some(_) => spec_hash(obj),
        None => String::new(),
    };
    let input = Input {
        schedule: repetition.schedule.as_deref(),
        suspend: repetition.suspend,
        policy: repetition.concurrency_policy,
        uid: &uid,
        generation: obj.meta().generation.unwrap_or(1),
        spec_hash: &hash,
        status,
    };
    decide(&input, now)
}

/// The run id the driver works on for `decision` (for no run yet, the generation's plain id:
/// it is never started).
pub fn run_id<K: Plan>(decision: &Decision, obj: &K) -> String {
    match decision {
        Decision::Scheduled(Scheduled { run: Some(id), .. }) => id.clone(),
        _ => labels::run_id(
            &obj.uid().unwrap_or_default(),
            obj.meta().generation.unwrap_or(1),
        ),
    }
}

/// The current run of `obj` on deletion: the generation's for an unscheduled benchmark, else
/// the one its status names (when it is one of this object's).
pub fn current_run<K: Plan>(obj: &K) -> String {
    let uid = obj.uid().unwrap_or_default();
    let plain = labels::run_id(&uid, obj.meta().generation.unwrap_or(1));
    if obj.outline().repetition.schedule.is_none() {
        return plain;
    }
    let prefix = format!("{}-g", labels::short_uid(&uid));
    obj.status()
        .and_then(|s| s.run().run_id.clone())
        .filter(|id| id.starts_with(&prefix))
        .unwrap_or(plain)
}

/// The schedule's Events; while no scheduled run exists yet, the wait for the first one (an
/// earlier run, from before the schedule, is retired first): Some(action) ends the reconcile's
/// run steps.
pub(in crate::driver) async fn before_run<K: Hooks>(
    run: &mut Run<'_, K>,
) -> Result<Option<Action>> {
    let Decision::Scheduled(s) = run.schedule() else {
        return Ok(None);
    };
    let s = s.clone();
    run.events(s.events());
    if s.run.is_some() {
        return Ok(None);
    }
    // No run yet: one from before the schedule (or a status written elsewhere) goes.
    if run.status().run().run_id.is_some() {
        if let Some(wait) = begin_run(run, "the schedule starts").await? {
            return Ok(Some(wait));
        }
        run.status_mut().run_mut().run_id = None;
    }
    let generation = run.generation();
    run.status_mut().run_mut().observed_generation = Some(generation);
    set_phase(run, Phase::Pending, s.idle_message());
    let m = "no scheduled run has started yet";
    run.condition(READY, false, "Scheduled", m);
    Ok(Some(s.wait.map_or(Action::await_change(), Action::requeue)))
}

/// After a new run started: a refused schedule fails it before anything is created.
pub(in crate::driver) fn refuse_invalid<K: Hooks>(run: &mut Run<'_, K>) {
    let Decision::Invalid { message, .. } = run.schedule() else {
        return;
    };
    if run.status().run().phase.is_some_and(Phase::is_finished) {
        return;
    }
    let m = message.clone();
    let reason = Reason::InvalidSchedule;
    run.condition(INVALID, true, reason.as_str(), m.clone());
    fail(run, Failure::new(reason, m));
}

/// After the phases: `status.schedule` as decided (a new run's fresh status does not carry
/// it), the next-run metric, and a wake-up at the next scheduled time even when the run has
/// finished.
pub(in crate::driver) fn keep<K: Hooks>(run: &mut Run<'_, K>, action: Action) -> Action {
    let kind = K::kind(&());
    let metric = run.ctx().metrics.family::<RunMetrics>();
    let (ns, name, generation) = (
        run.ns().to_string(),
        run.name().to_string(),
        run.generation(),
    );
    let schedule = run.schedule().clone();
    let status = run.status_mut().run_mut();
    match schedule {
        Decision::Unscheduled => {
            metric.set_schedule_next(&kind, &ns, &name, None);
            status.schedule = None;
            action
        }
        Decision::Invalid { status: s, .. } => {
            metric.set_schedule_next(&kind, &ns, &name, None);
            status.schedule = Some(s);
            action
        }
        Decision::Scheduled(s) => {
            let next = s.status.next_schedule_time.as_ref().map(|t| t.0);
            metric.set_schedule_next(&kind, &ns, &name, next);
            status.schedule = Some(s.status.clone());
            if s.kept && status.run_id == s.run {
                // The run measures this generation's spec too.
                status.observed_generation = Some(generation);
            }
            match s.wait {
                Some(wait) if action == Action::await_change() => Action::requeue(wait),
                _ => action,
            }
        }
    }
}
