//! The schedule applied to a run (see `policy::schedule` for the pure decision): its Events, the
//! wait before the first scheduled run, a refused schedule failing the run, and
//! `status.schedule` with the wake-up at the next scheduled time.

use jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::ResourceExt;

use crds::{Phase, RunStatus};

use super::metrics::RunMetrics;
use super::{Kind, Run, RunState, POLL};
use crate::base::conditions::{INVALID, READY};
use crate::base::error::Result;
use crate::base::labels;
use crate::policy::schedule::{
    decide, round_of, spec_hash, Decision, Input, Scheduled, INVALID_SCHEDULE,
};

/// The schedule's decision for `obj` at `now`.
pub fn decide_for<K: Kind>(obj: &K, status: &RunStatus, now: Timestamp) -> Decision {
    let repetition = obj.repetition();
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
pub fn run_id<K: Kind>(decision: &Decision, obj: &K) -> String {
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
pub fn current_run<K: Kind>(obj: &K) -> String {
    let uid = obj.uid().unwrap_or_default();
    let plain = labels::run_id(&uid, obj.meta().generation.unwrap_or(1));
    if obj.repetition().schedule.is_none() {
        return plain;
    }
    let prefix = format!("{}-g", labels::short_uid(&uid));
    obj.status_of()
        .and_then(|s| s.run().run_id.clone())
        .filter(|id| id.starts_with(&prefix))
        .unwrap_or(plain)
}

impl<K: Kind> Run<'_, K> {
    /// Before the run's phases: the schedule's Events, and the whole reconcile while no
    /// scheduled run exists yet (Some(action)).
    pub(super) async fn before_run(&mut self) -> Result<Option<Action>> {
        let Decision::Scheduled(s) = &self.schedule else {
            return Ok(None);
        };
        let s = s.clone();
        self.events.extend(s.events());
        if s.run.is_some() {
            return Ok(None);
        }
        // No run yet: one from before the schedule (or a status written elsewhere) goes.
        if self.status.run().run_id.is_some() {
            self.stop_old_run().await?;
            if let Some(m) = K::retire(self).await? {
                self.say(format!("{m} before the schedule starts"));
                return Ok(Some(Action::requeue(POLL)));
            }
            self.start_new_run().await?;
            self.status.run_mut().run_id = None;
        }
        self.status.run_mut().observed_generation = Some(self.generation);
        self.set_phase(Phase::Pending, s.idle_message());
        let m = "no scheduled run has started yet";
        self.condition(READY, false, "Scheduled", m);
        Ok(Some(s.wait.map_or(Action::await_change(), Action::requeue)))
    }

    /// After a new run started: a refused schedule fails it before anything is created.
    pub(super) fn refuse_invalid_schedule(&mut self) {
        let Decision::Invalid { message, .. } = &self.schedule else {
            return;
        };
        if self.status.run().phase.is_some_and(Phase::is_finished) {
            return;
        }
        let m = message.clone();
        self.condition(INVALID, true, INVALID_SCHEDULE, m.clone());
        self.fail(INVALID_SCHEDULE, m);
    }

    /// Whether the run `old` is stopped because a later round's run replaces it (the
    /// RunReplaced Event says so, not that the spec changed).
    pub(super) fn replaced_by_schedule(&self, old: &str) -> bool {
        let Decision::Scheduled(Scheduled { run: Some(new), .. }) = &self.schedule else {
            return false;
        };
        let uid = self.obj.uid().unwrap_or_default();
        match (round_of(old, &uid), round_of(new, &uid)) {
            (Some(old), Some(new)) => new > old,
            _ => false,
        }
    }

    /// After the phases: `status.schedule` as decided (a new run's fresh status does not
    /// carry it), the next-run metric, and a wake-up at the next scheduled time even when the
    /// run has finished.
    pub(super) fn keep_schedule(&mut self, action: Action) -> Action {
        let kind = K::kind(&());
        let metric = self.ctx.metrics.family::<RunMetrics>();
        match &self.schedule {
            Decision::Unscheduled => {
                metric.set_schedule_next(&kind, &self.ns, &self.name, None);
                self.status.run_mut().schedule = None;
                action
            }
            Decision::Invalid { status, .. } => {
                metric.set_schedule_next(&kind, &self.ns, &self.name, None);
                self.status.run_mut().schedule = Some(status.clone());
                action
            }
            Decision::Scheduled(s) => {
                let next = s.status.next_schedule_time.as_ref().map(|t| t.0);
                metric.set_schedule_next(&kind, &self.ns, &self.name, next);
                let run = self.status.run_mut();
                run.schedule = Some(s.status.clone());
                if s.kept && run.run_id == s.run {
                    // The run measures this generation's spec too.
                    run.observed_generation = Some(self.generation);
                }
                match s.wait {
                    Some(wait) if action == Action::await_change() => Action::requeue(wait),
                    _ => action,
                }
            }
        }
    }
}
