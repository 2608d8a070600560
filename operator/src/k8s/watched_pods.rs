//! The worker pods as the controllers' watches last saw them, so a Running tick reads them from
//! memory instead of listing them from the API server every two seconds.
//!
//! A watch lags the API server by a few milliseconds and may miss a pod just created or still
//! hold one just deleted: callers take what it says for progress only, and read the API server
//! before they fail a run on it (driver::phases::measure). Until a watch has listed its place
//! once, or for a namespace no watch covers, it answers None and the caller lists.

use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;
use kube::ResourceExt;

/// Where one watch looks: every namespace, or one.
#[derive(Clone, Debug, PartialEq)]
pub enum Place {
    Cluster,
    Namespace(String),
}

impl Place {
    fn covers(&self, namespace: &str) -> bool {
        match self {
            Place::Cluster => true,
            Place::Namespace(ns) => ns == namespace,
        }
    }
}

/// The pod watches of every controller (one per kind and watched place).
#[derive(Default)]
pub struct WatchedPods {
    stores: RwLock<Vec<(Place, Store<Pod>)>>,
}

impl WatchedPods {
    /// Adds one watch's store (controller::run, once per kind and place).
    pub fn add(&self, place: Place, store: Store<Pod>) {
        let mut stores = self.stores.write().unwrap_or_else(PoisonError::into_inner);
        stores.push((place, store));
    }

    /// The pods of `namespace` that carry every label of `selector` (`key=value` pairs joined by
    /// commas, as `Run::slot_selector` writes them), from the watches; None when a watch covering
    /// the namespace has not listed it yet, none covers it, or the selector is of another form.
    pub fn list(&self, namespace: &str, selector: &str) -> Option<Vec<Arc<Pod>>> {
        let wanted = equalities(selector)?;
        let stores = self.stores.read().unwrap_or_else(PoisonError::into_inner);
        let covering: Vec<&Store<Pod>> = stores
            .iter()
            .filter(|(place, _)| place.covers(namespace))
            .map(|(_, store)| store)
            .collect();
        if covering.is_empty() {
            return None;
        }
        let mut found: Vec<Arc<Pod>> = vec![];
        for store in covering {
            // Ready once its first listing is complete (never blocks).
            futures::FutureExt::now_or_never(store.wait_until_ready())?.ok()?;
            found.extend(store.state_filter(|p| {
                p.namespace().as_deref() == Some(namespace) && has_labels(p, &wanted)
            }));
        }
        // Two kinds' watches may both hold a pod: once each, in name order like a list. The
        // pods are shared with the watch, not copied: a run's every reconcile lists its pods.
        found.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        found.dedup_by(|a, b| a.metadata.uid == b.metadata.uid);
        Some(found)
    }

    /// Pod `namespace/name` as a watch holds it; None when no watch that has listed covers the
    /// namespace, or none holds it.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Pod> {
        let stores = self.stores.read().unwrap_or_else(PoisonError::into_inner);
        let key = kube::runtime::reflector::ObjectRef::new(name).within(namespace);
        stores
            .iter()
            .filter(|(place, _)| place.covers(namespace))
            .filter(|(_, store)| {
                futures::FutureExt::now_or_never(store.wait_until_ready())
                    .is_some_and(|r| r.is_ok())
            })
            .find_map(|(_, store)| store.get(&key))
            .map(|p| Pod::clone(&p))
    }

    /// The pods [`WatchedPods::list`] answers with, or else those the API server lists.
    pub async fn list_or_get(
        &self,
        client: &kube::Client,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<Pod>, kube::Error> {
        match self.list(namespace, selector) {
            Some(pods) => Ok(pods.iter().map(|p| Pod::clone(p)).collect()),
            None => super::pods::list_pods(client, namespace, selector).await,
        }
    }
}

/// What the watches keep of a pod, so that pods are cheap to hold (a pod anyone labels like
/// ours is watched too): its name, namespace, uid, labels, owners and deletion; its node and
/// whether it is on the host network; its phase, conditions, containers' states and addresses
/// (a worker's identity: api::pod_tokens). A pod not controlled by a `kind` benchmark keeps
/// only its name, namespace and uid (it can then match no selector).
pub fn keep_what_is_read(pod: &mut Pod, kind: &str) {
    let ours = super::pods::controlled_by(&pod.metadata, kind);
    let meta = std::mem::take(&mut pod.metadata);
    pod.metadata = kube::api::ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resource_version: meta.resource_version,
        ..Default::default()
    };
    let (spec, status) = (pod.spec.take(), pod.status.take());
    if !ours {
        return;
    }
    pod.metadata.labels = meta.labels;
    pod.metadata.owner_references = meta.owner_references;
    pod.metadata.deletion_timestamp = meta.deletion_timestamp;
    pod.spec = spec.map(|s| k8s_openapi::api::core::v1::PodSpec {
        node_name: s.node_name,
        host_network: s.host_network,
        ..Default::default()
    });
    pod.status = status.map(|s| k8s_openapi::api::core::v1::PodStatus {
        phase: s.phase,
        conditions: s.conditions,
        container_statuses: s.container_statuses,
        pod_ip: s.pod_ip,
        pod_ips: s.pod_ips,
        host_ip: s.host_ip,
        host_ips: s.host_ips,
        ..Default::default()
    });
}

/// The pairs of a selector made only of `key=value` terms; None for any other form.
fn equalities(selector: &str) -> Option<Vec<(&str, &str)>> {
    selector
        .split(',')
        .map(|term| {
            let (k, v) = term.split_once('=')?;
            let plain = |s: &str| !s.is_empty() && !s.contains(['=', '!', '(', ')', ' ']);
            (plain(k) && (v.is_empty() || plain(v))).then_some((k, v))
        })
        .collect()
}

fn has_labels(pod: &Pod, wanted: &[(&str, &str)]) -> bool {
    let labels = pod.labels();
    wanted
        .iter()
        .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
}

/// A watch's store that has listed `pods` (for tests).
#[cfg(test)]
pub fn listed(pods: Vec<Pod>) -> Store<Pod> {
    use kube::runtime::watcher::Event;
    let (reader, mut writer) = kube::runtime::reflector::store();
    writer.apply_watcher_event(&Event::Init);
    for p in pods {
        writer.apply_watcher_event(&Event::InitApply(p));
    }
    writer.apply_watcher_event(&Event::InitDone);
    // Ready for good once listed: the reader keeps what it was given after the writer goes.
    reader
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::runtime::reflector::store;

    fn pod(ns: &str, name: &str, labels: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                uid: Some(format!("{ns}/{name}")),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn selects_by_every_label_in_the_namespace_only() {
        let watched = WatchedPods::default();
        watched.add(
            Place::Cluster,
            listed(vec![
                pod("a", "w1", &[("run", "r1"), ("step", "0")]),
                pod("a", "w0", &[("run", "r1"), ("step", "0")]),
                pod("a", "w2", &[("run", "r1"), ("step", "1")]),
                pod("b", "w3", &[("run", "r1"), ("step", "0")]),
            ]),
        );
        let names = |pods: Vec<Arc<Pod>>| -> Vec<String> {
            pods.iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect()
        };
        assert_eq!(
            names(watched.list("a", "run=r1,step=0").unwrap()),
            ["w0", "w1"]
        );
        assert_eq!(names(watched.list("b", "run=r1").unwrap()), ["w3"]);
        assert!(watched.list("a", "run=r2").unwrap().is_empty());
        // The watch's pods are shared, not copied: each reconcile of a run lists all of its
        // pods, hundreds of them.
        let (first, again) = (
            watched.list("a", "run=r1").unwrap(),
            watched.list("a", "run=r1").unwrap(),
        );
        assert!(first.iter().zip(&again).all(|(a, b)| Arc::ptr_eq(a, b)));
    }

    #[test]
    fn no_answer_before_the_first_listing_or_outside_the_watches() {
        let watched = WatchedPods::default();
        assert_eq!(watched.list("a", "run=r1"), None, "no watch at all");
        let (reader, writer) = store::<Pod>();
        watched.add(Place::Namespace("a".into()), reader);
        assert_eq!(watched.list("a", "run=r1"), None, "not listed yet");
        drop(writer);
        watched.add(Place::Namespace("b".into()), listed(vec![]));
        assert_eq!(watched.list("c", "run=r1"), None, "no watch covers c");
        assert_eq!(watched.list("b", "run=r1"), Some(vec![]));
    }

    #[test]
    fn a_pod_held_by_two_watches_is_listed_once() {
        let watched = WatchedPods::default();
        let p = pod("a", "w0", &[("run", "r1")]);
        watched.add(Place::Cluster, listed(vec![p.clone()]));
        watched.add(Place::Namespace("a".into()), listed(vec![p]));
        assert_eq!(watched.list("a", "run=r1").map(|p| p.len()), Some(1));
    }

    #[test]
    fn a_watched_pod_keeps_what_is_read_and_a_stranger_nothing() {
        let mut p = pod("a", "w0", &[("run", "r1")]);
        p.metadata.annotations = Some([("big".to_string(), "x".repeat(1000))].into());
        p.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                kind: "IngressBenchmark".into(),
                controller: Some(true),
                ..Default::default()
            },
        ]);
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            node_name: Some("n1".into()),
            hostname: Some("h".into()),
            ..Default::default()
        });
        let mut stranger = p.clone();
        keep_what_is_read(&mut p, "IngressBenchmark");
        assert_eq!(p.metadata.annotations, None);
        assert_eq!(p.labels().get("run").map(String::as_str), Some("r1"));
        assert_eq!(
            p.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            Some("n1")
        );
        assert_eq!(p.spec.as_ref().and_then(|s| s.hostname.as_deref()), None);
        keep_what_is_read(&mut stranger, "EgressBenchmark");
        assert!(stranger.labels().is_empty() && stranger.spec.is_none());
        assert_eq!(stranger.metadata.name.as_deref(), Some("w0"));
    }

    #[test]
    fn only_equality_selectors_are_answered() {
        let watched = WatchedPods::default();
        watched.add(Place::Cluster, listed(vec![]));
        for s in [
            "run!=r1",
            "run in (a,b)",
            "!run",
            "run",
            "run==r1",
            "",
            "a=b,,c=d",
        ] {
            assert_eq!(watched.list("a", s), None, "{s}");
        }
        assert_eq!(equalities("a=b,c="), Some(vec![("a", "b"), ("c", "")]));
    }
}
