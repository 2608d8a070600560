//! What a phase handler wants next ([`Next`]), and the phase changes: the only place a run
//! moves to another phase ([`set_phase`], [`fail`], [`finish`]). Each change sets phaseSince
//! and adds the phase's Event, and a run that ends gets its completion time and its kind's last
//! words. The phase machine (`machine`) and the phase handlers (`phases/`) both use it.

use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use crds::{Phase, RunStatus};

use crate::base::conditions::{self, READY};
use crate::base::events::PendingEvent;
use crate::base::outcome::Failure;
use crate::run::{Hooks, Run, RunState};
use crate::store::run_record::Ended;

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
