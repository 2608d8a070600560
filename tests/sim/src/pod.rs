//! A worker pod, read the way the kubelet would start it: the container's environment (values
//! and downward-API fields), its arguments, its labels. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, Pod};
use protocol::worker::Role;

use crate::args::{work_of, Work};

/// Labels the operator puts on every worker pod (operator/src/base/labels.rs).
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const OPERATOR: &str = "netbench-operator";
pub const RUN: &str = "netbench.io/run";
pub const ROLE: &str = "netbench.io/role";
pub const KIND: &str = "netbench.io/kind";
pub const BENCHMARK: &str = "netbench.io/benchmark";
/// The pair of an EgressBenchmark topology case a worker belongs to (its client is worker
/// 2i, its server 2i+1).
pub const PAIR: &str = "netbench.io/pair";
/// The label selector of worker pods.
pub const WORKER_SELECTOR: &str = "app.kubernetes.io/managed-by=netbench-operator,netbench.io/run";
/// The label of kwok fake nodes (tests/cluster/fake-nodes.sh).
pub const FAKE_NODE_SELECTOR: &str = "netbench.io/fake-node=true";

/// Everything a simulated worker needs from its pod.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerPod {
    pub namespace: String,
    /// The pod's name (also the worker's name, from NETBENCH_WORKER).
    pub pod: String,
    pub uid: String,
    pub service_account: String,
    pub node: String,
    pub pod_ip: Option<String>,
    pub operator_url: String,
    pub run: String,
    pub step: u32,
    pub worker: String,
    pub role: Role,
    /// The benchmark's kind as labelled (`ingressbenchmark`, `egressbenchmark`) and name.
    pub kind: String,
    pub benchmark: String,
    /// The worker's pair (EgressBenchmark: every case's workers are labelled with theirs).
    pub pair: Option<u32>,
    pub work: Work,
}

/// Why a pod is not (yet) one to play.
#[derive(Debug, PartialEq)]
pub enum Skip {
    /// Not yet: no node, no IP, being deleted.
    NotReady(&'static str),
    /// Never: not a worker pod, or one this simulator cannot read.
    Foreign(String),
}

/// The value of an environment variable as the kubelet resolves it (plain values and the
/// downward-API fields the operator uses).
fn resolve(env: &EnvVar, pod: &Pod) -> Option<String> {
    if let Some(v) = &env.value {
        return Some(v.clone());
    }
    let path = env
        .value_from
        .as_ref()?
        .field_ref
        .as_ref()?
        .field_path
        .as_str();
    let spec = pod.spec.as_ref();
    match path {
        "metadata.name" => pod.metadata.name.clone(),
        "metadata.namespace" => pod.metadata.namespace.clone(),
        "metadata.uid" => pod.metadata.uid.clone(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()),
        "status.podIP" => pod.status.as_ref().and_then(|s| s.pod_ip.clone()),
        _ => None,
    }
}

/// Reads a worker pod placed on a node (fake or not: the caller checks).
pub fn worker_pod(pod: &Pod) -> Result<WorkerPod, Skip> {
    let labels: BTreeMap<String, String> = pod.metadata.labels.clone().unwrap_or_default();
    let label = |k: &str| labels.get(k).cloned();
    if label(MANAGED_BY).as_deref() != Some(OPERATOR) {
        return Err(Skip::Foreign("not managed by netbench-operator".into()));
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return Err(Skip::NotReady("being deleted"));
    }
    let spec = pod.spec.as_ref().ok_or(Skip::NotReady("no spec"))?;
    let node = spec
        .node_name
        .clone()
        .ok_or(Skip::NotReady("not scheduled"))?;
    let container = spec
        .containers
        .first()
        .ok_or_else(|| Skip::Foreign("no container".into()))?;
    let env: BTreeMap<String, String> = container
        .env
        .iter()
        .flatten()
        .filter_map(|e| Some((e.name.clone(), resolve(e, pod)?)))
        .collect();
    let var = |k: &str| {
        env.get(k)
            .cloned()
            .ok_or_else(|| Skip::Foreign(format!("no {k} in the pod's environment")))
    };
    let role = match label(ROLE).as_deref() {
        Some("client") => Role::Client,
        Some("server") => Role::Server,
        other => return Err(Skip::Foreign(format!("role label {other:?}"))),
    };
    let pod_ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone());
    if role == Role::Server && pod_ip.is_none() {
        return Err(Skip::NotReady("a server needs its pod IP"));
    }
    let step = var("NETBENCH_STEP")?
        .parse()
        .map_err(|_| Skip::Foreign("NETBENCH_STEP is not a number".into()))?;
    let args = container.args.clone().unwrap_or_default();
    Ok(WorkerPod {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        pod: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        service_account: spec
            .service_account_name
            .clone()
            .unwrap_or_else(|| "default".into()),
        node,
        pod_ip,
        operator_url: var("NETBENCH_OPERATOR_URL")?,
        run: var("NETBENCH_RUN")?,
        step,
        worker: var("NETBENCH_WORKER")?,
        role,
        kind: label(KIND).unwrap_or_default(),
        benchmark: label(BENCHMARK).unwrap_or_default(),
        pair: label(PAIR).and_then(|p| p.parse().ok()),
        work: work_of(&args),
    })
}

impl WorkerPod {
    /// The address a server registers (`podIP:port`, as the real server does without a
    /// bind address).
    pub fn listen(&self) -> Option<String> {
        match (&self.work, &self.pod_ip) {
            (Work::Server { port }, Some(ip)) if ip.contains(':') => Some(format!("[{ip}]:{port}")),
            (Work::Server { port }, Some(ip)) => Some(format!("{ip}:{port}")),
            _ => None,
        }
    }

    /// The worker's index within its step ("...-w3" -> 3), if its name says.
    pub fn index(&self) -> Option<u32> {
        self.worker.rsplit_once("-w")?.1.parse().ok()
    }

    /// The server of this client's pair: worker 2i+1 of the same step for client 2i
    /// (operator/src/egress/plan.rs), if this is a paired client whose name says its index.
    pub fn pair_server(&self) -> Option<String> {
        let pair = self.pair?;
        if self.role != Role::Client || self.index()? != pair.checked_mul(2)? {
            return None;
        }
        let (stem, _) = self.worker.rsplit_once("-w")?;
        Some(format!("{stem}-w{}", pair.checked_mul(2)?.checked_add(1)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: &str) -> Pod {
        serde_json::from_str(json).unwrap()
    }

    const WORKER: &str = r#"{
      "metadata": {"name": "b-abc-g1-s0-w3", "namespace": "scale-1", "uid": "u-1",
        "labels": {"app.kubernetes.io/managed-by": "netbench-operator", "netbench.io/run": "abc-g1",
                   "netbench.io/role": "client", "netbench.io/kind": "ingressbenchmark",
                   "netbench.io/benchmark": "b"}},
      "spec": {"nodeName": "nb-fake-0", "serviceAccountName": "default", "containers": [{"name": "loadgen",
        "args": ["http", "-c", "2", "-t", "1", "-d", "1000ms", "http://t/"],
        "env": [{"name": "NETBENCH_OPERATOR_URL", "value": "http://netbench-operator.netbench-system.svc:8080"},
                {"name": "NETBENCH_RUN", "value": "abc-g1"}, {"name": "NETBENCH_STEP", "value": "0"},
                {"name": "NETBENCH_WORKER", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "NETBENCH_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}]},
      "status": {"podIP": "198.19.240.7"}}"#;

    #[test]
    fn a_worker_pod_is_read_like_the_kubelet_starts_it() {
        let w = worker_pod(&pod(WORKER)).unwrap();
        assert_eq!(w.worker, "b-abc-g1-s0-w3");
        assert_eq!(w.index(), Some(3));
        assert_eq!(
            (w.run.as_str(), w.step, w.role),
            ("abc-g1", 0, Role::Client)
        );
        assert_eq!(w.node, "nb-fake-0");
        assert!(matches!(w.work, Work::Http(_)));
        assert_eq!(w.listen(), None);
    }

    #[test]
    fn pods_not_ready_or_foreign_are_skipped() {
        let unscheduled = WORKER.replace(r#""nodeName": "nb-fake-0", "#, "");
        assert_eq!(
            worker_pod(&pod(&unscheduled)),
            Err(Skip::NotReady("not scheduled"))
        );
        let other = WORKER.replace(
            "netbench-operator\", \"netbench.io/run",
            "someone\", \"netbench.io/run",
        );
        assert!(matches!(worker_pod(&pod(&other)), Err(Skip::Foreign(_))));
        let server = WORKER.replace("\"client\"", "\"server\"").replace(
            r#""args": ["http", "-c", "2", "-t", "1", "-d", "1000ms", "http://t/"]"#,
            r#""args": ["server", "-p", "5301"]"#,
        );
        let w = worker_pod(&pod(&server)).unwrap();
        assert_eq!(w.listen().as_deref(), Some("198.19.240.7:5301"));
    }

    #[test]
    fn a_paired_client_knows_its_servers_name() {
        let paired = WORKER.replace(
            r#""netbench.io/benchmark": "b""#,
            r#""netbench.io/benchmark": "b", "netbench.io/pair": "1""#,
        );
        let w = worker_pod(&pod(&paired.replace("-w3", "-w2"))).unwrap();
        assert_eq!(w.pair, Some(1));
        assert_eq!(w.pair_server().as_deref(), Some("b-abc-g1-s0-w3"));
        // Not client 2i of its pair, or not paired at all: no server to expect.
        assert_eq!(worker_pod(&pod(&paired)).unwrap().pair_server(), None);
        assert_eq!(worker_pod(&pod(WORKER)).unwrap().pair_server(), None);
    }
}
