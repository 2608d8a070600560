//! Workers on the real nodes of the multi-node test cluster (tests/cluster, NB_NODES=3): pinned
//! by name, spread one per node, a selector no node matches, and a node whose kubelet stops
//! mid-run (with and without an offload change on it). Needs `eval "$(tests/e2e/setup.sh)"`.

use std::time::Duration;

use e2e::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{json, Value};

const NODES: [&str; 3] = ["nb-node0", "nb-node1", "nb-node2"];

/// ingress-simple.yaml, short, with `workers`.
fn ingress(ns: &str, duration: &str, workers: Value) -> Value {
    let mut ib = ingress_simple(ns, TARGET, duration, 4);
    set(&mut ib, "/spec/workers", workers);
    ib
}

fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref()?.node_name.clone()
}

/// Waits until `n` worker pods of `ns` are scheduled; returns their nodes, sorted.
async fn scheduled_nodes(client: &kube::Client, ns: &str, n: usize) -> Vec<String> {
    eventually(Duration::from_secs(90), async || {
        let pods = worker_pods(client, ns).await.unwrap();
        let mut nodes: Vec<String> = pods.iter().filter_map(node_of).collect();
        if nodes.len() >= n {
            nodes.sort();
            return Ok(nodes);
        }
        Err(format!("{n} worker pod(s) not scheduled in 90s: {nodes:?}"))
    })
    .await
}

#[tokio::test]
async fn node_names_put_each_worker_on_its_node() {
    let client = client().await;
    let ns = TestNs::new(&client, "pinned").await;
    let ib = ingress(
        &ns.name,
        "4s",
        json!({"nodeNames": ["nb-node2", "nb-node1"]}),
    );
    create(&client, &ns.name, &ib).await.unwrap();
    assert_eq!(
        scheduled_nodes(&client, &ns.name, 2).await,
        ["nb-node1", "nb-node2"]
    );
    let done = wait_succeeded(&client, IB, &ns.name, "ingress-simple").await;
    assert_eq!(done["status"]["workers"], "2/2", "{:#}", done["status"]);
    wait_no_children(&client, &ns.name, Duration::from_secs(60)).await;
}

#[tokio::test]
async fn spread_puts_workers_on_distinct_nodes() {
    let client = client().await;
    let ns = TestNs::new(&client, "spread").await;
    let ib = ingress(&ns.name, "4s", json!({"replicas": 3, "spread": true}));
    create(&client, &ns.name, &ib).await.unwrap();
    let nodes = scheduled_nodes(&client, &ns.name, 3).await;
    assert_eq!(nodes, NODES, "one worker on each real node");
    wait_succeeded(&client, IB, &ns.name, "ingress-simple").await;
    wait_no_children(&client, &ns.name, Duration::from_secs(60)).await;
}

/// No node has the label: the run does not hang in Preparing; it fails within the worker start
/// timeout (60 s in setup.sh) with the scheduler's reason, and leaves no pod.
#[tokio::test]
async fn a_node_selector_no_node_matches_fails_with_the_schedulers_reason() {
    let client = client().await;
    let ns = TestNs::new(&client, "noselect").await;
    let ib = ingress(
        &ns.name,
        "4s",
        json!({"nodeSelector": {"netbench.io/e2e-no-such-label": "x"}}),
    );
    let done = create_and_wait(&client, &ib, FINISHED, Duration::from_secs(120)).await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Failed", "{st:#}");
    let message = st["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("not scheduled") && message.contains("node affinity/selector"),
        "the scheduler's reason is in the message: {message}"
    );
    wait_no_children(&client, &ns.name, Duration::from_secs(60)).await;
}

/// The kubelet of `node` stopped (SIGSTOP: the process and its node status updates freeze,
/// the pods it started keep running) until dropped (SIGCONT).
struct StoppedKubelet {
    pid: String,
}

impl StoppedKubelet {
    fn stop(node: &str) -> StoppedKubelet {
        let pidfile = format!("/run/netbench-cluster/pids/kubelet-{node}.pid");
        let pid = std::fs::read_to_string(&pidfile)
            .unwrap_or_else(|e| panic!("{pidfile}: {e}"))
            .trim()
            .to_string();
        assert!(pid.chars().all(|c| c.is_ascii_digit()), "{pidfile}: {pid}");
        signal("STOP", &pid);
        StoppedKubelet { pid }
    }
}

impl Drop for StoppedKubelet {
    fn drop(&mut self) {
        signal("CONT", &self.pid);
    }
}

fn signal(sig: &str, pid: &str) {
    let ok = std::process::Command::new("kill")
        .args([&format!("-{sig}"), pid])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -{sig} {pid}");
}

/// Waits until the node's Ready condition is True again.
async fn wait_node_ready(client: &kube::Client, node: &str) {
    let nodes = kube::Api::<Node>::all(client.clone());
    let ready = |n: &Node| {
        let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
        conditions.is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    wait_for(&nodes, node, "Ready again", Duration::from_secs(120), ready).await;
}

/// Failed, with the Ready condition saying NodeLost and naming `node` (the phase message may
/// already tell what the operator does next, e.g. restoring offload settings).
fn assert_node_lost(st: &Value, node: &str) {
    assert_eq!(st["phase"], "Failed", "{st:#}");
    let ready = st["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .unwrap_or_else(|| panic!("no Ready condition: {st:#}"));
    assert_eq!(ready["reason"], "NodeLost", "{ready:#}");
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("node {node} is not ready")),
        "the message names the node: {message}"
    );
}

/// Waits until every running pod on `node` is Ready again. While a node is NotReady the node
/// controller marks its pods not ready, which empties their Services' endpoints (the test nginx,
/// Traefik): the next test must not start before they serve again.
async fn wait_pods_ready_on(client: &kube::Client, node: &str) {
    let pods: kube::Api<Pod> = kube::Api::all(client.clone());
    let lp = kube::api::ListParams::default().fields(&format!("spec.nodeName={node}"));
    eventually(Duration::from_secs(120), async || {
        let list = pods.list(&lp).await.unwrap();
        let not_ready: Vec<String> = list
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .filter(|p| {
                !p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        if not_ready.is_empty() {
            return Ok(());
        }
        Err(format!("pods on {node} not Ready again: {not_ready:?}"))
    })
    .await
}

/// A worker's node stops mid-run: the run fails naming the node (not "succeeded" with the
/// workers' numbers, not a wait until the deadline), and once the node is back its pods go.
#[tokio::test]
async fn a_worker_node_whose_kubelet_stops_fails_the_run_naming_it() {
    let client = client().await;
    let ns = TestNs::new(&client, "nodelost").await;
    let restarts = operator_restarts(&client).await;
    let ib = ingress(&ns.name, "90s", json!({"nodeNames": ["nb-node2"]}));
    create_and_wait(&client, &ib, &["Running"], RUN_TIMEOUT).await;
    let done = {
        let _stopped = StoppedKubelet::stop("nb-node2");
        wait_phase(
            &client,
            IB,
            &ns.name,
            "ingress-simple",
            FINISHED,
            Duration::from_secs(75),
        )
        .await
    };
    assert_node_lost(&done["status"], "nb-node2");
    wait_node_ready(&client, "nb-node2").await;
    wait_pods_ready_on(&client, "nb-node2").await;
    wait_no_children(&client, &ns.name, Duration::from_secs(120)).await;
    assert_eq!(
        operator_restarts(&client).await,
        restarts,
        "the operator kept running"
    );
}

/// The same with an offload change on the stopped node: while the node is gone nothing claims
/// the device restored; once it is back the restore runs and the features equal those before.
#[tokio::test]
async fn an_offload_change_on_a_node_that_stops_is_restored_when_it_returns() {
    let net = EgressNet::up().unwrap();
    let node = net.server_node.clone();
    let before = net.features(&node, &net.vxlan).unwrap();
    let client = client().await;
    let ns = TestNs::new(&client, "egpriv").await;
    let spec = json!({
        "offload": {"profiles": [{"name": "off", "settings": [{
            "nodeNames": [node], "interface": net.vxlan,
            "features": {"tx-checksumming": false}}]}]},
        "cases": [{
            "name": "vx", "offloadProfile": "off", "duration": "90s",
            "client": {"nodeName": net.client_node, "hostNetwork": true, "bindInterface": net.vxlan},
            "server": {"nodeName": node, "hostNetwork": true, "bindInterface": net.vxlan},
        }],
    });
    let eb = benchmark(EB, &ns.name, "lost", spec);
    create_and_wait(&client, &eb, &["Running"], RUN_TIMEOUT).await;
    assert_eq!(
        net.features(&node, &net.vxlan)
            .unwrap()
            .get("tx-checksumming")
            .map(String::as_str),
        Some("off"),
        "applied on {node}"
    );
    {
        let _stopped = StoppedKubelet::stop(&node);
        let done = wait_phase(
            &client,
            EB,
            &ns.name,
            "lost",
            FINISHED,
            Duration::from_secs(75),
        )
        .await;
        let st = &done["status"];
        assert_node_lost(st, &node);
        // While the node is away its device cannot have been restored, and nothing says so.
        assert!(
            !condition_is(&done, "OffloadRestored", "True"),
            "OffloadRestored=True while {node} is stopped: {st:#}"
        );
        for r in st["offload"].as_array().into_iter().flatten() {
            assert_ne!(r["restored"], true, "{r:#}");
        }
        assert_eq!(
            net.features(&node, &net.vxlan)
                .unwrap()
                .get("tx-checksumming")
                .map(String::as_str),
            Some("off"),
            "still off on {node} while its kubelet is stopped"
        );
    }
    wait_node_ready(&client, &node).await;
    wait_pods_ready_on(&client, &node).await;
    wait_offload_restored(&client, &ns.name, "lost", Duration::from_secs(180)).await;
    assert_eq!(
        net.features(&node, &net.vxlan).unwrap(),
        before,
        "{node}'s {} features after the restore equal those before",
        net.vxlan
    );
    wait_no_children(&client, &ns.name, Duration::from_secs(120)).await;
}
