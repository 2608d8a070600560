//! The run's phase machine. Each phase handler is idempotent: it may run again on a stale or
//! restarted operator and must converge to the same children and the same status.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use protocol::worker::Role;

use crds::ingress::StepResult;
use crds::{CleanupPolicy, IngressBenchmark, IngressBenchmarkStatus, Phase};

use super::restore::{self, Restore, TargetRecord};
use super::{plan, result, validate, verdict};
use crate::caps::Refusal;
use crate::conditions::{
    self, INVALID, QUEUED, READY, TARGET_RESTORED, THRESHOLDS_MET, WORKERS_SCHEDULED,
};
use crate::context::Context;
use crate::creation::{self, Started};
use crate::deadline;
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
    let budget = deadline::ingress(&ib.spec, deadline::Timeouts::from(&ctx.config));
    for _ in 0..8 {
        let phase = run.status.run.phase.unwrap_or_default();
        if let Some(m) = deadline::exceeded(&run.status.run, budget) {
            run.fail(deadline::REASON, m).await?;
            continue;
        }
        let next = match phase {
            Phase::Pending | Phase::Queued => run.pending().await?,
            Phase::Preparing => run.preparing().await?,
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
    // From the record in the operator's namespace only, never from status.savedTarget.
    let run = labels::run_id(
        &ib.uid().unwrap_or_default(),
        ib.metadata.generation.unwrap_or(1),
    );
    let mut events = vec![];
    restore_target(ctx, ib, &run, &mut events).await?;
    lifecycle::publish_events(ctx, &ib.object_ref(&()), &mut events).await;
    children::delete_pods(
        &ctx.client,
        &ns,
        &labels::benchmark_selector(plan::KIND, &name),
    )
    .await?;
    Store::of(ctx).delete(&Owner::of(ib), None).await?;
    if let Some(id) = ib.status.as_ref().and_then(|s| s.run.run_id.as_deref()) {
        ctx.runs.forget(id);
    }
    ctx.metrics.forget(plan::KIND, &ns, &name);
    Ok(Action::await_change())
}

/// Restores a target an earlier run (or this one, on deletion) changed, from the record in the
/// operator's namespace. A refusal is reported (the record stays for the admin); a failure is
/// an error, so the caller retries.
async fn restore_target(
    ctx: &Context,
    ib: &IngressBenchmark,
    current_run: &str,
    events: &mut Vec<PendingEvent>,
) -> Result<()> {
    match restore::restore(&ctx.client, &ctx.config, ib, current_run).await? {
        Restore::Nothing | Restore::Restored(_) => Ok(()),
        Restore::Refused(m) => {
            events.push((
                EventType::Warning,
                "NotPermitted".into(),
                format!("sweep target not restored: {m}"),
            ));
            Ok(())
        }
        Restore::Failed(m) => Err(Error::Internal(format!("restoring the sweep target: {m}"))),
    }
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

    /// The target's saved spec from the operator's namespace, saved there (and copied to
    /// status) before the first patch; re-checked against the admin's pairs and the spec
    /// before every patch. Err((reason, message)) fails the run.
    async fn saved_target(
        &mut self,
        sweep: &crds::ingress::SweepSpec,
    ) -> Result<Result<crds::ingress::SavedTarget, (&'static str, String)>> {
        let (client, config) = (&self.ctx.client, &self.ctx.config);
        let record = match restore::load(client, config, self.ib).await? {
            Some(r) if r.run == self.id => r,
            Some(r) => {
                let m = format!(
                    "the sweep target {}/{} of an earlier run is not restored yet",
                    r.saved.namespace, r.saved.name
                );
                return Ok(Err(("TargetNotRestored", m)));
            }
            None => {
                let saved = match target::save(client, &sweep.target_ref, &self.ns).await {
                    Ok(saved) => saved,
                    Err(e) => return Ok(Err(("TargetUnavailable", e.to_string()))),
                };
                let record = TargetRecord {
                    run: self.id.clone(),
                    saved,
                };
                if let Err(m) = restore::permitted(&record, self.ib, &self.id, config) {
                    self.condition(INVALID, true, "NotPermitted", m.clone());
                    return Ok(Err(("NotPermitted", m)));
                }
                // The original spec must be durable before the first patch.
                restore::save(client, config, self.ib, record.clone()).await?;
                record
            }
        };
        if let Err(m) = restore::permitted(&record, self.ib, &self.id, config) {
            self.condition(INVALID, true, "NotPermitted", m.clone());
            return Ok(Err(("NotPermitted", m)));
        }
        self.status.saved_target = Some(record.saved.clone());
        Ok(Ok(record.saved))
    }

    /// Restores the target at the end of the run; true to come back (a failed restore).
    async fn restore_target_at_end(&mut self) -> Result<bool> {
        let outcome =
            restore::restore(&self.ctx.client, &self.ctx.config, self.ib, &self.id).await?;
        Ok(match outcome {
            Restore::Nothing => false,
            Restore::Restored(saved) => {
                let m = format!("{} {}/{} restored", saved.kind, saved.namespace, saved.name);
                self.status.saved_target = Some(crds::ingress::SavedTarget {
                    restored: true,
                    ..saved
                });
                self.condition(TARGET_RESTORED, true, "Restored", m);
                false
            }
            Restore::Refused(m) => {
                self.condition(TARGET_RESTORED, false, "NotPermitted", m.clone());
                self.events
                    .push((EventType::Warning, "NotPermitted".into(), m));
                false
            }
            Restore::Failed(m) => {
                let m = format!("restoring the sweep target: {m}; retrying");
                self.condition(TARGET_RESTORED, false, "RestoreFailed", m);
                true
            }
        })
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
            children::delete_pods(
                &self.ctx.client,
                &self.ns,
                &format!("{}={old}", labels::RUN),
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
        restore_target(self.ctx, self.ib, &self.id, &mut self.events).await?;
        self.status = IngressBenchmarkStatus::default();
        self.status.run.run_id = Some(self.id.clone());
        self.status.run.observed_generation = Some(self.generation);
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
        if let Err(m) = validate::sweep_permitted(spec, &self.ns, &self.ctx.config) {
            self.condition(INVALID, true, "NotPermitted", m.clone());
            return self.fail("NotPermitted", m).await;
        }
        let refusal = match validate::permitted(spec, &self.ns, &self.ctx.config) {
            Err(m) => Some(Refusal::invalid(m)),
            Ok(()) => validate::admitted(&self.ctx.client, spec, &self.ctx.config)
                .await?
                .err(),
        };
        if let Some(r) = refusal {
            self.condition(INVALID, true, r.reason, r.message.clone());
            return self.fail(r.reason, r.message).await;
        }
        self.condition(INVALID, false, "Valid", "the spec is valid");
        let all = queue::all(&self.ctx.client).await?;
        let me = queue::ingress(self.ib);
        let cap = self.ctx.config.caps.max_runs_per_namespace;
        if let Some(wait) = queue::wait(&me, &all, cap) {
            self.condition(QUEUED, true, wait.reason, wait.message.clone());
            self.status.run.queue = Some(wait.status);
            self.set_phase(Phase::Queued, wait.message);
            return Ok(Next::Wait(Action::requeue(Duration::from_secs(5))));
        }
        self.condition(QUEUED, false, "Admitted", "the run left the queue");
        self.status.current_step = Some(0);
        // The run's deadline counts from here (see deadline).
        self.status.run.start_time = Some(conditions::now());
        self.set_phase(Phase::Preparing, "preparing step 0");
        Ok(Next::Continue)
    }

    /// Scales the sweep target for the step, waits for its rollout and the settle time, then
    /// creates the step's workers.
    async fn preparing(&mut self) -> Result<Next> {
        let step = self.step();
        if let Some(sweep) = &self.ib.spec.sweep {
            let Some(step_spec) = sweep.steps.get(step as usize) else {
                return self
                    .fail("InvalidSpec", format!("no sweep step {step}"))
                    .await;
            };
            let saved = match self.saved_target(sweep).await? {
                Ok(saved) => saved,
                Err((reason, m)) => return self.fail(reason, m).await,
            };
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
                // Capped: the deadline is checked on every reconcile, and a far-off instant
                // (a settle from the object) must never reach the requeue timer.
                let wait = (settle - waited).min(Duration::from_secs(30));
                return Ok(Next::Wait(Action::requeue(wait)));
            }
        }
        match self.create_workers(step).await? {
            Started::Yes => {}
            Started::Retrying(m) => {
                self.status.run.message = Some(format!("step {step}: {m}"));
                return Ok(Next::Wait(Action::requeue(POLL)));
            }
            Started::Failed(reason, m) => {
                return self.fail(reason, format!("step {step}: {m}")).await
            }
        }
        let n = self.ib.spec.workers.effective_replicas();
        self.status.workers = Some(format!("0/{n}"));
        self.set_phase(
            Phase::Running,
            format!("step {step}: {n} worker(s) started"),
        );
        Ok(Next::Wait(Action::requeue(POLL)))
    }

    /// The registry entry for the barrier, then the pods (both idempotent).
    async fn announce(&mut self, step: u32) -> Result<()> {
        let workers = plan::worker_names(self.ib, &self.id, step);
        lifecycle::announce(self.ctx, self.ib, &self.id, step, workers).await
    }

    async fn create_workers(&mut self, step: u32) -> Result<Started> {
        self.announce(step).await?;
        let pods: Vec<_> =
            plan::workers(self.ib, &self.id, step, self.ib.spec.workers.host_network)
                .iter()
                .map(|p| workers::pod(p, &self.ctx.config))
                .collect();
        let selector = self.step_selector(step);
        let step_pods = creation::StepPods {
            namespace: &self.ns,
            selector: &selector,
            pods: &pods,
        };
        let run = &mut self.status.run;
        creation::start(self.ctx, step_pods, run, &mut self.events, self.generation).await
    }

    async fn running(&mut self) -> Result<Next> {
        let step = self.step();
        // After an operator restart the barrier state is gone: announce again. Otherwise the
        // run is already known.
        if !self.ctx.runs.is_announced(&self.id, step) {
            self.announce(step).await?;
        }
        if let Some(m) = lifecycle::preflight_failure(self.ctx, &self.id) {
            let m = format!("step {step}: {m}");
            return self.fail(lifecycle::PREFLIGHT_FAILED, m).await;
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
        let unreported: Vec<&String> = expected
            .keys()
            .filter(|w| !reports.contains_key(*w))
            .collect();
        if let Some(problem) = children::node_problem(&self.ctx.client, &pods, unreported).await? {
            return self
                .fail("NodeLost", format!("step {step}: {problem}"))
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
        let (reports, forged) = Store::of(self.ctx)
            .load_for_collecting(
                &self.ctx.metrics,
                &Owner::of(self.ib),
                &self.id,
                step,
                &expected,
            )
            .await?;
        self.events.extend(forged);
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
        let failed = verdict::failed_requests(&result, self.ctx.config.max_error_ratio);
        self.record_step(result);
        if self.cleanup_policy() != CleanupPolicy::Never {
            children::delete_pods(&self.ctx.client, &self.ns, &self.step_selector(step)).await?;
        }
        if let Some(why) = failed {
            let m = format!("step {step}: {why}");
            return self.fail(verdict::REASON, m).await;
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
        let retry = self.restore_target_at_end().await?;
        // Otherwise pods are kept for debugging. Reports go once the final status is stored
        // (apply).
        let failed = self.status.run.phase == Some(Phase::Failed);
        if let (CleanupPolicy::Always, _) | (CleanupPolicy::OnSuccess, false) =
            (self.cleanup_policy(), failed)
        {
            let (client, selector) = (&self.ctx.client, self.selector());
            children::delete_pods(client, &self.ns, &selector).await?;
        }
        self.ctx.runs.forget(&self.id);
        Ok(Next::Wait(if retry {
            Action::requeue(Duration::from_secs(10))
        } else {
            Action::await_change()
        }))
    }
}
