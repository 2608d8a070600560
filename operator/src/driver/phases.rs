//! The phase handlers of the shared run driver (see the module above). Each is idempotent.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use protocol::worker::{FinalReport, Role};

use crds::{CleanupPolicy, Phase};

use super::{Collected, Kind, Next, Prepared, Run, RunState, WrapUp, POLL};
use crate::conditions::{INVALID, QUEUED, READY, WORKERS_SCHEDULED};
use crate::creation::{self, Started};
use crate::error::Result;
use crate::lifecycle::{self, elapsed_since};
use crate::reports::{Owner, Store};
use crate::{children, conditions, labels, queue};

/// How often a queued run looks at the queue again.
const QUEUE_POLL: Duration = Duration::from_secs(5);

impl<K: Kind> Run<'_, K> {
    /// A new generation: the old run's workers stop and its barrier state goes (idempotent).
    pub(super) async fn stop_old_run(&mut self) -> Result<()> {
        if let Some(old) = self.status.run().run_id.clone() {
            let selector = format!("{}={old}", labels::RUN);
            children::delete_pods(&self.ctx.client, &self.ns, &selector).await?;
            self.ctx.runs.forget(&old);
        }
        Ok(())
    }

    /// After `K::retire`: the old run's reports go and the new run starts from a fresh status.
    pub(super) async fn start_new_run(&mut self) -> Result<()> {
        if let Some(old) = self.status.run().run_id.clone() {
            Store::of(self.ctx)
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
        self.status = self.obj.fresh_status();
        let run = self.status.run_mut();
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

    /// The kind's preparation of measurement `index`, then its workers.
    pub(super) async fn preparing(&mut self, index: u32) -> Result<Next> {
        let what = self.obj.describe(index);
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
        match self.create_workers(index).await? {
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
        let workers = self.obj.workers(&self.id, index);
        K::show_progress(&mut self.status, 0, clients(&workers));
        let m = format!("{what}: {} worker(s) started", workers.len());
        self.set_phase(Phase::Running, m);
        Ok(Next::Wait(Action::requeue(POLL)))
    }

    /// Tells the registry who may register for measurement `index` (idempotent).
    async fn announce(&mut self, index: u32) -> Result<()> {
        let workers = self.obj.workers(&self.id, index);
        lifecycle::announce(self.ctx, self.obj, &self.id, index, workers).await
    }

    /// The registry entry for the barrier, then the pods (both idempotent).
    async fn create_workers(&mut self, index: u32) -> Result<Started> {
        self.announce(index).await?;
        let pods = self.obj.pods(&self.id, index, &self.ctx.config);
        let selector = self.measurement_selector(index);
        let step_pods = creation::StepPods {
            namespace: &self.ns,
            selector: &selector,
            pods: &pods,
        };
        let run = self.status.run_mut();
        creation::start(self.ctx, step_pods, run, &mut self.events, self.generation).await
    }

    /// Waits for the clients' reports, failing the run as soon as one can no longer come (its
    /// pod or node is gone, a preflight check failed) or the measurement's deadline passed.
    pub(super) async fn running(&mut self, index: u32) -> Result<Next> {
        let what = self.obj.describe(index);
        // After an operator restart the barrier state is gone: announce again.
        if !self.ctx.runs.is_announced(&self.id, index) {
            self.announce(index).await?;
        }
        if let Some(m) = lifecycle::preflight_failure(self.ctx, &self.id) {
            self.fail(lifecycle::PREFLIGHT_FAILED, format!("{what}: {m}"));
            return Ok(Next::Continue);
        }
        // Pods first, then reports: a worker exits only after its report is stored, so a
        // finished pod's report is always in the second list.
        let selector = self.measurement_selector(index);
        let pods = children::list_pods(&self.ctx.client, &self.ns, &selector).await?;
        let expected = self.obj.workers(&self.id, index);
        let owner = Owner::of(self.obj);
        let store = Store::of(self.ctx);
        let reports = store
            .load(&owner, &self.id, index, &expected)
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
            None => self.check_deadline(index, &awaited, &pods, &reports),
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
        let problem = children::worker_problem(awaited, pods, reports)
            .or_else(|| children::server_problem(expected, pods));
        if let Some(p) = problem {
            return Ok(Some(("WorkerFailed", p)));
        }
        let unreported: Vec<&String> = expected
            .keys()
            .filter(|w| !reports.contains_key(*w))
            .collect();
        let lost = children::node_problem(&self.ctx.client, pods, unreported).await?;
        Ok(lost.map(|p| ("NodeLost", p)))
    }

    /// Fails the run once measurement `index` outlived its deadline, naming who never reported.
    fn check_deadline(
        &mut self,
        index: u32,
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
            .map(|w| children::describe_pod(w, pods))
            .collect();
        let m = format!(
            "{}: {} never reported within {}s",
            self.obj.describe(index),
            missing.join(", "),
            deadline.as_secs()
        );
        self.fail("WorkerTimeout", m);
        Ok(Next::Continue)
    }

    /// Turns the reports into the measurement's result (once), then goes on to the next
    /// measurement, or ends the run once the kind has nothing left to write back.
    pub(super) async fn collecting(&mut self, index: u32) -> Result<Next> {
        if !self.obj.recorded(&self.status, index) {
            if let Some((reason, m)) = self.collect(index).await? {
                self.fail(reason, m);
                return Ok(Next::Continue);
            }
        }
        let next = index.saturating_add(1);
        if next < self.obj.count() {
            self.status.set_current(next);
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

    /// The kind's result from the verified reports; the measurement's pods go unless the
    /// policy keeps them. Some((reason, message)) fails the run.
    async fn collect(&mut self, index: u32) -> Result<Option<(&'static str, String)>> {
        let expected = self.obj.workers(&self.id, index);
        let (reports, forged) = Store::of(self.ctx)
            .load_for_collecting(
                &self.ctx.metrics,
                &Owner::of(self.obj),
                &self.id,
                index,
                &expected,
            )
            .await?;
        self.events.extend(forged);
        let failure = match K::collect(self, index, &reports).await? {
            Collected::Unusable(reason, m) => return Ok(Some((reason, m))),
            Collected::Recorded => None,
            Collected::RecordedButFailed(reason, m) => Some((reason, m)),
        };
        if self.obj.cleanup_policy() != CleanupPolicy::Never {
            let selector = self.measurement_selector(index);
            children::delete_pods(&self.ctx.client, &self.ns, &selector).await?;
        }
        Ok(failure)
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
            children::delete_pods(&self.ctx.client, &self.ns, &selector).await?;
        }
        // Report objects go once the final status is stored (see `apply`).
        match K::wrap_up(self).await? {
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
