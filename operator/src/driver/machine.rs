//! The phase machine: the handler of the run's phase runs, and the phase may change, until a
//! handler waits (at most [`MAX_TRANSITIONS`] changes in one reconcile). The changes themselves
//! are `transition`'s.
//!
//! Before each handler: a run past its deadline fails (DeadlineExceeded), and a status that
//! names a measurement or sample the spec does not have fails the run (InvalidStatus): status
//! is hostile input.

use kube::runtime::controller::Action;

use crds::Phase;

use super::phases;
use super::transition::{fail, Next};
use crate::base::error::Result;
use crate::base::outcome::{Failure, Reason, POLL};
use crate::policy::{deadline, samples};
use crate::run::{Hooks, Run, RunState};

/// Phase changes one reconcile may make before it writes status and comes back. A run needs
/// at most five in a row (Collecting -> Preparing, a failure -> Failed, ...); the bound only
/// keeps a bug from spinning, and reaching it requeues rather than waiting for a change.
const MAX_TRANSITIONS: usize = 8;

/// Runs phase handlers until one waits.
pub(in crate::driver) async fn advance<K: Hooks>(run: &mut Run<'_, K>) -> Result<Action> {
    let outline = run.obj().outline();
    let once = run.obj().budget(&run.ctx().config);
    let budget = samples::budget(once, &outline.repetition.samples(), outline.count);
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
    if !phase.is_finished() {
        // Not ended (again: a status taken back): its end, when it comes, is done in full.
        run.ctx().runs.ends.reopen(&phases::finish::ending_key(run));
    }
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
    let outline = run.obj().outline();
    let (index, count, noun) = (run.index(), outline.count, outline.noun);
    let sample = run.slot().sample;
    let max = outline.repetition.samples().max();
    let outside = "the status was changed outside the operator";
    if count > samples::STRIDE {
        Some(format!(
            "the spec has {count} {noun}s, at most {} are supported",
            samples::STRIDE
        ))
    } else if index >= count {
        Some(format!(
            "status names {noun} {index}, which the spec does not have ({outside})"
        ))
    } else if sample >= max {
        Some(format!(
            "status names sample {sample}, but the spec asks for at most {max} ({outside})"
        ))
    } else {
        None
    }
}
