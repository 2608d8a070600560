//! What IngressBenchmark adds to the shared run driver: its steps (one, or one per sweep step),
//! HTTP client workers, the sweep target scaled before each step (see `sweep`), the step result
//! with its error verdict, and the scaling table and thresholds at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::events::EventType;
use kube::ResourceExt;
use protocol::worker::FinalReport;

use crds::ingress::StepResult;
use crds::result::BenchmarkResultSpec;
use crds::{IngressBenchmark, IngressBenchmarkSpec, IngressBenchmarkStatus, RunStatus};

use super::metrics::IngressMetrics;
use super::{churn, plan, result, routes, scale, sweep, usage, validate, verdict};
use crate::admin::config::Config;
use crate::base::conditions::THRESHOLDS_MET;
use crate::base::error::Result;
use crate::base::metrics::Metrics;
use crate::base::outcome::{Failure, Reason, Step};
use crate::context::Context;
use crate::k8s::workers;
use crate::policy::queue::Contender;
use crate::policy::samples::Slot;
use crate::run::{Hooks, MeasurementPlan, Outline, Plan, Reading, Run, RunState, SamplePlan};
use crate::store::registry::Pairing;

impl RunState for IngressBenchmarkStatus {
    fn run(&self) -> &RunStatus {
        &self.run
    }
    fn run_mut(&mut self) -> &mut RunStatus {
        &mut self.run
    }
    fn current(&self) -> Option<u32> {
        self.current_step
    }
    fn set_current(&mut self, step: u32) {
        self.current_step = Some(step);
        // Each step's target is scaled and settles anew.
        self.target_ready_at = None;
    }
}

impl Plan for IngressBenchmark {
    fn outline(&self) -> Outline<'_> {
        Outline {
            noun: "step",
            services: false,
            count: plan::step_count(&self.spec),
            cleanup: self.spec.cleanup,
            repetition: &self.spec.repetition,
            gates: &self.spec.gates,
            // Controllers compared side by side take their samples in alternating rounds.
            interleaved: self.spec.controllers.len() > 1,
            judged_by_default: &[("rps", 10.0), ("p99Ms", 20.0)],
        }
    }
    /// "step 1", or "step 1 (traefik)" when controllers are compared. Progress counts the
    /// warm-up in: the abort window starts after it.
    fn measurement(&self, step: u32) -> MeasurementPlan {
        MeasurementPlan {
            name: match plan::controller(&self.spec, step) {
                Some(c) => format!("step {step} ({})", c.name),
                None => format!("step {step}"),
            },
            report_kind: protocol::ReportKind::Http,
            live_from: self.spec.load.warmup.as_std(),
            after_start: plan::step_deadline(&self.spec, Duration::ZERO),
            start_lead: plan::start_lead(&self.spec, step),
        }
    }
    fn budget(&self, config: &Config) -> Duration {
        plan::budget(&self.spec, config.timeouts())
    }
    fn contender(&self) -> Contender {
        plan::contender(self)
    }
    fn sample(&self, run: &str, slot: Slot) -> SamplePlan {
        SamplePlan {
            workers: plan::worker_names(self, run, slot.wire()),
            pairing: Pairing::default(),
        }
    }
    fn pods(&self, run: &str, slot: Slot, config: &Config) -> Vec<Pod> {
        plan::workers(self, run, slot, self.spec.workers.host_network)
            .iter()
            .map(|p| workers::pod(p, config))
            .collect()
    }
    fn read(
        &self,
        _run: &str,
        slot: Slot,
        reports: &BTreeMap<String, FinalReport>,
    ) -> std::result::Result<Reading, String> {
        let mut figures =
            result::step_result(slot.measurement, None, reports).map(|r| result::figures(&r))?;
        figures.extend(churn::sample_figures(self, slot, reports)?);
        figures.extend(scale::sample_figures(self, slot, reports)?);
        Ok(Reading {
            figures,
            parameters: parameters(&self.spec, slot.measurement),
            pairs: vec![],
        })
    }
}

/// What distinguishes step `step` in a result: its controller, cpu and replicas.
fn parameters(spec: &IngressBenchmarkSpec, step: u32) -> BTreeMap<String, String> {
    let sweep_step = plan::sweep_step(spec, step);
    let mut p = BTreeMap::new();
    if let Some(c) = plan::controller(spec, step) {
        p.insert("controller".to_string(), c.name.clone());
    }
    if let Some(cpu) = sweep_step.and_then(|s| s.cpu.as_ref()) {
        p.insert("cpu".to_string(), cpu.0.clone());
    }
    if let Some(r) = sweep_step.and_then(|s| s.replicas) {
        p.insert("replicas".to_string(), r.to_string());
    }
    p
}

impl Hooks for IngressBenchmark {
    type Extra = ();

    async fn load(_ctx: &Context, ib: IngressBenchmark, _run: &str) -> Result<(Self, ())> {
        Ok((ib, ()))
    }

    async fn check(run: &mut Run<'_, Self>) -> Result<Step> {
        let (spec, ns, config) = (&run.obj().spec, run.ns(), &run.ctx().config);
        if let Err(m) = validate::sweep_permitted(spec, ns, config) {
            return Ok(Step::Fail(Failure::not_permitted(m)));
        }
        if let Err(m) = validate::permitted(spec, ns, config) {
            return Ok(Step::Fail(Failure::invalid(m)));
        }
        Ok(match validate::admitted(run.ctx(), spec).await? {
            Ok(()) => Step::Done,
            Err(refusal) => Step::Fail(refusal),
        })
    }

    /// A sweep target an earlier run changed is restored first; its saved spec is kept until
    /// it is (a failure is an error, so the reconcile is retried).
    /// Routes of earlier runs go too: listed every time (whether there was an earlier run is
    /// status's to say, which its author can clear, and a route left on a shared Gateway would
    /// outlive its run).
    async fn retire(run: &mut Run<'_, Self>) -> Result<Step> {
        // Two different objects: asked at once (a new run's first reconcile waits for both).
        let (events, deleted) = futures::join!(
            sweep::restore_earlier(run.ctx(), run.obj(), run.id()),
            routes::delete(run, Some(run.id()))
        );
        run.events(events?);
        deleted?;
        Ok(Step::Done)
    }

    /// The step's controller's route (when the run creates one), or the sweep target.
    async fn prepare(run: &mut Run<'_, Self>, step: u32) -> Result<Step> {
        match routes::prepare(run, step).await? {
            Step::Done => sweep::prepare(run, step).await,
            not_yet => Ok(not_yet),
        }
    }

    /// The step's route scale's routes, its route changes under load (spec.routeChanges) and
    /// the kubelets' readings of its controller's workloads.
    async fn while_running(run: &mut Run<'_, Self>, step: u32) -> Result<Step> {
        // The routes come with the load and the changes keep a schedule; the kubelet readings
        // can wait, but are never left out.
        let created = scale::while_running(run, step).await?;
        if let Step::Fail(_) = created {
            return Ok(created);
        }
        let churn = churn::while_running(run, step).await?;
        let sample_again = usage::while_running(run, step).await;
        Ok(sooner(
            sooner(created, churn),
            sample_again
                .map(|after| Step::Wait {
                    message: None,
                    after,
                })
                .unwrap_or(Step::Done),
        ))
    }

    /// The step's result into status, with its verdict on failed requests (and how its
    /// route changes showed).
    async fn collect(
        run: &mut Run<'_, Self>,
        slot: Slot,
        reports: &BTreeMap<String, FinalReport>,
    ) -> Result<Step> {
        let step = slot.measurement;
        let sweep_step = plan::sweep_step(&run.obj().spec, step);
        let mut result = match result::step_result(step, sweep_step, reports) {
            Ok(r) => r,
            Err(e) => return Ok(Step::fail(Reason::BadReport, e)),
        };
        result.controller = plan::controller(&run.obj().spec, step).map(|c| c.name.clone());
        result.workloads = usage::collect(run, slot).await;
        let before = run.status().steps.iter().find(|s| s.index == step);
        let gateway_404s_only = match churn::collect(run, slot, reports, before) {
            Ok(figures) => {
                let only = !figures.backend_4xx;
                figures.fill(&mut result);
                only
            }
            Err(e) => return Ok(Step::fail(Reason::BadReport, format!("step {step}: {e}"))),
        };
        let max_error_ratio = run.ctx().config.max_error_ratio;
        let failed = if churn::deletes_routes(&run.obj().spec) && gateway_404s_only {
            // The Gateway's 404s while the route is gone are what the run asked for (no
            // backend answered a 4xx itself: those would count).
            let mut judged = result.clone();
            judged.errors.status4xx = 0;
            verdict::failed_requests(&judged, max_error_ratio)
        } else {
            verdict::failed_requests(&result, max_error_ratio)
        };
        let scale_before = before.and_then(|s| s.route_scale.as_ref());
        result.route_scale = match scale::collect(run, slot, reports, scale_before) {
            Ok(r) => r,
            Err(e) => return Ok(Step::fail(Reason::BadReport, format!("step {step}: {e}"))),
        };
        // Read: the sample's routes go (the next sample creates its own).
        scale::delete_sample(run, slot).await?;
        record_step(run, result);
        Ok(match failed {
            Some(why) => Step::fail(Reason::RequestsFailed, format!("step {step}: {why}")),
            None => Step::Done,
        })
    }

    /// The run's summary (see `summarize`), then its routes are deleted, the sweep target
    /// restored.
    async fn wrap_up(run: &mut Run<'_, Self>) -> Result<Step> {
        summarize(run);
        // Listed whatever the spec says now (a scheduled round keeps its run across a change).
        let deleted = routes::delete(run, None).await?;
        if deleted > 0 {
            let m = format!("{deleted} HTTPRoute(s) of the run deleted");
            run.event(EventType::Normal, "RoutesDeleted", m);
        }
        Ok(if sweep::restore_at_end(run).await? {
            Step::Wait {
                message: None,
                after: Duration::from_secs(10),
            }
        } else {
            Step::Done
        })
    }

    /// From the record in the operator's namespace only, never from status.savedTarget.
    async fn on_delete(
        ctx: &Context,
        ib: &IngressBenchmark,
        _api: &Api<IngressBenchmark>,
        run: &str,
    ) -> Result<Step> {
        let mut events = sweep::restore_earlier(ctx, ib, run).await?;
        let reference = kube::Resource::object_ref(ib, &());
        ctx.publish(&reference, &mut events);
        let ns = ib.namespace().unwrap_or_default();
        ctx.metrics
            .family::<IngressMetrics>()
            .forget(&ns, &ib.name_any());
        Ok(Step::Done)
    }

    /// The printer columns: workers reporting, and the last sample's step's requests per
    /// second over its samples.
    fn show(run: &mut Run<'_, Self>) {
        if let Some((reported, expected)) = run.progress() {
            run.status_mut().workers = Some(format!("{reported}/{expected}"));
        }
        let Some(step) = run.recorded().last().map(|s| s.measurement) else {
            return;
        };
        let stats = &run.status().run.statistics;
        if let Some(interval) = stats
            .iter()
            .find(|m| m.index == step)
            .map(result::rps_interval)
        {
            run.status_mut().rps_interval = interval;
        }
    }

    /// The steps and the sweep's scaling its status holds.
    fn export_results(&self, metrics: &Metrics) {
        let ns = self.namespace().unwrap_or_default();
        metrics
            .family::<IngressMetrics>()
            .export(&ns, &self.name_any(), self);
    }

    /// A sweep's scaling table, from the result's measurements (made of the stored reports,
    /// not of status), and the ingress controller's image for the environment fingerprint.
    async fn complete_result(run: &Run<'_, Self>, spec: &mut BenchmarkResultSpec) {
        if run.obj().spec.sweep.is_some() {
            let steps = result::sweep_steps(&run.obj().spec, &spec.measurements);
            spec.scaling = result::scaling_by_controller(&steps);
        }
        spec.cluster.ingress_controller = sweep::target_image(run).await;
    }
}

/// The end of a run, either way: the scaling table of a sweep (a table per controller), the
/// controllers side by side (at the sweep's largest size), and the thresholds (against the
/// last step, or every controller's there). Again on each wrap-up until it is done: the same
/// status, and the comparison's Event only when the comparison is new.
fn summarize(run: &mut Run<'_, IngressBenchmark>) {
    usage::forget_run(run);
    let (spec, stats) = (&run.obj().spec, &run.status().run.statistics);
    let steps = plan::judged_steps(spec).filter_map(|step| {
        let c = plan::controller(spec, step)?;
        let m = stats.iter().find(|m| m.index == step)?;
        Some((c.name.as_str(), m))
    });
    if let Some(mut c) = crds::ingress::compare::comparison(steps) {
        let last = plan::judged_steps(spec).start;
        if let Some(size) = plan::sweep_step(spec, last).map(result::describe_size) {
            c.summary = crate::base::labels::truncate(&format!("at {size}:\n{}", c.summary), 4096);
        }
        if run.status().comparison.as_ref() != Some(&c) {
            let line = c.summary.replace(":\n", ": ").replace('\n', "; ");
            let m = crate::base::labels::truncate(&line, 1000);
            run.event(EventType::Normal, "ControllersCompared", m);
            run.status_mut().comparison = Some(c);
        }
    }
    if run.obj().spec.sweep.is_some() {
        let (spec, status) = (&run.obj().spec, run.status());
        let mut steps = result::with_mean_rps(&status.steps, &status.run.statistics);
        // Each step's controller as the spec names it, never as status says.
        steps.retain(|s| s.index < plan::step_count(spec));
        for s in &mut steps {
            s.controller = plan::controller(spec, s.index).map(|c| c.name.clone());
        }
        let scaling = result::scaling_by_controller(&steps);
        if let Some(s) = &scaling {
            run.ctx()
                .metrics
                .family::<IngressMetrics>()
                .set_scaling(run.ns(), run.name(), s);
        }
        run.status_mut().scaling = scaling;
    }
    if let Some(t) = &run.obj().spec.thresholds {
        let judged = plan::judged_steps(&run.obj().spec);
        if let Some((ok, why)) = result::judge_thresholds(t, &run.status().steps, judged) {
            run.condition(THRESHOLDS_MET, ok, if ok { "Met" } else { "NotMet" }, why);
        }
    }
}

/// A step's result into status, metrics and an Event (again on a retry: it replaces itself).
fn record_step(run: &mut Run<'_, IngressBenchmark>, r: StepResult) {
    run.ctx()
        .metrics
        .family::<IngressMetrics>()
        .set_step(run.ns(), run.name(), &r);
    // "step 1 (envoy) sample 2/3: ...": the order of samples (interleaved or not) shows here.
    let m = format!(
        "{}: {:.1} req/s, p99 {}",
        run.describe(run.slot()),
        r.rps,
        result::format_ms(r.latency_ms.p99)
    );
    run.event(EventType::Normal, "StepMeasured", m);
    let status = run.status_mut();
    status.rps = Some((r.rps * 100.0).round() / 100.0);
    status.p99 = Some(result::format_ms(r.latency_ms.p99));
    status.steps.retain(|s| s.index != r.index);
    status.steps.push(r);
    status.steps.sort_by_key(|s| s.index);
}

/// The step that comes back sooner: a failure first, then the shorter wait (with its message,
/// or the other's), Done only when both are.
fn sooner(a: Step, b: Step) -> Step {
    match (a, b) {
        (f @ Step::Fail(_), _) | (_, f @ Step::Fail(_)) => f,
        (Step::Done, other) | (other, Step::Done) => other,
        (
            Step::Wait {
                message: m1,
                after: a1,
            },
            Step::Wait {
                message: m2,
                after: a2,
            },
        ) => Step::Wait {
            message: m1.or(m2),
            after: a1.min(a2),
        },
    }
}
