//! What a benchmark kind adds to the shared run driver, in two parts: [`Plan`], pure and
//! synchronous (what the kind's spec asks for: measurements, workers, deadlines, figures), and
//! [`Hooks`], the kind's own steps in a run, each idempotent and each answering with a
//! [`Step`] (done, wait, or fail the run). A new kind implements both (see ingress/kind.rs,
//! egress/kind/) and is wired in main.rs (docs/architecture.md lists where).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::Resource;
use protocol::worker::{FinalReport, Role};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crds::history::{MetricTolerance, Repetition};
use crds::result::MeasurementStats;
use crds::{CleanupPolicy, RunStatus};

use super::Run;
use crate::admin::config::Config;
use crate::base::error::Result;
use crate::base::metrics::Metrics;
use crate::base::outcome::Step;
use crate::context::Context;
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

/// What a kind's spec asks for. Pure: no client, no status written.
pub trait Plan:
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
    /// The run as the queue sees it (what it claims: targets, nodes).
    fn contender(&self) -> Contender;
    /// The workers of one sample of a measurement by pod name (named and labelled after the
    /// slot). Clients end the sample with their reports; servers serve until then.
    fn workers(&self, run: &str, slot: Slot) -> BTreeMap<String, Role>;
    /// A case with a topology: a row per pair of one sample, from its verified reports (for the
    /// BenchmarkResult's node-pair matrix). None by default.
    fn pair_rows(
        &self,
        _run: &str,
        _slot: Slot,
        _reports: &BTreeMap<String, FinalReport>,
    ) -> Vec<crds::egress::PairResult> {
        vec![]
    }
    /// Which server each client of the sample connects to and who starts later (none: every
    /// client gets every server, all start together).
    fn pairing(&self, _run: &str, _slot: Slot) -> Pairing {
        Pairing::default()
    }
    /// The kind of report measurement `index`'s clients deliver.
    fn report_kind(&self, index: u32) -> protocol::ReportKind;
    /// Their pods.
    fn pods(&self, run: &str, slot: Slot, config: &Config) -> Vec<Pod>;
    /// The spec's samples, history, baseline and schedule.
    fn repetition(&self) -> &Repetition;
    /// The figures of one sample from its verified reports, main figure first (requests/s,
    /// receiver bits/s): what samples, results and verdicts are made of. Err when the reports
    /// make no result (the run fails BadReport).
    fn figures(
        &self,
        run: &str,
        slot: Slot,
        reports: &BTreeMap<String, FinalReport>,
    ) -> std::result::Result<Vec<Figure>, String>;
    /// The spec's SLO gates.
    fn gates(&self) -> &[crds::gates::Gate];
    /// How far into measurement `index` its live progress counts for an SLO gate's early
    /// abort (the warm-up's progress does not).
    fn live_from(&self, _index: u32) -> Duration {
        Duration::ZERO
    }
    /// Whether samples are taken in rounds over every measurement, in alternating order (A B C,
    /// then C B A) so that drift of the machine favours none; false (the default): every
    /// sample of one measurement before the next, as a sweep or an offload profile wants (each
    /// change of measurement costs a rollout or a Job there).
    fn interleaved(&self) -> bool {
        false
    }
    /// The figures judged against a baseline when the spec names none.
    fn default_judged() -> Vec<MetricTolerance>;
    /// What distinguishes measurement `slot.measurement` in a result (cpu, offload profile,
    /// where it ran ...): from the spec and the sample's verified reports, never from status.
    fn parameters(
        &self,
        _run: &str,
        _slot: Slot,
        _reports: &BTreeMap<String, FinalReport>,
    ) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
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
    /// Shows a measurement's statistics after a sample (printer columns).
    fn show_statistics(_status: &mut Self::Status, _stats: &MeasurementStats) {}
    /// Shows how many workers have reported (default: nothing to show).
    fn show_progress(_status: &mut Self::Status, _reported: usize, _expected: usize) {}
    /// Publishes the results its status holds on /metrics (a new leader's gauges start empty).
    fn export_results(&self, _metrics: &Metrics) {}
}

/// A kind's own steps in a run. Each is idempotent (a restarted or stale operator repeats it
/// and converges), and each says what comes next with one [`Step`]. Written as plain `async
/// fn` in the kinds.
pub trait Hooks: Plan {
    /// What the kind reads once per reconcile besides the object (egress: its offload records
    /// and what its node selectors matched for run `run`).
    type Extra: Send + Sync;

    fn load_extra(
        ctx: &Context,
        obj: &Self,
        run: &str,
    ) -> impl Future<Output = Result<Self::Extra>> + Send;
    /// The object as the run sees it, from what `load_extra` read (egress: a matrix's node
    /// selectors replaced by the nodes they matched when the run began). Never written back.
    fn resolve(obj: Self, _extra: &Self::Extra) -> Self {
        obj
    }
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
    fn while_running(
        _run: &mut Run<'_, Self>,
        _index: u32,
    ) -> impl Future<Output = Result<Step>> + Send {
        async { Ok(Step::Done) }
    }
    /// Records one sample's verified reports as its measurement's result in status (the
    /// latest sample's, in full). The driver has made the sample's figures from them already,
    /// so they make a result; Fail ends the run once the sample is recorded (too many failed
    /// requests, streams that ended early).
    fn collect(
        run: &mut Run<'_, Self>,
        slot: Slot,
        reports: &BTreeMap<String, FinalReport>,
    ) -> impl Future<Output = Result<Step>> + Send;
    /// After the last measurement, before the run counts as Succeeded. Wait holds it.
    fn before_success(_run: &mut Run<'_, Self>) -> impl Future<Output = Result<Step>> + Send {
        async { Ok(Step::Done) }
    }
    /// A finished run: write back what it changed (its pods are gone per policy already).
    /// Wait comes back.
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
    /// Last words on a run that ends (either way), before its phase is set.
    fn on_finish(_run: &mut Run<'_, Self>) {}
    /// Just before status is written.
    fn before_write(_run: &mut Run<'_, Self>) {}
    /// The ingress controller's image for the result's environment fingerprint, when the kind
    /// can see it (an IngressBenchmark's sweep target). Best effort: None when unknown.
    fn ingress_controller(_run: &Run<'_, Self>) -> impl Future<Output = Option<String>> + Send {
        async { None }
    }
}
