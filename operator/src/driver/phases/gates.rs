//! SLO gates in the phases of a run (shared by Running and Collecting): the live early abort
//! while a sample runs, a sample's figures once its reports are in (gates with abortOnFail end
//! the run at once), and every gate when the last measurement is in (a broken gate fails the
//! run, as k6's thresholds fail a test). Each failure sets GatesPassed=False, emits a GateFailed
//! Event and ends the run Failed with reason GateFailed, its message naming the gate, the
//! figure, the limit and the measured value. The decisions are `policy::gates` and
//! `policy::live`.

use kube::runtime::events::EventType;

use crds::result::MeasurementStats;

use crate::base::conditions::GATES_PASSED;
use crate::base::error::Result;
use crate::base::outcome::{Failure, Reason};
use crate::policy::gates::{self, Breach};
use crate::policy::live;
use crate::policy::samples::{Figure, Slot};
use crate::run::{Hooks, Run};

/// While `slot` runs: the first gate with abortOnFail its clients' merged live progress has
/// broken for good.
pub(in crate::driver) fn live_abort<K: Hooks>(run: &mut Run<'_, K>, slot: Slot) -> Option<Failure> {
    let gates = run.obj().outline().gates;
    if !gates.iter().any(|g| g.abort_on_fail) {
        return None;
    }
    let points = run.ctx().runs.live(run.id(), slot.wire());
    let from = run
        .obj()
        .measurement(slot.measurement)
        .live_from
        .as_secs_f64();
    let what = run.describe(slot);
    let breach = gates.iter().find_map(|g| {
        let b = live::decide(&points, g, from)?;
        let about = format!("{what}, live, broken for {:.0}s", b.seconds);
        Breach::of(g, b.value, about)
    })?;
    Some(failed(run, &breach))
}

/// Once a sample's figures are made: the first gate with abortOnFail they break.
pub(in crate::driver) fn after_sample<K: Hooks>(
    run: &mut Run<'_, K>,
    slot: Slot,
    figures: &[Figure],
) -> Option<Failure> {
    let what = run.describe(slot);
    let breach = gates::sample_breaches(run.obj().outline().gates, figures, &what, true)
        .into_iter()
        .next()?;
    Some(failed(run, &breach))
}

/// When every measurement is in: every gate over the statistics the stored reports make (status
/// is writable by the benchmark's author: never judged); sets GatesPassed.
pub(in crate::driver) async fn at_end<K: Hooks>(run: &mut Run<'_, K>) -> Result<Option<Failure>> {
    if run.obj().outline().gates.is_empty() {
        return Ok(None);
    }
    let stats = crate::results::statistics(run).await?;
    Ok(judged(run, &stats))
}

fn judged<K: Hooks>(run: &mut Run<'_, K>, stats: &[MeasurementStats]) -> Option<Failure> {
    let verdict = gates::judge_run(run.obj().outline().gates, stats);
    match verdict.broken.first() {
        Some(b) => {
            let (_, _, message) = verdict.condition();
            let failure = failed(run, b);
            Some(Failure::new(failure.reason, message))
        }
        None => {
            let (ok, reason, message) = verdict.condition();
            run.condition(GATES_PASSED, ok, reason, message);
            None
        }
    }
}

/// GatesPassed=False, a GateFailed Event, and the failure that ends the run.
fn failed<K: Hooks>(run: &mut Run<'_, K>, breach: &Breach) -> Failure {
    let message = breach.message();
    run.condition(
        GATES_PASSED,
        false,
        Reason::GateFailed.as_str(),
        message.clone(),
    );
    run.event(
        EventType::Warning,
        Reason::GateFailed.as_str(),
        message.clone(),
    );
    Failure::new(Reason::GateFailed, message)
}
