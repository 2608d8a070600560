//! Failed work says so, and nothing hangs, on the real test cluster: worker pods refused by a
//! ResourceQuota, a target where nothing listens, a target host that does not resolve. Each
//! run must end Failed quickly with the cause in status.message, and disturb nothing else.
//! Needs `eval "$(tests/e2e/setup.sh)"` (which sets the worker start timeout to 60 s).

use std::time::{Duration, Instant};

use e2e::*;
use k8s_openapi::api::core::v1::{Event, ResourceQuota};
use kube::api::{Api, ListParams};
use serde_json::{json, Value};

/// NETBENCH_WORKER_START_TIMEOUT in tests/e2e/setup.sh.
const WORKER_START_TIMEOUT: Duration = Duration::from_secs(60);

/// ingress-simple.yaml against `url`, measuring for `duration` after a 1 s warm-up.
fn bench(ns: &str, name: &str, url: &str, duration: &str) -> Value {
    let mut ib = ingress_simple(ns, url, duration, 4);
    set(&mut ib, "/metadata/name", json!(name));
    ib
}

fn message(ib: &Value) -> String {
    ib["status"]["message"].as_str().unwrap_or("").to_string()
}

/// Waits until a Warning Event with `reason` exists in `ns`; returns its note.
async fn warning_event(client: &kube::Client, ns: &str, reason: &str) -> String {
    let api = Api::<Event>::namespaced(client.clone(), ns);
    eventually(Duration::from_secs(30), async || {
        let events = api.list(&ListParams::default()).await.unwrap().items;
        let found = events
            .iter()
            .find(|e| e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some("Warning"));
        if let Some(e) = found {
            return Ok(e.message.clone().unwrap_or_default());
        }
        Err(format!(
            "no Warning Event {reason} in {ns}: {:?}",
            events.iter().map(|e| &e.reason).collect::<Vec<_>>()
        ))
    })
    .await
}

/// Creates a ResourceQuota allowing no pod and waits until the quota controller counted it,
/// so the API server's refusal names the exceeded quota.
async fn forbid_pods(client: &kube::Client, ns: &str) {
    let quota = json!({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "no-pods"},
        "spec": {"hard": {"pods": "0"}}
    });
    create(client, ns, &quota).await.unwrap();
    let api = Api::<ResourceQuota>::namespaced(client.clone(), ns);
    let counted = |q: &ResourceQuota| q.status.as_ref().is_some_and(|s| s.used.is_some());
    let timeout = Duration::from_secs(30);
    wait_for(&api, "no-pods", "usage counted", timeout, counted).await;
}

#[tokio::test]
async fn worker_pods_refused_by_a_quota_end_the_run_failed_and_disturb_nothing_else() {
    let client = client().await;
    let ns = TestNs::new(&client, "quota").await;
    let other = TestNs::new(&client, "bystander").await;
    let restarts = operator_restarts(&client).await;
    forbid_pods(&client, &ns.name).await;

    let started = Instant::now();
    let unrelated = bench(&other.name, "unrelated", TARGET, "3s");
    create(&client, &ns.name, &bench(&ns.name, "refused", TARGET, "3s"))
        .await
        .unwrap();
    create(&client, &other.name, &unrelated).await.unwrap();
    let done = wait_phase(
        &client,
        IB,
        &ns.name,
        "refused",
        FINISHED,
        WORKER_START_TIMEOUT,
    )
    .await;
    let took = started.elapsed();
    assert_eq!(done["status"]["phase"], "Failed", "{:#}", done["status"]);
    let m = message(&done);
    assert!(
        m.contains("refused worker pod") && m.contains("exceeded quota: no-pods"),
        "the API server's message: {m}"
    );
    assert!(took < WORKER_START_TIMEOUT, "took {took:?}");
    let scheduled = condition(&done, "WorkersScheduled");
    assert_eq!(scheduled["status"], "False", "{scheduled}");
    assert_eq!(scheduled["reason"], "PodCreationRefused", "{scheduled}");
    assert_eq!(condition(&done, "Ready")["reason"], "PodCreationRefused");
    let note = warning_event(&client, &ns.name, "PodCreationRefused").await;
    assert!(note.contains("exceeded quota"), "{note}");
    assert!(worker_pods(&client, &ns.name).await.unwrap().is_empty());
    wait_no_children(&client, &ns.name, Duration::from_secs(30)).await;

    // Nothing else was disturbed: another team's run finishes, the operator never restarted.
    let unrelated = wait_phase(
        &client,
        IB,
        &other.name,
        "unrelated",
        FINISHED,
        Duration::from_secs(180),
    )
    .await;
    assert_eq!(
        unrelated["status"]["phase"], "Succeeded",
        "{:#}",
        unrelated["status"]
    );
    assert_eq!(operator_restarts(&client).await, restarts);
}

#[tokio::test]
async fn a_target_where_nothing_listens_fails_before_the_measurement_naming_connect() {
    let client = client().await;
    let ns = TestNs::new(&client, "refused").await;
    // A Service without endpoints: kube-proxy rejects connections to it.
    let svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "nothing"},
        "spec": {"selector": {"app": "nothing-here"}, "ports": [{"port": 80, "targetPort": 8080}]}
    });
    create(&client, &ns.name, &svc).await.unwrap();
    let url = format!("http://nothing.{}.svc.cluster.local/", ns.name);
    let started = Instant::now();
    let ib = bench(&ns.name, "nothing", &url, "60s");
    let done = create_and_wait(&client, &ib, FINISHED, Duration::from_secs(55)).await;
    assert_eq!(done["status"]["phase"], "Failed", "{:#}", done["status"]);
    let m = message(&done);
    assert!(
        m.contains("cannot connect to") && m.contains(&url),
        "names the connect error: {m}"
    );
    assert_eq!(condition(&done, "Ready")["reason"], "PreflightFailed");
    assert!(
        done["status"]["steps"]
            .as_array()
            .is_none_or(|s| s.is_empty()),
        "nothing was measured"
    );
    assert!(started.elapsed() < Duration::from_secs(55));
    wait_no_children(&client, &ns.name, Duration::from_secs(30)).await;
}

#[tokio::test]
async fn an_unresolvable_target_fails_before_the_measured_time_naming_the_host() {
    let client = client().await;
    let ns = TestNs::new(&client, "nxdomain").await;
    let started = Instant::now();
    let ib = bench(&ns.name, "nowhere", "http://nginx.nowhere.invalid/", "60s");
    // Well before warm-up + duration (61 s) would have passed after the workers started.
    let done = create_and_wait(&client, &ib, FINISHED, Duration::from_secs(55)).await;
    assert_eq!(done["status"]["phase"], "Failed", "{:#}", done["status"]);
    let m = message(&done);
    // The operator resolves the host before any pod exists (admin caps: where a target leads)
    // and refuses the run; the workers' own preflight (loadgen/tests/preflight.rs, and the
    // test above for a host that resolves but refuses) is the second line.
    assert!(
        m.contains("cannot resolve nginx.nowhere.invalid"),
        "names the host: {m}"
    );
    assert_eq!(condition(&done, "Ready")["reason"], "InvalidSpec");
    assert!(started.elapsed() < Duration::from_secs(55));
    let note = warning_event(&client, &ns.name, "Failed").await;
    assert!(note.contains("nginx.nowhere.invalid"), "{note}");
}
