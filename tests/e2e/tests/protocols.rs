//! deploy/examples/egress-protocols.yaml on the real test cluster, between two nodes: tcp-rr on
//! the pod path and through the Service the operator creates, tcp-crr, udp-rr, udp-stream at a
//! paced rate, a TCP stream with a latency probe, and a tcp-rr message-size sweep. Each case
//! must Succeed with its protocol's figures; the Service case must really go through a Service
//! (its client connected to a cluster IP, the pod case to a pod IP); the sweep gives its table;
//! the result, the metrics and the cleanup cover all of it. The example as written (no node
//! named) measures every case and sweep value on one node pair the run chose; cases pinned to
//! different pairs get no overhead, but the reason.

use std::time::Duration;

use crds::BenchmarkResult;
use e2e::*;
use kube::Api;
use serde_json::{json, Value};

const CLIENT_NODE: &str = "nb-node0";
const SERVER_NODE: &str = "nb-node1";

fn case<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["cases"]
        .as_array()
        .and_then(|cases| cases.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no result for case {name}: {status:#}"))
}

fn f(v: &Value, field: &str) -> f64 {
    v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} missing: {v:#}"))
}

/// The third octet of an "a.b.c.d:port" address: the test cluster's Service range is
/// 198.19.64.0/18 (64..128), its pod range 198.19.128.0/18 (tests/cluster/lib.sh).
fn third_octet(address: &str) -> u8 {
    address
        .split(['.', ':'])
        .nth(2)
        .and_then(|o| o.parse().ok())
        .unwrap_or_else(|| panic!("not an IPv4 address: {address}"))
}

#[tokio::test]
async fn every_protocol_service_path_and_sweep_between_two_nodes() {
    let client = client().await;
    let ns = TestNs::new(&client, "egproto").await;
    let mut eb = example("egress-protocols.yaml", &ns.name, &[]);
    for c in eb["spec"]["cases"].as_array_mut().unwrap() {
        c["client"]["nodeName"] = json!(CLIENT_NODE);
        c["server"]["nodeName"] = json!(SERVER_NODE);
        c["duration"] = json!("3s");
    }
    let done = create_and_wait(&client, &eb, FINISHED, Duration::from_secs(480)).await;
    let st = &done["status"];
    for c in st["cases"].as_array().into_iter().flatten() {
        eprintln!("{c}");
    }
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    assert_eq!(st["casesSummary"], "9/9", "a sweep of 3 counts 3 runs");

    // Request/response: transactions, ordered percentiles, nothing failed, CPU per transaction.
    for name in ["rr-pod", "rr-service", "crr", "udp-rr"] {
        let c = case(st, name);
        assert!(f(c, "transactionsPerSecond") > 0.0, "{c:#}");
        let l = &c["latency"];
        let p = |q: &str| f(l, q);
        assert!(
            p("p50") > 0.0 && p("p50") <= p("p90") && p("p90") <= p("p99") && p("p99") <= p("max"),
            "{c:#}"
        );
        assert_eq!(c["failures"], 0, "{c:#}");
        assert!(f(c, "clientCpuUsPerTransaction") > 0.0, "{c:#}");
        assert_eq!(c["serverNode"], SERVER_NODE);
        assert_eq!(c["clientNode"], CLIENT_NODE);
    }
    assert_eq!(case(st, "crr")["protocol"], "tcp-crr");
    // udp-rr over the overlay between two nodes of one machine: little or no loss.
    assert!(f(case(st, "udp-rr"), "lossPercent") < 5.0);

    // The Service path goes through a Service: its client connected to a cluster IP, the pod
    // case's to the server pod's IP; both are compared (same protocol), the others are not.
    let (pod, svc) = (case(st, "rr-pod"), case(st, "rr-service"));
    assert_eq!(
        (pod["path"].as_str(), svc["path"].as_str()),
        (Some("pod"), Some("service"))
    );
    let svc_addr = svc["serverAddress"].as_str().unwrap();
    let pod_addr = pod["serverAddress"].as_str().unwrap();
    assert!(
        (64..128).contains(&third_octet(svc_addr)),
        "Service path connected to {svc_addr}"
    );
    assert!(
        (128..192).contains(&third_octet(pod_addr)),
        "pod path connected to {pod_addr}"
    );
    assert!(svc["overheadPercent"].as_f64().is_some(), "{svc:#}");
    assert!(
        case(st, "datagrams")["overheadPercent"].is_null(),
        "no overhead across protocols"
    );

    // udp-stream paced at 100 Mbit/s: received close to it, loss and jitter reported.
    let d = case(st, "datagrams");
    let rx = f(d, "receiverBitsPerSecond");
    assert!(
        (50e6..=101e6).contains(&rx),
        "received {rx} bit/s of 100M offered"
    );
    assert!(
        f(d, "lossPercent") < 5.0 && f(d, "jitterMs") >= 0.0,
        "{d:#}"
    );
    assert_eq!(d["messageSize"], 1200);

    // Latency under load: the probe's percentiles next to the stream's throughput.
    let l = case(st, "latency-under-load");
    assert!(f(l, "receiverBitsPerSecond") > 1e6, "{l:#}");
    assert!(f(&l["probeLatency"], "p99") > 0.0, "{l:#}");

    // The sweep: one run per size, in order, each with its size.
    let runs: Vec<&Value> = st["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["case"] == "rr-sizes")
        .collect();
    let sizes: Vec<_> = runs.iter().map(|c| c["messageSize"].clone()).collect();
    assert_eq!(sizes, [json!(1), json!(1024), json!(16384)]);
    assert_eq!(runs[2]["name"], "rr-sizes/messageSize=16384");
    assert!(runs.iter().all(|c| f(c, "transactionsPerSecond") > 0.0));

    // The result: a measurement per run with its parameters, histograms for the rr runs.
    let name = st["latestResult"].as_str().unwrap();
    let result = Api::<BenchmarkResult>::namespaced(client.clone(), &ns.name)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("result {name}: {e}"));
    let result = serde_json::to_value(result).unwrap();
    let ms = result["spec"]["measurements"].as_array().unwrap();
    assert_eq!(ms.len(), 9);
    // Measurements are named as the operator describes them: "case <run name>".
    let m = |name: &str| {
        ms.iter()
            .find(|m| m["name"] == format!("case {name}"))
            .unwrap_or_else(|| panic!("no measurement for {name}: {ms:#?}"))
    };
    assert_eq!(
        m("rr-sizes/messageSize=1024")["parameters"]["messageSize"],
        "1024"
    );
    assert_eq!(m("rr-service")["parameters"]["path"], "service");
    assert!(
        m("crr")["histogram"].is_string(),
        "rr runs keep their latency histogram"
    );
    assert!(
        m("latency-under-load")["histogram"].is_string(),
        "and the latency probe's"
    );
    assert!(m("datagrams")["histogram"].is_null());
    let names: Vec<_> = m("udp-rr")["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].clone())
        .collect();
    assert!(
        names.contains(&json!("transactionsPerSecond")) && names.contains(&json!("lossPercent"))
    );

    // Prometheus: the new figures of this benchmark.
    let metrics = operator_metrics(&client).await.unwrap();
    let has = |metric: &str, case: &str| {
        metrics.lines().any(|l| {
            l.starts_with(metric)
                && l.contains(&format!("namespace=\"{}\"", ns.name))
                && l.contains(&format!("case=\"{case}\""))
        })
    };
    assert!(has("netbench_egress_transactions_per_second", "rr-service"));
    assert!(has("netbench_egress_latency_seconds", "udp-rr"));
    assert!(has("netbench_egress_loss_ratio", "datagrams"));
    assert!(has("netbench_egress_jitter_seconds", "datagrams"));

    // Pods and the Service are gone (cleanup: Always).
    wait_no_children(&client, &ns.name, Duration::from_secs(60)).await;
}

/// The example as written (no node named): every case and every value of the sweep measured
/// on the one node pair the run chose, client and server on different nodes, both nodes in
/// status, in the result and in the report; rr-service is compared with rr-pod on that pair.
#[tokio::test]
async fn the_example_as_written_measures_every_case_on_one_node_pair() {
    let client = client().await;
    let ns = TestNs::new(&client, "egpair").await;
    let eb = example("egress-protocols.yaml", &ns.name, &[]);
    let done = create_and_wait(&client, &eb, FINISHED, Duration::from_secs(600)).await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    let cases = st["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 9, "{st:#}");
    let pair = |c: &Value| {
        let node = |k: &str| {
            c[k].as_str()
                .unwrap_or_else(|| panic!("{k} missing: {c:#}"))
                .to_string()
        };
        (node("clientNode"), node("serverNode"))
    };
    let chosen = pair(&cases[0]);
    eprintln!("node pair: {} -> {}", chosen.0, chosen.1);
    assert_ne!(chosen.0, chosen.1, "client and server on different nodes");
    for c in cases {
        assert_eq!(
            pair(c),
            chosen,
            "every case and sweep value on one pair: {c:#}"
        );
        assert!(c["notComparable"].is_null(), "{c:#}");
    }
    let (pod, svc) = (case(st, "rr-pod"), case(st, "rr-service"));
    let overhead = f(svc, "overheadPercent");
    eprintln!(
        "rr-pod {:.0} tx/s, rr-service {:.0} tx/s, overhead {overhead:.1} %, column {}",
        f(pod, "transactionsPerSecond"),
        f(svc, "transactionsPerSecond"),
        st["overhead"]
    );
    let column = st["overhead"].as_str().unwrap_or_default();
    assert!(!column.contains("not comparable"), "{column}");
    // The Event that names the pair, once.
    let said = event_messages(&ns.name, "NodePair").unwrap();
    assert!(
        said.contains(&format!("client on {}, server on {}", chosen.0, chosen.1)),
        "{said}"
    );

    // The result: both nodes of every measurement.
    let name = st["latestResult"].as_str().unwrap();
    let result = Api::<BenchmarkResult>::namespaced(client.clone(), &ns.name)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("result {name}: {e}"));
    for m in &result.spec.measurements {
        let p = |k: &str| m.parameters.get(k).cloned();
        assert_eq!(
            (p("clientNode"), p("serverNode")),
            (Some(chosen.0.clone()), Some(chosen.1.clone())),
            "{}",
            m.name
        );
    }
    // The report: both nodes in the tables, the sweep drawn (one pair), no "not comparable".
    let loaded = netbench_cli::source::Loaded {
        origin: format!("result {name}"),
        name: name.to_string(),
        created: None,
        spec: result.spec.clone(),
        conditions: vec![],
    };
    let r = netbench_cli::report::render(&[loaded]).unwrap();
    let md = &r.markdown;
    let row = format!(
        "| case rr-service | as found | {} | {} |",
        chosen.0, chosen.1
    );
    assert!(md.contains(&row), "{row} missing:\n{md}");
    let sweep = format!("client node {}, server node {}", chosen.0, chosen.1);
    assert!(md.contains(&sweep), "{sweep} missing:\n{md}");
    assert!(!md.contains("not comparable"), "{md}");
    assert!(r.charts.iter().any(|c| c.file.contains("sweep")), "{md}");
    wait_no_children(&client, &ns.name, Duration::from_secs(60)).await;
}

/// Two cases pinned to different node pairs: the second gets no overhead against the first,
/// but the reason, naming both pairs; the printer column says a case was left out.
#[tokio::test]
async fn cases_pinned_to_different_pairs_get_no_overhead_but_the_reason() {
    let client = client().await;
    let ns = TestNs::new(&client, "egpairs").await;
    let rr = |name: &str, c: &str, s: &str| {
        json!({"name": name, "protocol": "tcp-rr", "duration": "2s",
               "client": {"nodeName": c}, "server": {"nodeName": s}})
    };
    let obj = benchmark(
        EB,
        &ns.name,
        "apart",
        json!({"cases": [rr("base", "nb-node0", "nb-node1"), rr("other", "nb-node2", "nb-node0")]}),
    );
    let done = create_and_wait(&client, &obj, FINISHED, Duration::from_secs(300)).await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    let other = case(st, "other");
    assert!(f(other, "transactionsPerSecond") > 0.0, "{other:#}");
    assert!(other["overheadPercent"].is_null(), "{other:#}");
    assert_eq!(
        other["notComparable"],
        "not comparable: nb-node2->nb-node0 vs nb-node0->nb-node1 (baseline base)",
        "{other:#}"
    );
    assert_eq!(st["overhead"], "1 not comparable", "{st:#}");
    // No pair was chosen: every case placed itself. (The run's Succeeded Event is published after
    // any NodePair Event it would have had.)
    let ended = events(&ns.name, "Succeeded", &[]).unwrap();
    assert!(!ended.trim().is_empty(), "no Succeeded Event");
    let said = events_now(
        &ns.name,
        "NodePair",
        &["-o", "jsonpath={.items[*].message}"],
    )
    .unwrap();
    assert!(said.trim().is_empty(), "{said}");
    wait_no_children(&client, &ns.name, Duration::from_secs(60)).await;
}

/// Uncordons the nodes when dropped (also when the test fails).
struct Cordoned(Vec<&'static str>);

impl Drop for Cordoned {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = kubectl(&["uncordon", n]);
        }
    }
}

/// With one node that can take a worker (the others cordoned), the run's pair is that node
/// with itself, and a Warning Event says so; the case shows the same node on both ends.
#[tokio::test]
async fn one_schedulable_node_is_a_pair_with_itself_and_is_said() {
    let client = client().await;
    let ns = TestNs::new(&client, "egpairone").await;
    let _cordoned = Cordoned(vec!["nb-node1", "nb-node2"]);
    for n in &_cordoned.0 {
        kubectl(&["cordon", n]).unwrap();
    }
    let obj = benchmark(
        EB,
        &ns.name,
        "alone",
        json!({"cases": [{"name": "rr", "protocol": "tcp-rr", "duration": "2s", "client": {}, "server": {}}]}),
    );
    let done = create_and_wait(&client, &obj, FINISHED, Duration::from_secs(300)).await;
    drop(_cordoned);
    let st = &done["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    let rr = case(st, "rr");
    assert_eq!(
        (rr["clientNode"].as_str(), rr["serverNode"].as_str()),
        (Some("nb-node0"), Some("nb-node0")),
        "{rr:#}"
    );
    let warned = events(
        &ns.name,
        "NodePair",
        &["-o", "jsonpath={.items[*].type} {.items[*].message}"],
    )
    .unwrap();
    assert!(
        warned.starts_with("Warning")
            && warned.contains("only one node can take a worker (nb-node0)"),
        "{warned}"
    );
    wait_no_children(&client, &ns.name, Duration::from_secs(60)).await;
}

/// Absurd values never reach the operator: the API server refuses them with the rule's message.
#[tokio::test]
async fn absurd_protocol_fields_are_refused_by_the_api_server() {
    let client = client().await;
    let ns = TestNs::new(&client, "egprotobad").await;
    let bad: &[(Value, &str)] = &[
        (
            json!({"protocol": "tcp-stream", "requestSize": 64}),
            "apply to protocols tcp-rr, tcp-crr and udp-rr only",
        ),
        (
            json!({"protocol": "tcp-rr", "rate": 0}),
            "should be greater than or equal to 1",
        ),
        (
            json!({"protocol": "tcp-rr", "burst": 100000}),
            "should be less than or equal to 256",
        ),
        (
            json!({"protocol": "udp-stream", "bitrate": "9T"}),
            "should match",
        ),
        (
            json!({"protocol": "udp-stream", "bitrate": "999"}),
            "should match",
        ),
        (
            json!({"protocol": "udp-stream", "messageSize": 20}),
            "32-byte header",
        ),
        (
            json!({"protocol": "tcp-rr", "burst": 8, "requestSize": 65536}),
            "both ends could block on full socket buffers",
        ),
        (
            json!({"protocol": "udp-stream", "messageSize": 70000}),
            "a UDP datagram carries at most 65507 bytes",
        ),
        (
            json!({"protocol": "udp-rr", "requestSize": 2}),
            "8-byte sequence number",
        ),
        (
            json!({"sweep": {"messageSizes": [1, 2, 3, 4, 5], "streams": [1, 2, 3, 4]}}),
            "at most 16 times",
        ),
        (json!({"protocol": "teapot"}), "Unsupported value"),
    ];
    for (i, (fields, message)) in bad.iter().enumerate() {
        let mut c = json!({"name": "c", "client": {}, "server": {}});
        for (k, v) in fields.as_object().unwrap() {
            c[k] = v.clone();
        }
        let obj = benchmark(EB, &ns.name, &format!("bad-{i}"), json!({"cases": [c]}));
        let err = create(&client, &ns.name, &obj)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(message), "{fields}: {err}");
    }
}

/// A Service someone else created under the name the operator will use (names are predictable
/// from the benchmark's uid) is never used: the run ends Failed (ServiceConflict) before any
/// client connects through it, and the Service is left alone.
#[tokio::test]
async fn a_service_the_operator_did_not_create_is_never_used() {
    use k8s_openapi::api::core::v1::Service;
    let client = client().await;
    let restarts = operator_restarts(&client).await;
    let ns = TestNs::new(&client, "egprotosvc").await;
    let nodes = json!({"client": {"nodeName": CLIENT_NODE}, "server": {"nodeName": SERVER_NODE}});
    let rr_case = |name: &str, service: bool, duration: &str| {
        let mut c = nodes.clone();
        c["name"] = json!(name);
        c["protocol"] = json!("tcp-rr");
        c["duration"] = json!(duration);
        c["server"]["service"] = json!(service);
        c
    };
    // The first case runs for a while: time to take the second case's Service name.
    let obj = benchmark(
        EB,
        &ns.name,
        "hijack",
        json!({"cases": [rr_case("first", false, "4s"), rr_case("svc", true, "2s")]}),
    );
    create(&client, &ns.name, &obj).await.unwrap();
    let created = get_benchmark(&client, EB, &ns.name, "hijack")
        .await
        .unwrap();
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let short: String = uid
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(8)
        .collect();
    // Step 1's server (worker 1) is behind nb-<benchmark>-<run>-s1-w1.
    let name = format!("nb-hijack-{short}-g1-s1-w1");
    let squatter: Service = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns.name},
        "spec": {"type": "ExternalName", "externalName": "elsewhere.example"},
    }))
    .unwrap();
    let services = Api::<Service>::namespaced(client.clone(), &ns.name);
    services
        .create(&Default::default(), &squatter)
        .await
        .unwrap();

    let done = wait_phase(
        &client,
        EB,
        &ns.name,
        "hijack",
        FINISHED,
        Duration::from_secs(300),
    )
    .await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Failed", "{st:#}");
    let ready = condition(&done, "Ready");
    assert_eq!(ready["reason"], "ServiceConflict", "{ready:#}");
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&name) && message.contains("not owned by this benchmark"),
        "{message}"
    );
    // The first case ran; the second never had a client.
    assert!(
        f(case(st, "first"), "transactionsPerSecond") > 0.0,
        "{st:#}"
    );
    let measured: Vec<_> = st["cases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| &c["name"])
        .collect();
    assert!(!measured.contains(&&json!("svc")), "{st:#}");
    wait_no_children(&client, &ns.name, Duration::from_secs(60)).await;
    let kept = services
        .get(&name)
        .await
        .expect("the squatter's Service is left alone");
    assert_eq!(
        kept.spec.and_then(|s| s.external_name).as_deref(),
        Some("elsewhere.example")
    );
    assert_eq!(operator_restarts(&client).await, restarts);
}
