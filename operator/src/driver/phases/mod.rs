//! The phase handlers, one file per phase; each is idempotent and says what comes next
//! ([`Next`](super::transition::Next)). A new phase is a new file here, a variant of `crds::Phase`
//! and an arm of `machine::handle`.
//!
//! Pending and Queued: `admit` (the spec checked, the queue). Preparing: `prepare` (the pause
//! between samples, the kind's preparation, the workers). Running: `measure` (reports awaited,
//! lost workers and the measurement's deadline). Collecting: `collect` (the sample's result and
//! statistics; another sample, the next measurement, or the end). Succeeded and Failed:
//! `finish` (pods per policy, the BenchmarkResult, the kind's wrap-up). `gates`: SLO gates,
//! judged while measuring and collecting.

pub(in crate::driver) mod admit;
pub(in crate::driver) mod collect;
pub(in crate::driver) mod finish;
mod gates;
pub(in crate::driver) mod measure;
pub(in crate::driver) mod prepare;

use std::collections::BTreeMap;

use protocol::worker::Role;

use super::transition::{fail, Next};
use crate::base::outcome::Step;
use crate::policy::samples::Slot;
use crate::run::{Hooks, Run};
use crate::store::registry::RunSpec;

/// Tells the registry who may register for one sample (idempotent): the worker pods it names
/// (each proves it is one with its pod's ServiceAccount token, see `api::pod_tokens`).
pub(in crate::driver) fn announce<K: Hooks>(run: &Run<'_, K>, slot: Slot) {
    let obj = run.obj();
    let sample = obj.sample(run.id(), slot);
    let measurement = obj.measurement(slot.measurement);
    let spec = RunSpec {
        kind: K::kind(&()).into_owned(),
        namespace: run.ns().to_string(),
        benchmark: run.name().to_string(),
        uid: run.uid().to_string(),
        step: slot.wire(),
        workers: sample.workers,
        report_kind: measurement.report_kind,
        pairing: sample.pairing,
        start_lead: measurement.start_lead,
    };
    run.ctx().runs.announce(run.id(), spec);
}

/// What wakes `run`'s benchmark later (from a task of its own): a reconcile of it at once.
pub(in crate::driver) fn wake_again<K: Hooks>(run: &Run<'_, K>) -> impl FnOnce() + Send + 'static {
    run.ctx().waker(&K::kind(&()), run.ns(), run.name())
}

/// How many of `workers` are clients (whose reports end a measurement).
pub(in crate::driver) fn clients(workers: &BTreeMap<String, Role>) -> usize {
    workers.values().filter(|r| **r == Role::Client).count()
}

/// What a hook's [`Step`] means for the phase it runs in: Done goes on (None), Wait shows its
/// message and comes back, Fail ends the run.
pub(in crate::driver) fn after_hook<K: Hooks>(run: &mut Run<'_, K>, step: Step) -> Option<Next> {
    match step {
        Step::Done => None,
        Step::Wait { message, after } => {
            if let Some(m) = message {
                run.say(m);
            }
            Some(Next::after(after))
        }
        Step::Fail(f) => {
            fail(run, f);
            Some(Next::Continue)
        }
    }
}
