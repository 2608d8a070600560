//! deploy/examples/egress-topologies.yaml on the real 3-node test cluster: a `pairs: 2` case,
//! a fan-in of 3 clients to one server node and the node-pair matrix of the 3 nodes (6 ordered
//! pairs), its nodes chosen by a node selector. Placement exactly as asked, checked from the pods' nodes; a row per pair whose nodes
//! are the pods'; aggregates equal to a recomputation from the rows. And the refusals: a pair
//! that cannot be placed, and a topology that would create more pods than the admin allows,
//! are refused with a clear message before any pod exists.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use e2e::*;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};

const NODES: [&str; 3] = ["nb-node0", "nb-node1", "nb-node2"];

fn case<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["cases"]
        .as_array()
        .and_then(|cases| cases.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no result for case {name}: {status:#}"))
}

/// (step, pair) -> (client node, server node) from the worker pods.
fn placed(pods: &[Pod]) -> BTreeMap<(String, String), (String, String)> {
    let mut out: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
    for p in pods {
        let labels = p.metadata.labels.clone().unwrap_or_default();
        let key = (
            labels["netbench.io/step"].clone(),
            labels["netbench.io/pair"].clone(),
        );
        let node = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let entry = out.entry(key).or_default();
        match labels["netbench.io/role"].as_str() {
            "client" => entry.0 = node,
            _ => entry.1 = node,
        }
    }
    out
}

/// The rows of a case as (pair, client node, server node, value).
fn rows(c: &Value) -> Vec<(u64, String, String, f64)> {
    c["pairs"]
        .as_array()
        .unwrap_or_else(|| panic!("no pairs: {c:#}"))
        .iter()
        .map(|r| {
            (
                r["pair"].as_u64().unwrap(),
                r["clientNode"].as_str().unwrap().to_string(),
                r["serverNode"].as_str().unwrap().to_string(),
                r["value"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// Sum, median, p05 and p95 (nearest rank) of `values`, as the operator defines them.
fn recomputed(values: &[f64]) -> (f64, f64, f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    (v.iter().sum(), rank(0.5), rank(0.05), rank(0.95))
}

/// Asserts that `ns` holds no worker pod.
async fn assert_no_pods(client: &kube::Client, ns: &str) {
    assert!(
        worker_pods(client, ns).await.unwrap().is_empty(),
        "no pod was created"
    );
}

/// Creates `eb` and waits until it finished (60 s at most); asserts that its status message
/// holds `expected`, and returns its phase.
async fn refusal(client: &kube::Client, eb: &Value, expected: &str) -> Value {
    let done = create_and_wait(client, eb, FINISHED, Duration::from_secs(60)).await;
    let message = done["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(expected), "{message}");
    done["status"]["phase"].clone()
}

#[tokio::test]
async fn pairs_fan_in_and_a_three_node_matrix_are_placed_as_asked() {
    let client = client().await;
    let ns = TestNs::new(&client, "egtopo").await;
    let restarts = operator_restarts(&client).await;
    let mut eb = example("egress-topologies.yaml", &ns.name, &[]);
    set(&mut eb, "/spec/cleanup", json!("Never"));
    for c in eb["spec"]["cases"].as_array_mut().unwrap() {
        c["duration"] = json!("3s");
    }
    let names = |list: &[&str]| json!({"names": list});
    let cases = eb["spec"]["cases"].as_array_mut().unwrap();
    cases[1]["topology"]["serverNodes"] = names(&[NODES[1]]);
    cases[1]["topology"]["clientNodes"] = names(&[NODES[0], NODES[2]]);
    // The matrix keeps the example's selector (kubernetes.io/os: linux): the 3 nodes.
    let done = create_and_wait(&client, &eb, FINISHED, Duration::from_secs(420)).await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    let pods = worker_pods(&client, &ns.name).await.unwrap();
    let by_pair = placed(&pods);
    assert_eq!(
        by_pair.len(),
        2 + 3 + 6,
        "a client and a server per pair: {by_pair:?}"
    );

    // pairs: 2, placed by the scheduler, never a client on its own server's node.
    for pair in ["0", "1"] {
        let (c, s) = &by_pair[&("0".to_string(), pair.to_string())];
        assert!(
            !c.is_empty() && !s.is_empty() && c != s,
            "pair {pair}: {c} -> {s}"
        );
    }
    // fan-in: every server on nb-node1, clients round-robin on nb-node0 and nb-node2.
    let fan: Vec<(String, String)> = (0..3)
        .map(|i| by_pair[&("1".to_string(), i.to_string())].clone())
        .collect();
    let want = |c: &str, s: &str| (c.to_string(), s.to_string());
    assert_eq!(
        fan,
        [
            want(NODES[0], NODES[1]),
            want(NODES[2], NODES[1]),
            want(NODES[0], NODES[1])
        ]
    );
    // The matrix: each of the 6 ordered pairs of different nodes exactly once.
    let matrix: BTreeSet<(String, String)> = (0..6)
        .map(|i| by_pair[&("2".to_string(), i.to_string())].clone())
        .collect();
    let all: BTreeSet<(String, String)> = NODES
        .iter()
        .flat_map(|a| {
            NODES
                .iter()
                .filter(move |b| *b != a)
                .map(move |b| want(a, b))
        })
        .collect();
    assert_eq!(matrix, all);

    for (step, name, pairs) in [("0", "pairs", 2), ("1", "fan-in", 3), ("2", "matrix", 6)] {
        let c = case(st, name);
        let rows = rows(c);
        assert_eq!(rows.len(), pairs, "{name}: {c:#}");
        for (pair, cn, sn, value) in &rows {
            // The row's nodes are where the pods ran; every pair moved something.
            let pods_at = &by_pair[&(step.to_string(), pair.to_string())];
            assert_eq!((cn, sn), (&pods_at.0, &pods_at.1), "{name} pair {pair}");
            assert!(*value > 0.0, "{name} pair {pair}: {c:#}");
        }
        let values: Vec<f64> = rows.iter().map(|r| r.3).collect();
        let (sum, median, p05, p95) = recomputed(&values);
        let agg = &c["aggregate"];
        assert_eq!(agg["pairs"], json!(pairs));
        assert!(
            (agg["sum"].as_f64().unwrap() - sum).abs() < 0.01 * pairs as f64,
            "{agg}"
        );
        assert_eq!(agg["median"].as_f64().unwrap(), median, "{agg}");
        assert_eq!(agg["p05"].as_f64().unwrap(), p05, "{agg}");
        assert_eq!(agg["p95"].as_f64().unwrap(), p95, "{agg}");
        // The case's own figure is the sum of its pairs'.
        let main = c["transactionsPerSecond"]
            .as_f64()
            .unwrap_or_else(|| c["receiverBitsPerSecond"].as_f64().unwrap());
        assert!(
            (main - sum).abs() <= 0.01 * pairs as f64 + 1.0,
            "{name}: {main} vs {sum}"
        );
        let spread = agg["startSpreadMs"].as_f64().unwrap();
        assert!(
            (0.0..5_000.0).contains(&spread),
            "{name}: start spread {spread} ms"
        );
    }
    let latency = &case(st, "matrix")["latency"];
    assert!(
        latency["p99"].as_f64().unwrap() > 0.0,
        "merged latency: {latency}"
    );

    // The BenchmarkResult keeps the rows, made of the reports: a pinned pair's nodes are its
    // pins, an unpinned pair has its client's node and no server node (servers send no report).
    let name = st["latestResult"].as_str().expect("a result");
    let result = kube::Api::<crds::BenchmarkResult>::namespaced(client.clone(), &ns.name)
        .get(name)
        .await
        .unwrap();
    let kept = |index: u32| -> BTreeSet<(Option<String>, Option<String>)> {
        let m = result
            .spec
            .measurements
            .iter()
            .find(|m| m.index == index)
            .unwrap();
        m.pairs
            .iter()
            .map(|p| (p.client_node.clone(), p.server_node.clone()))
            .collect()
    };
    let some = |(c, s): &(String, String)| (Some(c.clone()), Some(s.clone()));
    assert_eq!(kept(2), all.iter().map(some).collect());
    assert_eq!(kept(1), fan.iter().map(some).collect());
    let unpinned = kept(0);
    assert!(
        !unpinned.is_empty() && unpinned.iter().all(|(c, s)| c.is_some() && s.is_none()),
        "{unpinned:?}"
    );

    // What the selector matched is kept in the operator's namespace while the benchmark
    // exists (never in status), and goes with it.
    let uid = done["metadata"]["uid"].as_str().unwrap().to_string();
    let record = format!("netbench-nodes-{uid}");
    let cms = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
        client.clone(),
        OPERATOR_NAMESPACE,
    );
    let kept_nodes = cms.get(&record).await.expect("the node selector record");
    let text = &kept_nodes.data.unwrap()["record.json"];
    assert!(NODES.iter().all(|n| text.contains(n)), "{text}");
    kubectl(&[
        "delete",
        "egressbenchmark",
        "-n",
        &ns.name,
        "egress-topologies",
        "--wait=true",
    ])
    .unwrap();
    eventually(Duration::from_secs(60), async || {
        match cms.get_opt(&record).await {
            Ok(None) => Ok(()),
            other => Err(format!("{record} outlived its benchmark: {other:?}")),
        }
    })
    .await;
    assert_eq!(operator_restarts(&client).await, restarts);
}

#[tokio::test]
async fn a_pair_that_cannot_be_placed_or_too_many_pods_are_refused_before_any_pod() {
    let client = client().await;
    let ns = TestNs::new(&client, "egtopobad").await;
    let restarts = operator_restarts(&client).await;
    let one = |name: &str, topology: Value| {
        benchmark(
            EB,
            &ns.name,
            name,
            json!({"cases": [{"name": "c", "client": {}, "server": {}, "duration": "2s", "topology": topology}]}),
        )
    };
    let stuck = one(
        "stuck",
        json!({"fanIn": 2, "serverNodes": {"names": [NODES[0]]}, "clientNodes": {"names": [NODES[0]]}}),
    );
    assert_eq!(
        refusal(
            &client,
            &stuck,
            "pair 0: its client has no node but nb-node0, where its peer runs"
        )
        .await,
        "Failed"
    );
    // 9 pairs are 18 pods; setup.sh keeps the chart's caps.maxWorkers of 16.
    let many = one("many", json!({"pairs": 9}));
    assert_eq!(refusal(&client, &many, "its worker pods (a client and a server per pair) is 18, above the cluster admin's cap of 16").await, "Failed");
    assert_no_pods(&client, &ns.name).await;
    // A matrix whose selector matches no node is refused, naming the selector.
    let nowhere = one(
        "nowhere",
        json!({"matrix": {}, "clientNodes": {"selector": {"netbench.io/e2e-no-such-pool": "x"}}}),
    );
    assert_eq!(refusal(&client, &nowhere, "case c: topology.clientNodes.selector netbench.io/e2e-no-such-pool=x matches 0 usable node(s) of 0").await, "Failed");
    assert_no_pods(&client, &ns.name).await;
    // A node that does not exist is named.
    let ghost = one(
        "ghost",
        json!({"pairs": 1, "clientNodes": {"names": ["nb-nowhere"]}}),
    );
    refusal(&client, &ghost, "node nb-nowhere does not exist").await;
    assert_eq!(operator_restarts(&client).await, restarts);
}

#[tokio::test]
async fn host_network_servers_of_a_fan_in_share_their_node_on_ports_of_their_own() {
    let client = client().await;
    // e2e-egpriv-*: where setup.sh lets the admin's opt-in allow hostNetwork workers.
    let ns = TestNs::new(&client, "egpriv").await;
    let eb = benchmark(
        EB,
        &ns.name,
        "fanin-host",
        json!({"cleanup": "Never", "cases": [{
            "name": "fan-in", "protocol": "tcp-rr", "rate": 200, "duration": "2s",
            "client": {"hostNetwork": true}, "server": {"hostNetwork": true, "port": 5301},
            "topology": {"fanIn": 3, "serverNodes": {"names": [NODES[1]]},
                         "clientNodes": {"names": [NODES[0], NODES[2]]}},
        }]}),
    );
    let done = create_and_wait(&client, &eb, FINISHED, Duration::from_secs(240)).await;
    let st = &done["status"];
    // Three servers in one network namespace: on one port the second and third could not
    // listen and the run would fail.
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    let pods = worker_pods(&client, &ns.name).await.unwrap();
    let mut ports: Vec<String> = pods
        .iter()
        .filter(|p| p.metadata.labels.as_ref().unwrap()["netbench.io/role"] == "server")
        .map(|p| {
            let args = p.spec.as_ref().unwrap().containers[0].args.clone().unwrap();
            let at = args.iter().position(|a| a == "-p").unwrap();
            args[at + 1].clone()
        })
        .collect();
    ports.sort();
    assert_eq!(ports, ["5301", "5302", "5303"]);
    let c = case(st, "fan-in");
    assert_eq!(c["aggregate"]["pairs"], json!(3));
    assert!(
        rows(c).iter().all(|r| r.2 == NODES[1] && r.3 > 0.0),
        "{c:#}"
    );
}
