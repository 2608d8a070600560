//! Worker reports are stored the moment they arrive, one ConfigMap per worker and step, in the
//! operator's namespace: benchmark authors cannot write there, so they can neither add a
//! "worker" to a result nor take a report's name. Owner references cannot cross namespaces, so
//! each object is tied to its benchmark by labels (kind, namespace, name, uid, run, step,
//! worker) and by a name derived from all of them. An object is read back only if its name,
//! labels and content all agree; the phases delete a run's reports only once the status holding
//! their result is persisted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use kube::runtime::events::EventType;
use kube::Client;
use prometheus::IntCounterVec;
use protocol::worker::{FinalReport, Role};

use crate::base::events::PendingEvent;
use crate::base::labels;
use crate::base::metrics::{counter, Family, Metrics};
use crate::base::text::clip;
pub use crate::store::owner::Owner;
use crate::store::registry::RunSpec;

pub mod folded;
mod sink;
mod watched;
pub use folded::Folded;
pub use sink::ApiSink;
pub use watched::WatchedReports;

/// Where accepted reports go: ConfigMaps in the operator's namespace (`ApiSink`).
pub trait ReportSink: Send + Sync {
    fn store<'a>(
        &'a self,
        run: &'a str,
        spec: &'a RunSpec,
        report: &'a FinalReport,
    ) -> BoxFuture<'a, Result<(), String>>;
}

/// The `reason` labels of `netbench_reports_rejected_total`: a forged object in the operator's
/// namespace, a report-labelled object in the benchmark's, an object holding a report's name
/// (replaced), a second and different report of one worker (refused).
pub const REPORT_REJECTIONS: [&str; 4] = ["forged", "outside", "shadowed", "conflict"];

/// `netbench_reports_rejected_total` (each reason's series exists at 0 from the start).
pub struct ReportMetrics {
    pub rejected: IntCounterVec,
}

impl Family for ReportMetrics {
    fn register(registry: &prometheus::Registry) -> Self {
        let rejected = counter(
            registry,
            "netbench_reports_rejected_total",
            "Report objects ignored or refused as forged or conflicting, by reason",
            &["reason"],
        );
        for reason in REPORT_REJECTIONS {
            rejected.with_label_values(&[reason]);
        }
        ReportMetrics { rejected }
    }
}

const KEY: &str = "report.json";
/// Event reason of every forged or shadowed report object.
pub const FORGED: &str = "ForgedReport";

/// Selects `owner`'s report objects: all, one run's (folded samples included), or one step's
/// worker reports (folded samples not).
fn selector(owner: &Owner, run: Option<&str>, step: Option<u32>) -> String {
    let mut s: Vec<String> = selected_labels(owner, run, step)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if step.is_some() {
        s.push(format!("!{}", labels::SAMPLE));
    }
    s.join(",")
}

/// The labels [`selector`] asks for (its `!sample` term aside).
fn selected_labels(
    owner: &Owner,
    run: Option<&str>,
    step: Option<u32>,
) -> Vec<(&'static str, String)> {
    let mut l = vec![
        (labels::MANAGED_BY, labels::OPERATOR.to_string()),
        (labels::REPORT, "true".to_string()),
        (labels::NAMESPACE, owner.namespace.clone()),
        (labels::BENCHMARK_UID, owner.uid.clone()),
    ];
    if let Some(run) = run {
        l.push((labels::RUN, run.to_string()));
    }
    if let Some(step) = step {
        l.push((labels::STEP, step.to_string()));
    }
    l
}

/// The labels every report object of step `step` of `run` carries (a worker's report adds its
/// worker, a folded sample its mark).
fn step_labels(owner: &Owner, run: &str, step: u32) -> BTreeMap<String, String> {
    let mut l = labels::run_labels(&owner.kind, &owner.name, run);
    for (k, v) in [
        (labels::NAMESPACE, owner.namespace.clone()),
        (labels::BENCHMARK_UID, owner.uid.clone()),
        (labels::STEP, step.to_string()),
        (labels::REPORT, "true".to_string()),
    ] {
        l.insert(k.to_string(), v);
    }
    l
}

/// Every label a report object of `worker` (step `step` of `run`) carries.
fn report_labels(owner: &Owner, run: &str, step: u32, worker: &str) -> BTreeMap<String, String> {
    let mut l = step_labels(owner, run, step);
    l.insert(labels::WORKER.to_string(), worker.to_string());
    l
}

/// A hash of everything that identifies an object of step `step` of `run` (`what`: the worker,
/// or "sample"), so benchmarks of the same name in two namespaces never meet. FNV-1a: stable
/// across versions and platforms (std's hasher is not).
fn identity_hash(owner: &Owner, run: &str, step: u32, what: &str) -> u64 {
    let identity = format!(
        "{}/{}/{}/{run}/{step}/{what}",
        owner.kind, owner.namespace, owner.uid
    );
    identity.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The object's name: the worker pod's (which holds run and step) and the identity's hash.
pub fn object_name(owner: &Owner, run: &str, step: u32, worker: &str) -> String {
    let hash = identity_hash(owner, run, step, worker);
    format!("{worker}-report-{hash:016x}")
}

/// The object holding `report` of a worker of `run`, in `namespace`.
fn report_object(
    namespace: &str,
    owner: &Owner,
    run: &str,
    report: &FinalReport,
) -> Result<ConfigMap, serde_json::Error> {
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(object_name(owner, run, report.step, &report.worker)),
            namespace: Some(namespace.to_string()),
            labels: Some(report_labels(owner, run, report.step, &report.worker)),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            KEY.to_string(),
            serde_json::to_string(report)?,
        )])),
        ..Default::default()
    })
}

/// Whether `cm`'s name and labels are exactly what [`Store::store`] writes for a worker of step
/// `step` accepted by `expected`; the worker if so, what is wrong otherwise.
fn verify_name(
    cm: &ConfigMap,
    owner: &Owner,
    run: &str,
    step: u32,
    expected: impl Fn(&str) -> bool,
) -> Result<String, String> {
    let empty = BTreeMap::new();
    let have = cm.metadata.labels.as_ref().unwrap_or(&empty);
    let worker = have
        .get(labels::WORKER)
        .ok_or_else(|| format!("it has no {} label", labels::WORKER))?;
    if !expected(worker) {
        return Err(format!(
            "{worker} is not a worker of step {step} of run {run}"
        ));
    }
    for (k, v) in report_labels(owner, run, step, worker) {
        if have.get(&k) != Some(&v) {
            return Err(format!("label {k} is not {v:?}"));
        }
    }
    let name = object_name(owner, run, step, worker);
    if cm.metadata.name.as_deref() != Some(name.as_str()) {
        return Err(format!("a report of {worker} is named {name}"));
    }
    Ok(worker.clone())
}

/// Whether `cm` is exactly what [`Store::store`] writes for a worker of step `step` accepted by
/// `expected`; its report if so, what is wrong otherwise.
fn verify(
    cm: &ConfigMap,
    owner: &Owner,
    run: &str,
    step: u32,
    expected: impl Fn(&str) -> bool,
) -> Result<FinalReport, String> {
    let worker = verify_name(cm, owner, run, step, expected)?;
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(KEY))
        .ok_or_else(|| format!("it has no {KEY}"))?;
    let report: FinalReport =
        serde_json::from_str(text).map_err(|e| format!("unreadable report: {e}"))?;
    if report.worker != worker || report.step != step {
        return Err(format!(
            "its report claims worker {} step {}, its labels worker {worker} step {step}",
            report.worker, report.step
        ));
    }
    Ok(report)
}

/// Deletes `existing` only if it is still that very object (same uid and version); one that
/// changed or went meanwhile is left for the caller's next look.
async fn delete_exactly(api: &Api<ConfigMap>, existing: &ConfigMap) -> Result<(), kube::Error> {
    let only_this = DeleteParams {
        preconditions: Some(Preconditions {
            uid: existing.metadata.uid.clone(),
            resource_version: existing.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    let name = existing.metadata.name.as_deref().unwrap_or("");
    match api.delete(name, &only_this).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether labels claim an object is a report of `owner` or of its run `run`.
fn poses_as_report(have: Option<&BTreeMap<String, String>>, owner: &Owner, run: &str) -> bool {
    let Some(have) = have.filter(|l| l.contains_key(labels::REPORT)) else {
        return false;
    };
    let ours = labels::run_labels(&owner.kind, &owner.name, run);
    [labels::RUN, labels::BENCHMARK]
        .iter()
        .any(|k| have.get(*k).is_some() && have.get(*k) == ours.get(*k))
}

/// The stored reports of one step, and the objects that claimed to be one but were not.
#[derive(Debug, Default)]
pub struct Loaded {
    /// By worker name; only expected workers, each report verified against its object.
    pub reports: BTreeMap<String, FinalReport>,
    /// "ConfigMap ns/name: why", for a Warning Event.
    pub rejected: Vec<String>,
}

/// What [`Store::store`] did.
#[derive(Debug, PartialEq)]
pub enum Stored {
    New,
    /// The same report was already stored (a retried post).
    Again,
    /// An object that was not this report held its name; it was replaced (why).
    Replaced(String),
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("report does not serialize: {0}")]
    Serialize(#[from] serde_json::Error),
    /// A different report of the same worker is stored: the first one stands.
    #[error("{0}")]
    Conflict(String),
}

/// Report objects in the operator's namespace.
#[derive(Clone)]
pub struct Store {
    client: Client,
    namespace: String,
    /// The operator's watch of its report objects (read once it has listed them).
    watched: Option<Arc<WatchedReports>>,
}

impl Store {
    pub fn new(client: Client, namespace: impl Into<String>) -> Store {
        Store {
            client,
            namespace: namespace.into(),
            watched: None,
        }
    }

    /// Reads from `watched` where it can answer, and tells it what this store writes (see
    /// [`WatchedReports`]).
    pub fn reading(mut self, watched: Arc<WatchedReports>) -> Store {
        self.watched = Some(watched);
        self
    }

    /// Whether the watch has listed and holds no report object of `owner` (of its run `run`):
    /// worker reports and folded samples alike.
    pub fn holds_none(&self, owner: &Owner, run: Option<&str>) -> bool {
        self.watch_holds_none(owner, run, None, |_| true)
    }

    /// Whether the watch has listed and holds no object `selector(owner, run, step)` (and the
    /// `sample` test on its labels) selects: a delete of them would delete nothing (one
    /// request less for every new run and finished sample). An object stored in the last
    /// milliseconds may be missed, as a delete sent a moment earlier would have missed it.
    fn watch_holds_none(
        &self,
        owner: &Owner,
        run: Option<&str>,
        step: Option<u32>,
        sample: impl Fn(bool) -> bool,
    ) -> bool {
        let Some(watched) = self.watched.as_ref().and_then(|w| w.ready()) else {
            return false;
        };
        let wanted = selected_labels(owner, run, step);
        watched
            .find(|cm| {
                cm.metadata.labels.as_ref().is_some_and(|have| {
                    sample(have.contains_key(labels::SAMPLE))
                        && wanted.iter().all(|(k, v)| have.get(*k) == Some(v))
                })
            })
            .is_none()
    }

    /// The watch's objects of step `step` of `run` (its worker reports, not folded samples).
    fn watched_step(&self, owner: &Owner, run: &str, step: u32) -> Option<Vec<Arc<ConfigMap>>> {
        let watched = self.watched.as_ref()?.ready()?;
        // What the API server would list with `selector(owner, Some(run), Some(step))`.
        let wanted = selected_labels(owner, Some(run), Some(step));
        Some(watched.state_filter(|cm| {
            let have = cm.metadata.labels.as_ref();
            have.is_some_and(|have| {
                !have.contains_key(labels::SAMPLE)
                    && wanted.iter().all(|(k, v)| have.get(*k) == Some(v))
            })
        }))
    }

    /// The `expected` workers of step `step` of `run` whose report object the watch holds (by
    /// name and labels; the content is read in [`Store::load`]) or this process has just
    /// stored; None until the watch has listed.
    pub fn reported(
        &self,
        owner: &Owner,
        run: &str,
        step: u32,
        expected: &BTreeMap<String, Role>,
    ) -> Option<BTreeSet<String>> {
        let objects = self.watched_step(owner, run, step)?;
        let watched = self.watched.as_ref()?;
        let shown = objects
            .iter()
            .filter_map(|cm| verify_name(cm, owner, run, step, |w| expected.contains_key(w)).ok());
        let just_stored = expected
            .keys()
            .filter(|w| watched.is_unseen(&object_name(owner, run, step, w)))
            .cloned();
        Some(shown.chain(just_stored).collect())
    }

    fn api(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn note_stored(&self, name: &str) {
        // Only a watch that runs (the leader's) ever shows a name again.
        if let Some(watched) = self.watched.as_ref().filter(|w| w.ready().is_some()) {
            watched.stored(name);
        }
    }

    /// Stores `report` (its worker and step already authorized for `run`). Storing it twice is
    /// a no-op; any other object holding its name (only admins and the operator can write
    /// here) is replaced, that very object only; a different report of the same worker is
    /// refused, so a result once read stays what it was.
    pub async fn store(
        &self,
        owner: &Owner,
        run: &str,
        report: &FinalReport,
    ) -> Result<Stored, StoreError> {
        let api = self.api();
        let cm = report_object(&self.namespace, owner, run, report)?;
        let name = cm.metadata.name.clone().unwrap_or_default();
        let mut replaced = None;
        // Create, or find what holds the name; a squatter is deleted and creation retried.
        for _ in 0..3 {
            match api.create(&PostParams::default(), &cm).await {
                Ok(_) => {
                    self.note_stored(&name);
                    return Ok(replaced.map_or(Stored::New, Stored::Replaced));
                }
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
            let Some(existing) = api.get_opt(&name).await? else {
                continue;
            };
            let why = match verify(&existing, owner, run, report.step, |w| w == report.worker) {
                Ok(stored) if stored == *report => {
                    self.note_stored(&name);
                    return Ok(Stored::Again);
                }
                Ok(_) => {
                    return Err(StoreError::Conflict(format!(
                        "ConfigMap {}/{name} already holds a different report of {}",
                        self.namespace, report.worker
                    )))
                }
                Err(why) => why,
            };
            delete_exactly(&api, &existing).await?;
            replaced = Some(format!(
                "ConfigMap {}/{name} held the name of {}'s report but was not it ({why})",
                self.namespace, report.worker
            ));
        }
        Err(StoreError::Conflict(format!(
            "ConfigMap {}/{name} keeps being taken by another object",
            self.namespace
        )))
    }

    /// The stored reports of step `step` of `run`: only objects that are exactly what `store`
    /// writes for one of the `expected` workers. Read from the watch when it holds a report of
    /// every client (a finished sample's, the common case), else listed from the API server.
    pub async fn load(
        &self,
        owner: &Owner,
        run: &str,
        step: u32,
        expected: &BTreeMap<String, Role>,
    ) -> Result<Loaded, kube::Error> {
        if let Some(objects) = self.watched_step(owner, run, step) {
            let loaded = self.verified(
                objects.iter().map(|cm| cm.as_ref()),
                owner,
                run,
                step,
                expected,
            );
            let clients = expected.iter().filter(|(_, r)| **r == Role::Client);
            if clients.clone().next().is_some()
                && clients
                    .into_iter()
                    .all(|(w, _)| loaded.reports.contains_key(w))
            {
                return Ok(loaded);
            }
        }
        let selector = selector(owner, Some(run), Some(step));
        let listed = self
            .api()
            .list(&ListParams::default().labels(&selector))
            .await?;
        Ok(self.verified(listed.iter(), owner, run, step, expected))
    }

    fn verified<'a>(
        &self,
        objects: impl Iterator<Item = &'a ConfigMap>,
        owner: &Owner,
        run: &str,
        step: u32,
        expected: &BTreeMap<String, Role>,
    ) -> Loaded {
        let mut out = Loaded::default();
        for cm in objects {
            match verify(cm, owner, run, step, |w| expected.contains_key(w)) {
                Ok(r) => {
                    out.reports.insert(r.worker.clone(), r);
                }
                Err(why) => out.rejected.push(format!(
                    "ConfigMap {}/{}: {why}",
                    self.namespace,
                    cm.metadata.name.as_deref().unwrap_or("")
                )),
            }
        }
        out
    }

    /// Deletes the report objects of one run, or of every run of the benchmark.
    pub async fn delete(&self, owner: &Owner, run: Option<&str>) -> Result<(), kube::Error> {
        if self.holds_none(owner, run) {
            return Ok(());
        }
        let lp = ListParams::default().labels(&selector(owner, run, None));
        self.api()
            .delete_collection(&DeleteParams::background(), &lp)
            .await
            .map(drop)
    }

    /// Deletes the report objects of benchmarks whose uid is not in `live`; returns how many.
    pub async fn delete_orphans(&self, live: &BTreeSet<String>) -> Result<usize, kube::Error> {
        let api = self.api();
        let selector = format!(
            "{}={},{}=true",
            labels::MANAGED_BY,
            labels::OPERATOR,
            labels::REPORT
        );
        let mut deleted = 0;
        for cm in api
            .list_metadata(&ListParams::default().labels(&selector))
            .await?
        {
            let uid = cm
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::BENCHMARK_UID));
            if uid.is_some_and(|u| live.contains(u)) {
                continue;
            }
            let name = cm.metadata.name.unwrap_or_default();
            match api.delete(&name, &DeleteParams::background()).await {
                Ok(_) => deleted += 1,
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    /// ConfigMaps in the benchmark's own namespace that pose as reports of this benchmark or
    /// run (reports were kept there once): metadata only, their content is never read.
    async fn impostors(&self, owner: &Owner, run: &str) -> Result<Vec<String>, kube::Error> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &owner.namespace);
        let list = api
            .list_metadata(&ListParams::default().labels(labels::REPORT))
            .await?;
        Ok(list
            .items
            .iter()
            .filter(|cm| poses_as_report(cm.metadata.labels.as_ref(), owner, run))
            .map(|cm| {
                format!(
                    "ConfigMap {}/{}: reports are never read from the benchmark's namespace",
                    owner.namespace,
                    cm.metadata.name.as_deref().unwrap_or("")
                )
            })
            .collect())
    }

    /// Warning Events (counted in `netbench_reports_rejected_total`) for a step's forged report
    /// objects: those `load` rejected and impostors in the benchmark's namespace. Best effort:
    /// a failed look is logged, the result does not depend on it.
    /// The step's verified reports for Collecting, and the forgeries met on the way (rejected
    /// objects and impostors in the benchmark's namespace) as one Warning Event, counted and
    /// logged.
    pub async fn load_for_collecting(
        &self,
        metrics: &Metrics,
        owner: &Owner,
        run: &str,
        step: u32,
        expected: &BTreeMap<String, Role>,
    ) -> Result<(BTreeMap<String, FinalReport>, Vec<PendingEvent>), kube::Error> {
        let loaded = self.load(owner, run, step, expected).await?;
        let events = self
            .forgery_events(metrics, owner, run, &loaded.rejected)
            .await;
        Ok((loaded.reports, events))
    }

    async fn forgery_events(
        &self,
        metrics: &Metrics,
        owner: &Owner,
        run: &str,
        rejected: &[String],
    ) -> Vec<PendingEvent> {
        let impostors = match self.impostors(owner, run).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(
                    namespace = owner.namespace,
                    "looking for forged reports: {e}"
                );
                vec![]
            }
        };
        let forged = rejected.iter().map(|r| ("forged", r));
        let outside = impostors.iter().map(|r| ("outside", r));
        let found: Vec<&String> = forged
            .chain(outside)
            .map(|(reason, what)| {
                metrics
                    .family::<ReportMetrics>()
                    .rejected
                    .with_label_values(&[reason])
                    .inc();
                tracing::warn!(
                    benchmark = owner.name,
                    namespace = owner.namespace,
                    "ignored a forged report: {what}"
                );
                what
            })
            .collect();
        // One Event for all of them: Events of one reason about one object are aggregated
        // (the note of the first would hide the others).
        match found.as_slice() {
            [] => vec![],
            [one] => vec![(
                EventType::Warning,
                FORGED.to_string(),
                clip(&format!("ignored a forged report object: {one}"), 1000),
            )],
            many => {
                let list: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
                let note = format!(
                    "ignored {} forged report objects: {}",
                    many.len(),
                    list.join("; ")
                );
                vec![(EventType::Warning, FORGED.to_string(), clip(&note, 1000))]
            }
        }
    }
}

#[cfg(test)]
mod tests;
