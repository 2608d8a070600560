//! What EgressBenchmark adds to the shared run driver: its cases one after another, each a
//! client (and an in-cluster server) pinned to the case's nodes, with the case's offload profile
//! applied by privileged Jobs before and written back after (see `offload::in_run`), and the
//! case results with their overhead against the baseline.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::events::EventType;
use kube::ResourceExt;
use protocol::worker::{FinalReport, Role};

use crds::egress::{CaseResult, PairResult};
use crds::history::{MetricTolerance, Repetition};
use crds::{CleanupPolicy, EgressBenchmark, EgressBenchmarkStatus, RunStatus};

use super::metrics::EgressMetrics;
use super::offload::{self, in_run, Book};
use super::result::PairReport;
use super::{nodes, overhead, pair, plan, readings, result, service, validate};
use crate::admin::config::Config;
use crate::base::error::Result;
use crate::base::metrics::Metrics;
use crate::base::outcome::{Failure, Reason, Step, POLL};
use crate::context::Context;
use crate::k8s::workers;
use crate::policy::queue::Contender;
use crate::policy::samples::{Figure, Slot};
use crate::run::{Hooks, Plan, Run, RunState};
use crate::store::registry::Pairing;

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

impl Plan for EgressBenchmark {
    type Status = EgressBenchmarkStatus;
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
        plan::budget(&self.spec, config.timeouts())
    }
    fn deadline(&self, case: u32, config: &Config) -> Duration {
        let start = config.worker_start_timeout();
        plan::case_at(self, case).map_or(start, |m| plan::case_deadline(&m.spec, start))
    }
    fn contender(&self) -> Contender {
        plan::contender(self)
    }
    fn workers(&self, run: &str, slot: Slot) -> BTreeMap<String, Role> {
        plan::worker_roles(self, run, slot)
    }
    fn pairing(&self, run: &str, slot: Slot) -> Pairing {
        plan::pairing(self, run, slot)
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
        let pairs = pair_reports(self, run, slot, reports, Nodes::Pinned)?;
        result::case_result(&case, &pairs).map(|(r, _)| result::figures(&r))
    }
    fn pair_rows(
        &self,
        run: &str,
        slot: Slot,
        reports: &BTreeMap<String, FinalReport>,
    ) -> Vec<PairResult> {
        let Some(case) = plan::case_at(self, slot.measurement) else {
            return vec![];
        };
        if case.spec.topology.is_none() {
            return vec![];
        }
        let Ok(pairs) = pair_reports(self, run, slot, reports, Nodes::Pinned) else {
            return vec![];
        };
        result::case_result(&case, &pairs).map_or_else(|_| vec![], |(r, _)| r.pairs)
    }
    /// Each case is judged by the figures its protocol has (a figure a case lacks is not
    /// expected of it).
    fn gates(&self) -> &[crds::gates::Gate] {
        &self.spec.gates
    }
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
    /// The case's nodes come from the plan's pins and the sample's verified reports (as its
    /// pair rows do), never from status.cases, which a benchmark author can write.
    fn parameters(
        &self,
        run: &str,
        slot: Slot,
        reports: &BTreeMap<String, FinalReport>,
    ) -> BTreeMap<String, String> {
        let mut p = BTreeMap::new();
        let Some(m) = plan::case_at(self, slot.measurement) else {
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
        if c.topology.is_none() {
            let (client, server) = case_nodes(self, run, slot, reports);
            for (key, node) in [("clientNode", client), ("serverNode", server)] {
                if let Some(n) = node {
                    p.insert(key.to_string(), n);
                }
            }
        }
        if let Some(a) = &c.server.address {
            p.insert("serverAddress".to_string(), a.clone());
        }
        p
    }
    /// The case results its status holds.
    fn export_results(&self, metrics: &Metrics) {
        if let Some(s) = &self.status {
            let ns = self.namespace().unwrap_or_default();
            metrics
                .family::<EgressMetrics>()
                .export(&ns, &self.name_any(), s);
        }
    }
}

/// What an EgressBenchmark's run keeps in the operator's namespace (read once per reconcile).
pub struct Records {
    /// The offload records: what restores are driven by.
    pub offload: Book,
    /// What the matrix node selectors matched when the run began.
    pub nodes: nodes::Resolved,
    /// The node pair of the cases that leave placement open, and whether this reconcile chose
    /// it (then it is announced once).
    pub pair: pair::Chosen,
    pub pair_chosen_now: bool,
}

impl Hooks for EgressBenchmark {
    type Extra = Records;

    fn before_write(run: &mut Run<'_, Self>) {
        if let Some(report) = run.extra().offload.report() {
            run.status_mut().offload = report;
        }
        if run.extra().pair_chosen_now {
            let chosen = run.extra().pair.clone();
            pair::announce(run, &chosen);
        }
    }

    async fn load_extra(ctx: &Context, eb: &EgressBenchmark, run: &str) -> Result<Records> {
        let (pair, pair_chosen_now) = pair::load(ctx, eb, run).await?;
        Ok(Records {
            offload: Book::load(&ctx.client, &ctx.config, eb).await?,
            nodes: nodes::load(ctx, eb, run).await?,
            pair,
            pair_chosen_now,
        })
    }

    fn resolve(eb: EgressBenchmark, extra: &Records) -> EgressBenchmark {
        pair::apply(nodes::apply(eb, &extra.nodes), &extra.pair)
    }

    async fn check(run: &mut Run<'_, Self>) -> Result<Step> {
        if let Some(m) = nodes::refusal(run.obj(), &run.extra().nodes) {
            return Ok(Step::Fail(Failure::invalid(m)));
        }
        let (spec, config) = (&run.obj().spec, &run.ctx().config);
        if let Err(refusal) = validate::permitted(spec, run.ns(), config) {
            return Ok(Step::Fail(refusal));
        }
        if let Err(refusal) = validate::admitted(&run.ctx().client, spec, config).await? {
            return Ok(Step::Fail(refusal));
        }
        let offload = in_run::offload_of(run.ctx(), run.obj(), run.id());
        Ok(match offload.refusal().await? {
            Some(m) => Step::Fail(Failure::not_permitted(m)),
            None => Step::Done,
        })
    }

    /// What earlier runs changed on the nodes is written back before a new run starts; then
    /// their Jobs and records go.
    async fn retire(run: &mut Run<'_, Self>) -> Result<Step> {
        if let Some(m) = in_run::restore_open(run, None).await? {
            return Ok(Step::wait(format!("the spec changed: {m}")));
        }
        let ctx = run.ctx();
        if run.status().run.run_id.is_some() && in_run::manages_jobs(run.obj(), &ctx.config) {
            offload::delete_jobs(&ctx.client, &ctx.config, run.obj()).await?;
        }
        run.extra_mut().offload.start_over().await?;
        Ok(Step::Done)
    }

    /// The case's offload profile, then (on the Service path) the Service its client reaches
    /// the server through.
    async fn prepare(run: &mut Run<'_, Self>, case: u32) -> Result<Step> {
        let prepared = in_run::prepare(run, case).await?;
        if let (Step::Done, Some(m)) = (&prepared, plan::case_at(run.obj(), case)) {
            let client = &run.ctx().client;
            let refused = service::ensure(client, run.obj(), run.id(), run.slot(), &m).await?;
            if let Some(failure) = refused {
                return Ok(Step::Fail(failure));
            }
        }
        Ok(prepared)
    }

    /// The case's result into status, failing the run when streams ended early or nothing was
    /// transferred.
    async fn collect(
        run: &mut Run<'_, Self>,
        slot: Slot,
        reports: &BTreeMap<String, FinalReport>,
    ) -> Result<Step> {
        let case = slot.measurement;
        let Some(measured) = plan::case_at(run.obj(), case) else {
            return Ok(Step::Fail(Failure::invalid(format!("no case {case}"))));
        };
        let spec = &measured;
        let selector = run.slot_selector(slot);
        let ctx = run.ctx();
        let pods = ctx
            .pods
            .list_or_get(&ctx.client, run.ns(), &selector)
            .await?;
        let pairs = match pair_reports(run.obj(), run.id(), slot, reports, Nodes::Pods(&pods)) {
            Ok(p) => p,
            Err(m) => return Ok(Step::fail(Reason::BadReport, m)),
        };
        let (measured, stream_errors) = match result::case_result(spec, &pairs) {
            Ok(r) => r,
            Err(e) => return Ok(Step::fail(Reason::BadReport, e)),
        };
        let idle = result::nothing_transferred(&measured);
        if let Some(w) = &measured.warning {
            let m = format!("case {}: {w}", measured.name);
            run.event(EventType::Warning, "MeasurementLimited", m);
        }
        record_case(run, measured);
        Ok(if !stream_errors.is_empty() {
            let m = format!(
                "case {}: {} stream(s) ended early: {}",
                spec.name,
                stream_errors.len(),
                stream_errors.join("; ")
            );
            Step::fail(Reason::StreamFailed, m)
        } else if let Some(why) = idle {
            let m = format!("case {}: {why}", spec.name);
            Step::fail(Reason::NothingTransferred, m)
        } else {
            Step::Done
        })
    }

    /// The run counts as done only once the nodes are as they were.
    async fn before_success(run: &mut Run<'_, Self>) -> Result<Step> {
        Ok(match in_run::restore_open(run, None).await? {
            Some(m) => Step::wait(m),
            None => Step::Done,
        })
    }

    /// Every change written back and verified, then the records and Jobs go (status keeps the
    /// report).
    async fn wrap_up(run: &mut Run<'_, Self>) -> Result<Step> {
        if let Some(m) = in_run::restore_open(run, None).await? {
            return Ok(Step::Wait {
                message: Some(format!("{m} (the run has ended)")),
                after: POLL,
            });
        }
        // Also when nothing was left open here (e.g. an apply that changed nothing).
        in_run::note_restore(run, &offload::Stage::Done);
        run.extra_mut().offload.delete_if_resolved().await?;
        let ctx = run.ctx();
        if in_run::manages_jobs(run.obj(), &ctx.config) {
            offload::delete_jobs(&ctx.client, &ctx.config, run.obj()).await?;
        }
        Ok(Step::Done)
    }

    /// The finalizer stays until every offload change is written back (a failure is retried
    /// and shown in status); driven by the records in the operator's namespace only.
    async fn on_delete(
        ctx: &Context,
        eb: &EgressBenchmark,
        api: &Api<EgressBenchmark>,
        run: &str,
    ) -> Result<Step> {
        let restored = in_run::restore_on_delete(ctx, eb, api, run).await?;
        if restored != Step::Done {
            return Ok(restored);
        }
        if in_run::manages_jobs(eb, &ctx.config) {
            offload::delete_jobs(&ctx.client, &ctx.config, eb).await?;
        }
        nodes::forget(ctx, eb).await?;
        pair::forget(ctx, eb).await?;
        let ns = eb.namespace().unwrap_or_default();
        ctx.metrics
            .family::<EgressMetrics>()
            .keep_cases(&ns, &eb.name_any(), &[]);
        Ok(Step::Done)
    }
}

/// Where the workers of a pair ran, as far as the caller can tell.
enum Nodes<'p> {
    /// The pods the operator created for the sample (status: while they exist).
    Pods(&'p [Pod]),
    /// The nodes the plan pinned the pair to (the pods could run nowhere else); else the
    /// client's node as its report says, and no server node (a server sends no report). For
    /// results, made of reports after the pods are gone.
    Pinned,
}

/// The client reports of a sample pair by pair, with their nodes (`nodes`); Err names a
/// client whose report is missing.
fn pair_reports<'a>(
    eb: &EgressBenchmark,
    run: &str,
    slot: Slot,
    reports: &'a BTreeMap<String, FinalReport>,
    nodes: Nodes<'_>,
) -> std::result::Result<Vec<PairReport<'a>>, String> {
    let node_of = |pods: &[Pod], name: &str| {
        pods.iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .and_then(|p| p.spec.as_ref()?.node_name.clone())
    };
    let case = plan::case_at(eb, slot.measurement)
        .map(|m| m.name)
        .unwrap_or_default();
    plan::pairs_at(eb, slot)
        .iter()
        .map(|p| {
            let client = plan::client_name(eb, run, slot.wire(), p.index);
            let server = plan::server_name(eb, run, slot.wire(), p.index);
            let report = reports.get(&client).ok_or_else(|| {
                format!(
                    "case {case}: the report of client {client} (pair {}) is gone",
                    p.index
                )
            })?;
            let (client_node, server_node) = match nodes {
                Nodes::Pods(pods) => (node_of(pods, &client), node_of(pods, &server)),
                Nodes::Pinned => (
                    p.client.node.clone().or_else(|| report.node.clone()),
                    p.server.node.clone(),
                ),
            };
            Ok(PairReport {
                pair: p.index,
                wave: p.wave,
                client: report,
                client_node,
                server_node,
            })
        })
        .collect()
}

/// Where the single pair of a case without a topology ran: each end's pinned node, or else
/// the node its own verified report names.
fn case_nodes(
    eb: &EgressBenchmark,
    run: &str,
    slot: Slot,
    reports: &BTreeMap<String, FinalReport>,
) -> (Option<String>, Option<String>) {
    let Ok(pairs) = pair_reports(eb, run, slot, reports, Nodes::Pinned) else {
        return (None, None);
    };
    let Some(only) = pairs.first() else {
        return (None, None);
    };
    let server = plan::server_name(eb, run, slot.wire(), only.pair);
    let server_node = only
        .server_node
        .clone()
        .or_else(|| reports.get(&server).and_then(|r| r.node.clone()));
    (only.client_node.clone(), server_node)
}

/// A case's result into status (replacing an earlier one of the same name), the overheads and
/// summary, metrics and an Event.
fn record_case(run: &mut Run<'_, EgressBenchmark>, r: CaseResult) {
    let m = format!("case {}: {}", r.name, result::headline(&r));
    run.event(EventType::Normal, "CaseMeasured", m);
    let eb = run.obj();
    let status = run.status_mut();
    status.cases.retain(|c| c.name != r.name);
    status.cases.push(r);
    overhead::set_overheads(&mut status.cases, plan::baseline(eb));
    (status.best, status.overhead) = overhead::summary(&status.cases);
    status.cases_summary = Some(cases_summary(eb, &status.cases));
    let metrics = run.ctx().metrics.family::<EgressMetrics>();
    for c in &run.status().cases {
        metrics.set_case(run.ns(), run.name(), c);
    }
    // A new run's first case: the series of the runs before that it does not repeat go.
    metrics.keep_cases(run.ns(), run.name(), &run.status().cases);
}

/// "measured/asked", the printer column (a swept case counts each run).
fn cases_summary(eb: &EgressBenchmark, measured: &[CaseResult]) -> String {
    format!("{}/{}", measured.len(), plan::count(eb))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_CASES: &str = r#"
apiVersion: netbench.io/v1alpha1
kind: EgressBenchmark
metadata: {name: e, uid: u-1}
spec:
  cases:
    - name: pinned
      client: {nodeName: a}
      server: {nodeName: b}
    - name: placed
      client: {}
      server: {}
"#;

    fn report(worker: &str, node: &str) -> (String, FinalReport) {
        let r = FinalReport {
            version: 1,
            worker: worker.into(),
            node: Some(node.into()),
            step: 0,
            started_at_unix_ms: 1,
            report: serde_json::json!({}),
            host: None,
        };
        (worker.to_string(), r)
    }

    /// A result's nodes: the pins, else each end's own report; status.cases (forged here) is
    /// never read.
    #[test]
    fn a_cases_nodes_come_from_pins_and_reports_never_from_status() {
        let mut eb: EgressBenchmark = serde_yaml::from_str(TWO_CASES).unwrap();
        let forged = |name: &str| CaseResult {
            name: name.into(),
            client_node: Some("forged-client".into()),
            server_node: Some("forged-server".into()),
            ..Default::default()
        };
        eb.status = Some(EgressBenchmarkStatus {
            cases: vec![forged("pinned"), forged("placed")],
            ..Default::default()
        });
        let run = "u1-g1";
        let nodes = |slot: Slot, reports: &BTreeMap<String, FinalReport>| {
            let p = eb.parameters(run, slot, reports);
            (p.get("clientNode").cloned(), p.get("serverNode").cloned())
        };
        let some = |a: &str, b: &str| (Some(a.to_string()), Some(b.to_string()));
        // Pinned: the pins win over what a report says.
        let slot = Slot::first(0);
        let reports = BTreeMap::from([
            report(&plan::client_name(&eb, run, 0, 0), "elsewhere"),
            report(&plan::server_name(&eb, run, 0, 0), "elsewhere"),
        ]);
        assert_eq!(nodes(slot, &reports), some("a", "b"));
        // Placed by the scheduler: each end's own report.
        let slot = Slot::first(1);
        let reports = BTreeMap::from([
            report(&plan::client_name(&eb, run, 1, 0), "n1"),
            report(&plan::server_name(&eb, run, 1, 0), "n2"),
        ]);
        assert_eq!(nodes(slot, &reports), some("n1", "n2"));
        // No report: no node (not status's).
        assert_eq!(nodes(slot, &BTreeMap::new()), (None, None));
    }
}
