//! The run driver every kind shares. One reconcile moves a run through
//! Pending -> (Queued) -> Preparing -> Running -> Collecting -> Succeeded | Failed, over the
//! kind's measurements one after another (an IngressBenchmark's sweep steps, an
//! EgressBenchmark's cases). A kind supplies only what differs, through `run::Plan` and
//! `run::Hooks`: its checks, the workers of a measurement, what it prepares before one (a sweep
//! target scaled, an offload profile applied), how reports become a result, and what it
//! restores at the end.
//!
//! [`apply`] below is the whole reconcile, step by step; `scheduled` applies the schedule,
//! `start` begins a new run, `machine` runs the phase handlers (`phases/`, one file per phase),
//! `transition` is the only place a run changes phase, `status` writes status and releases reports,
//! `record` writes the run record (what the operator decided about the run; results are made
//! of it).
//!
//! Every handler is idempotent: a stale or restarted operator converges to the same children
//! and the same status. Everything a phase decides is recorded in status before [`apply`]
//! returns, so a restart resumes the run instead of repeating it. ([`apply`] is a reconcile's
//! work: past a grace it goes on behind the controller's reconcile, never two of one object at
//! once; `controller::behind`.)

mod machine;
pub mod metrics;
mod phases;
mod record;
mod scheduled;
mod start;
mod status;
mod transition;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::ResourceExt;

use crate::base::error::Result;
use crate::base::labels;
use crate::base::outcome::Step;
use crate::context::Context;
use crate::k8s::pods;
use crate::results::fold;
use crate::results::metrics::{RegimeMetrics, ResultMetrics};
use crate::run::{Hooks, Run, RunState};
use crate::store::reports::Owner;
use crate::store::run_record;
use metrics::{RunMetrics, StepMetrics};

/// How soon a reconcile handed a copy behind the operator's own last write looks again, should
/// the watch's next event not come first.
pub const BEHIND_RETRY: std::time::Duration = std::time::Duration::from_secs(2);

/// Moves `obj`'s run on as far as it can go now, writes status, publishes Events.
pub async fn apply<K: Hooks>(obj: &K, ctx: &Context, api: &Api<K>) -> Result<Action> {
    // Each step's time goes to netbench_reconcile_step_duration_seconds.
    let kind = K::kind(&());
    let steps = ctx.metrics.family::<StepMetrics>();
    let lap = std::time::Instant::now();

    // 1. The freshest object: the cache's copy only when it is the version this operator last
    //    read or wrote (it then holds our own last status write), else read anew.
    let (cached, behind) = match (obj.uid(), obj.resource_version()) {
        (Some(uid), Some(version)) => (
            ctx.versions.is_current(&uid, &version),
            ctx.versions.is_behind(&uid, &version),
        ),
        _ => (false, false),
    };
    // A copy at an earlier version of ours: the watch has yet to show our later write, and
    // that wakes this object again (a relist, should the watch restart, does too; the requeue
    // is a net). Reading it now would only do the work of that reconcile twice.
    if behind {
        return Ok(Action::requeue(BEHIND_RETRY));
    }
    let obj = if cached {
        obj.clone()
    } else {
        api.get(&obj.name_any()).await?
    };
    note_version(ctx, &obj);
    let lap = steps.lap(&kind, "get", lap);
    let before = obj.status().cloned().unwrap_or_default();

    // 2. What the schedule says now, and so which run the object should have.
    let decision = scheduled::decide_for(&obj, before.run(), jiff::Timestamp::now());
    let id = scheduled::run_id(&decision, &obj);
    let (obj, extra) = K::load(ctx, obj, &id).await?;
    let lap = steps.lap(&kind, "extra", lap);
    let mut run = Run::new(&obj, ctx, id, before.clone(), decision, extra);

    let action = 'moved: {
        // 3. The schedule's Events; before its first time, no run: wait for it.
        if let Some(wait) = scheduled::before_run(&mut run).await? {
            break 'moved wait;
        }
        // 4. A new run id (a new generation, a scheduled round that came due): the old run
        //    stops, the kind retires it, the new run begins.
        if run.is_new() {
            let begun = start::begin_run(&mut run, "the new run starts").await?;
            steps.lap(&kind, "start", lap);
            if let Some(wait) = begun {
                break 'moved wait;
            }
        }
        // 5. A refused schedule fails the run before anything is created.
        scheduled::refuse_invalid(&mut run);
        // 6. The phase handlers, until one waits.
        machine::advance(&mut run).await?
    };

    // 7. status.schedule, and the wake-up at the next scheduled time.
    let action = scheduled::keep(&mut run, action);
    let lap = std::time::Instant::now();

    // 8. The end of the run in its record, if the finish handler could not write it; then one
    //    status write, only when something changed (the kind's last touches first).
    record::end(&mut run, true).await;
    K::show(&mut run);
    let recorded = run.take_recorded();
    let persisted = match status::write(api, run.name(), run.status(), before).await? {
        status::Written::Unchanged(status) => status,
        status::Written::Stored(stored) => {
            note_version(ctx, &stored);
            stored.status().cloned().unwrap_or_default()
        }
    };
    let lap = steps.lap(&kind, "status", lap);
    // A run whose finish handler did all it owes is done once the stored status shows it ended.
    if status::is_stored_finished(persisted.run(), run.id()) {
        let key = phases::finish::ending_key(&run);
        ctx.runs.stored_ended(&key, run.id());
    }

    // 9. The phase on /metrics, the Events, and the finished run's reports released (only
    //    once the stored status holds their results); until then, the samples this write
    //    recorded folded into one object each.
    let phase = run.status().run().phase.unwrap_or_default();
    ctx.metrics
        .family::<RunMetrics>()
        .set_phase(&kind, run.ns(), run.name(), phase);
    ctx.publish(&obj.object_ref(&()), &mut run.take_events());
    let lap = steps.lap(&kind, "publish", lap);
    if !status::release_reports(ctx, &obj, run.id(), persisted.run()).await? {
        fold::fold_recorded(ctx, &obj, run.id(), &recorded, persisted.run()).await;
    }
    steps.lap(&kind, "reports", lap);
    Ok(action)
}

/// The version of `obj` this reconcile holds (read, or written by its status write).
fn note_version<K: kube::Resource>(ctx: &Context, obj: &K) {
    ctx.versions.note_object(obj);
}

/// [`cleanup`], its time observed as the reconcile step "cleanup".
pub async fn cleanup_timed<K: Hooks>(obj: &K, ctx: &Context, api: &Api<K>) -> Result<Step> {
    let started = std::time::Instant::now();
    let done = cleanup(obj, ctx, api).await;
    let steps = ctx.metrics.family::<StepMetrics>();
    steps.lap(&K::kind(&()), "cleanup", started);
    done
}

/// Deletion: stop the workers, let the kind write back what its runs changed, then delete every
/// child. Works even if apply never ran; status is not trusted for anything but the run id to
/// forget. Done lets the object go; Wait keeps it (and its finalizer) until the kind is done.
pub async fn cleanup<K: Hooks>(obj: &K, ctx: &Context, api: &Api<K>) -> Result<Step> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let kind = K::kind(&());

    // 1. The workers stop. Without the right to (a namespace-scoped install whose Role in this
    // namespace is gone: the namespace is being deleted, or no longer watched) they go with the
    // benchmark (owner references), and what the runs changed must still be written back.
    let selector = labels::benchmark_selector(&kind, &name);
    ctx.creations
        .stop(&obj.uid().unwrap_or_default(), None)
        .await;
    match pods::delete_workers(&ctx.client, &kind, obj.outline().services, &ns, &selector).await {
        Ok(()) => {}
        Err(kube::Error::Api(e)) if e.code == 403 => {
            tracing::warn!(
                "deleting the workers was refused ({}); restoring anyway",
                e.message
            );
        }
        Err(e) => return Err(e.into()),
    }

    // 2. The freshest copy of this very object (a re-created one of the same name is not ours).
    let obj = api
        .get_opt(&name)
        .await?
        .filter(|fresh| fresh.uid() == obj.uid())
        .unwrap_or_else(|| obj.clone());

    // 3. The kind writes back what the object's runs changed.
    let run = scheduled::current_run(&obj);
    let deleted = K::on_delete(ctx, &obj, api, &run).await?;
    if deleted != Step::Done {
        return Ok(deleted);
    }

    // 4. Its reports, its run record, its registry entry and its series go.
    ctx.reports().delete(&Owner::of(&obj), None).await?;
    run_record::delete(
        &ctx.client,
        &ctx.config.namespace,
        &ctx.run_records,
        &Owner::of(&obj),
    )
    .await?;
    if let Some(id) = obj.status().and_then(|s| s.run().run_id.as_deref()) {
        ctx.runs.forget(id);
        ctx.usage.forget_run(id);
    }
    if let Some(uid) = obj.uid() {
        ctx.versions.forget(&uid);
    }
    ctx.metrics.family::<RunMetrics>().forget(&kind, &ns, &name);
    ctx.metrics
        .family::<ResultMetrics>()
        .forget(&kind, &ns, &name);
    ctx.metrics
        .family::<RegimeMetrics>()
        .forget(&kind, &ns, &name);
    Ok(Step::Done)
}
