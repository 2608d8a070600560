//! What EgressBenchmark adds to the shared run driver: its cases one after another, each a
//! client (and an in-cluster server) pinned to the case's nodes, with the case's offload profile
//! applied by privileged Jobs before and written back after (see `offload::in_run`), and the
//! case results with their overhead against the baseline.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::events::EventType;
use kube::ResourceExt;
use protocol::worker::{FinalReport, Role};

use crds::egress::CaseResult;
use crds::history::{MetricTolerance, Repetition};
use crds::{CleanupPolicy, EgressBenchmark, EgressBenchmarkStatus, RunStatus};

use super::metrics::EgressMetrics;
use super::offload::{self, in_run, Book};
use super::{plan, readings, result, service, validate};
use crate::admin::caps::Refusal;
use crate::admin::config::Config;
use crate::base::error::Result;
use crate::context::Context;
use crate::driver::{Collected, Figure, Kind, Prepared, Run, RunState, Slot, WrapUp, POLL};
use crate::k8s::pods;
use crate::k8s::workers;
use crate::policy::{deadline, queue};

impl RunState for EgressBenchmarkStatus {
    fn run(&self) -> &RunStatus {
        &self.run
    }
    fn run_mut(&mut self) -> &mut RunStatus {
        &mut self.run
    }
    fn current(&self) -> Option<u32> {
        self.current_case
    }
    fn set_current(&mut self, case: u32) {
        self.current_case = Some(case);
    }
}

impl Kind for EgressBenchmark {
    type Status = EgressBenchmarkStatus;
    /// The offload records (operator namespace): what restores are driven by.
    type Extra = Book;
    const MEASUREMENT: &'static str = "case";

    fn status_of(&self) -> Option<&EgressBenchmarkStatus> {
        self.status.as_ref()
    }
    fn count(&self) -> u32 {
        plan::count(self)
    }
    fn describe(&self, case: u32) -> String {
        match plan::case_at(self, case) {
            Some(m) => format!("case {}", m.name),
            None => format!("case {case}"),
        }
    }
    fn cleanup_policy(&self) -> CleanupPolicy {
        self.spec.cleanup
    }
    fn budget(&self, config: &Config) -> Duration {
        deadline::egress(&self.spec, config.timeouts())
    }
    fn deadline(&self, case: u32, config: &Config) -> Duration {
        let start = config.worker_start_timeout();
        plan::case_at(self, case).map_or(start, |m| plan::case_deadline(&m.spec, start))
    }
    fn contender(&self) -> queue::Contender {
        queue::egress(self)
    }
    fn workers(&self, run: &str, slot: Slot) -> BTreeMap<String, Role> {
        plan::worker_roles(self, run, slot)
    }
    fn report_kind(&self, case: u32) -> &'static str {
        let protocol = plan::case_at(self, case).map(|m| m.spec.protocol);
        readings::report_kind(protocol.unwrap_or_default())
    }
    fn pods(&self, run: &str, slot: Slot, config: &Config) -> Vec<Pod> {
        plan::workers(self, run, slot)
            .iter()
            .map(|p| workers::pod(p, config))
            .collect()
    }
    fn repetition(&self) -> &Repetition {
        &self.spec.repetition
    }
    fn figures(
        &self,
        run: &str,
        slot: Slot,
        reports: &BTreeMap<String, FinalReport>,
    ) -> std::result::Result<Vec<Figure>, String> {
        let case = plan::case_at(self, slot.measurement)
            .ok_or_else(|| format!("no case {}", slot.measurement))?;
        let client = plan::client_name(self, run, slot.wire());
        let report = reports
            .get(&client)
            .ok_or_else(|| format!("case {}: no client report", case.name))?;
        result::case_result(&case, report, None).map(|(r, _)| result::figures(&r))
    }
    /// Each case is judged by the figures its protocol has (a figure a case lacks is not
    /// expected of it).
    fn default_judged() -> Vec<MetricTolerance> {
        let judged = |name: &str, tolerance_percent| MetricTolerance {
            name: name.into(),
            tolerance_percent,
            better: None,
        };
        vec![
            judged("receiverBitsPerSecond", 10.0),
            judged("transactionsPerSecond", 10.0),
            judged("p99Ms", 20.0),
            judged("lossPercent", 50.0),
        ]
    }
    fn parameters(&self, status: &EgressBenchmarkStatus, case: u32) -> BTreeMap<String, String> {
        let mut p = BTreeMap::new();
        let Some(m) = plan::case_at(self, case) else {
            return p;
        };
        let c = &m.spec;
        p.insert("case".to_string(), m.case.clone());
        p.insert("protocol".to_string(), c.protocol.to_string());
        p.insert("path".to_string(), c.path().to_string());
        p.insert("streams".to_string(), c.streams.to_string());
        if let Some(size) = c.shown_message_size() {
            p.insert("messageSize".to_string(), size.to_string());
        }
        if let Some(profile) = &c.offload_profile {
            p.insert("offloadProfile".to_string(), profile.clone());
        }
        if let Some(r) = status.cases.iter().find(|r| r.name == m.name) {
            for (key, node) in [
                ("clientNode", &r.client_node),
                ("serverNode", &r.server_node),
            ] {
                if let Some(n) = node {
                    p.insert(key.to_string(), n.clone());
                }
            }
        }
        if let Some(a) = &c.server.address {
            p.insert("serverAddress".to_string(), a.clone());
        }
        p
    }
    fn before_write(run: &mut Run<'_, Self>) {
        if let Some(report) = run.extra.report() {
            run.status.offload = report;
        }
    }

    fn load_extra<'a>(ctx: &'a Context, eb: &'a EgressBenchmark) -> BoxFuture<'a, Result<Book>> {
        Box::pin(async move { Book::load(&ctx.client, &ctx.config, eb).await })
    }

    fn check<'a>(run: &'a mut Run<'_, Self>) -> BoxFuture<'a, Result<Option<Refusal>>> {
        Box::pin(async move {
            let (spec, config) = (&run.obj.spec, &run.ctx.config);
            let refusal = match validate::permitted(spec, &run.ns, config) {
                Err(r) => Some(r),
                Ok(()) => validate::admitted(&run.ctx.client, spec, config)
                    .await?
                    .err(),
            };
            if refusal.is_some() {
                return Ok(refusal);
            }
            let offload = in_run::offload_of(run.ctx, run.obj, &run.id);
            Ok(offload.refusal().await?.map(Refusal::not_permitted))
        })
    }

    /// What earlier runs changed on the nodes is written back before a new run starts; then
    /// their Jobs and records go.
    fn retire<'a>(run: &'a mut Run<'_, Self>) -> BoxFuture<'a, Result<Option<String>>> {
        Box::pin(async move {
            if let Some(m) = in_run::restore_open(run, None).await? {
                return Ok(Some(format!("the spec changed: {m}")));
            }
            if run.status.run.run_id.is_some() && in_run::manages_jobs(run.obj, &run.ctx.config) {
                offload::delete_jobs(&run.ctx.client, &run.ctx.config, run.obj).await?;
            }
            run.extra.start_over().await?;
            Ok(None)
        })
    }

    /// The case's offload profile, then (on the Service path) the Service its client reaches
    /// the server through.
    fn prepare<'a>(run: &'a mut Run<'_, Self>, case: u32) -> BoxFuture<'a, Result<Prepared>> {
        Box::pin(async move {
            let prepared = in_run::prepare(run, case).await?;
            if let (Prepared::Ready, Some(m)) = (&prepared, plan::case_at(run.obj, case)) {
                service::ensure(&run.ctx.client, run.obj, &run.id, run.slot(), &m).await?;
            }
            Ok(prepared)
        })
    }

    fn collect<'a>(
        run: &'a mut Run<'_, Self>,
        slot: Slot,
        reports: &'a BTreeMap<String, FinalReport>,
    ) -> BoxFuture<'a, Result<Collected>> {
        Box::pin(async move {
            let case = slot.measurement;
            let Some(measured) = plan::case_at(run.obj, case) else {
                return Ok(Collected::Unusable(
                    "InvalidSpec",
                    format!("no case {case}"),
                ));
            };
            let spec = &measured;
            let client = plan::client_name(run.obj, &run.id, slot.wire());
            let Some(report) = reports.get(&client) else {
                let m = format!("case {}: the client's report is gone", spec.name);
                return Ok(Collected::Unusable("BadReport", m));
            };
            let server_node = server_node(run, slot).await?;
            let (measured, stream_errors) = match result::case_result(spec, report, server_node) {
                Ok(r) => r,
                Err(e) => return Ok(Collected::Unusable("BadReport", e)),
            };
            let idle = result::nothing_transferred(&measured);
            if let Some(w) = &measured.warning {
                let m = format!("case {}: {w}", measured.name);
                run.events
                    .push((EventType::Warning, "MeasurementLimited".into(), m));
            }
            record_case(run, measured);
            Ok(if !stream_errors.is_empty() {
                let m = format!(
                    "case {}: {} stream(s) ended early: {}",
                    spec.name,
                    stream_errors.len(),
                    stream_errors.join("; ")
                );
                Collected::RecordedButFailed("StreamFailed", m)
            } else if let Some(why) = idle {
                let m = format!("case {}: {why}", spec.name);
                Collected::RecordedButFailed("NothingTransferred", m)
            } else {
                Collected::Recorded
            })
        })
    }

    /// The run counts as done only once the nodes are as they were.
    fn before_success<'a>(run: &'a mut Run<'_, Self>) -> BoxFuture<'a, Result<Option<String>>> {
        Box::pin(async move { in_run::restore_open(run, None).await })
    }

    /// Every change written back and verified, then the records and Jobs go (status keeps the
    /// report).
    fn wrap_up<'a>(run: &'a mut Run<'_, Self>) -> BoxFuture<'a, Result<WrapUp>> {
        Box::pin(async move {
            if let Some(m) = in_run::restore_open(run, None).await? {
                return Ok(WrapUp::Retry {
                    message: Some(format!("{m} (the run has ended)")),
                    after: POLL,
                });
            }
            // Also when nothing was left open here (e.g. an apply that changed nothing).
            in_run::note_restore(run, &offload::Stage::Done);
            run.extra.delete_if_resolved().await?;
            if in_run::manages_jobs(run.obj, &run.ctx.config) {
                offload::delete_jobs(&run.ctx.client, &run.ctx.config, run.obj).await?;
            }
            Ok(WrapUp::Done)
        })
    }

    /// The finalizer stays until every offload change is written back (a failure is retried
    /// and shown in status); driven by the records in the operator's namespace only.
    fn on_delete<'a>(
        ctx: &'a Context,
        eb: &'a EgressBenchmark,
        api: &'a Api<EgressBenchmark>,
        run: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            in_run::restore_on_delete(ctx, eb, api, run).await?;
            if in_run::manages_jobs(eb, &ctx.config) {
                offload::delete_jobs(&ctx.client, &ctx.config, eb).await?;
            }
            let ns = eb.namespace().unwrap_or_default();
            for c in eb.status.iter().flat_map(|s| &s.cases) {
                let profile = c.offload_profile.as_deref();
                ctx.metrics.family::<EgressMetrics>().forget_case(
                    &ns,
                    &eb.name_any(),
                    &c.name,
                    profile,
                );
            }
            Ok(())
        })
    }
}

/// The node the case's in-cluster server ran on (None for a server outside the cluster).
async fn server_node(run: &Run<'_, EgressBenchmark>, slot: Slot) -> Result<Option<String>> {
    let selector = run.slot_selector(slot);
    let pods = pods::list_pods(&run.ctx.client, &run.ns, &selector).await?;
    let server = plan::server_name(run.obj, &run.id, slot.wire());
    Ok(pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(&server))
        .and_then(|p| p.spec.as_ref()?.node_name.clone()))
}

/// A case's result into status (replacing an earlier one of the same name), the overheads and
/// summary, metrics and an Event.
fn record_case(run: &mut Run<'_, EgressBenchmark>, r: CaseResult) {
    let m = format!("case {}: {}", r.name, result::headline(&r));
    run.events
        .push((EventType::Normal, "CaseMeasured".into(), m));
    let status = &mut run.status;
    status.cases.retain(|c| c.name != r.name);
    status.cases.push(r);
    result::set_overheads(&mut status.cases, plan::baseline(run.obj));
    (status.best, status.overhead) = result::summary(&status.cases);
    status.cases_summary = Some(cases_summary(run.obj, &status.cases));
    let metrics = run.ctx.metrics.family::<EgressMetrics>();
    for c in &run.status.cases {
        metrics.set_case(&run.ns, &run.name, c);
    }
}

/// "measured/asked", the printer column (a swept case counts each run).
fn cases_summary(eb: &EgressBenchmark, measured: &[CaseResult]) -> String {
    format!("{}/{}", measured.len(), plan::count(eb))
}
