//! What EgressBenchmark adds to the shared run driver: its cases one after another, each a
//! client (and an in-cluster server) pinned to the case's nodes, with the case's offload profile
//! applied by privileged Jobs before and written back after (see `offload::in_run`), and the
//! case results with their overhead against the baseline. This file holds the kind's own
//! steps (`run::Hooks`) and what they keep; what the kind is to the driver, pure, is
//! `model.rs`.

use std::collections::BTreeMap;

use kube::api::Api;
use kube::runtime::events::EventType;
use kube::ResourceExt;
use protocol::worker::FinalReport;

use crds::egress::CaseResult;
use crds::EgressBenchmark;

use super::metrics::EgressMetrics;
use super::offload::{self, in_run, Book};
use super::{nodes, overhead, pair, plan, result, service, validate};
use crate::base::error::Result;
use crate::base::metrics::Metrics;
use crate::base::outcome::{Failure, Reason, Step, POLL};
use crate::context::Context;
use crate::policy::samples::Slot;
use crate::run::{Hooks, Run};

mod model;
use model::{pair_reports, Nodes};

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

    /// The run's records, and the object with the nodes they hold.
    async fn load(ctx: &Context, eb: EgressBenchmark, run: &str) -> Result<(Self, Records)> {
        let (pair, pair_chosen_now) = pair::load(ctx, &eb, run).await?;
        let records = Records {
            offload: Book::load(ctx, &eb).await?,
            nodes: nodes::load(ctx, &eb, run).await?,
            pair,
            pair_chosen_now,
        };
        let eb = pair::apply(nodes::apply(eb, &records.nodes), &records.pair);
        Ok((eb, records))
    }

    async fn check(run: &mut Run<'_, Self>) -> Result<Step> {
        if let Some(m) = nodes::refusal(run.obj(), &run.extra().nodes) {
            return Ok(Step::Fail(Failure::invalid(m)));
        }
        let (spec, config) = (&run.obj().spec, &run.ctx().config);
        if let Err(refusal) = validate::permitted(spec, run.ns(), config) {
            return Ok(Step::Fail(refusal));
        }
        if let Err(refusal) = validate::admitted(run.ctx(), spec).await? {
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

    /// The offload records' report, and the node pair chosen this reconcile (once).
    fn show(run: &mut Run<'_, Self>) {
        if let Some(report) = run.extra().offload.report() {
            run.status_mut().offload = report;
        }
        if run.extra().pair_chosen_now {
            let chosen = run.extra().pair.clone();
            pair::announce(run, &chosen);
        }
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
