//! The operator's report objects as its watch last saw them, so that a Running tick counts the
//! reports, and Collecting and the result read them, from memory instead of listing them from
//! the API server (one list per benchmark every two seconds before).
//!
//! The watch sees every object in the operator's namespace that carries the report labels, the
//! forged ones too: what it holds goes through the same checks as a list (`Store::load`). It lags
//! the API server by a few milliseconds, so it answers a load only when it holds a report of
//! every client, and the names of the objects this process stored and the watch has not shown
//! yet fill the gap while a Running tick counts (the worker API wakes the benchmark right after
//! storing, usually before the watch has the object).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::PoisonError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::reflector::{self, store::Writer, ObjectRef};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};

use crate::base::labels;

/// Names of objects stored but not yet shown by the watch, at most this many (the watch removes
/// them as it shows them; a watch that is down cannot make the set grow without bound).
const UNSEEN_AT_MOST: usize = 100_000;

/// The watch's store, its writer until [`WatchedReports::run`] takes it, and the names of the
/// report objects this process stored that the watch has not shown yet.
pub struct WatchedReports {
    reader: reflector::Store<ConfigMap>,
    writer: Mutex<Option<Writer<ConfigMap>>>,
    /// By object name: the benchmark uid and run it is of, and when it was stored.
    unseen: Mutex<HashMap<String, Unseen>>,
    /// False from a failed watch request until the next event: a store that may be stale
    /// answers nothing.
    healthy: AtomicBool,
}

/// An object this process stored that the watch has not shown yet.
struct Unseen {
    uid: String,
    run: String,
    at: Instant,
    /// The object as the API server answered its creation (a worker report's, while the
    /// objects held stay under [`HELD_BYTES_AT_MOST`]): a sample's last report is read from it
    /// when the watch has yet to show it, rather than listing them all again. Dropped when the
    /// watch shows it, when its run's reports are deleted, or [`UNSEEN_FOR_AT_MOST`] after.
    object: Option<Held>,
}

/// A stored object held until the watch shows it, and about how many bytes it holds.
struct Held {
    object: Arc<ConfigMap>,
    bytes: usize,
}

/// Most bytes of stored objects held (a report is up to 512 KiB): beyond, only their names
/// are noted, and a load lists.
const HELD_BYTES_AT_MOST: usize = 16 << 20;

/// How many bytes of stored objects `unseen` holds.
fn held_bytes(unseen: &HashMap<String, Unseen>) -> usize {
    unseen
        .values()
        .filter_map(|u| u.object.as_ref().map(|h| h.bytes))
        .fold(0, usize::saturating_add)
}

/// About how many bytes `cm` holds (its data; the rest is small and bounded).
fn size_of(cm: &ConfigMap) -> usize {
    let data = cm.data.iter().flatten();
    data.map(|(k, v)| k.len().saturating_add(v.len()))
        .fold(1024, usize::saturating_add)
}

/// A stored object the watch has not shown within this long is taken as shown (or gone): the
/// watch lags by milliseconds, a re-list may miss a deletion, and the set must not keep it.
const UNSEEN_FOR_AT_MOST: Duration = Duration::from_secs(30);

impl Default for WatchedReports {
    fn default() -> Self {
        let (reader, writer) = reflector::store();
        WatchedReports {
            reader,
            writer: Mutex::new(Some(writer)),
            unseen: Mutex::default(),
            healthy: AtomicBool::new(true),
        }
    }
}

impl WatchedReports {
    /// A watch that has listed `objects` and runs no more: what a test's reconcile reads.
    pub fn listed(objects: Vec<ConfigMap>) -> WatchedReports {
        let (reader, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Init);
        for cm in objects {
            writer.apply_watcher_event(&watcher::Event::InitApply(cm));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        WatchedReports {
            reader,
            writer: Mutex::new(None),
            unseen: Mutex::default(),
            healthy: AtomicBool::new(true),
        }
    }

    /// The store once the watch has listed every report object (never blocks); None before,
    /// and while the watch fails (until its next event).
    pub fn ready(&self) -> Option<&reflector::Store<ConfigMap>> {
        if !self.healthy.load(Ordering::Relaxed) {
            return None;
        }
        self.reader.wait_until_ready().now_or_never()?.ok()?;
        Some(&self.reader)
    }

    fn unseen(&self) -> std::sync::MutexGuard<'_, HashMap<String, Unseen>> {
        self.unseen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// This process stored the object `name`, a report of run `run` of the benchmark `uid`
    /// (the API server said so, answering `object` when given: held only if it is that object
    /// and the watch has not shown it already).
    pub fn stored(&self, name: &str, uid: &str, run: &str, object: Option<ConfigMap>) {
        let shown = |cm: &ConfigMap| self.reader.get(&ObjectRef::from_obj(cm)).is_some();
        let object = object.filter(|o| o.metadata.name.as_deref() == Some(name) && !shown(o));
        let mut unseen = self.unseen();
        if unseen.len() >= UNSEEN_AT_MOST / 2 {
            unseen.retain(|_, u| u.at.elapsed() < UNSEEN_FOR_AT_MOST);
        }
        // What is held, once the objects past their time are dropped.
        for u in unseen
            .values_mut()
            .filter(|u| u.at.elapsed() >= UNSEEN_FOR_AT_MOST)
        {
            u.object = None;
        }
        let held = held_bytes(&unseen);
        if unseen.len() < UNSEEN_AT_MOST {
            let object = object
                .map(|o| Held {
                    bytes: size_of(&o),
                    object: Arc::new(o),
                })
                .filter(|h| held.saturating_add(h.bytes) <= HELD_BYTES_AT_MOST);
            let (uid, run, at) = (uid.to_string(), run.to_string(), Instant::now());
            let entry = Unseen {
                uid,
                run,
                at,
                object,
            };
            unseen.insert(name.to_string(), entry);
        }
    }

    /// The objects of run `run` of benchmark `uid` this process stored and the watch has not
    /// shown yet, as the API server answered their creation.
    pub fn unseen_objects(&self, uid: &str, run: &str) -> Vec<Arc<ConfigMap>> {
        self.unseen()
            .values()
            .filter(|u| u.uid == uid && u.run == run && u.at.elapsed() < UNSEEN_FOR_AT_MOST)
            .filter_map(|u| u.object.as_ref().map(|h| h.object.clone()))
            .collect()
    }

    /// The report objects of benchmark `uid` (of its run `run`) are being deleted: none of
    /// them is read from what was held any more (their names stay, so that a deletion is not
    /// skipped as "none" before the watch has shown them).
    pub fn deleting(&self, uid: &str, run: Option<&str>) {
        for u in self.unseen().values_mut() {
            if u.uid == uid && run.is_none_or(|r| r == u.run) {
                u.object = None;
            }
        }
    }

    /// How many bytes of stored objects are held.
    #[cfg(test)]
    pub fn held_bytes(&self) -> usize {
        held_bytes(&self.unseen())
    }

    /// Whether this process stored `name` and the watch has not shown it yet.
    pub fn is_unseen(&self, name: &str) -> bool {
        self.unseen()
            .get(name)
            .is_some_and(|u| u.at.elapsed() < UNSEEN_FOR_AT_MOST)
    }

    /// Whether this process stored a report of benchmark `uid` (of its run `run`) that the
    /// watch has not shown yet.
    pub fn any_unseen(&self, uid: &str, run: Option<&str>) -> bool {
        self.unseen().values().any(|u| {
            u.uid == uid && run.is_none_or(|r| r == u.run) && u.at.elapsed() < UNSEEN_FOR_AT_MOST
        })
    }

    /// The watch showed `name` (created, changed or deleted): it answers for it from now on.
    fn seen(&self, name: &str) {
        self.unseen().remove(name);
    }

    /// Keeps the store up to date from a watch of the report objects in `namespace` (retried
    /// with backoff when the watch fails). Runs once; a second call returns at once.
    pub async fn run(&self, client: Client, namespace: &str) {
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(writer) = writer else {
            return;
        };
        let api: Api<ConfigMap> = Api::namespaced(client, namespace);
        let selector = format!(
            "{}={},{}=true",
            labels::MANAGED_BY,
            labels::OPERATOR,
            labels::REPORT
        );
        watcher(api, watcher::Config::default().labels(&selector))
            .default_backoff()
            .reflect(writer)
            .for_each(|event| {
                // Healthy again with the next event that leaves the store current (not while
                // a new listing is being gathered: the store holds the old one until it ends).
                let healthy = match &event {
                    Err(_) => Some(false),
                    Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => None,
                    Ok(_) => Some(true),
                };
                match event {
                    Ok(
                        watcher::Event::Apply(cm)
                        | watcher::Event::InitApply(cm)
                        | watcher::Event::Delete(cm),
                    ) => self.seen(&cm.name_any()),
                    Ok(_) => {}
                    Err(e) => tracing::warn!("watching the report objects: {e}"),
                }
                if let Some(healthy) = healthy {
                    self.healthy.store(healthy, Ordering::Relaxed);
                }
                futures::future::ready(())
            })
            .await;
    }
}
