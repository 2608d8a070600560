//! The run driver both kinds share. One reconcile moves a run through
//! Pending -> (Queued) -> Preparing -> Running -> Collecting -> Succeeded | Failed, over the
//! kind's measurements one after another (an IngressBenchmark's sweep steps, an
//! EgressBenchmark's cases). A kind supplies only what differs, through [`Kind`]: its checks,
//! the workers of a measurement, what it prepares before one (a sweep target scaled, an offload
//! profile applied), how reports become a result, and what it restores at the end.
//!
//! Every handler is idempotent: a stale or restarted operator converges to the same children
//! and the same status. Everything a phase decides is recorded in status before the reconcile
//! ends, so a restart resumes the run instead of repeating it.

pub mod lifecycle;
pub mod metrics;
mod phases;
mod scheduled;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use protocol::worker::{FinalReport, Role};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crds::history::{MetricTolerance, Repetition};
use crds::result::MeasurementStats;
use crds::{CleanupPolicy, Phase, RunStatus};

use crate::admin::caps::Refusal;
use crate::admin::config::Config;
use crate::base::conditions::{self, READY};
use crate::base::error::Result;
use crate::base::events::PendingEvent;
use crate::base::labels;
use crate::context::Context;
use crate::k8s::pods;
use crate::k8s::status;
use crate::policy::queue;
use crate::policy::samples;
pub use crate::policy::samples::{Figure, Slot};
use crate::policy::schedule;
use crate::results::metrics::ResultMetrics;
use crate::store::reports::Owner;
use metrics::RunMetrics;

/// How often a measurement, a rollout or a Job under way is checked (reports also wake the
/// controller at once).
pub const POLL: Duration = Duration::from_secs(2);

/// Phase changes one reconcile may make before it writes status and comes back. A run needs
/// at most five in a row (Collecting -> Preparing, a failure -> Failed, ...); the bound only
/// keeps a bug from spinning, and reaching it requeues rather than waiting for a change.
const MAX_TRANSITIONS: usize = 8;

/// A kind's status: the run bookkeeping every kind has, and which measurement is under way.
pub trait RunState:
    Default + Clone + PartialEq + Serialize + std::fmt::Debug + Send + Sync
{
    fn run(&self) -> &RunStatus;
    fn run_mut(&mut self) -> &mut RunStatus;
    /// The measurement under way (a step or case index), once the run left the queue.
    fn current(&self) -> Option<u32>;
    fn set_current(&mut self, index: u32);
}

/// What a benchmark kind adds to the shared driver. The synchronous methods describe the plan;
/// the asynchronous ones are the kind's own steps, each idempotent.
pub trait Kind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + Serialize
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    type Status: RunState;
    /// What the kind reads once per reconcile besides the object (egress: its offload records).
    type Extra: Send + Sync;
    /// How messages name one measurement: "step" or "case".
    const MEASUREMENT: &'static str;

    fn status_of(&self) -> Option<&Self::Status>;
    /// How many measurements the spec asks for.
    fn count(&self) -> u32;
    /// How messages name measurement `index`, e.g. "step 2" or "case vxlan".
    fn describe(&self, index: u32) -> String;
    fn cleanup_policy(&self) -> CleanupPolicy;
    /// The whole run's deadline, from the moment it leaves the queue.
    fn budget(&self, config: &Config) -> Duration;
    /// How long measurement `index` may take once its workers exist.
    fn deadline(&self, index: u32, config: &Config) -> Duration;
    /// The run as the queue sees it.
    fn contender(&self) -> queue::Contender;
    /// The workers of one sample of a measurement by pod name (named and labelled after the
    /// slot). Clients end the sample with their reports; servers serve until then.
    fn workers(&self, run: &str, slot: Slot) -> BTreeMap<String, Role>;
    /// The kind of report measurement `index`'s clients deliver ("http", "tcp", "rr", "udp").
    fn report_kind(&self, index: u32) -> &'static str;
    /// Their pods.
    fn pods(&self, run: &str, slot: Slot, config: &Config) -> Vec<Pod>;
    /// The spec's samples, history, baseline and schedule.
    fn repetition(&self) -> &Repetition;
    /// The figures of one sample from its verified reports, main figure first (requests/s,
    /// receiver bits/s): what samples, results and verdicts are made of.
    fn figures(
        &self,
        run: &str,
        slot: Slot,
        reports: &BTreeMap<String, FinalReport>,
    ) -> std::result::Result<Vec<Figure>, String>;
    /// The figures judged against a baseline when the spec names none.
    fn default_judged() -> Vec<MetricTolerance>;
    /// What distinguishes measurement `index` in a result (cpu, offload profile, ...).
    fn parameters(&self, _status: &Self::Status, _index: u32) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    /// Shows a measurement's statistics after a sample (printer columns).
    fn show_statistics(_status: &mut Self::Status, _stats: &MeasurementStats) {}
    /// The scaling table (IngressBenchmark sweeps) of a result, from its measurements (which
    /// come from the stored reports, not from status).
    fn scaling(
        &self,
        _measurements: &[crds::result::Measurement],
    ) -> Option<crds::ingress::Scaling> {
        None
    }
    /// A new run's status (before the driver sets its id and phase).
    fn fresh_status(&self) -> Self::Status {
        Self::Status::default()
    }
    /// Shows how many workers have reported (default: nothing to show).
    fn show_progress(_status: &mut Self::Status, _reported: usize, _expected: usize) {}
    /// Last words on a run that ends (either way), before its phase is set.
    fn on_finish(_run: &mut Run<'_, Self>) {}
    /// Just before status is written.
    fn before_write(_run: &mut Run<'_, Self>) {}

    fn load_extra<'a>(ctx: &'a Context, obj: &'a Self) -> BoxFuture<'a, Result<Self::Extra>>;
    /// The spec against the admin's lists and caps and against the cluster; Some refuses it.
    fn check<'a>(run: &'a mut Run<'_, Self>) -> BoxFuture<'a, Result<Option<Refusal>>>;
    /// Before a new run starts: write back what earlier runs changed and clear their children.
    /// Some(what it waits for) keeps the new run from starting yet.
    fn retire<'a>(run: &'a mut Run<'_, Self>) -> BoxFuture<'a, Result<Option<String>>>;
    /// What measurement `index` needs before its workers start.
    fn prepare<'a>(run: &'a mut Run<'_, Self>, index: u32) -> BoxFuture<'a, Result<Prepared>>;
    /// Turns one sample's verified reports into its measurement's result in status (the
    /// latest sample's, in full).
    fn collect<'a>(
        run: &'a mut Run<'_, Self>,
        slot: Slot,
        reports: &'a BTreeMap<String, FinalReport>,
    ) -> BoxFuture<'a, Result<Collected>>;
    /// After the last measurement, before the run counts as Succeeded: Some(what it waits for).
    fn before_success<'a>(_run: &'a mut Run<'_, Self>) -> BoxFuture<'a, Result<Option<String>>> {
        Box::pin(async { Ok(None) })
    }
    /// A finished run: write back what it changed (its pods are gone per policy already).
    fn wrap_up<'a>(run: &'a mut Run<'_, Self>) -> BoxFuture<'a, Result<WrapUp>>;
    /// Deletion: write back what the object's runs changed and delete the kind's own children.
    /// Err(Error::Pending) keeps the finalizer while a restore is under way. `run` is the
    /// current run id, from the object itself.
    fn on_delete<'a>(
        ctx: &'a Context,
        obj: &'a Self,
        api: &'a Api<Self>,
        run: &'a str,
    ) -> BoxFuture<'a, Result<()>>;
}

/// What a kind's preparation of a measurement says.
#[derive(Debug, PartialEq)]
pub enum Prepared {
    /// Start the workers.
    Ready,
    /// Not yet: show `message`, come back after `after`.
    Waiting { message: String, after: Duration },
    /// The run ends Failed: (reason, message).
    Failed(&'static str, String),
}

impl Prepared {
    pub fn waiting(message: impl Into<String>) -> Prepared {
        Prepared::Waiting {
            message: message.into(),
            after: POLL,
        }
    }
}

/// What collecting a measurement says.
#[derive(Debug, PartialEq)]
pub enum Collected {
    /// The result is in status; the run goes on.
    Recorded,
    /// The result is in status, but the run ends Failed: (reason, message).
    RecordedButFailed(&'static str, String),
    /// No usable result; the run ends Failed: (reason, message).
    Unusable(&'static str, String),
}

/// What wrapping up a finished run says.
#[derive(Debug, PartialEq)]
pub enum WrapUp {
    Done,
    /// Something is not written back yet: show `message` (when there is one), come back after
    /// `after`.
    Retry {
        message: Option<String>,
        after: Duration,
    },
}

/// One reconcile's view of a benchmark and its run.
pub struct Run<'a, K: Kind> {
    pub obj: &'a K,
    pub ctx: &'a Context,
    pub ns: String,
    pub name: String,
    /// The run id of the object's generation (see `labels::run_id`).
    pub id: String,
    pub generation: i64,
    pub status: K::Status,
    pub events: Vec<PendingEvent>,
    pub extra: K::Extra,
    /// What the schedule says this reconcile (see `schedule`).
    pub schedule: schedule::Decision,
}

/// What a phase handler wants next.
enum Next {
    /// The phase changed; run the next handler in this reconcile.
    Continue,
    /// Write status and come back after this action.
    Wait(Action),
}

/// Moves `obj`'s run on as far as it can go now, writes status, publishes Events.
pub async fn apply<K: Kind>(obj: &K, ctx: &Context, api: &Api<K>) -> Result<Action> {
    // Act on the freshest object, not the cache: our own status writes may not be in it yet.
    let obj = api.get(&obj.name_any()).await?;
    let generation = obj.meta().generation.unwrap_or(1);
    let before = obj.status_of().cloned().unwrap_or_default();
    let decision = scheduled::decide_for(&obj, before.run(), jiff::Timestamp::now());
    let mut run = Run {
        extra: K::load_extra(ctx, &obj).await?,
        obj: &obj,
        ctx,
        ns: obj.namespace().unwrap_or_default(),
        name: obj.name_any(),
        id: scheduled::run_id(&decision, &obj),
        generation,
        status: before.clone(),
        events: vec![],
        schedule: decision,
    };
    let action = run.advance().await?;
    let action = run.keep_schedule(action);
    K::before_write(&mut run);
    // Report objects go only once the status holding their results is stored.
    let persisted = if run.status != before {
        let written = status::write(api, &run.name, &run.status).await?;
        written.status_of().cloned().unwrap_or_default()
    } else {
        before
    };
    let kind = K::kind(&());
    let phase = run.status.run().phase.unwrap_or_default();
    ctx.metrics
        .family::<RunMetrics>()
        .set_phase(&kind, &run.ns, &run.name, phase);
    let reference = obj.object_ref(&());
    ctx.publish(&reference, &mut run.events).await;
    lifecycle::release_reports(ctx, &obj, &run.id, persisted.run()).await?;
    Ok(action)
}

/// Deletion: stop the workers, let the kind write back what its runs changed, then delete every
/// child. Works even if apply never ran; status is not trusted for anything but the run id to
/// forget.
pub async fn cleanup<K: Kind>(obj: &K, ctx: &Context, api: &Api<K>) -> Result<Action> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let kind = K::kind(&());
    let selector = labels::benchmark_selector(&kind, &name);
    pods::delete_workers(&ctx.client, &ns, &selector).await?;
    // The freshest copy of this very object (a re-created one of the same name is not ours).
    let obj = api
        .get_opt(&name)
        .await?
        .filter(|fresh| fresh.uid() == obj.uid())
        .unwrap_or_else(|| obj.clone());
    let run = scheduled::current_run(&obj);
    K::on_delete(ctx, &obj, api, &run).await?;
    ctx.reports().delete(&Owner::of(&obj), None).await?;
    if let Some(id) = obj.status_of().and_then(|s| s.run().run_id.as_deref()) {
        ctx.runs.forget(id);
    }
    ctx.metrics.family::<RunMetrics>().forget(&kind, &ns, &name);
    ctx.metrics
        .family::<ResultMetrics>()
        .forget(&kind, &ns, &name);
    Ok(Action::await_change())
}

impl<K: Kind> Run<'_, K> {
    /// Starts a new run when the run id changed (a new generation, or a scheduled round came
    /// due), then runs phase handlers until one waits.
    async fn advance(&mut self) -> Result<Action> {
        if let Some(action) = self.before_run().await? {
            return Ok(action);
        }
        if self.status.run().run_id.as_deref() != Some(self.id.as_str()) {
            self.stop_old_run().await?;
            if let Some(m) = K::retire(self).await? {
                self.say(format!("{m} before the new run starts"));
                return Ok(Action::requeue(POLL));
            }
            self.start_new_run().await?;
        }
        self.refuse_invalid_schedule();
        let plan = self.obj.repetition().samples();
        let budget = samples::budget(self.obj.budget(&self.ctx.config), &plan);
        for _ in 0..MAX_TRANSITIONS {
            if let Some(m) = crate::policy::deadline::exceeded(self.status.run(), budget) {
                self.fail(crate::policy::deadline::REASON, m);
                continue;
            }
            if let Next::Wait(action) = self.step().await? {
                return Ok(action);
            }
        }
        tracing::warn!(
            "{MAX_TRANSITIONS} phase changes in one reconcile; coming back in {}s",
            POLL.as_secs()
        );
        Ok(Action::requeue(POLL))
    }

    /// The handler of the current phase.
    async fn step(&mut self) -> Result<Next> {
        let phase = self.status.run().phase.unwrap_or_default();
        let measuring = matches!(phase, Phase::Preparing | Phase::Running | Phase::Collecting);
        let index = self.index();
        if measuring {
            if let Some(m) = self.out_of_plan() {
                self.fail("InvalidStatus", m);
                return Ok(Next::Continue);
            }
        }
        match phase {
            Phase::Pending | Phase::Queued => self.pending().await,
            Phase::Preparing => self.preparing(index).await,
            Phase::Running => self.running(index).await,
            Phase::Collecting => self.collecting(index).await,
            Phase::Succeeded | Phase::Failed => self.finished().await,
        }
    }

    pub fn set_phase(&mut self, phase: Phase, message: impl Into<String>) {
        lifecycle::set_phase(self.status.run_mut(), &mut self.events, phase, message);
    }

    pub fn condition(&mut self, type_: &str, ok: bool, reason: &str, message: impl Into<String>) {
        let generation = Some(self.generation);
        let run = self.status.run_mut();
        conditions::set(&mut run.conditions, type_, ok, reason, message, generation);
    }

    /// A condition whose status may also be "Unknown".
    pub fn condition_status(&mut self, type_: &str, status: &str, reason: &str, message: String) {
        let generation = Some(self.generation);
        let run = self.status.run_mut();
        conditions::set_status(
            &mut run.conditions,
            type_,
            status,
            reason,
            message,
            generation,
        );
    }

    /// A measurement or sample in status that the spec does not have (a forged status).
    fn out_of_plan(&self) -> Option<String> {
        let (index, count) = (self.index(), self.obj.count());
        let sample = self.slot().sample;
        let max = self.obj.repetition().samples().max();
        let outside = "the status was changed outside the operator";
        if count > samples::STRIDE {
            Some(format!(
                "the spec has {count} {}s, at most {} are supported",
                K::MEASUREMENT,
                samples::STRIDE
            ))
        } else if index >= count {
            Some(format!(
                "status names {} {index}, which the spec does not have ({outside})",
                K::MEASUREMENT
            ))
        } else if sample >= max {
            Some(format!(
                "status names sample {sample}, but the spec asks for at most {max} ({outside})"
            ))
        } else {
            None
        }
    }

    /// Shows what the run is doing or waiting for.
    pub fn say(&mut self, message: impl Into<String>) {
        self.status.run_mut().message = Some(message.into());
    }

    /// The measurement under way.
    pub fn index(&self) -> u32 {
        self.status.current().unwrap_or(0)
    }

    /// The sample under way.
    pub fn slot(&self) -> Slot {
        Slot {
            measurement: self.index(),
            sample: self.status.run().current_sample.unwrap_or(0),
        }
    }

    /// Selects every pod of this run.
    pub fn selector(&self) -> String {
        format!("{}={}", labels::RUN, self.id)
    }

    /// Selects the pods of one sample of this run.
    pub fn slot_selector(&self, slot: Slot) -> String {
        format!("{},{}={}", self.selector(), labels::STEP, slot.wire())
    }

    /// Ends the run Failed with `reason` (Ready=False) and `message`.
    pub fn fail(&mut self, reason: &str, message: String) {
        self.condition(READY, false, reason, message.clone());
        self.finish(Phase::Failed, message);
    }

    /// Ends the run in `phase`: the kind's last words, the completion time, the phase.
    fn finish(&mut self, phase: Phase, message: String) {
        K::on_finish(self);
        self.status.run_mut().completion_time = Some(conditions::now());
        self.set_phase(phase, message);
    }
}
