//! What a kind's spec asks for, pure: [`Plan`] reads the spec (and, for figures, a sample's
//! verified reports) and writes nothing. The kind's steps that do write are [`super::Hooks`].
//!
//! Most of a spec is data the driver reads as it is ([`Outline`], [`MeasurementPlan`],
//! [`SamplePlan`], [`Reading`]); the trait has a member only where a kind computes something.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::NamespaceResourceScope;
use kube::core::object::HasStatus;
use kube::Resource;
use protocol::worker::{FinalReport, Role};
use protocol::ReportKind;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crds::gates::Gate;
use crds::history::{MetricTolerance, Repetition};
use crds::topology::PairResult;
use crds::{CleanupPolicy, RunStatus};

use crate::admin::config::Config;
use crate::policy::queue::Contender;
use crate::policy::samples::{Figure, Slot};
use crate::store::registry::Pairing;

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

/// The shape of a run, as its spec says.
pub struct Outline<'a> {
    /// How messages name one measurement: "step" or "case".
    pub noun: &'static str,
    /// How many measurements the spec asks for.
    pub count: u32,
    pub cleanup: CleanupPolicy,
    /// The spec's samples, history, baseline and schedule.
    pub repetition: &'a Repetition,
    /// The spec's SLO gates.
    pub gates: &'a [Gate],
    /// Whether samples are taken in rounds over every measurement, in alternating order (A B
    /// C, then C B A) so that drift of the machine favours none; false: every sample of one
    /// measurement before the next, as a sweep or an offload profile wants (each change of
    /// measurement costs a rollout or a Job there).
    pub interleaved: bool,
    /// The figures judged against a baseline when the spec names none, with their tolerance
    /// in percent.
    pub judged_by_default: &'static [(&'static str, f64)],
    /// Whether its workers can have Services in front of them (egress's Service path):
    /// deleting workers then lists and deletes those too, else it sends no request for them.
    pub services: bool,
}

impl Outline<'_> {
    /// [`Outline::judged_by_default`] as a baseline's tolerances.
    pub fn default_judged(&self) -> Vec<MetricTolerance> {
        self.judged_by_default
            .iter()
            .map(|(name, tolerance_percent)| MetricTolerance {
                name: (*name).into(),
                tolerance_percent: *tolerance_percent,
                better: None,
            })
            .collect()
    }
}

/// One measurement (a step or a case) as the spec asks for it.
pub struct MeasurementPlan {
    /// How messages name it, e.g. "step 2 (traefik)" or "case vxlan".
    pub name: String,
    /// The kind of report its clients deliver.
    pub report_kind: ReportKind,
    /// How far into it its live progress counts for an SLO gate's early abort (a warm-up's
    /// progress does not).
    pub live_from: Duration,
    /// How long it may take once its workers have started (the driver adds the admin's
    /// worker start timeout).
    pub after_start: Duration,
    /// How far ahead the barrier sets the workers' common start once the last one registered
    /// (`store::registry::START_LEAD` unless the kind needs more).
    pub start_lead: Duration,
}

/// The workers of one sample.
pub struct SamplePlan {
    /// Each worker by pod name (named and labelled after the slot). Clients end the sample
    /// with their reports; servers serve until then.
    pub workers: BTreeMap<String, Role>,
    /// Which server each client connects to and who starts later (default: every client gets
    /// every server, all start together).
    pub pairing: Pairing,
}

/// What one sample's verified reports say.
#[derive(Debug, Default)]
pub struct Reading {
    /// The figures, main figure first (requests/s, receiver bits/s): what samples, results
    /// and verdicts are made of.
    pub figures: Vec<Figure>,
    /// What distinguishes the measurement in a result (cpu, offload profile, where it ran
    /// ...): from the spec and the reports, never from status.
    pub parameters: BTreeMap<String, String>,
    /// A row per pair of the sample, for a result's node-pair matrix (the BenchmarkResult's
    /// row type; none without a topology).
    pub pairs: Vec<PairResult>,
}

/// What a kind's spec asks for. Pure: no client, nothing written. Its status comes with the
/// object (`HasStatus`, derived by kube).
pub trait Plan:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + HasStatus<Status: RunState>
    + Clone
    + DeserializeOwned
    + Serialize
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    fn outline(&self) -> Outline<'_>;
    /// Measurement `index`.
    fn measurement(&self, index: u32) -> MeasurementPlan;
    /// The whole run's deadline, from the moment it leaves the queue.
    fn budget(&self, config: &Config) -> Duration;
    /// The run as the queue sees it (what it claims: targets, nodes).
    fn contender(&self) -> Contender;
    /// The workers of one sample of a measurement.
    fn sample(&self, run: &str, slot: Slot) -> SamplePlan;
    /// Their pods.
    fn pods(&self, run: &str, slot: Slot, config: &Config) -> Vec<Pod>;
    /// One sample's verified reports read. Err when they make no result (the run fails
    /// BadReport).
    fn read(
        &self,
        run: &str,
        slot: Slot,
        reports: &BTreeMap<String, FinalReport>,
    ) -> Result<Reading, String>;
}
