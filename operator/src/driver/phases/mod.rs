//! The phase handlers of the shared run driver (see the module above). Each is idempotent.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use protocol::worker::{FinalReport, Role};

use crds::{CleanupPolicy, Phase};

use super::{Collected, Kind, Next, Prepared, Run, RunState, Slot, WrapUp, POLL};
use crate::base::clock::elapsed_since;
use crate::base::conditions::{INVALID, QUEUED, READY, WORKERS_SCHEDULED};
use crate::base::error::Result;
use crate::base::{conditions, labels};
use crate::driver::lifecycle;
use crate::k8s::creation::{self, Started};
use crate::k8s::pods;
use crate::policy::queue;
use crate::policy::samples;
use crate::store::reports::Owner;

/// How soon a result that could not be written is tried again.
const RESULT_RETRY: Duration = Duration::from_secs(15);

/// How often a queued run looks at the queue again.
const QUEUE_POLL: Duration = Duration::from_secs(5);

impl<K: Kind> Run<'_, K> {
    /// A new generation: the old run's workers stop and its barrier state goes (idempotent).
    pub(super) async fn stop_old_run(&mut self) -> Result<()> {
        if let Some(old) = self.status.run().run_id.clone() {
            let selector = format!("{}={old}", labels::RUN);
            pods::delete_workers(&self.ctx.client, &self.ns, &selector).await?;
            self.ctx.runs.forget(&old);
        }
        Ok(())
    }

    /// After `K::retire`: the old run's reports go and the new run starts from a fresh status.
    pub(super) async fn start_new_run(&mut self) -> Result<()> {
        if let Some(old) = self.status.run().run_id.clone() {
            self.ctx
                .reports()
                .delete(&Owner::of(self.obj), Some(&old))
                .await?;
            let finished = self.status.run().phase.is_some_and(Phase::is_finished);
            if !finished && !self.replaced_by_schedule(&old) {
                self.events.push((
                    EventType::Warning,
                    "SpecChanged".into(),
                    format!(
                        "the spec changed during run {old}; it was stopped and a new run starts"
                    ),
                ));
            }
        }
        // What outlives a run: the pointer to the latest result.
        let latest = self.status.run().latest_result.clone();
        self.status = self.obj.fresh_status();
        let run = self.status.run_mut();
        run.latest_result = latest;
        run.run_id = Some(self.id.clone());
        run.observed_generation = Some(self.generation);
        self.set_phase(Phase::Pending, "accepted");
        self.condition(READY, false, "Pending", "the run has not finished");
        Ok(())
    }

    /// Checks the spec, then waits in the queue; leaving it starts the run's deadline.
    pub(super) async fn pending(&mut self) -> Result<Next> {
        if let Some(r) = K::check(self).await? {
            self.condition(INVALID, true, r.reason, r.message.clone());
            self.fail(r.reason, r.message);
            return Ok(Next::Continue);
        }
        self.condition(INVALID, false, "Valid", "the spec is valid");
        let all = queue::all(&self.ctx.client).await?;
        let me = self.obj.contender();
        let cap = self.ctx.config.caps.max_runs_per_namespace;
        if let Some(wait) = queue::wait(&me, &all, cap) {
            self.condition(QUEUED, true, wait.reason, wait.message.clone());
            self.status.run_mut().queue = Some(wait.status);
            self.set_phase(Phase::Queued, wait.message);
            return Ok(Next::Wait(Action::requeue(QUEUE_POLL)));
        }
        self.condition(QUEUED, false, "Admitted", "the run left the queue");
        self.status.set_current(0);
        // The run's deadline counts from here (see deadline).
        self.status.run_mut().start_time = Some(conditions::now());
        let m = format!("preparing {}", self.obj.describe(0));
        self.set_phase(Phase::Preparing, m);
        Ok(Next::Continue)
    }

    /// The pause after a sample, the kind's preparation of measurement `index`, then the
    /// sample's workers.
    pub(super) async fn preparing(&mut self, index: u32) -> Result<Next> {
        let slot = self.slot();
        let what = self.describe(slot);
        let plan = self.obj.repetition().samples();
        let since = elapsed_since(&self.status.run().phase_since);
        if let Some(left) = samples::pause_left(&plan, slot.sample, since) {
            self.say(format!(
                "{what}: pausing {}s between samples",
                left.as_secs().max(1)
            ));
            return Ok(Next::Wait(Action::requeue(left.min(POLL))));
        }
        match K::prepare(self, index).await? {
            Prepared::Ready => {}
            Prepared::Waiting { message, after } => {
                self.say(message);
                return Ok(Next::Wait(Action::requeue(after)));
            }
            Prepared::Failed(reason, m) => {
                self.fail(reason, m);
                return Ok(Next::Continue);
            }
        }
        match self.create_workers(slot).await? {
            Started::Yes => {}
            Started::Retrying(m) => {
                self.say(format!("{what}: {m}"));
                return Ok(Next::Wait(Action::requeue(POLL)));
            }
            Started::Failed(reason, m) => {
                self.fail(reason, format!("{what}: {m}"));
                return Ok(Next::Continue);
            }
        }
        let workers = self.obj.workers(&self.id, slot);
        K::show_progress(&mut self.status, 0, clients(&workers));
        let m = format!("{what}: {} worker(s) started", workers.len());
        self.set_phase(Phase::Running, m);
        Ok(Next::Wait(Action::requeue(POLL)))
    }

    /// Tells the registry who may register for one sample (idempotent).
    async fn announce(&mut self, slot: Slot) -> Result<()> {
        let workers = self.obj.workers(&self.id, slot);
        let kind = self.obj.report_kind(slot.measurement);
        lifecycle::announce(self.ctx, self.obj, &self.id, slot.wire(), workers, kind).await
    }

    /// The registry entry for the barrier, then the pods (both idempotent).
    async fn create_workers(&mut self, slot: Slot) -> Result<Started> {
        self.announce(slot).await?;
        let pods = self.obj.pods(&self.id, slot, &self.ctx.config);
        let selector = self.slot_selector(slot);
        let step_pods = creation::StepPods {
            namespace: &self.ns,
            selector: &selector,
            pods: &pods,
        };
        let run = self.status.run_mut();
        let (client, timeout) = (&self.ctx.client, self.ctx.config.worker_start_timeout());
        creation::start(
            client,
            timeout,
            step_pods,
            run,
            &mut self.events,
            self.generation,
        )
        .await
    }

    /// Waits for the clients' reports, failing the run as soon as one can no longer come (its
    /// pod or node is gone, a preflight check failed) or the measurement's deadline passed.
    pub(super) async fn running(&mut self, index: u32) -> Result<Next> {
        let slot = self.slot();
        let what = self.describe(slot);
        // After an operator restart the barrier state is gone: announce again.
        if !self.ctx.runs.is_announced(&self.id, slot.wire()) {
            self.announce(slot).await?;
        }
        if let Some(m) = lifecycle::preflight_failure(self.ctx, &self.id) {
            self.fail(lifecycle::PREFLIGHT_FAILED, format!("{what}: {m}"));
            return Ok(Next::Continue);
        }
        // Pods first, then reports: a worker exits only after its report is stored, so a
        // finished pod's report is always in the second list.
        let selector = self.slot_selector(slot);
        let pods = pods::list_pods(&self.ctx.client, &self.ns, &selector).await?;
        let expected = self.obj.workers(&self.id, slot);
        let owner = Owner::of(self.obj);
        let store = self.ctx.reports();
        let reports = store
            .load(&owner, &self.id, slot.wire(), &expected)
            .await?
            .reports;
        let awaited: BTreeMap<String, Role> = expected
            .iter()
            .filter(|(_, role)| **role == Role::Client)
            .map(|(w, r)| (w.clone(), *r))
            .collect();
        let done = awaited.keys().filter(|w| reports.contains_key(*w)).count();
        K::show_progress(&mut self.status, done, awaited.len());
        if done == awaited.len() {
            let m = format!("{what}: collecting {} report(s)", reports.len());
            self.set_phase(Phase::Collecting, m);
            return Ok(Next::Continue);
        }
        self.note_scheduled(&pods, expected.len());
        match self
            .lost_worker(&expected, &awaited, &pods, &reports)
            .await?
        {
            Some((reason, problem)) => {
                self.fail(reason, format!("{what}: {problem}"));
                Ok(Next::Continue)
            }
            None => self.check_deadline(index, &what, &awaited, &pods, &reports),
        }
    }

    /// WorkersScheduled: how many of the measurement's pods have a node.
    fn note_scheduled(&mut self, pods: &[Pod], expected: usize) {
        let scheduled = pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .count();
        let m = format!("{scheduled}/{expected} worker(s) scheduled");
        self.condition(WORKERS_SCHEDULED, scheduled == expected, "Scheduling", m);
    }

    /// A worker whose report can no longer come: (reason, what happened).
    async fn lost_worker(
        &self,
        expected: &BTreeMap<String, Role>,
        awaited: &BTreeMap<String, Role>,
        pods: &[Pod],
        reports: &BTreeMap<String, FinalReport>,
    ) -> Result<Option<(&'static str, String)>> {
        let problem = pods::worker_problem(awaited, pods, reports)
            .or_else(|| pods::server_problem(expected, pods));
        if let Some(p) = problem {
            return Ok(Some(("WorkerFailed", p)));
        }
        let unreported: Vec<&String> = expected
            .keys()
            .filter(|w| !reports.contains_key(*w))
            .collect();
        let lost = pods::node_problem(&self.ctx.client, pods, unreported).await?;
        Ok(lost.map(|p| ("NodeLost", p)))
    }

    /// Fails the run once measurement `index` outlived its deadline, naming who never reported.
    fn check_deadline(
        &mut self,
        index: u32,
        what: &str,
        awaited: &BTreeMap<String, Role>,
        pods: &[Pod],
        reports: &BTreeMap<String, FinalReport>,
    ) -> Result<Next> {
        let deadline = self.obj.deadline(index, &self.ctx.config);
        if elapsed_since(&self.status.run().phase_since) <= deadline {
            return Ok(Next::Wait(Action::requeue(POLL)));
        }
        let missing: Vec<String> = awaited
            .keys()
            .filter(|w| !reports.contains_key(*w))
            .map(|w| pods::describe_pod(w, pods))
            .collect();
        let m = format!(
            "{what}: {} never reported within {}s",
            missing.join(", "),
            deadline.as_secs()
        );
        self.fail("WorkerTimeout", m);
        Ok(Next::Continue)
    }

    /// Turns the sample's reports into the measurement's result and statistics (once), then
    /// takes another sample, goes on to the next measurement, or ends the run once the kind has
    /// nothing left to write back.
    pub(super) async fn collecting(&mut self, index: u32) -> Result<Next> {
        let slot = self.slot();
        if !samples::recorded(&self.status.run().statistics, index, slot.sample) {
            if let Some((reason, m)) = self.collect(slot).await? {
                self.fail(reason, m);
                return Ok(Next::Continue);
            }
        }
        let plan = self.obj.repetition().samples();
        let taken = slot.sample.saturating_add(1);
        let stats = self
            .status
            .run()
            .statistics
            .iter()
            .find(|m| m.index == index);
        if samples::wants_another(&plan, stats, taken) {
            self.status.run_mut().current_sample = Some(taken);
            let m = format!("{}: sample {} next", self.obj.describe(index), taken + 1);
            self.set_phase(Phase::Preparing, m);
            return Ok(Next::Continue);
        }
        let next = index.saturating_add(1);
        if next < self.obj.count() {
            self.status.set_current(next);
            self.status.run_mut().current_sample = None;
            let m = format!("preparing {}", self.obj.describe(next));
            self.set_phase(Phase::Preparing, m);
            return Ok(Next::Continue);
        }
        let all = format!("all {}s measured", K::MEASUREMENT);
        if let Some(m) = K::before_success(self).await? {
            self.say(format!("{all}; {m}"));
            return Ok(Next::Wait(Action::requeue(POLL)));
        }
        self.condition(READY, true, "Succeeded", all);
        let m = format!("{} {}(s) measured", self.obj.count(), K::MEASUREMENT);
        self.finish(Phase::Succeeded, m);
        Ok(Next::Continue)
    }

    /// The kind's result and the sample's figures from the verified reports; the sample's pods
    /// go unless the policy keeps them. Some((reason, message)) fails the run.
    async fn collect(&mut self, slot: Slot) -> Result<Option<(&'static str, String)>> {
        let expected = self.obj.workers(&self.id, slot);
        let (reports, forged) = self
            .ctx
            .reports()
            .load_for_collecting(
                &self.ctx.metrics,
                &Owner::of(self.obj),
                &self.id,
                slot.wire(),
                &expected,
            )
            .await?;
        self.events.extend(forged);
        let failure = match K::collect(self, slot, &reports).await? {
            Collected::Unusable(reason, m) => return Ok(Some((reason, m))),
            Collected::Recorded => None,
            Collected::RecordedButFailed(reason, m) => Some((reason, m)),
        };
        let figures = match self.obj.figures(&self.id, slot, &reports) {
            Ok(f) => f,
            Err(e) => return Ok(Some(("BadReport", e))),
        };
        let name = self.obj.describe(slot.measurement);
        let stats = &mut self.status.run_mut().statistics;
        if let Some(m) = samples::record(stats, slot.measurement, &name, slot.sample, &figures) {
            let m = m.clone();
            K::show_statistics(&mut self.status, &m);
        }
        if self.obj.cleanup_policy() != CleanupPolicy::Never {
            let selector = self.slot_selector(slot);
            pods::delete_workers(&self.ctx.client, &self.ns, &selector).await?;
        }
        Ok(failure)
    }

    /// How messages name a sample: "step 1", or "step 1 sample 2/3" when there are several.
    pub(super) fn describe(&self, slot: Slot) -> String {
        let what = self.obj.describe(slot.measurement);
        let plan = self.obj.repetition().samples();
        if plan.max() > 1 {
            format!(
                "{what} sample {}/{}",
                slot.sample.saturating_add(1),
                plan.min().max(slot.sample.saturating_add(1))
            )
        } else {
            what
        }
    }

    /// Succeeded or Failed: the pods go per policy (first, so they no longer load what is
    /// being restored), then the kind writes back what the run changed.
    pub(super) async fn finished(&mut self) -> Result<Next> {
        let failed = self.status.run().phase == Some(Phase::Failed);
        let keep_pods = match self.obj.cleanup_policy() {
            CleanupPolicy::Always => false,
            CleanupPolicy::OnSuccess => failed,
            CleanupPolicy::Never => true,
        };
        if !keep_pods {
            let selector = self.selector();
            pods::delete_workers(&self.ctx.client, &self.ns, &selector).await?;
        }
        // The result is built from the reports, which stay until it is written (see `apply`).
        let recorded = crate::results::record(self).await;
        if let Err(e) = &recorded {
            tracing::warn!(benchmark = self.name, "writing the BenchmarkResult: {e}");
            let m = format!("writing the BenchmarkResult failed (retried): {e}");
            self.events
                .push((EventType::Warning, "ResultFailed".into(), m));
        }
        match K::wrap_up(self).await? {
            WrapUp::Done if recorded.is_err() => Ok(Next::Wait(Action::requeue(RESULT_RETRY))),
            WrapUp::Done => {
                self.ctx.runs.forget(&self.id);
                Ok(Next::Wait(Action::await_change()))
            }
            WrapUp::Retry { message, after } => {
                if let Some(m) = message {
                    self.say(m);
                }
                Ok(Next::Wait(Action::requeue(after)))
            }
        }
    }
}

/// How many of `workers` are clients (whose reports end a measurement).
fn clients(workers: &BTreeMap<String, Role>) -> usize {
    workers.values().filter(|r| **r == Role::Client).count()
}
