//! The run model: one reconcile's view of a benchmark and its run ([`Run`]), and what a kind
//! adds to it ([`Plan`], [`Hooks`]).
//!
//! A `Run` keeps its fields to itself. A kind's hooks read the object, the context and the
//! status, write the kind's own status fields, set conditions, say what the run waits for and
//! add Events, all through the methods below; none of them moves the run to another phase:
//! only the driver does (driver::transition), so every phase change goes through one place that
//! also sets phaseSince and the phase Event.

pub mod kinds;
mod plan;

use std::collections::BTreeMap;
use std::future::Future;

use kube::api::Api;
use kube::runtime::events::EventType;
use kube::ResourceExt;
use protocol::worker::FinalReport;

use crds::result::BenchmarkResultSpec;

use crate::base::conditions;
use crate::base::error::Result;
use crate::base::events::PendingEvent;
use crate::base::labels;
use crate::base::metrics::Metrics;
use crate::base::outcome::Step;
use crate::context::Context;
use crate::policy::samples::Slot;
use crate::policy::schedule::Decision;
use crate::store::run_record::Ended;
pub use plan::{MeasurementPlan, Outline, Plan, Reading, RunState, SamplePlan};

/// A kind's own steps in a run, which write. Each is idempotent (a restarted or stale operator
/// repeats it and converges), and each says what comes next with one [`Step`]. Written as
/// plain `async fn` in the kinds. A member with a default is one a kind may have nothing to do
/// for; the default says why. It is in this file because it and [`Run`] name each other.
pub trait Hooks: Plan {
    /// What the kind reads once per reconcile besides the object (egress: its offload records
    /// and what its node selectors matched for run `run`).
    type Extra: Send + Sync;

    /// The object as the run sees it, and its Extra (egress: a matrix's node selectors
    /// replaced by the nodes they matched when the run began). Never written back.
    fn load(
        ctx: &Context,
        obj: Self,
        run: &str,
    ) -> impl Future<Output = Result<(Self, Self::Extra)>> + Send;
    /// The spec against the admin's lists and caps and against the cluster; Fail refuses it
    /// (its reason also goes on the Invalid condition).
    fn check(run: &mut Run<'_, Self>) -> impl Future<Output = Result<Step>> + Send;
    /// Before a new run starts: write back what earlier runs changed and clear their children.
    /// Wait keeps the new run from starting yet.
    fn retire(run: &mut Run<'_, Self>) -> impl Future<Output = Result<Step>> + Send;
    /// What measurement `index` needs before its workers start (a sweep target scaled, an
    /// offload profile applied).
    fn prepare(run: &mut Run<'_, Self>, index: u32) -> impl Future<Output = Result<Step>> + Send;
    /// While measurement `index`'s workers run, on every reconcile of the Running phase (a
    /// route changed under load). Wait says when it wants to act next; Fail ends the run.
    /// Default: a kind that changes nothing under load has nothing to do.
    fn while_running(
        _run: &mut Run<'_, Self>,
        _index: u32,
    ) -> impl Future<Output = Result<Step>> + Send {
        async { Ok(Step::Done) }
    }
    /// Records one sample's verified reports as its measurement's result in status (the
    /// latest sample's, in full). The driver has read the sample's figures from them already,
    /// so they make a result; Fail ends the run once the sample is recorded (too many failed
    /// requests, streams that ended early).
    fn collect(
        run: &mut Run<'_, Self>,
        slot: Slot,
        reports: &BTreeMap<String, FinalReport>,
    ) -> impl Future<Output = Result<Step>> + Send;
    /// After the last measurement, before the run counts as Succeeded: Wait holds it.
    /// Default: a kind whose runs change nothing that must be back before a success (what
    /// they change, `wrap_up` writes back after it) holds nothing.
    fn before_success(_run: &mut Run<'_, Self>) -> impl Future<Output = Result<Step>> + Send {
        async { Ok(Step::Done) }
    }
    /// A run that ended (either way): its summary into status, then what it changed written
    /// back (its pods are gone per policy already). Wait comes back.
    fn wrap_up(run: &mut Run<'_, Self>) -> impl Future<Output = Result<Step>> + Send;
    /// Deletion: write back what the object's runs changed and delete the kind's own children.
    /// Wait keeps the finalizer (and the object) until it is done. `run` is the current run id,
    /// from the object itself.
    fn on_delete(
        ctx: &Context,
        obj: &Self,
        api: &Api<Self>,
        run: &str,
    ) -> impl Future<Output = Result<Step>> + Send;
    /// Just before status is written: the kind's own status fields that show what this
    /// reconcile did (printer columns, what the Extra learned).
    fn show(run: &mut Run<'_, Self>);
    /// Publishes the results its status holds on /metrics (a new leader's gauges start empty).
    fn export_results(&self, metrics: &Metrics);
    /// The kind's own parts of the run's BenchmarkResult, once the driver has built it from
    /// the stored reports (a sweep's scaling table, the ingress controller's image in the
    /// cluster facts). Best effort. Default: a kind whose result is its measurements adds
    /// nothing.
    fn complete_result(
        _run: &Run<'_, Self>,
        _result: &mut BenchmarkResultSpec,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// One reconcile's view of a benchmark and its run.
pub struct Run<'a, K: Hooks> {
    obj: &'a K,
    ctx: &'a Context,
    ns: String,
    name: String,
    /// The run the object should have now (see `driver::scheduled::run_id`).
    id: String,
    generation: i64,
    status: K::Status,
    events: Vec<PendingEvent>,
    extra: K::Extra,
    /// What the schedule says this reconcile (see `policy::schedule`).
    schedule: Decision,
    /// How the run ended, decided this reconcile and not yet in its run record.
    ended: Option<Ended>,
    /// The samples whose figures this reconcile recorded (folded once a stored status holds
    /// them: `results::fold`).
    recorded: Vec<Slot>,
    /// The clients that have reported of those the sample awaits, while it runs.
    progress: Option<(usize, usize)>,
}

impl<'a, K: Hooks> Run<'a, K> {
    /// `obj`'s run `id` this reconcile, starting from `status` (as read).
    pub fn new(
        obj: &'a K,
        ctx: &'a Context,
        id: String,
        status: K::Status,
        schedule: Decision,
        extra: K::Extra,
    ) -> Run<'a, K> {
        Run {
            obj,
            ctx,
            ns: obj.namespace().unwrap_or_default(),
            name: obj.name_any(),
            id,
            generation: obj.meta().generation.unwrap_or(1),
            status,
            events: vec![],
            extra,
            schedule,
            ended: None,
            recorded: vec![],
            progress: None,
        }
    }

    pub fn obj(&self) -> &'a K {
        self.obj
    }

    pub fn ctx(&self) -> &'a Context {
        self.ctx
    }

    /// The benchmark's namespace.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// The benchmark's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The run id (see `base::labels::run_id`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The benchmark's uid (from its metadata, which only the API server writes).
    pub fn uid(&self) -> &'a str {
        self.obj.meta().uid.as_deref().unwrap_or_default()
    }

    pub fn generation(&self) -> i64 {
        self.generation
    }

    pub fn status(&self) -> &K::Status {
        &self.status
    }

    /// The status to write; its phase is the driver's (see the module's header).
    pub fn status_mut(&mut self) -> &mut K::Status {
        &mut self.status
    }

    pub fn extra(&self) -> &K::Extra {
        &self.extra
    }

    pub fn extra_mut(&mut self) -> &mut K::Extra {
        &mut self.extra
    }

    /// What the schedule says this reconcile.
    pub fn schedule(&self) -> &Decision {
        &self.schedule
    }

    /// How the run ended, when the driver ended it this reconcile and its run record does not
    /// hold that yet (`store::run_record`).
    pub fn ended(&self) -> Option<&Ended> {
        self.ended.as_ref()
    }

    /// The driver ended the run (only `driver::transition` calls this).
    pub fn set_ended(&mut self, ended: Ended) {
        self.ended = Some(ended);
    }

    /// The end is in the run record.
    pub fn end_recorded(&mut self) {
        self.ended = None;
    }

    /// Whether the status holds another run than this one (a new generation, a scheduled
    /// round that came due, or none yet).
    pub fn is_new(&self) -> bool {
        self.status.run().run_id.as_deref() != Some(self.id.as_str())
    }

    /// An Event to publish once the status is written.
    pub fn event(&mut self, type_: EventType, reason: &str, note: impl Into<String>) {
        self.events.push((type_, reason.to_string(), note.into()));
    }

    /// Events to publish once the status is written.
    pub fn events(&mut self, events: impl IntoIterator<Item = PendingEvent>) {
        self.events.extend(events);
    }

    /// Sample `slot`'s figures were recorded in status this reconcile.
    pub fn note_recorded(&mut self, slot: Slot) {
        self.recorded.push(slot);
    }

    /// The samples whose figures this reconcile recorded, in order.
    pub fn recorded(&self) -> &[Slot] {
        &self.recorded
    }

    /// How many of the sample's clients have reported, of how many (the driver's, while
    /// the sample runs).
    pub fn set_progress(&mut self, reported: usize, expected: usize) {
        self.progress = Some((reported, expected));
    }

    /// What [`Run::set_progress`] said this reconcile.
    pub fn progress(&self) -> Option<(usize, usize)> {
        self.progress
    }

    /// The samples recorded this reconcile (see [`Run::note_recorded`]), taken.
    pub fn take_recorded(&mut self) -> Vec<Slot> {
        std::mem::take(&mut self.recorded)
    }

    /// The Events gathered so far (they go to the caller, to publish).
    pub fn take_events(&mut self) -> Vec<PendingEvent> {
        std::mem::take(&mut self.events)
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

    /// How messages name a sample: "step 1", or "step 1 sample 2/3" when there are several.
    pub fn describe(&self, slot: Slot) -> String {
        let what = self.obj.measurement(slot.measurement).name;
        let plan = self.obj.outline().repetition.samples();
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

    /// Selects every pod of this run.
    pub fn selector(&self) -> String {
        format!("{}={}", labels::RUN, self.id)
    }

    /// Selects the pods of one sample of this run.
    pub fn slot_selector(&self, slot: Slot) -> String {
        format!("{},{}={}", self.selector(), labels::STEP, slot.wire())
    }
}
