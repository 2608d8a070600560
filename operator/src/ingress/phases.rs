//! The run's phase machine. Each phase handler is idempotent: it may run again on a stale or
//! restarted operator and must converge to the same children and the same status.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use loadgen::worker::protocol::Role;

use crds::ingress::StepResult;
use crds::{CleanupPolicy, IngressBenchmark, IngressBenchmarkStatus, Phase};

use super::{plan, result, validate};
use crate::conditions::{self, INVALID, READY, TARGET_RESTORED, THRESHOLDS_MET, WORKERS_SCHEDULED};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::lifecycle::{self, elapsed_since, PendingEvent};
use crate::reports::{Loaded, Owner, Store};
use crate::{children, labels, queue, target, workers};

/// How often a running step is checked (reports also wake the controller at once).
const POLL: Duration = Duration::from_secs(2);

/// One reconcile's view of a benchmark and its run.
struct Run<'a> {
    ib: &'a IngressBenchmark,
    ctx: &'a Context,
    ns: String,
    name: String,
    id: String,
    generation: i64,
    status: IngressBenchmarkStatus,
    events: Vec<PendingEvent>,
}

/// What a phase handler wants next.
enum Next {
    /// The phase changed; run the next handler in this reconcile.
    Continue,
    /// Write status and come back after this action.
    Wait(Action),
}

pub async fn apply(
    ib: &IngressBenchmark,
    ctx: &Context,
    api: &Api<IngressBenchmark>,
) -> Result<Action> {
    // Act on the freshest object, not the cache: our own status writes may not be in it yet.
    let ib = api.get(&ib.name_any()).await?;
    let generation = ib.metadata.generation.unwrap_or(1);
    let id = labels::run_id(&ib.uid().unwrap_or_default(), generation);
    let before = ib.status.clone().unwrap_or_default();
    let mut run = Run {
        ib: &ib,
        ctx,
        ns: ib.namespace().unwrap_or_default(),
        name: ib.name_any(),
        id,
        generation,
        status: before.clone(),
        events: vec![],
    };
    if run.status.run.run_id.as_deref() != Some(run.id.as_str()) {
        run.start_new_run().await?;
    }
    let mut action = Action::await_change();
    for _ in 0..8 {
        let phase = run.status.run.phase.unwrap_or_default();
        let next = match phase {
            Phase::Pending | Phase::Queued => run.pending().await?,
            Phase::Preparing => run.preparing(api).await?,
            Phase::Running => run.running().await?,
            Phase::Collecting => run.collecting().await?,
            Phase::Succeeded | Phase::Failed => run.finished().await?,
        };
        match next {
            Next::Continue => continue,
            Next::Wait(a) => {
                action = a;
                break;
            }
        }
    }
    // Report objects go only once the status holding their results is stored.
    let persisted = if run.status != before {
        let written = lifecycle::write_status(api, &run.name, &run.status).await?;
        written.status.unwrap_or_default()
    } else {
        before
    };
    ctx.metrics.set_phase(
        plan::KIND,
        &run.ns,
        &run.name,
        run.status.run.phase.unwrap_or_default(),
    );
    run.publish_events().await;
    lifecycle::release_reports(ctx, &ib, &run.id, &persisted.run).await?;
    Ok(action)
}

/// Deletion: restore the target, delete every child. Works even if apply never ran.
pub async fn cleanup(ib: &IngressBenchmark, ctx: &Context) -> Result<Action> {
    let ns = ib.namespace().unwrap_or_default();
    let name = ib.name_any();
    if let Some(saved) = ib.status.as_ref().and_then(|s| s.saved_target.as_ref()) {
        if !saved.restored {
            target::restore(&ctx.client, saved)
                .await
                .map_err(|e| Error::Internal(format!("restoring the sweep target: {e}")))?;
        }
    }
    children::delete(
        &ctx.client,
        &ns,
        &labels::benchmark_selector(plan::KIND, &name),
        children::Sweep::ALL,
    )
    .await?;
    Store::of(ctx).delete(&Owner::of(ib), None).await?;
    if let Some(id) = ib.status.as_ref().and_then(|s| s.run.run_id.as_deref()) {
        ctx.runs.forget(id);
    }
    ctx.metrics.forget(plan::KIND, &ns, &name);
    Ok(Action::await_change())
}

impl Run<'_> {
    fn set_phase(&mut self, phase: Phase, message: impl Into<String>) {
        lifecycle::set_phase(&mut self.status.run, &mut self.events, phase, message);
    }

    fn condition(&mut self, type_: &str, ok: bool, reason: &str, message: impl Into<String>) {
        conditions::set(
            &mut self.status.run.conditions,
            type_,
            ok,
            reason,
            message,
            Some(self.generation),
        );
    }

    fn selector(&self) -> String {
        format!("{}={}", labels::RUN, self.id)
    }

    fn step_selector(&self, step: u32) -> String {
        format!("{},{}={step}", self.selector(), labels::STEP)
    }

    fn step(&self) -> u32 {
        self.status.current_step.unwrap_or(0)
    }

    fn cleanup_policy(&self) -> CleanupPolicy {
        self.ib.spec.cleanup
    }

    async fn publish_events(&mut self) {
        let reference = self.ib.object_ref(&());
        lifecycle::publish_events(self.ctx, &reference, &mut self.events).await;
    }

    /// A new generation: stop what an older run left behind, then start fresh. A sweep target
    /// changed by the old run is restored first; its saved spec is kept until it is.
    async fn start_new_run(&mut self) -> Result<()> {
        if let Some(old) = self.status.run.run_id.clone() {
            let was_active = !self.status.run.phase.is_some_and(Phase::is_finished);
            children::delete(
                &self.ctx.client,
                &self.ns,
                &format!("{}={old}", labels::RUN),
                children::Sweep::ALL,
            )
            .await?;
            Store::of(self.ctx)
                .delete(&Owner::of(self.ib), Some(&old))
                .await?;
            self.ctx.runs.forget(&old);
            if was_active {
                self.events.push((
                    EventType::Warning,
                    "SpecChanged".into(),
                    format!(
                        "the spec changed during run {old}; it was stopped and a new run starts"
                    ),
                ));
            }
        }
        let saved = match self.status.saved_target.take() {
            Some(s) if !s.restored => {
                target::restore(&self.ctx.client, &s)
                    .await
                    .map_err(|e| Error::Internal(format!("restoring the sweep target: {e}")))?;
                None
            }
            _ => None,
        };
        self.status = IngressBenchmarkStatus {
            saved_target: saved,
            ..Default::default()
        };
        self.status.run.run_id = Some(self.id.clone());
        self.status.run.observed_generation = Some(self.generation);
        self.status.run.start_time = Some(conditions::now());
        self.set_phase(Phase::Pending, "accepted");
        self.condition(READY, false, "Pending", "the run has not finished");
        Ok(())
    }

    async fn fail(&mut self, reason: &str, message: String) -> Result<Next> {
        self.condition(READY, false, reason, message.clone());
        self.finish(Phase::Failed, message).await
    }

    async fn pending(&mut self) -> Result<Next> {
        let spec = &self.ib.spec;
        let invalid = match validate::permitted(spec, &self.ns, &self.ctx.config) {
            Err(m) => Some(m),
            Ok(()) => validate::nodes_exist(&self.ctx.client, spec).await?.err(),
        };
        if let Some(message) = invalid {
            self.condition(INVALID, true, "InvalidSpec", message.clone());
            return self.fail("InvalidSpec", message).await;
        }
        self.condition(INVALID, false, "Valid", "the spec is valid");
        let all = queue::all(&self.ctx.client).await?;
        if let Some(why) = queue::blocker(&queue::ingress(self.ib), &all) {
            self.set_phase(Phase::Queued, why);
            return Ok(Next::Wait(Action::requeue(Duration::from_secs(5))));
        }
        self.status.current_step = Some(0);
        self.set_phase(Phase::Preparing, "preparing step 0");
        Ok(Next::Continue)
    }

    /// Scales the sweep target for the step, waits for its rollout and the settle time, then
    /// creates the step's workers.
    async fn preparing(&mut self, api: &Api<IngressBenchmark>) -> Result<Next> {
        let step = self.step();
        if let Some(sweep) = &self.ib.spec.sweep {
            let Some(step_spec) = sweep.steps.get(step as usize) else {
                return self
                    .fail("InvalidSpec", format!("no sweep step {step}"))
                    .await;
            };
            if self.status.saved_target.is_none() {
                match target::save(&self.ctx.client, &sweep.target_ref, &self.ns).await {
                    Ok(saved) => self.status.saved_target = Some(saved),
                    Err(e) => return self.fail("TargetUnavailable", e.to_string()).await,
                }
                // The original spec must be durable before the first patch.
                lifecycle::write_status(api, &self.name, &self.status).await?;
            }
            let saved = self.status.saved_target.clone().expect("saved above");
            if self.status.target_ready_at.is_none() {
                if let Err(e) = target::apply_step(&self.ctx.client, &saved, step_spec).await {
                    return self.fail("TargetPatchFailed", e.to_string()).await;
                }
                self.condition(
                    TARGET_RESTORED,
                    false,
                    "Scaled",
                    format!("{}/{} scaled for step {step}", saved.namespace, saved.name),
                );
                let rolled = target::rolled_out(&self.ctx.client, &saved)
                    .await
                    .map_err(|e| Error::Internal(e.to_string()))?;
                if !rolled {
                    if elapsed_since(&self.status.run.phase_since)
                        > self.ctx.config.rollout_timeout()
                    {
                        let m = format!(
                            "{} {}/{} did not finish rolling out for step {step}",
                            saved.kind, saved.namespace, saved.name
                        );
                        return self.fail("RolloutTimeout", m).await;
                    }
                    self.status.run.message = Some(format!(
                        "waiting for {} {}/{} to roll out (step {step})",
                        saved.kind, saved.namespace, saved.name
                    ));
                    return Ok(Next::Wait(Action::requeue(POLL)));
                }
                self.status.target_ready_at = Some(conditions::now());
            }
            let settle = Duration::from(sweep.settle);
            let waited = elapsed_since(&self.status.target_ready_at);
            if waited < settle {
                self.status.run.message =
                    Some(format!("target ready; settling before step {step}"));
                return Ok(Next::Wait(Action::requeue(settle - waited)));
            }
        }
        self.create_workers(step).await?;
        let n = self.ib.spec.workers.effective_replicas();
        self.status.workers = Some(format!("0/{n}"));
        self.set_phase(
            Phase::Running,
            format!("step {step}: {n} worker(s) started"),
        );
        Ok(Next::Wait(Action::requeue(POLL)))
    }

    /// The token Secret, the registry entry for the barrier, and the pods (all idempotent).
    async fn announce(&mut self, step: u32) -> Result<()> {
        let workers = plan::worker_names(self.ib, &self.id, step);
        lifecycle::announce(self.ctx, self.ib, &self.id, step, workers).await
    }

    async fn create_workers(&mut self, step: u32) -> Result<()> {
        self.announce(step).await?;
        let pods: Vec<_> =
            plan::workers(self.ib, &self.id, step, self.ib.spec.workers.host_network)
                .iter()
                .map(|p| workers::pod(p, &self.ctx.config))
                .collect();
        children::create_pods(&self.ctx.client, &self.ns, &pods).await?;
        Ok(())
    }

    async fn running(&mut self) -> Result<Next> {
        let step = self.step();
        // After an operator restart the barrier state is gone: announce again. Otherwise the
        // run is already known and the token Secret need not be read on every poll.
        if !self.ctx.runs.is_announced(&self.id, step) {
            self.announce(step).await?;
        }
        // Pods first, then reports: a worker exits only after its report is stored, so a
        // finished pod's report is always in the second list.
        let pods =
            children::list_pods(&self.ctx.client, &self.ns, &self.step_selector(step)).await?;
        let expected = plan::worker_names(self.ib, &self.id, step);
        let reports = self.reports(step, &expected).await?.reports;
        let n = expected.len();
        self.status.workers = Some(format!("{}/{n}", reports.len()));
        if expected.keys().all(|w| reports.contains_key(w)) {
            self.set_phase(
                Phase::Collecting,
                format!("step {step}: merging {n} report(s)"),
            );
            return Ok(Next::Continue);
        }
        let scheduled = pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .count();
        self.condition(
            WORKERS_SCHEDULED,
            scheduled == n,
            "Scheduling",
            format!("{scheduled}/{n} worker(s) scheduled"),
        );
        if let Some(problem) = children::worker_problem(&expected, &pods, &reports) {
            return self
                .fail("WorkerFailed", format!("step {step}: {problem}"))
                .await;
        }
        let deadline = plan::step_deadline(&self.ib.spec, self.ctx.config.worker_start_timeout());
        if elapsed_since(&self.status.run.phase_since) > deadline {
            let missing: Vec<String> = expected
                .keys()
                .filter(|w| !reports.contains_key(*w))
                .map(|w| children::describe_pod(w, &pods))
                .collect();
            return self
                .fail(
                    "WorkerTimeout",
                    format!(
                        "step {step}: {} never reported within {}s",
                        missing.join(", "),
                        deadline.as_secs()
                    ),
                )
                .await;
        }
        Ok(Next::Wait(Action::requeue(POLL)))
    }

    /// The verified reports of `step` (see reports::Store::load).
    async fn reports(&self, step: u32, expected: &BTreeMap<String, Role>) -> Result<Loaded> {
        let owner = Owner::of(self.ib);
        Ok(Store::of(self.ctx)
            .load(&owner, &self.id, step, expected)
            .await?)
    }

    async fn collecting(&mut self) -> Result<Next> {
        let step = self.step();
        let expected = plan::worker_names(self.ib, &self.id, step);
        let loaded = self.reports(step, &expected).await?;
        let forged = Store::of(self.ctx)
            .forgery_events(
                &self.ctx.metrics,
                &Owner::of(self.ib),
                &self.id,
                &loaded.rejected,
            )
            .await;
        self.events.extend(forged);
        let reports = loaded.reports;
        let sweep_step = self
            .ib
            .spec
            .sweep
            .as_ref()
            .and_then(|s| s.steps.get(step as usize));
        let result = match result::step_result(step, sweep_step, &reports) {
            Ok(r) => r,
            Err(e) => return self.fail("BadReport", e).await,
        };
        self.record_step(result);
        if self.cleanup_policy() != CleanupPolicy::Never {
            children::delete(
                &self.ctx.client,
                &self.ns,
                &self.step_selector(step),
                children::Sweep::PODS,
            )
            .await?;
        }
        if step + 1 < plan::step_count(&self.ib.spec) {
            self.status.current_step = Some(step + 1);
            self.status.target_ready_at = None;
            self.set_phase(Phase::Preparing, format!("preparing step {}", step + 1));
            return Ok(Next::Continue);
        }
        self.condition(READY, true, "Succeeded", "all steps measured");
        self.finish(Phase::Succeeded, format!("{} step(s) measured", step + 1))
            .await
    }

    fn record_step(&mut self, r: StepResult) {
        self.ctx.metrics.set_ingress_step(&self.ns, &self.name, &r);
        self.status.rps = Some((r.rps * 100.0).round() / 100.0);
        self.status.p99 = Some(result::format_ms(r.latency_ms.p99));
        self.events.push((
            EventType::Normal,
            "StepMeasured".into(),
            format!(
                "step {}: {:.1} req/s, p99 {}",
                r.index,
                r.rps,
                result::format_ms(r.latency_ms.p99)
            ),
        ));
        self.status.steps.retain(|s| s.index != r.index);
        self.status.steps.push(r);
        self.status.steps.sort_by_key(|s| s.index);
    }

    /// Final phase: scaling table, thresholds, target restored, children cleaned per policy.
    async fn finish(&mut self, phase: Phase, message: String) -> Result<Next> {
        if self.ib.spec.sweep.is_some() {
            self.status.scaling = result::scaling(&self.status.steps);
            if let Some(s) = &self.status.scaling {
                self.ctx
                    .metrics
                    .set_ingress_scaling(&self.ns, &self.name, s);
            }
        }
        if let (Some(t), Some(last)) = (&self.ib.spec.thresholds, self.status.steps.last()) {
            let (ok, why) = result::check_thresholds(t, last);
            self.condition(THRESHOLDS_MET, ok, if ok { "Met" } else { "NotMet" }, why);
        }
        self.status.run.completion_time = Some(conditions::now());
        self.set_phase(phase, message);
        Ok(Next::Continue)
    }

    /// Succeeded or Failed: make sure the target is restored and children are gone per policy.
    async fn finished(&mut self) -> Result<Next> {
        let mut retry = false;
        if let Some(saved) = self.status.saved_target.clone().filter(|s| !s.restored) {
            match target::restore(&self.ctx.client, &saved).await {
                Ok(()) => {
                    self.status.saved_target.as_mut().expect("present").restored = true;
                    self.condition(
                        TARGET_RESTORED,
                        true,
                        "Restored",
                        format!("{} {}/{} restored", saved.kind, saved.namespace, saved.name),
                    );
                }
                Err(e) => {
                    self.condition(
                        TARGET_RESTORED,
                        false,
                        "RestoreFailed",
                        format!(
                            "restoring {}/{}: {e}; retrying",
                            saved.namespace, saved.name
                        ),
                    );
                    retry = true;
                }
            }
        }
        // Otherwise pods and their token are kept for debugging. Reports go once the final
        // status is stored (apply).
        let failed = self.status.run.phase == Some(Phase::Failed);
        if let (CleanupPolicy::Always, _) | (CleanupPolicy::OnSuccess, false) =
            (self.cleanup_policy(), failed)
        {
            let (client, selector) = (&self.ctx.client, self.selector());
            children::delete(client, &self.ns, &selector, children::Sweep::ALL).await?;
        }
        self.ctx.runs.forget(&self.id);
        Ok(Next::Wait(if retry {
            Action::requeue(Duration::from_secs(10))
        } else {
            Action::await_change()
        }))
    }
}
