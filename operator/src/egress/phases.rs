//! The run's phase machine: cases one after another, each with its offload profile applied
//! before and restored after. Every handler is idempotent: a stale or restarted operator
//! converges to the same children and status.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use protocol::worker::Role;

use crds::egress::CaseResult;
use crds::{CleanupPolicy, EgressBenchmark, EgressBenchmarkStatus, Phase};

use super::offload::{self, Book, Offload, Stage};
use super::{plan, result, validate};
use crate::conditions::{self, INVALID, OFFLOAD_RESTORED, QUEUED, READY, WORKERS_SCHEDULED};
use crate::context::Context;
use crate::creation::{self, Started};
use crate::deadline;
use crate::error::{Error, Result};
use crate::lifecycle::{self, elapsed_since, PendingEvent};
use crate::reports::{Loaded, Owner, Store};
use crate::{children, labels, queue, workers};

/// How often a running case or an offload Job is checked (reports also wake the controller).
const POLL: Duration = Duration::from_secs(2);

struct Run<'a> {
    eb: &'a EgressBenchmark,
    ctx: &'a Context,
    ns: String,
    name: String,
    id: String,
    generation: i64,
    status: EgressBenchmarkStatus,
    events: Vec<PendingEvent>,
    /// The offload records (operator namespace): what restores are driven by.
    book: Book,
}

enum Next {
    Continue,
    Wait(Action),
}

pub async fn apply(
    eb: &EgressBenchmark,
    ctx: &Context,
    api: &Api<EgressBenchmark>,
) -> Result<Action> {
    // Act on the freshest object, not the cache: our own status writes may not be in it yet.
    let eb = api.get(&eb.name_any()).await?;
    let generation = eb.metadata.generation.unwrap_or(1);
    let before = eb.status.clone().unwrap_or_default();
    let book = Book::load(&ctx.client, &ctx.config, &eb).await?;
    let mut run = Run {
        book,
        eb: &eb,
        ctx,
        ns: eb.namespace().unwrap_or_default(),
        name: eb.name_any(),
        id: labels::run_id(&eb.uid().unwrap_or_default(), generation),
        generation,
        status: before.clone(),
        events: vec![],
    };
    let mut action = Action::await_change();
    if run.status.run.run_id.as_deref() != Some(run.id.as_str()) {
        match run.retire_old_run().await? {
            Some(wait) => action = wait,
            None => run.start_new_run().await?,
        }
    }
    if run.status.run.run_id.as_deref() == Some(run.id.as_str()) {
        let budget = deadline::egress(&eb.spec, deadline::Timeouts::from(&ctx.config));
        for _ in 0..8 {
            if let Some(m) = deadline::exceeded(&run.status.run, budget) {
                run.fail(deadline::REASON, m).await?;
                continue;
            }
            let phase = run.status.run.phase.unwrap_or_default();
            let tampered = plan::case_at(&eb, run.case_index()).is_none();
            let next = match phase {
                Phase::Preparing | Phase::Running | Phase::Collecting if tampered => {
                    let m = format!(
                        "status.currentCase {} names no case (the status was changed outside the operator)",
                        run.case_index()
                    );
                    run.fail("InvalidStatus", m).await?
                }
                Phase::Pending | Phase::Queued => run.pending().await?,
                Phase::Preparing => run.preparing().await?,
                Phase::Running => run.running().await?,
                Phase::Collecting => run.collecting().await?,
                Phase::Succeeded | Phase::Failed => run.finished().await?,
            };
            if let Next::Wait(a) = next {
                action = a;
                break;
            }
        }
    }
    if let Some(report) = run.book.report() {
        run.status.offload = report;
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
    let reference = eb.object_ref(&());
    lifecycle::publish_events(ctx, &reference, &mut run.events).await;
    lifecycle::release_reports(ctx, &eb, &run.id, &persisted.run).await?;
    Ok(action)
}

/// Deletion: stop the workers, restore every offload change, then delete every child. The
/// finalizer stays until the restore succeeded (a failure is retried and shown in status).
pub async fn cleanup(
    eb: &EgressBenchmark,
    ctx: &Context,
    api: &Api<EgressBenchmark>,
) -> Result<Action> {
    let ns = eb.namespace().unwrap_or_default();
    let name = eb.name_any();
    let selector = labels::benchmark_selector(plan::KIND, &name);
    children::delete_pods(&ctx.client, &ns, &selector).await?;
    let eb = api.get_opt(&name).await?.unwrap_or_else(|| eb.clone());
    let status = eb.status.clone().unwrap_or_default();
    // Driven by the records in the operator's namespace only, never by status.offload.
    let mut book = Book::load(&ctx.client, &ctx.config, &eb).await?;
    if book.open() {
        // The current run from the object itself (status is not trusted for anything).
        let run = labels::run_id(
            &eb.uid().unwrap_or_default(),
            eb.metadata.generation.unwrap_or(1),
        );
        match offload_of(ctx, &eb, &run).restore(&mut book, None).await? {
            Stage::Waiting(m) => {
                if let Some(report) = book.report() {
                    let mut status = status.clone();
                    status.offload = report;
                    if Some(&status) != eb.status.as_ref() {
                        lifecycle::write_status(api, &name, &status).await?;
                    }
                }
                return Err(Error::Pending(format!("deleting {ns}/{name}: {m}")));
            }
            // The record stays in the operator's namespace for the admin; nothing was run.
            Stage::Refused(m) | Stage::Failed(m) => {
                let mut events = vec![(
                    EventType::Warning,
                    "NotPermitted".to_string(),
                    format!("offload settings not restored: {m}"),
                )];
                lifecycle::publish_events(ctx, &eb.object_ref(&()), &mut events).await;
            }
            Stage::Done => {}
        }
    }
    book.delete_if_resolved().await?;
    Store::of(ctx).delete(&Owner::of(&eb), None).await?;
    if manages_jobs(&eb, &ctx.config) {
        offload::delete_jobs(&ctx.client, &ctx.config, &eb).await?;
    }
    if let Some(id) = status.run.run_id.as_deref() {
        ctx.runs.forget(id);
    }
    ctx.metrics.forget(plan::KIND, &ns, &name);
    for c in &status.cases {
        ctx.metrics
            .forget_egress_case(&ns, &name, &c.name, c.offload_profile.as_deref());
    }
    Ok(Action::await_change())
}

fn offload_of<'a>(ctx: &'a Context, eb: &'a EgressBenchmark, run: &'a str) -> Offload<'a> {
    Offload {
        client: &ctx.client,
        config: &ctx.config,
        eb,
        run,
    }
}

/// Offload Jobs exist only for benchmarks with profiles in namespaces allowed them (and only
/// then does the operator hold its Role for Jobs).
fn manages_jobs(eb: &EgressBenchmark, config: &crate::config::Config) -> bool {
    eb.spec.offload.is_some()
        && config
            .offload_namespaces
            .allows(&eb.namespace().unwrap_or_default())
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

    fn case_index(&self) -> u32 {
        self.status.current_case.unwrap_or(0)
    }

    fn case_selector(&self, index: u32) -> String {
        format!("{}={},{}={index}", labels::RUN, self.id, labels::STEP)
    }

    fn cases_summary(&self) -> String {
        format!("{}/{}", self.status.cases.len(), self.eb.spec.cases.len())
    }

    /// Before a new generation starts: stop the old run's workers and write back what its
    /// offload Jobs changed. Some(action) while that restore is still under way.
    async fn retire_old_run(&mut self) -> Result<Option<Action>> {
        let Some(old) = self.status.run.run_id.clone() else {
            return Ok(None);
        };
        let selector = format!("{}={old}", labels::RUN);
        children::delete_pods(&self.ctx.client, &self.ns, &selector).await?;
        self.ctx.runs.forget(&old);
        match self.restore_offload(None).await? {
            Some(m) => {
                self.status.run.message = Some(format!("the spec changed: {m} before the new run"));
                Ok(Some(Action::requeue(POLL)))
            }
            None => Ok(None),
        }
    }

    async fn start_new_run(&mut self) -> Result<()> {
        if let Some(old) = self.status.run.run_id.clone() {
            let selector = format!("{}={old}", labels::RUN);
            children::delete_pods(&self.ctx.client, &self.ns, &selector).await?;
            Store::of(self.ctx)
                .delete(&Owner::of(self.eb), Some(&old))
                .await?;
            if manages_jobs(self.eb, &self.ctx.config) {
                offload::delete_jobs(&self.ctx.client, &self.ctx.config, self.eb).await?;
            }
            if !self.status.run.phase.is_some_and(Phase::is_finished) {
                self.events.push((
                    EventType::Warning,
                    "SpecChanged".into(),
                    format!(
                        "the spec changed during run {old}; it was stopped and a new run starts"
                    ),
                ));
            }
        }
        // The old run's devices are restored (retire_old_run waited for it).
        self.book.start_over().await?;
        self.status = EgressBenchmarkStatus::default();
        self.status.run.run_id = Some(self.id.clone());
        self.status.run.observed_generation = Some(self.generation);
        self.status.cases_summary = Some(self.cases_summary());
        self.set_phase(Phase::Pending, "accepted");
        self.condition(READY, false, "Pending", "the run has not finished");
        Ok(())
    }

    async fn fail(&mut self, reason: &str, message: String) -> Result<Next> {
        self.condition(READY, false, reason, message.clone());
        self.status.run.completion_time = Some(conditions::now());
        self.set_phase(Phase::Failed, message);
        Ok(Next::Continue)
    }

    async fn pending(&mut self) -> Result<Next> {
        let spec = &self.eb.spec;
        let refusal = match validate::permitted(spec, &self.ns, &self.ctx.config) {
            Err(r) => Some(r),
            Ok(()) => validate::admitted(&self.ctx.client, spec, &self.ctx.config)
                .await?
                .err(),
        };
        if let Some(r) = refusal {
            self.condition(INVALID, true, r.reason, r.message.clone());
            return self.fail(r.reason, r.message).await;
        }
        if let Some(m) = offload_of(self.ctx, self.eb, &self.id).refusal().await? {
            self.condition(INVALID, true, "NotPermitted", m.clone());
            return self.fail("NotPermitted", m).await;
        }
        self.condition(INVALID, false, "Valid", "the spec is valid");
        let all = queue::all(&self.ctx.client).await?;
        let me = queue::egress(self.eb);
        let cap = self.ctx.config.caps.max_runs_per_namespace;
        if let Some(wait) = queue::wait(&me, &all, cap) {
            self.condition(QUEUED, true, wait.reason, wait.message.clone());
            self.status.run.queue = Some(wait.status);
            self.set_phase(Phase::Queued, wait.message);
            return Ok(Next::Wait(Action::requeue(Duration::from_secs(5))));
        }
        self.condition(QUEUED, false, "Admitted", "the run left the queue");
        self.status.current_case = Some(0);
        // The run's deadline counts from here (see deadline).
        self.status.run.start_time = Some(conditions::now());
        let first = plan::case_at(self.eb, 0).map_or("", |c| c.name.as_str());
        self.set_phase(Phase::Preparing, format!("preparing case {first}"));
        Ok(Next::Continue)
    }

    /// Restores the previous case's offload changes, applies this case's profile, then creates
    /// the case's server and client.
    async fn preparing(&mut self) -> Result<Next> {
        let index = self.case_index();
        let Some(case) = self.eb.spec.cases.get(index as usize) else {
            return self.fail("InvalidSpec", format!("no case {index}")).await;
        };
        // Other cases' changes only: this case's records exist before its apply Job does.
        if let Some(m) = self.restore_offload(Some(&case.name)).await? {
            self.status.run.message = Some(m);
            return Ok(Next::Wait(Action::requeue(POLL)));
        }
        if case.offload_profile.is_some() {
            let stage = offload_of(self.ctx, self.eb, &self.id)
                .apply(case, &mut self.book)
                .await?;
            match stage {
                Stage::Waiting(m) => {
                    self.status.run.message = Some(m);
                    self.condition(
                        OFFLOAD_RESTORED,
                        false,
                        "Applied",
                        "offload settings are changed for a case",
                    );
                    return Ok(Next::Wait(Action::requeue(POLL)));
                }
                Stage::Failed(m) => return self.fail("OffloadFailed", m).await,
                Stage::Refused(m) => {
                    self.condition(INVALID, true, "NotPermitted", m.clone());
                    return self.fail("NotPermitted", m).await;
                }
                Stage::Done => {}
            }
        }
        match self.create_workers(index).await? {
            Started::Yes => {}
            Started::Retrying(m) => {
                self.status.run.message = Some(format!("case {}: {m}", case.name));
                return Ok(Next::Wait(Action::requeue(POLL)));
            }
            Started::Failed(reason, m) => {
                return self.fail(reason, format!("case {}: {m}", case.name)).await
            }
        }
        let n = plan::workers(self.eb, &self.id, index).len();
        self.set_phase(
            Phase::Running,
            format!("case {}: {n} worker pod(s) started", case.name),
        );
        Ok(Next::Wait(Action::requeue(POLL)))
    }

    /// Writes back the offload changes still open, except `skip`'s (the case being prepared:
    /// its records exist before its apply Job does), and keeps OffloadRestored current.
    /// Some(what it waits for) while restore Jobs are at work.
    async fn restore_offload(&mut self, skip: Option<&str>) -> Result<Option<String>> {
        if !self.book.open() {
            return Ok(None);
        }
        let stage = offload_of(self.ctx, self.eb, &self.id)
            .restore(&mut self.book, skip)
            .await?;
        self.note_restore(&stage);
        Ok(match stage {
            Stage::Waiting(m) => Some(m),
            _ => None,
        })
    }

    fn note_restore(&mut self, stage: &Stage) {
        let problems = offload::restore_problems(self.book.records());
        if let Stage::Refused(m) = stage {
            let m = format!("not restored: {m}");
            self.condition(OFFLOAD_RESTORED, false, "NotPermitted", m.clone());
            self.events
                .push((EventType::Warning, "NotPermitted".into(), m));
        } else if !problems.is_empty() {
            let m = format!("restore failed, retrying: {}", problems.join("; "));
            self.condition(OFFLOAD_RESTORED, false, "RestoreFailed", m);
        } else if *stage == Stage::Done && !self.book.records().is_empty() && !self.book.open() {
            self.condition(
                OFFLOAD_RESTORED,
                true,
                "Restored",
                "every offload change was written back",
            );
        }
    }

    async fn announce(&mut self, index: u32) -> Result<()> {
        let workers = plan::worker_roles(self.eb, &self.id, index);
        lifecycle::announce(self.ctx, self.eb, &self.id, index, workers).await
    }

    async fn create_workers(&mut self, index: u32) -> Result<Started> {
        self.announce(index).await?;
        let pods: Vec<_> = plan::workers(self.eb, &self.id, index)
            .iter()
            .map(|p| workers::pod(p, &self.ctx.config))
            .collect();
        let selector = self.case_selector(index);
        let step_pods = creation::StepPods {
            namespace: &self.ns,
            selector: &selector,
            pods: &pods,
        };
        let run = &mut self.status.run;
        creation::start(self.ctx, step_pods, run, &mut self.events, self.generation).await
    }

    async fn running(&mut self) -> Result<Next> {
        let index = self.case_index();
        let Some(case) = plan::case_at(self.eb, index) else {
            return Err(Error::Internal(format!("no case {index}")));
        };
        if !self.ctx.runs.is_announced(&self.id, index) {
            self.announce(index).await?;
        }
        if let Some(m) = lifecycle::preflight_failure(self.ctx, &self.id) {
            let m = format!("case {}: {m}", case.name);
            return self.fail(lifecycle::PREFLIGHT_FAILED, m).await;
        }
        // Pods first, then reports: a worker exits only after its report is stored.
        let pods =
            children::list_pods(&self.ctx.client, &self.ns, &self.case_selector(index)).await?;
        let expected = plan::worker_roles(self.eb, &self.id, index);
        let reports = self.reports(index, &expected).await?.reports;
        let client = plan::client_name(self.eb, &self.id, index);
        if reports.contains_key(&client) {
            self.set_phase(Phase::Collecting, format!("case {}: collecting", case.name));
            return Ok(Next::Continue);
        }
        let scheduled = pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .count();
        self.condition(
            WORKERS_SCHEDULED,
            scheduled == expected.len(),
            "Scheduling",
            format!("{scheduled}/{} worker(s) scheduled", expected.len()),
        );
        let clients = BTreeMap::from([(client.clone(), Role::Client)]);
        let problem = children::worker_problem(&clients, &pods, &reports)
            .or_else(|| server_problem(&expected, &pods));
        if let Some(p) = problem {
            return self
                .fail("WorkerFailed", format!("case {}: {p}", case.name))
                .await;
        }
        if let Some(p) = children::node_problem(&self.ctx.client, &pods, expected.keys()).await? {
            return self
                .fail("NodeLost", format!("case {}: {p}", case.name))
                .await;
        }
        let deadline = plan::case_deadline(case, self.ctx.config.worker_start_timeout());
        if elapsed_since(&self.status.run.phase_since) > deadline {
            let m = format!(
                "case {}: {} never reported within {}s",
                case.name,
                children::describe_pod(&client, &pods),
                deadline.as_secs()
            );
            return self.fail("WorkerTimeout", m).await;
        }
        Ok(Next::Wait(Action::requeue(POLL)))
    }

    async fn collecting(&mut self) -> Result<Next> {
        let index = self.case_index();
        let Some(case) = plan::case_at(self.eb, index) else {
            return Err(Error::Internal(format!("no case {index}")));
        };
        if !self.status.cases.iter().any(|c| c.name == case.name) {
            if let Some(fail) = self.record_report(index).await? {
                return Ok(fail);
            }
        }
        if let Some(next) = self.eb.spec.cases.get(index as usize + 1) {
            self.status.current_case = Some(index + 1);
            let m = format!("preparing case {}", next.name);
            self.set_phase(Phase::Preparing, m);
            return Ok(Next::Continue);
        }
        // The run counts as done only once the nodes are as they were.
        if let Some(m) = self.restore_offload(None).await? {
            self.status.run.message = Some(format!("all cases measured; {m}"));
            return Ok(Next::Wait(Action::requeue(POLL)));
        }
        self.condition(READY, true, "Succeeded", "all cases measured");
        self.status.run.completion_time = Some(conditions::now());
        let m = format!("{} case(s) measured", self.status.cases.len());
        self.set_phase(Phase::Succeeded, m);
        Ok(Next::Continue)
    }

    /// The verified reports of case `index` (see reports::Store::load).
    async fn reports(&self, index: u32, expected: &BTreeMap<String, Role>) -> Result<Loaded> {
        let owner = Owner::of(self.eb);
        Ok(Store::of(self.ctx)
            .load(&owner, &self.id, index, expected)
            .await?)
    }

    /// Turns the case's client report into its result (once), then removes the case's pods.
    /// Some(next) when the run fails (an unreadable report, streams that ended early).
    async fn record_report(&mut self, index: u32) -> Result<Option<Next>> {
        let Some(case) = plan::case_at(self.eb, index) else {
            return Err(Error::Internal(format!("no case {index}")));
        };
        let expected = plan::worker_roles(self.eb, &self.id, index);
        let (reports, forged) = Store::of(self.ctx)
            .load_for_collecting(
                &self.ctx.metrics,
                &Owner::of(self.eb),
                &self.id,
                index,
                &expected,
            )
            .await?;
        self.events.extend(forged);
        let client = plan::client_name(self.eb, &self.id, index);
        let Some(report) = reports.get(&client) else {
            let m = format!("case {}: the client's report is gone", case.name);
            return self.fail("BadReport", m).await.map(Some);
        };
        let pods =
            children::list_pods(&self.ctx.client, &self.ns, &self.case_selector(index)).await?;
        let server = plan::server_name(self.eb, &self.id, index);
        let server_node = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(&server))
            .and_then(|p| p.spec.as_ref()?.node_name.clone());
        let (measured, stream_errors) = match result::case_result(case, report, server_node) {
            Ok(r) => r,
            Err(e) => return self.fail("BadReport", e).await.map(Some),
        };
        let idle = result::nothing_transferred(&measured);
        self.record_case(measured);
        if self.eb.spec.cleanup != CleanupPolicy::Never {
            children::delete_pods(&self.ctx.client, &self.ns, &self.case_selector(index)).await?;
        }
        if !stream_errors.is_empty() {
            let m = format!(
                "case {}: {} stream(s) ended early: {}",
                case.name,
                stream_errors.len(),
                stream_errors.join("; ")
            );
            return self.fail("StreamFailed", m).await.map(Some);
        }
        if let Some(why) = idle {
            let m = format!("case {}: {why}", case.name);
            return self.fail("NothingTransferred", m).await.map(Some);
        }
        Ok(None)
    }

    fn record_case(&mut self, r: CaseResult) {
        self.events.push((
            EventType::Normal,
            "CaseMeasured".into(),
            format!(
                "case {}: {} received, {} retransmits",
                r.name,
                result::format_bits(r.receiver_bits_per_second),
                r.retransmits
            ),
        ));
        self.status.cases.retain(|c| c.name != r.name);
        self.status.cases.push(r);
        result::set_overheads(&mut self.status.cases, plan::baseline(self.eb));
        let (best, overhead) = result::summary(&self.status.cases);
        self.status.best = best;
        self.status.overhead = overhead;
        self.status.cases_summary = Some(self.cases_summary());
        for c in &self.status.cases {
            self.ctx.metrics.set_egress_case(&self.ns, &self.name, c);
        }
    }

    /// Succeeded or Failed: offload written back first, then the children go per policy.
    async fn finished(&mut self) -> Result<Next> {
        // The workers stop first so they no longer load the nodes being restored.
        let failed = self.status.run.phase == Some(Phase::Failed);
        let keep_pods = match self.eb.spec.cleanup {
            CleanupPolicy::Always => false,
            CleanupPolicy::OnSuccess => failed,
            CleanupPolicy::Never => true,
        };
        let selector = format!("{}={}", labels::RUN, self.id);
        if !keep_pods {
            children::delete_pods(&self.ctx.client, &self.ns, &selector).await?;
        }
        if let Some(m) = self.restore_offload(None).await? {
            self.status.run.message = Some(format!("{m} (the run has ended)"));
            return Ok(Next::Wait(Action::requeue(POLL)));
        }
        // Also when nothing was left open here (e.g. an apply that changed nothing).
        self.note_restore(&Stage::Done);
        // Every restore verified: the records go (status keeps the report).
        self.book.delete_if_resolved().await?;
        // Report objects go once the final status is stored (apply).
        if manages_jobs(self.eb, &self.ctx.config) {
            offload::delete_jobs(&self.ctx.client, &self.ctx.config, self.eb).await?;
        }
        self.ctx.runs.forget(&self.id);
        Ok(Next::Wait(Action::await_change()))
    }
}

/// An in-cluster server that is gone or failed before the client reported.
fn server_problem(expected: &BTreeMap<String, Role>, pods: &[Pod]) -> Option<String> {
    let (server, _) = expected.iter().find(|(_, r)| **r == Role::Server)?;
    let Some(pod) = pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(server))
    else {
        return Some(format!("server pod {server} was deleted"));
    };
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    (phase == Some("Failed")).then(|| {
        let why = pod
            .status
            .as_ref()
            .and_then(|s| {
                s.container_statuses
                    .as_ref()?
                    .first()?
                    .state
                    .as_ref()?
                    .terminated
                    .clone()
            })
            .and_then(|t| t.message)
            .unwrap_or_default();
        format!(
            "{} failed: {}",
            children::describe_pod(server, pods),
            why.trim()
        )
    })
}
