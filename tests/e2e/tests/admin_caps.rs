//! The cluster admin's caps end to end, with the operator as the chart installs it (default
//! caps: no operator env is changed): a benchmark over the workers cap, one aimed at the API
//! server and one at the cloud metadata address are refused (Invalid/NotPermitted naming the
//! field, value and cap, a Warning Event, Failed, no pod), while one within the caps succeeds;
//! a namespace's run beyond its concurrent-run cap waits in Queued, then runs.
//! Needs `eval "$(tests/e2e/setup.sh)"` (tests/run-all.sh does it).

use std::time::Duration;

use anyhow::{Context as _, Result};
use e2e::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use serde_json::{json, Value};

/// The nginx Service tests/cluster/demo.sh deploys, as three different host names: runs that
/// name different hosts do not queue behind each other for sharing a target.
const TARGETS: [&str; 3] = [
    "http://nginx-target.netbench-target.svc.cluster.local/",
    "http://nginx-target.netbench-target.svc/",
    "http://nginx-target.netbench-target/",
];
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(60);

/// ingress-simple.yaml as `name`, loading `url` for `duration` with 8 connections.
fn bench(ns: &str, name: &str, url: &str, duration: &str) -> Value {
    let mut ib = ingress_simple(ns, url, duration, 8);
    set(&mut ib, "/metadata/name", json!(name));
    ib
}

/// A numeric cap as the operator's Deployment sets it (the chart always renders every cap).
async fn operator_cap(client: &kube::Client, env: &str) -> Result<u64> {
    let d = Api::<Deployment>::namespaced(client.clone(), OPERATOR_NAMESPACE)
        .get("netbench-operator")
        .await?;
    let d = serde_json::to_value(d)?;
    let containers = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let value = containers
        .iter()
        .flat_map(|c| c["env"].as_array().cloned().unwrap_or_default())
        .find(|e| e["name"] == env)
        .and_then(|e| e["value"].as_str().map(String::from))
        .with_context(|| format!("the operator Deployment sets no {env}"))?;
    value
        .parse()
        .with_context(|| format!("{env}={value} is not a number"))
}

/// Waits for the Warning Event of a failed benchmark, carrying `needle` in its note.
async fn wait_warning_event(ns: &str, name: &str, needle: &str) {
    let selector = format!("involvedObject.name={name},type=Warning");
    eventually(Duration::from_secs(30), async || {
        let notes = kubectl(&[
            "-n",
            ns,
            "get",
            "events",
            "--field-selector",
            &selector,
            "-o",
            "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}",
        ])
        .unwrap();
        if notes
            .lines()
            .any(|l| l.starts_with("Failed: ") && l.contains(needle))
        {
            return Ok(());
        }
        Err(format!(
            "no Warning Event Failed for {ns}/{name} with {needle:?}; events: {notes}"
        ))
    })
    .await
}

/// The benchmark ends Failed with the refusal: phase message, condition Invalid (reason
/// NotPermitted), a Warning Event, all carrying `needle`.
async fn assert_refused(client: &kube::Client, ns: &str, name: &str, needle: &str) {
    let done = wait_phase(client, IB, ns, name, FINISHED, REFUSAL_TIMEOUT).await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Failed", "{name}: {st:#}");
    let message = st["message"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "{name}: {message}");
    let invalid = condition(&done, "Invalid");
    assert_eq!(invalid["status"], "True", "{name}: {invalid}");
    assert_eq!(invalid["reason"], "NotPermitted", "{name}: {invalid}");
    assert!(
        invalid["message"]
            .as_str()
            .is_some_and(|m| m.contains(needle)),
        "{name}: {invalid}"
    );
    wait_warning_event(ns, name, needle).await;
}

#[tokio::test]
async fn over_the_caps_or_at_forbidden_targets_is_refused_while_a_run_within_succeeds() {
    let client = client().await;
    let max_workers = operator_cap(&client, "NETBENCH_MAX_WORKERS").await.unwrap();
    assert!(
        max_workers < 64,
        "the workers cap {max_workers} leaves no replica count the schema allows above it"
    );
    let refused = TestNs::new(&client, "capsno").await;
    let allowed = TestNs::new(&client, "capsok").await;
    let ns = refused.name.as_str();

    let mut workers = bench(ns, "too-many-workers", TARGETS[0], "4s");
    set(
        &mut workers,
        "/spec/workers",
        json!({"replicas": max_workers + 1}),
    );
    let apiserver = bench(ns, "apiserver", "https://kubernetes.default.svc/", "4s");
    let metadata = bench(
        ns,
        "metadata",
        "http://169.254.169.254/latest/meta-data/",
        "4s",
    );
    let within = bench(&allowed.name, "within", TARGETS[0], "4s");
    for (namespace, b) in [(ns, &workers), (ns, &apiserver), (ns, &metadata)] {
        create(&client, namespace, b).await.unwrap();
    }
    create(&client, &allowed.name, &within).await.unwrap();

    let over = max_workers + 1;
    assert_refused(
        &client,
        ns,
        "too-many-workers",
        &format!("workers.replicas is {over}, above the cluster admin's cap of {max_workers} worker pods per benchmark (Helm value caps.maxWorkers)"),
    )
    .await;
    // kubernetes.default.svc resolves to the Service's ClusterIP, which the operator looks up.
    assert_refused(
        &client,
        ns,
        "apiserver",
        "(kubernetes.default.svc resolves to it) is an address of the Kubernetes API server",
    )
    .await;
    assert_refused(
        &client,
        ns,
        "metadata",
        "target.url http://169.254.169.254/latest/meta-data/: 169.254.169.254 is inside 169.254.0.0/16, which the cluster admin denies (Helm value targets.denied)",
    )
    .await;
    let left = all_pods_and_jobs(&client, ns).await.unwrap();
    assert!(left.is_empty(), "refused benchmarks created {left:?}");
    let left = children(&client, ns).await.unwrap();
    assert!(left.is_empty(), "refused benchmarks created {left:?}");

    let done = wait_succeeded(&client, IB, &allowed.name, "within").await;
    assert_eq!(condition(&done, "Invalid")["status"], "False");
    assert!(done["status"]["steps"][0]["requests"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn a_run_beyond_the_namespace_cap_waits_in_queued_then_runs() {
    let client = client().await;
    let cap = operator_cap(&client, "NETBENCH_MAX_RUNS_PER_NAMESPACE")
        .await
        .unwrap();
    let cap = usize::try_from(cap).unwrap();
    assert!(
        cap < TARGETS.len(),
        "this test has {} distinct targets; the per-namespace cap is {cap}",
        TARGETS.len()
    );
    let ns = TestNs::new(&client, "capsq").await;
    // cap + 1 runs on different host names (so only the cap holds one back); names sort in
    // creation order, so the last is the youngest even when created within one second.
    let names: Vec<String> = (0..=cap).map(|i| format!("run-{i}")).collect();
    for (name, url) in names.iter().zip(TARGETS) {
        create(&client, &ns.name, &bench(&ns.name, name, url, "15s"))
            .await
            .unwrap();
    }
    let last = names.last().unwrap();
    let needle = format!(
        "already has {cap} benchmark(s) running or queued ahead, and the cluster admin allows {cap} concurrent run(s) per namespace (Helm value caps.maxRunsPerNamespace)"
    );
    let queued = wait_until(
        &client,
        IB,
        &ns.name,
        last,
        "Queued for the namespace cap",
        Duration::from_secs(60),
        |b| {
            // Position 1 once the runs before it have all started (the only one left waiting).
            b["status"]["phase"] == "Queued"
                && b["status"]["queue"]["position"] == 1
                && b["status"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(&needle))
        },
    )
    .await;
    assert_eq!(condition(&queued, "Invalid")["status"], "False");
    let waiting = condition(&queued, "Queued");
    assert_eq!(waiting["status"], "True", "{waiting:#}");
    assert_eq!(waiting["reason"], "NamespaceCap", "{waiting:#}");
    let place = &queued["status"]["queue"];
    assert_eq!(place["waitsFor"], "namespace run slots", "{place:#}");
    // While it waits it has no pod.
    let pods = worker_pods(&client, &ns.name).await.unwrap();
    assert!(
        !pods.iter().any(|p| p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("netbench.io/benchmark"))
            == Some(last)),
        "{last} has pods while Queued"
    );
    // Not a refusal: once a slot frees, it runs to the end.
    for name in &names {
        let done = wait_phase(&client, IB, &ns.name, name, FINISHED, RUN_TIMEOUT).await;
        assert_eq!(
            done["status"]["phase"], "Succeeded",
            "{name}: {:#}",
            done["status"]
        );
    }
}
