//! The run model: one reconcile's view of a benchmark and its run ([`Run`]), and what a kind
//! adds to it ([`Plan`], [`Hooks`]).
//!
//! A `Run` keeps its fields to itself. A kind's hooks read the object, the context and the
//! status, write the kind's own status fields, set conditions, say what the run waits for and
//! add Events, all through the methods below; none of them moves the run to another phase:
//! only the driver does (driver::transition), so every phase change goes through one place that
//! also sets phaseSince and the phase Event.

pub mod kind;
pub mod kinds;

use kube::runtime::events::EventType;
use kube::ResourceExt;

use crate::base::conditions;
use crate::base::events::PendingEvent;
use crate::base::labels;
use crate::context::Context;
use crate::policy::samples::Slot;
use crate::policy::schedule::Decision;
use crate::store::run_record::Ended;
pub use kind::{Hooks, Plan, RunState};

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

    /// The Events gathered so far (they go to the caller, to publish).
    /// Sample `slot`'s figures were recorded in status this reconcile.
    pub fn note_recorded(&mut self, slot: Slot) {
        self.recorded.push(slot);
    }

    /// The samples recorded this reconcile (see [`Run::note_recorded`]).
    pub fn take_recorded(&mut self) -> Vec<Slot> {
        std::mem::take(&mut self.recorded)
    }

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

    /// Selects every pod of this run.
    pub fn selector(&self) -> String {
        format!("{}={}", labels::RUN, self.id)
    }

    /// Selects the pods of one sample of this run.
    pub fn slot_selector(&self, slot: Slot) -> String {
        format!("{},{}={}", self.selector(), labels::STEP, slot.wire())
    }
}
