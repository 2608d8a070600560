//! The sweep target in a run: its spec saved (in the operator's namespace) before the first
//! patch, scaled for each step and given time to roll out and settle, and restored at the end,
//! on a new generation and on deletion. Every patch and restore is re-checked against the
//! admin's pairs and the spec first (see `restore::permitted`).

use kube::runtime::events::EventType;

use crds::ingress::{SavedTarget, SweepStep, TargetRef};
use crds::IngressBenchmark;

use super::restore::{self, Restore, RestoreError, TargetRecord};
use crate::base::clock::elapsed_since;
use crate::base::conditions::{self, INVALID, TARGET_RESTORED};
use crate::base::error::Result;
use crate::base::events::PendingEvent;
use crate::base::outcome::{Failure, Reason, Step};
use crate::context::Context;
use crate::ingress::{plan, target};
use crate::run::Run;

type IngressRun<'a> = Run<'a, IngressBenchmark>;

/// Scales the sweep target of `step` (its controller's, with controllers) to the step's size,
/// waits for its rollout and the settle time.
pub async fn prepare(run: &mut IngressRun<'_>, step: u32) -> Result<Step> {
    let spec = &run.obj().spec;
    let Some(sweep) = &spec.sweep else {
        return Ok(Step::Done);
    };
    let (Some(step_spec), Some(tref)) =
        (plan::sweep_step(spec, step), plan::sweep_target(spec, step))
    else {
        return Ok(Step::Fail(Failure::invalid(format!(
            "no sweep step or target for step {step}"
        ))));
    };
    let saved = match saved_target(run, tref).await? {
        Ok(saved) => saved,
        Err(failure) => return Ok(Step::Fail(failure)),
    };
    if run.status().target_ready_at.is_none() {
        if let Some(not_yet) = scale(run, &saved, step, step_spec).await? {
            return Ok(not_yet);
        }
        run.status_mut().target_ready_at = Some(conditions::now());
    }
    let waited = elapsed_since(&run.status().target_ready_at);
    let m = format!("target ready; settling before step {step}");
    Ok(Step::settling(waited, sweep.settle.into(), m))
}

/// Patches the target for `step` and checks its rollout. None once it rolled out.
async fn scale(
    run: &mut IngressRun<'_>,
    saved: &SavedTarget,
    step: u32,
    step_spec: &SweepStep,
) -> Result<Option<Step>> {
    let client = &run.ctx().client;
    if let Err(e) = target::apply_step(client, saved, step_spec).await {
        return Ok(Some(Step::fail(Reason::TargetPatchFailed, e.to_string())));
    }
    let what = format!("{} {}/{}", saved.kind, saved.namespace, saved.name);
    let m = format!("{}/{} scaled for step {step}", saved.namespace, saved.name);
    run.condition(TARGET_RESTORED, false, "Scaled", m);
    let rolled = target::rolled_out(client, saved).await?;
    if rolled {
        return Ok(None);
    }
    if elapsed_since(&run.status().run.phase_since) > run.ctx().config.rollout_timeout() {
        let m = format!("{what} did not finish rolling out for step {step}");
        return Ok(Some(Step::fail(Reason::RolloutTimeout, m)));
    }
    let m = format!("waiting for {what} to roll out (step {step})");
    Ok(Some(Step::wait(m)))
}

/// The saved spec of `tref` (the target of the step under way) from the operator's namespace.
/// Every target of the sweep is saved there (and copied to status) before the first patch,
/// and the record re-checked against the admin's pairs and the spec before every patch.
/// Err fails the run.
async fn saved_target(
    run: &mut IngressRun<'_>,
    tref: &TargetRef,
) -> Result<std::result::Result<SavedTarget, Failure>> {
    let (client, config) = (&run.ctx().client, &run.ctx().config);
    let (record, new) = match restore::load(run.ctx(), run.obj()).await? {
        Some(r) if r.run == run.id() => (r, false),
        Some(r) => {
            let m = format!(
                "the sweep target {}/{} of an earlier run is not restored yet",
                r.saved.namespace, r.saved.name
            );
            return Ok(Err(Failure::new(Reason::TargetNotRestored, m)));
        }
        None => {
            let mut saved = vec![];
            for t in plan::sweep_targets(&run.obj().spec) {
                match target::save(client, t, run.ns()).await {
                    Ok(s) => saved.push(s),
                    Err(e) => {
                        return Ok(Err(Failure::new(Reason::TargetUnavailable, e.to_string())))
                    }
                }
            }
            if let Some(m) = restore::held_elsewhere(client, config, run.obj(), &saved).await? {
                return Ok(Err(Failure::new(Reason::TargetNotRestored, m)));
            }
            let mut saved = saved.into_iter();
            let Some(first) = saved.next() else {
                let m = "the sweep names no target".to_string();
                return Ok(Err(Failure::invalid(m)));
            };
            let record = TargetRecord {
                run: run.id().to_string(),
                saved: first,
                others: saved.collect(),
            };
            (record, true)
        }
    };
    if let Err(m) = restore::permitted(&record, run.obj(), run.id(), config) {
        run.condition(INVALID, true, "NotPermitted", m.clone());
        return Ok(Err(Failure::not_permitted(m)));
    }
    if new {
        // The original specs must be durable before the first patch.
        restore::save(run.ctx(), run.obj(), record.clone()).await?;
    }
    let Some(current) = record
        .targets()
        .find(|s| target::is_saved_of(s, tref, run.ns()))
        .cloned()
    else {
        // The record was saved for this run from the spec, which cannot change within a run.
        let m = format!(
            "{} {}/{} is not in the run's saved targets",
            target::kind_name(tref.kind),
            tref.namespace.as_deref().unwrap_or(run.ns()),
            tref.name
        );
        return Ok(Err(Failure::new(Reason::TargetNotRestored, m)));
    };
    let status = run.status_mut();
    status.saved_target = Some(current.clone());
    status.saved_targets = if record.others.is_empty() {
        vec![]
    } else {
        record.targets().cloned().collect()
    };
    Ok(Ok(current))
}

/// The image of the sweep target's container (the ingress controller, for the result's
/// environment fingerprint), when the admin pairs the target with the benchmark's namespace.
/// None without a sweep, when not permitted, or when it cannot be read.
pub async fn target_image(run: &IngressRun<'_>) -> Option<String> {
    // With controllers swept, the first controller's.
    let tref = plan::sweep_target(&run.obj().spec, 0)?;
    let namespace = tref.namespace.as_deref().unwrap_or(run.ns());
    if !run
        .ctx()
        .config
        .sweep_allows(run.ns(), namespace, &tref.name)
    {
        return None;
    }
    match target::image(&run.ctx().client, tref, namespace).await {
        Ok(image) => image,
        Err(e) => {
            tracing::debug!("reading the sweep target's image: {e}");
            None
        }
    }
}

/// Restores the target at the end of the run; true to come back (a failed restore).
pub async fn restore_at_end(run: &mut IngressRun<'_>) -> Result<bool> {
    let outcome = restore::restore(run.ctx(), run.obj(), run.id()).await?;
    Ok(match outcome {
        Restore::Nothing => false,
        Restore::Restored(saved) => {
            let named: Vec<String> = saved.iter().map(restore::describe).collect();
            let m = format!("{} restored", named.join(", "));
            let restored = |s: &SavedTarget| SavedTarget {
                restored: true,
                ..s.clone()
            };
            let status = run.status_mut();
            let current = status.saved_target.take();
            // The one status showed (the last step's), else the first.
            let shown = current
                .and_then(|c| {
                    saved
                        .iter()
                        .find(|s| s.name == c.name && s.namespace == c.namespace)
                })
                .or(saved.first());
            status.saved_target = shown.map(restored);
            if saved.len() > 1 {
                status.saved_targets = saved.iter().map(restored).collect();
            }
            run.condition(TARGET_RESTORED, true, "Restored", m);
            false
        }
        Restore::Refused(m) => {
            run.condition(TARGET_RESTORED, false, "NotPermitted", m.clone());
            run.event(EventType::Warning, "NotPermitted", m);
            false
        }
        Restore::Failed(m) => {
            let m = format!("restoring the sweep target: {m}; retrying");
            run.condition(TARGET_RESTORED, false, "RestoreFailed", m);
            true
        }
    })
}

/// Restores a target an earlier run (or this one, on deletion) changed, from the record in the
/// operator's namespace. A refusal is reported (an Event; the record stays for the admin); a
/// failure is an error, so the caller retries.
pub async fn restore_earlier(
    ctx: &Context,
    ib: &IngressBenchmark,
    current_run: &str,
) -> Result<Vec<PendingEvent>> {
    match restore::restore(ctx, ib, current_run).await? {
        Restore::Nothing | Restore::Restored(_) => Ok(vec![]),
        Restore::Refused(m) => {
            let m = format!("sweep target not restored: {m}");
            Ok(vec![(EventType::Warning, "NotPermitted".into(), m)])
        }
        Restore::Failed(m) => Err(RestoreError::Failed(m).into()),
    }
}
