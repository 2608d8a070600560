//! Collecting: the sample's verified reports become its figures (statistics in status) and the
//! kind's result (once per sample); then another sample, the next measurement, or the end of
//! the run once the kind has nothing left to write back.

use std::time::Instant;

use crds::{CleanupPolicy, Phase};

use super::super::transition::{fail, finish, set_phase, Next};
use super::{after_hook, gates};
use crate::base::conditions::READY;
use crate::base::error::Result;
use crate::base::outcome::{Failure, Reason, Step};
use crate::driver::metrics::StepMetrics;
use crate::k8s::pods;
use crate::policy::samples::{self, Slot};
use crate::run::{Hooks, Run, RunState};
use crate::store::reports::Owner;

pub(in crate::driver) async fn handle<K: Hooks>(run: &mut Run<'_, K>, index: u32) -> Result<Next> {
    let slot = run.slot();
    if !samples::recorded(&run.status().run().statistics, index, slot.sample) {
        let collected = collect(run, slot).await?;
        if let Some(next) = after_hook(run, collected) {
            return Ok(next);
        }
    }
    let outline = run.obj().outline();
    if let Some(next) = next_slot(run, slot) {
        let m = if next.measurement == index {
            format!(
                "{}: sample {} next",
                run.obj().measurement(index).name,
                next.sample.saturating_add(1)
            )
        } else {
            run.status_mut().set_current(next.measurement);
            format!("preparing {}", run.describe(next))
        };
        run.status_mut().run_mut().current_sample = (next.sample > 0).then_some(next.sample);
        set_phase(run, Phase::Preparing, m);
        return Ok(Next::Continue);
    }
    if let Some(f) = gates::at_end(run).await? {
        fail(run, f);
        return Ok(Next::Continue);
    }
    let all = format!("all {}s measured", outline.noun);
    match K::before_success(run).await? {
        Step::Done => {}
        Step::Wait { message, after } => {
            if let Some(m) = message {
                run.say(format!("{all}; {m}"));
            }
            return Ok(Next::after(after));
        }
        Step::Fail(f) => {
            fail(run, f);
            return Ok(Next::Continue);
        }
    }
    run.condition(READY, true, "Succeeded", all);
    let m = format!("{} {}(s) measured", outline.count, outline.noun);
    finish(run, Phase::Succeeded, "Succeeded", m);
    Ok(Next::Continue)
}

/// The sample's figures and the kind's result from the verified reports (reports that make no
/// figures fail the run BadReport, with nothing recorded); the sample's pods go unless the
/// policy keeps them or the sample ends the run (the finish handler then deletes the run's).
/// A kind's Fail, or an SLO gate with abortOnFail the sample's figures break, ends the run
/// once the sample is recorded.
async fn collect<K: Hooks>(run: &mut Run<'_, K>, slot: Slot) -> Result<Step> {
    let ctx = run.ctx();
    // Where a Collecting's time goes, each part on its own step of the reconcile histogram.
    let steps = ctx.metrics.family::<StepMetrics>();
    let kind = K::kind(&());
    let lap = Instant::now();
    let expected = run.obj().sample(run.id(), slot).workers;
    let (events, reference) = (ctx.events.clone(), run.obj().object_ref(&()));
    let reports = ctx
        .reports()
        .load_for_collecting(
            ctx.metrics.clone(),
            &Owner::of(run.obj()),
            run.id(),
            slot.wire(),
            &expected,
            move |mut forged| events.send(&reference, &mut forged),
        )
        .await?;
    let lap = steps.lap(&kind, "Collecting: load reports", lap);
    let figures = match run.obj().read(run.id(), slot, &reports) {
        Ok(r) => r.figures,
        Err(e) => return Ok(Step::Fail(Failure::new(Reason::BadReport, e))),
    };
    let lap = steps.lap(&kind, "Collecting: figures", lap);
    let mut verdict = K::collect(run, slot, &reports).await?;
    let lap = steps.lap(&kind, "Collecting: kind", lap);
    if let Step::Wait { .. } = verdict {
        return Ok(verdict);
    }
    if verdict == Step::Done {
        if let Some(f) = gates::after_sample(run, slot, &figures) {
            verdict = Step::Fail(f);
        }
    }
    let name = run.obj().measurement(slot.measurement).name;
    let stats = &mut run.status_mut().run_mut().statistics;
    samples::record(stats, slot.measurement, &name, slot.sample, &figures);
    if samples::recorded(
        &run.status().run().statistics,
        slot.measurement,
        slot.sample,
    ) {
        run.note_recorded(slot);
    }
    let outline = run.obj().outline();
    // A sample that ends the run leaves its pods to the finish handler, which deletes the whole
    // run's (or keeps them, when the policy keeps a failed run's): one deletion, not two.
    let ends_run = matches!(verdict, Step::Fail(_)) || next_slot(run, slot).is_none();
    if outline.cleanup != CleanupPolicy::Never && !ends_run {
        let selector = run.slot_selector(slot);
        // A deletion that fails for good is the finish handler's to do again (it deletes the
        // whole run's pods).
        let services = outline.services;
        pods::delete_workers_soon(&ctx.client, &kind, services, run.ns(), &selector, || {});
    }
    steps.lap(&kind, "Collecting: the rest", lap);
    Ok(verdict)
}

/// The sample after `slot` the run's plan still wants, if any (none: the run's last is done).
fn next_slot<K: Hooks>(run: &Run<'_, K>, slot: Slot) -> Option<Slot> {
    let outline = run.obj().outline();
    let plan = outline.repetition.samples();
    let stats = &run.status().run().statistics;
    samples::next(&plan, stats, outline.count, slot, outline.interleaved)
}
