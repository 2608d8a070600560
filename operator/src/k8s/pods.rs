//! Creating, inspecting and deleting a run's children in the benchmark's namespace: worker
//! pods (offload Jobs: egress::offload; report objects, kept in the operator's namespace:
//! store::reports). Creation is idempotent (deterministic names; AlreadyExists is success).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;

use crate::base::memo::Memo;
use crate::base::text::clip;

fn ignore_conflict<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// A worker pod the API server did not create.
#[derive(Debug)]
pub struct PodCreateError {
    pub pod: String,
    /// The API server refused it (quota, admission, an invalid field): retrying cannot help.
    pub refused: bool,
    pub message: String,
}

/// A 4xx other than 409 (AlreadyExists) and 429 (TooManyRequests) is the API server's final
/// word on this object; 5xx, 429 and transport errors may pass.
pub fn is_refusal(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if (400..500).contains(&s.code) && s.code != 409 && s.code != 429)
}

/// Pod creations in flight at once: a 256-worker step is not 256 round trips one after
/// another, and the API server is not sent them all at once either.
const CREATE_AT_ONCE: usize = 16;

/// Creates the pods, several at a time (AlreadyExists is success); every pod is tried (until
/// `stopped` is set), and the first refusal (which retrying cannot help) is returned before any
/// other failure.
pub async fn create_pods(
    client: &Client,
    namespace: &str,
    pods: &[Pod],
    stopped: &std::sync::atomic::AtomicBool,
) -> Result<(), PodCreateError> {
    use futures::StreamExt;
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let create = |pod: &Pod| {
        let api = api.clone();
        let pod = pod.clone();
        async move {
            // Stopped (k8s::creation): no further POST; what was sent is still answered.
            if stopped.load(std::sync::atomic::Ordering::Relaxed) {
                return Ok(());
            }
            ignore_conflict(api.create(&PostParams::default(), &pod).await).map_err(|e| {
                PodCreateError {
                    pod: pod.metadata.name.clone().unwrap_or_default(),
                    refused: is_refusal(&e),
                    message: match &e {
                        kube::Error::Api(s) => s.message.clone(),
                        other => other.to_string(),
                    },
                }
            })
        }
    };
    let results: Vec<Result<(), PodCreateError>> = futures::stream::iter(pods)
        .map(create)
        .buffer_unordered(CREATE_AT_ONCE)
        .collect()
        .await;
    let mut failed: Vec<PodCreateError> = results.into_iter().filter_map(Result::err).collect();
    // A refusal first, then in the order of the pods' names (deterministic messages).
    failed.sort_by(|a, b| (!a.refused, &a.pod).cmp(&(!b.refused, &b.pod)));
    match failed.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

pub async fn list_pods(
    client: &Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<Pod>, kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    Ok(api
        .list(&ListParams::default().labels(selector))
        .await?
        .items)
}

/// Whether an object's controller (its owner with `controller: true`) is of kind `kind`.
pub fn controlled_by(meta: &kube::api::ObjectMeta, kind: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == kind)
}

/// Deletes the worker pods matching `selector` (a run, a step, or the whole benchmark) of a
/// benchmark of kind `kind`, and, when its kind has them (`services`), the Services in front of
/// them (egress::service): the only children a benchmark has in its own namespace (reports:
/// store::reports; offload Jobs: egress::offload).
pub async fn delete_workers(
    client: &Client,
    kind: &str,
    services: bool,
    namespace: &str,
    selector: &str,
) -> Result<(), kube::Error> {
    let lp = ListParams::default().labels(selector);
    let _ = Api::<Pod>::namespaced(client.clone(), namespace)
        .delete_collection(&DeleteParams::background(), &lp)
        .await?;
    if !services {
        return Ok(());
    }
    // Services have no deletecollection. Only some kinds have Services (an EgressBenchmark's
    // Service path): without the permission to list them (a trimmed role), there are none of
    // ours to delete.
    let services = Api::<Service>::namespaced(client.clone(), namespace);
    let listed = match services.list_metadata(&lp).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(e)) if e.code == 403 => vec![],
        Err(e) => return Err(e),
    };
    for svc in listed {
        // Only the operator's own: a Service someone else labelled like a benchmark's children
        // is not deleted (its controller is not a benchmark of this kind).
        let ours = controlled_by(&svc.metadata, kind);
        let (true, Some(name)) = (ours, svc.metadata.name) else {
            continue;
        };
        match services.delete(&name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How long one try of a deletion in the background may take.
const DELETE_TIMEOUT: Duration = Duration::from_secs(60);

/// [`delete_workers`] without waiting for it: the API server deletes a collection one pod after
/// another before it answers (seconds at 256 workers), and nothing of a run waits for its pods
/// to go. Tried up to three times (base::soon); a deletion that still fails is logged and
/// `failed` is called (the caller makes the deletion come again).
pub fn delete_workers_soon(
    client: &Client,
    kind: &str,
    services: bool,
    namespace: &str,
    selector: &str,
    failed: impl FnOnce() + Send + 'static,
) {
    let (client, kind) = (client.clone(), kind.to_string());
    let (namespace, selector) = (namespace.to_string(), selector.to_string());
    let what = format!("deleting worker pods ({selector}) in {namespace}");
    let attempt = move || {
        let (client, kind) = (client.clone(), kind.clone());
        let (namespace, selector) = (namespace.clone(), selector.clone());
        async move { delete_workers(&client, &kind, services, &namespace, &selector).await }
    };
    crate::base::soon::spawn(what, DELETE_TIMEOUT, attempt, failed);
}

/// A worker that can no longer report: deleted, failed, or finished without a stored report.
pub fn worker_problem(
    expected: &std::collections::BTreeMap<String, protocol::worker::Role>,
    named: &ByName<'_>,
    reported: &std::collections::BTreeSet<String>,
) -> Option<String> {
    for w in expected.keys().filter(|w| !reported.contains(*w)) {
        let Some(pod) = named.get(w.as_str()) else {
            return Some(format!("worker pod {w} was deleted before it reported"));
        };
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("");
        if phase == "Failed" || phase == "Succeeded" {
            let why = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.terminated.as_ref())
                .map(|t| {
                    format!(
                        "exit code {}{}",
                        t.exit_code,
                        t.message
                            .as_deref()
                            .map(|m| format!(": {}", m.trim()))
                            .unwrap_or_default()
                    )
                })
                .unwrap_or_else(|| "no report".into());
            return Some(format!(
                "{} ended without a report ({why})",
                describe_pod(w, named)
            ));
        }
    }
    None
}

/// "worker pod NAME on node N", or with the scheduler's reason when it has no node yet.
pub fn describe_pod(name: &str, named: &ByName<'_>) -> String {
    let pod = named.get(name);
    if let Some(n) = pod.and_then(|p| p.spec.as_ref()?.node_name.as_deref()) {
        return format!("worker pod {name} on node {n}");
    }
    let unschedulable = pod
        .and_then(|p| p.status.as_ref()?.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        })
        .and_then(|c| c.message.as_deref());
    match unschedulable {
        // The scheduler's message lists every reason of every node: bounded.
        Some(why) => format!("worker pod {name} (not scheduled: {})", clip(why, 300)),
        None => format!("worker pod {name} (not scheduled)"),
    }
}

/// Why `node` cannot run a worker any more, if it cannot: its Ready condition is not True
/// (a stopped kubelet shows as Unknown once the node controller's grace period passed).
pub fn node_not_ready(node: &Node) -> Option<String> {
    let name = node.metadata.name.as_deref().unwrap_or("?");
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    match ready {
        Some(c) if c.status == "True" => None,
        Some(c) => Some(format!(
            "node {name} is not ready (Ready={}{})",
            c.status,
            c.message
                .as_deref()
                .map(|m| format!(": {}", m.trim()))
                .unwrap_or_default()
        )),
        None => Some(format!("node {name} reports no Ready condition")),
    }
}

/// The first of `workers` (pod names) whose node is gone or not ready, described with its node.
/// Each node is read once.
pub async fn node_problem<'a>(
    client: &Client,
    health: &NodeHealth,
    named: &ByName<'_>,
    workers: impl IntoIterator<Item = &'a String>,
) -> Result<Option<String>, kube::Error> {
    let api: Api<Node> = Api::all(client.clone());
    let mut checked = std::collections::BTreeSet::new();
    for w in workers {
        let Some(node) = named
            .get(w.as_str())
            .and_then(|p| p.spec.as_ref()?.node_name.clone())
        else {
            continue;
        };
        if !checked.insert(node.clone()) {
            continue;
        }
        if health.known_ready(&node) {
            continue;
        }
        let why = match api.get_opt(&node).await? {
            None => Some(format!("node {node} no longer exists")),
            Some(n) => node_not_ready(&n),
        };
        health.note(&node, why.is_none());
        if let Some(why) = why {
            return Ok(Some(format!("worker pod {w}: {why}")));
        }
    }
    Ok(None)
}

/// How long a node read Ready is trusted: a run's every tick (and every run on the node)
/// needs no GET of it, and a lost node is noticed at most this much later.
const NODE_FRESH: Duration = Duration::from_secs(10);
/// Most nodes remembered.
const NODES_KEPT: usize = 4096;

/// The nodes last read Ready, each trusted for [`NODE_FRESH`]. A node read not Ready (or
/// gone) is read again each time it is asked about: that reading fails a run, so it must be
/// the node's state now. Kept, it failed the runs on a node that had come back for 10 s more.
pub struct NodeHealth(Memo<()>);

impl Default for NodeHealth {
    fn default() -> Self {
        Self(Memo::new(NODE_FRESH, NODES_KEPT))
    }
}

impl NodeHealth {
    fn known_ready(&self, node: &str) -> bool {
        self.0.get(node).is_some()
    }

    /// What a GET of `node` found: Ready is trusted for a while, anything else forgets it.
    fn note(&self, node: &str, ready: bool) {
        if ready {
            self.0.keep(node, ());
        } else {
            self.0.forget(node);
        }
    }
}

/// The first in-cluster server (a topology has one per pair) that is gone or failed before
/// the clients reported.
pub fn server_problem(
    expected: &std::collections::BTreeMap<String, protocol::worker::Role>,
    named: &ByName<'_>,
) -> Option<String> {
    let servers = expected
        .iter()
        .filter(|(_, r)| **r == protocol::worker::Role::Server);
    servers.into_iter().find_map(|(server, _)| {
        let Some(pod) = named.get(server.as_str()) else {
            return Some(format!("server pod {server} was deleted"));
        };
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        (phase == Some("Failed")).then(|| {
            let why = pod
                .status
                .as_ref()
                .and_then(|s| {
                    s.container_statuses
                        .as_ref()?
                        .first()?
                        .state
                        .as_ref()?
                        .terminated
                        .clone()
                })
                .and_then(|t| t.message)
                .unwrap_or_default();
            format!("{} failed: {}", describe_pod(server, named), why.trim())
        })
    })
}

/// A step's pods by name (the first of a name, as a search of the list finds it): a run of
/// hundreds of workers looks every one of them up on each of its reconciles, so one look
/// builds this once for all of its questions.
pub struct ByName<'a>(HashMap<&'a str, &'a Pod>);

impl<'a> ByName<'a> {
    pub fn of<P: Borrow<Pod>>(pods: &'a [P]) -> ByName<'a> {
        let mut named = HashMap::with_capacity(pods.len());
        for pod in pods.iter().map(Borrow::borrow) {
            if let Some(name) = pod.metadata.name.as_deref() {
                named.entry(name).or_insert(pod);
            }
        }
        ByName(named)
    }

    pub fn get(&self, name: &str) -> Option<&'a Pod> {
        self.0.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};

    fn node(conditions: Option<Vec<(&str, &str, Option<&str>)>>) -> Node {
        Node {
            metadata: kube::api::ObjectMeta {
                name: Some("nb-node1".into()),
                ..Default::default()
            },
            status: Some(NodeStatus {
                conditions: conditions.map(|cs| {
                    cs.into_iter()
                        .map(|(t, s, m)| NodeCondition {
                            type_: t.into(),
                            status: s.into(),
                            message: m.map(Into::into),
                            ..Default::default()
                        })
                        .collect()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn an_unschedulable_pod_is_described_with_the_schedulers_reason() {
        let why = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.";
        let pod = crate::testing::unscheduled_pod("w0", why);
        assert_eq!(
            describe_pod("w0", &ByName::of(&[pod])),
            format!("worker pod w0 (not scheduled: {why})")
        );
        assert_eq!(
            describe_pod("w1", &ByName::of(&[] as &[Pod])),
            "worker pod w1 (not scheduled)"
        );
    }

    /// Workers are looked up by name from one index; as the search of the list it replaced,
    /// the first pod of a name is the one judged, and a worker with no pod is gone.
    #[test]
    fn each_worker_is_judged_by_the_first_pod_of_its_name() {
        use k8s_openapi::api::core::v1::PodStatus;
        use protocol::worker::Role;
        let pod = |name: &str, phase: &str| Pod {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let expected = std::collections::BTreeMap::from([
            ("w0".to_string(), Role::Client),
            ("s0".to_string(), Role::Server),
        ]);
        let none = std::collections::BTreeSet::new();
        let running_first = [
            pod("s0", "Running"),
            pod("w0", "Running"),
            pod("w0", "Failed"),
            pod("s0", "Failed"),
        ];
        assert_eq!(
            worker_problem(&expected, &ByName::of(&running_first), &none),
            None
        );
        assert_eq!(server_problem(&expected, &ByName::of(&running_first)), None);
        let failed_first = [pod("w0", "Failed"), pod("w0", "Running")];
        assert_eq!(
            worker_problem(&expected, &ByName::of(&failed_first), &none).as_deref(),
            Some("worker pod s0 was deleted before it reported")
        );
        let only_w0: std::collections::BTreeMap<_, _> = expected
            .iter()
            .filter(|(w, _)| *w == "w0")
            .map(|(w, r)| (w.clone(), *r))
            .collect();
        assert_eq!(
            worker_problem(&only_w0, &ByName::of(&failed_first), &none).as_deref(),
            Some("worker pod w0 (not scheduled) ended without a report (no report)")
        );
        assert_eq!(
            server_problem(&expected, &ByName::of(&failed_first)).as_deref(),
            Some("server pod s0 was deleted")
        );
    }

    #[test]
    fn a_ready_node_has_no_problem() {
        let n = node(Some(vec![
            ("MemoryPressure", "False", None),
            ("Ready", "True", None),
        ]));
        assert_eq!(node_not_ready(&n), None);
    }

    #[test]
    fn a_node_whose_kubelet_stopped_is_named_with_the_reason() {
        let n = node(Some(vec![(
            "Ready",
            "Unknown",
            Some("Kubelet stopped posting node status."),
        )]));
        assert_eq!(
            node_not_ready(&n).as_deref(),
            Some(
                "node nb-node1 is not ready (Ready=Unknown: Kubelet stopped posting node status.)"
            )
        );
    }

    /// A Node as the API server returns it, Ready `status`.
    fn node_json(name: &str, status: &str) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": status,
                "message": "Kubelet stopped posting node status."}]},
        })
    }

    #[tokio::test]
    async fn a_node_back_to_ready_fails_no_run_and_a_ready_one_is_read_once() {
        use crate::testing::fake_api::{status, FakeApi};
        let ready = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let fake = FakeApi::default();
        let answer = ready.clone();
        let client = fake.client(move |seen| match seen.path.as_str() {
            "/api/v1/nodes/n1" => {
                let r = answer.load(std::sync::atomic::Ordering::SeqCst);
                (200, node_json("n1", if r { "True" } else { "Unknown" }))
            }
            _ => (404, status(404, "NotFound")),
        });
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w0"}, "spec": {"nodeName": "n1", "containers": []},
        }))
        .unwrap();
        let (pods, workers) = (vec![pod], vec!["w0".to_string()]);
        let health = NodeHealth::default();
        let named = ByName::of(&pods);
        let ask = || node_problem(&client, &health, &named, &workers);

        let lost = ask().await.unwrap();
        assert!(
            lost.as_deref()
                .is_some_and(|m| m.starts_with("worker pod w0: node n1 is not ready")),
            "{lost:?}"
        );
        // The node is back: the next run on it is not failed with the old reading.
        ready.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(ask().await.unwrap(), None);
        // Ready is trusted for a while: asked again, nothing is read.
        assert_eq!(ask().await.unwrap(), None);
        let gets = |node: &str| {
            let path = format!("/nodes/{node}");
            fake.requests().iter().filter(|r| r.contains(&path)).count()
        };
        assert_eq!(gets("n1"), 2, "{:?}", fake.requests());
        // A node gone is named so, and read again each time.
        let gone: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w1"}, "spec": {"nodeName": "n2", "containers": []},
        }))
        .unwrap();
        let w1 = ["w1".to_string()];
        for _ in 0..2 {
            let lost = node_problem(
                &client,
                &health,
                &ByName::of(std::slice::from_ref(&gone)),
                &w1,
            )
            .await;
            let lost = lost.unwrap();
            assert_eq!(
                lost.as_deref(),
                Some("worker pod w1: node n2 no longer exists")
            );
        }
        assert_eq!(gets("n2"), 2, "{:?}", fake.requests());
    }

    #[test]
    fn a_node_without_conditions_is_not_trusted() {
        assert!(node_not_ready(&node(None)).is_some());
        assert!(node_not_ready(&node(Some(vec![]))).is_some());
    }

    #[test]
    fn every_server_of_a_topology_is_watched_not_only_the_first() {
        use protocol::worker::Role;
        let expected = std::collections::BTreeMap::from([
            ("c0".to_string(), Role::Client),
            ("s0".to_string(), Role::Server),
            ("c1".to_string(), Role::Client),
            ("s1".to_string(), Role::Server),
        ]);
        let pod = |name: &str, phase: &str| {
            serde_json::from_value::<Pod>(serde_json::json!({
                "metadata": {"name": name},
                "spec": {"nodeName": "n1", "containers": []},
                "status": {"phase": phase},
            }))
            .unwrap()
        };
        let running = [pod("s0", "Running"), pod("s1", "Running")];
        assert_eq!(server_problem(&expected, &ByName::of(&running)), None);
        let second_failed = [pod("s0", "Running"), pod("s1", "Failed")];
        let why = server_problem(&expected, &ByName::of(&second_failed)).unwrap();
        assert!(why.starts_with("worker pod s1 on node n1 failed"), "{why}");
        let second_gone = [pod("s0", "Running")];
        assert_eq!(
            server_problem(&expected, &ByName::of(&second_gone)).as_deref(),
            Some("server pod s1 was deleted")
        );
    }

    #[tokio::test]
    async fn every_pod_is_tried_and_a_refusal_is_named_before_other_failures() {
        use crate::testing::fake_api::{status, FakeApi};
        let fake = FakeApi::default();
        // w07 is refused (quota), w03 fails with a 500 (may pass), the rest exist already or
        // are created.
        let client = fake.client(|seen| {
            if seen.body.contains("\"w07\"") {
                (403, status(403, "Forbidden"))
            } else if seen.body.contains("\"w03\"") {
                (500, status(500, "InternalError"))
            } else if seen.body.contains("\"w1") {
                (409, status(409, "AlreadyExists"))
            } else {
                (201, serde_json::json!({"metadata": {"name": "x"}}))
            }
        });
        let pods: Vec<Pod> = (0..40)
            .map(|i| Pod {
                metadata: kube::api::ObjectMeta {
                    name: Some(format!("w{i:02}")),
                    ..Default::default()
                },
                ..Default::default()
            })
            .collect();
        let err = create_pods(&client, "team", &pods, &Default::default())
            .await
            .unwrap_err();
        assert_eq!((err.pod.as_str(), err.refused), ("w07", true));
        let posts = fake
            .requests()
            .iter()
            .filter(|r| r.starts_with("POST"))
            .count();
        assert_eq!(posts, 40, "every pod tried");
        let ok: Vec<Pod> = pods
            .into_iter()
            .filter(|p| p.metadata.name.as_deref() > Some("w10"))
            .collect();
        assert!(
            create_pods(&client, "team", &ok, &Default::default())
                .await
                .is_ok(),
            "AlreadyExists is success"
        );
    }

    #[tokio::test]
    async fn services_are_looked_for_only_where_the_kind_has_them() {
        use crate::testing::fake_api::{empty_list, FakeApi};
        let fake = FakeApi::default();
        let client = fake.client(|_| (200, empty_list()));
        let selector = "netbench.io/run=r1";
        delete_workers(&client, "IngressBenchmark", false, "team-a", selector)
            .await
            .unwrap();
        let asked = |log: &[String]| -> Vec<String> {
            log.iter()
                .map(|l| l.split(' ').take(2).collect::<Vec<_>>().join(" "))
                .collect()
        };
        assert_eq!(
            asked(&fake.requests()),
            ["DELETE /api/v1/namespaces/team-a/pods"]
        );
        delete_workers(&client, "EgressBenchmark", true, "team-a", selector)
            .await
            .unwrap();
        assert_eq!(
            asked(&fake.requests())[1..],
            [
                "DELETE /api/v1/namespaces/team-a/pods",
                "GET /api/v1/namespaces/team-a/services"
            ]
        );
    }
}
