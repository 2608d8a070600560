//! A new run begins (written once): when the run id changed (a new generation, a scheduled
//! round that came due) or no scheduled run exists yet, the old run stops (its workers and its
//! barrier state go), the kind retires it (writes back what it changed, which may make the new
//! run wait), its reports go, and the new run starts from a fresh status.

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::ResourceExt;

use crds::Phase;

use super::transition::{fail, set_phase};
use crate::base::conditions::READY;
use crate::base::error::Result;
use crate::base::labels;
use crate::base::outcome::Step;
use crate::k8s::pods;
use crate::policy::schedule::{round_of, Decision, Scheduled};
use crate::run::{Hooks, Run, RunState};
use crate::store::reports::Owner;

/// Begins run `run.id()`: Some(action) while the kind still retires the old run (the status
/// says so, "... before `before`"). A kind that cannot retire it fails the new run.
pub(in crate::driver) async fn begin_run<K: Hooks>(
    run: &mut Run<'_, K>,
    before: &str,
) -> Result<Option<Action>> {
    stop_old_run(run).await?;
    let retired = K::retire(run).await?;
    if let Step::Wait { message, after } = retired {
        if let Some(m) = message {
            run.say(format!("{m} before {before}"));
        }
        return Ok(Some(Action::requeue(after)));
    }
    start_new_run(run).await?;
    if let Step::Fail(f) = retired {
        fail(run, f);
    }
    Ok(None)
}

/// The old run's workers stop and its barrier state goes (idempotent).
async fn stop_old_run<K: Hooks>(run: &mut Run<'_, K>) -> Result<()> {
    // Every creation of the benchmark's pods stops (the new run has none yet), whichever run
    // status names.
    run.ctx().creations.stop(run.uid(), None).await;
    if let Some(old) = run.status().run().run_id.clone() {
        let selector = format!("{}={old}", labels::RUN);
        let services = run.obj().outline().services;
        pods::delete_workers(
            &run.ctx().client,
            &K::kind(&()),
            services,
            run.ns(),
            &selector,
        )
        .await?;
        run.ctx().runs.forget(&old);
        run.ctx().usage.forget_run(&old);
    }
    Ok(())
}

/// After the kind retired the old run: its reports go and the new run starts from a fresh
/// status.
async fn start_new_run<K: Hooks>(run: &mut Run<'_, K>) -> Result<()> {
    // Folds of this very run id can only be left by a status wiped or forged after it was
    // stored; the new run takes its samples afresh.
    let owner = Owner::of(run.obj());
    run.ctx().reports().delete_folds(&owner, run.id()).await?;
    if let Some(old) = run.status().run().run_id.clone() {
        let ctx = run.ctx();
        ctx.reports().delete(&owner, Some(&old)).await?;
        let finished = run.status().run().phase.is_some_and(Phase::is_finished);
        if !finished && !replaces(run, &old) {
            let m =
                format!("the spec changed during run {old}; it was stopped and a new run starts");
            run.event(EventType::Warning, "SpecChanged", m);
        }
    }
    // What outlives a run: the pointer to the latest result.
    let latest = run.status().run().latest_result.clone();
    let (id, generation) = (run.id().to_string(), run.generation());
    *run.status_mut() = K::Status::default();
    let status = run.status_mut().run_mut();
    status.latest_result = latest;
    status.run_id = Some(id);
    status.observed_generation = Some(generation);
    set_phase(run, Phase::Pending, "accepted");
    run.condition(READY, false, "Pending", "the run has not finished");
    Ok(())
}

/// Whether the run `old` is stopped because a later round's run replaces it (the
/// RunReplaced Event says so, not that the spec changed).
fn replaces<K: Hooks>(run: &Run<'_, K>, old: &str) -> bool {
    let Decision::Scheduled(Scheduled { run: Some(new), .. }) = run.schedule() else {
        return false;
    };
    let uid = run.obj().uid().unwrap_or_default();
    match (round_of(old, &uid), round_of(new, &uid)) {
        (Some(old), Some(new)) => new > old,
        _ => false,
    }
}
