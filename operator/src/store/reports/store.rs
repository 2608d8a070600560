//! The [`Store`] of report objects in the operator's namespace: storing a worker's report,
//! loading a step's reports (from the watch where it can answer, else listed), and deleting
//! a run's, a benchmark's or orphaned reports; with what a store or load came to.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use kube::Client;
use protocol::worker::{FinalReport, Role};

use super::object::{
    every_client_reported, object_name, report_object, selected_labels, selector, selects, verify,
    verify_name,
};
use super::watched::WatchedReports;
use crate::base::labels;
use crate::store::owner::Owner;

/// Deletes `existing` only if it is still that very object (same uid and version); one that
/// changed or went meanwhile is left for the caller's next look.
pub(super) async fn delete_exactly(
    api: &Api<ConfigMap>,
    existing: &ConfigMap,
) -> Result<(), kube::Error> {
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
    pub(super) client: Client,
    pub(super) namespace: String,
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
    pub(super) fn watch_holds_none(
        &self,
        owner: &Owner,
        run: Option<&str>,
        step: Option<u32>,
        sample: impl Fn(bool) -> bool,
    ) -> bool {
        let Some(watch) = self.watched.as_ref() else {
            return false;
        };
        // One stored a moment ago may not be in the store yet.
        if watch.any_unseen(&owner.uid, run) {
            return false;
        }
        let Some(watched) = watch.ready() else {
            return false;
        };
        let wanted = selected_labels(owner, run, step);
        watched
            .find(|cm| selects(cm.metadata.labels.as_ref(), &wanted, &sample))
            .is_none()
    }

    /// The watch's objects of step `step` of `run` (its worker reports, not folded samples),
    /// with those this process stored that the watch has not shown yet, as the API server
    /// answered their creation (the watch's copy of an object wins).
    fn watched_step(&self, owner: &Owner, run: &str, step: u32) -> Option<Vec<Arc<ConfigMap>>> {
        let watch = self.watched.as_ref()?;
        let watched = watch.ready()?;
        // What the API server would list with `selector(owner, Some(run), Some(step))`.
        let wanted = selected_labels(owner, Some(run), Some(step));
        let of_step = |cm: &ConfigMap| selects(cm.metadata.labels.as_ref(), &wanted, |s| !s);
        let mut objects = watched.state_filter(of_step);
        let shown: BTreeSet<String> = objects
            .iter()
            .filter_map(|cm| cm.metadata.name.clone())
            .collect();
        let just_stored = watch
            .unseen_objects(&owner.uid, run)
            .into_iter()
            .filter(|cm| of_step(cm))
            .filter(|cm| {
                cm.metadata
                    .name
                    .as_ref()
                    .is_some_and(|n| !shown.contains(n))
            });
        objects.extend(just_stored);
        Some(objects)
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

    pub(super) fn api(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The report objects of `owner` (of its run `run`) are being deleted: what was held of
    /// them since their creation is not read any more.
    pub(super) fn forget_held(&self, owner: &Owner, run: Option<&str>) {
        if let Some(watched) = self.watched.as_ref() {
            watched.deleting(&owner.uid, run);
        }
    }

    /// `object`: as the API server answered its creation, when it is a worker report.
    pub(super) fn note_stored(
        &self,
        name: &str,
        owner: &Owner,
        run: &str,
        object: Option<ConfigMap>,
    ) {
        // Only a watch that runs (the leader's) ever shows a name again.
        if let Some(watched) = self.watched.as_ref().filter(|w| w.ready().is_some()) {
            watched.stored(name, &owner.uid, run, object);
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
                Ok(created) => {
                    self.note_stored(&name, owner, run, Some(created));
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
                    // Not held: a worker posting its report again must not pin objects.
                    self.note_stored(&name, owner, run, None);
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
        if let Some(loaded) = self.load_watched(owner, run, step, expected) {
            return Ok(loaded);
        }
        let selector = selector(owner, Some(run), Some(step));
        let listed = self
            .api()
            .list(&ListParams::default().labels(&selector))
            .await?;
        Ok(self.verified(listed.iter(), owner, run, step, expected))
    }

    /// [`Store::load`] from the watch alone: None unless it holds a report of every client.
    pub fn load_watched(
        &self,
        owner: &Owner,
        run: &str,
        step: u32,
        expected: &BTreeMap<String, Role>,
    ) -> Option<Loaded> {
        let objects = self.watched_step(owner, run, step)?;
        let objects = objects.iter().map(|cm| cm.as_ref());
        let loaded = self.verified(objects, owner, run, step, expected);
        every_client_reported(expected, &loaded.reports).then_some(loaded)
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
        self.forget_held(owner, run);
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
}
