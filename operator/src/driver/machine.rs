//! The phase machine: the handler of the run's phase runs, and the phase may change, until a
//! handler waits (at most [`MAX_TRANSITIONS`] changes in one reconcile). Only this module moves
//! a run to another phase ([`set_phase`], [`fail`], [`finish`]): each change sets phaseSince and
//! adds the phase's Event, and a run that ends gets its completion time and its kind's last
//! words.
//!
//! Before each handler: a run past its deadline fails (DeadlineExceeded), and a status that
//! names a measurement or sample the spec does not have fails the run (InvalidStatus): status
//! is hostile input.

use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use crds::{Phase, RunStatus};

use super::phases;
use crate::base::conditions::{self, READY};
use crate::base::error::Result;
use crate::base::events::PendingEvent;
use crate::base::outcome::{Failure, Reason, POLL};
use crate::policy::{deadline, samples};
use crate::run::{Hooks, Run, RunState};
use crate::store::run_record::Ended;

/// Phase changes one reconcile may make before it writes status and comes back. A run needs
/// at most five in a row (Collecting -> Preparing, a failure -> Failed, ...); the bound only
/// keeps a bug from spinning, and reaching it requeues rather than waiting for a change.
const MAX_TRANSITIONS: usize = 8;

/// What a phase handler wants next.
pub(in crate::driver) enum Next {
    /// The phase changed; run the next handler in this reconcile.
    Continue,
    /// Write status and come back after this action.
    Wait(Action),
}

impl Next {
    /// Come back after `after`.
    pub(in crate::driver) fn after(after: Duration) -> Next {
        Next::Wait(Action::requeue(after))
    }
}

/// Runs phase handlers until one waits.
pub(in crate::driver) async fn advance<K: Hooks>(run: &mut Run<'_, K>) -> Result<Action> {
    let plan = run.obj().repetition().samples();
    let once = run.obj().budget(&run.ctx().config);
    let budget = samples::budget(once, &plan, run.obj().count());
    for _ in 0..MAX_TRANSITIONS {
        if let Some(m) = deadline::exceeded(run.status().run(), budget) {
            fail(run, Failure::new(Reason::DeadlineExceeded, m));
            continue;
        }
        if let Next::Wait(action) = handle(run).await? {
            return Ok(action);
        }
    }
    tracing::warn!(
        "{MAX_TRANSITIONS} phase changes in one reconcile; coming back in {}s",
        POLL.as_secs()
    );
    Ok(Action::requeue(POLL))
}

/// The handler of the current phase.
async fn handle<K: Hooks>(run: &mut Run<'_, K>) -> Result<Next> {
    let phase = run.status().run().phase.unwrap_or_default();
    let measuring = matches!(phase, Phase::Preparing | Phase::Running | Phase::Collecting);
    let index = run.index();
    if measuring {
        if let Some(m) = out_of_plan(run) {
            fail(run, Failure::new(Reason::InvalidStatus, m));
            return Ok(Next::Continue);
        }
    }
    let started = std::time::Instant::now();
    let next = match phase {
        Phase::Pending | Phase::Queued => phases::admit::handle(run).await,
        Phase::Preparing => phases::prepare::handle(run, index).await,
        Phase::Running => phases::measure::handle(run, index).await,
        Phase::Collecting => phases::collect::handle(run, index).await,
        Phase::Succeeded | Phase::Failed => phases::finish::handle(run).await,
    };
    let steps = run.ctx().metrics.family::<super::metrics::StepMetrics>();
    steps.lap(&K::kind(&()), phase_name(phase), started);
    next
}

/// The phase's name as a step of the reconcile.
fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Pending => "Pending",
        Phase::Queued => "Queued",
        Phase::Preparing => "Preparing",
        Phase::Running => "Running",
        Phase::Collecting => "Collecting",
        Phase::Succeeded => "Succeeded",
        Phase::Failed => "Failed",
    }
}

/// A measurement or sample in status that the spec does not have (a forged status).
fn out_of_plan<K: Hooks>(run: &Run<'_, K>) -> Option<String> {
    let (index, count) = (run.index(), run.obj().count());
    let sample = run.slot().sample;
    let max = run.obj().repetition().samples().max();
    let outside = "the status was changed outside the operator";
    if count > samples::STRIDE {
        Some(format!(
            "the spec has {count} {}s, at most {} are supported",
            K::MEASUREMENT,
            samples::STRIDE
        ))
    } else if index >= count {
        Some(format!(
            "status names {} {index}, which the spec does not have ({outside})",
            K::MEASUREMENT
        ))
    } else if sample >= max {
        Some(format!(
            "status names sample {sample}, but the spec asks for at most {max} ({outside})"
        ))
    } else {
        None
    }
}

/// Moves the run to `phase` with `message`.
pub(in crate::driver) fn set_phase<K: Hooks>(
    run: &mut Run<'_, K>,
    phase: Phase,
    message: impl Into<String>,
) {
    let mut events = vec![];
    enter(run.status_mut().run_mut(), &mut events, phase, message);
    run.events(events);
}

/// Ends the run Failed (Ready=False with the failure's reason).
pub(in crate::driver) fn fail<K: Hooks>(run: &mut Run<'_, K>, failure: Failure) {
    let Failure { reason, message } = failure;
    run.condition(READY, false, reason.as_str(), message.clone());
    finish(run, Phase::Failed, reason.as_str(), message);
}

/// Ends the run in `phase` for `reason`: the kind's last words, the completion time, the phase,
/// and the decision kept for the run record (written by the finish handler or, failing that,
/// before status: `driver::record`).
pub(in crate::driver) fn finish<K: Hooks>(
    run: &mut Run<'_, K>,
    phase: Phase,
    reason: &str,
    message: String,
) {
    let was = run.status().run().phase;
    let measuring = matches!(
        was,
        Some(Phase::Preparing | Phase::Running | Phase::Collecting)
    );
    K::on_finish(run);
    let at = conditions::now();
    run.status_mut().run_mut().completion_time = Some(at.clone());
    set_phase(run, phase, message.clone());
    run.set_ended(Ended {
        phase,
        reason: reason.to_string(),
        message,
        at,
        measuring,
    });
}

/// `phase` in `status` (an Event and a new phaseSince when it changes) with `message`.
fn enter(
    status: &mut RunStatus,
    events: &mut Vec<PendingEvent>,
    phase: Phase,
    message: impl Into<String>,
) {
    let message = message.into();
    if status.phase != Some(phase) {
        let kind = if phase == Phase::Failed {
            EventType::Warning
        } else {
            EventType::Normal
        };
        events.push((kind, format!("{phase:?}"), message.clone()));
        status.phase_since = Some(conditions::now());
    }
    status.phase = Some(phase);
    status.message = Some(message);
    if phase != Phase::Queued {
        // Where it stood in the queue is news only while it waits there.
        status.queue = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `status.queue` is there while the run is Queued (each new reading replaces it) and gone
    /// with any other phase, whichever way the run leaves the queue.
    #[test]
    fn the_queue_place_lasts_only_while_queued() {
        let place = crds::QueueStatus {
            position: 2,
            waits_for: "node n1".into(),
            blocked_by: None,
        };
        for next in [Phase::Preparing, Phase::Failed, Phase::Pending] {
            let mut run = RunStatus {
                run_id: Some("r1".into()),
                phase: Some(Phase::Pending),
                ..Default::default()
            };
            let mut events = vec![];
            run.queue = Some(place.clone());
            enter(&mut run, &mut events, Phase::Queued, "waiting");
            assert_eq!(run.queue.as_ref(), Some(&place));
            enter(&mut run, &mut events, next, "moved on");
            assert_eq!(run.queue, None, "{next:?}");
        }
    }
}
