//! Status is never a source of privilege: deleting a benchmark whose status names offload
//! changes or a saved sweep target, with NO record in the operator's namespace, creates no Job
//! and patches nothing, even where the admin's lists would allow both. The API server is the
//! in-process fake (testing::FakeApi) that answers reads (no record, no Jobs) and logs every
//! request. The real
//! cluster version is tests/e2e/tests/status_authority.rs.

use kube::api::Api;
use serde_json::{json, Value};

use operator::admin::allow::{GlobList, NodeSelector, SweepPairs};
use operator::admin::config::{Config, NamespaceList};
use operator::context::Context;
use operator::run::Hooks;
use operator::testing::FakeApi;

/// Everything allowed: only the missing record stops a restore.
fn permissive() -> Config {
    let mut c = Config::for_tests();
    c.offload_namespaces = NamespaceList::parse("*");
    c.offload_interfaces = GlobList::parse("*");
    c.offload_node_selector = NodeSelector::parse("kubernetes.io/os");
    c.sweep_targets = SweepPairs::parse("*=*");
    c
}

fn context(client: kube::Client) -> Context {
    operator::testing::context(client, permissive())
}

/// Requests that would change something: any write but the benchmark's own children's deletes.
fn writes(api_server: &FakeApi) -> Vec<String> {
    api_server
        .requests()
        .iter()
        .filter(|l| !l.starts_with("GET "))
        .filter(|l| !(l.starts_with("DELETE ") && l.contains("/namespaces/team-a/")))
        // The benchmark's own run record in the operator's namespace.
        .filter(|l| {
            !(l.starts_with("DELETE /api/v1/namespaces/netbench-system/configmaps/netbench-run-"))
        })
        // The benchmark's own report objects in the operator's namespace, selected by its labels.
        .filter(|l| {
            !(l.starts_with("DELETE /api/v1/namespaces/netbench-system/configmaps ")
                && l.contains("netbench.io%2Freport%3Dtrue")
                && l.contains("netbench.io%2Fbenchmark-uid%3D"))
        })
        .cloned()
        .collect()
}

/// What the driver is asked to do with a benchmark.
enum Reconcile {
    Apply,
    Cleanup,
}

/// Runs `reconcile` once on `object` (a `K`, its status forged) against a fake API server
/// serving it; returns that server.
async fn reconcile_once<K: Hooks>(object: Value, reconcile: Reconcile) -> FakeApi {
    let api_server = FakeApi::default();
    let client = api_server.serving(object.clone());
    let ctx = context(client.clone());
    let api = Api::<K>::namespaced(client, "team-a");
    let obj: K = serde_json::from_value(object).unwrap();
    match reconcile {
        Reconcile::Apply => drop(
            operator::testing::fake_api::apply(&obj, &ctx, &api)
                .await
                .unwrap(),
        ),
        Reconcile::Cleanup => drop(operator::driver::cleanup(&obj, &ctx, &api).await.unwrap()),
    }
    // Events are published after the reconcile: any it made are in the log once flushed.
    let flushed = ctx.events.flush(std::time::Duration::from_secs(10)).await;
    assert!(flushed, "Events not published in 10 s");
    api_server
}

/// Asserts that the record ConfigMap whose name starts with `record` was looked up, and that
/// nothing was written.
fn assert_record_read_and_nothing_written(api_server: &FakeApi, record: &str) {
    let all = api_server.requests();
    let path = format!("/configmaps/{record}");
    assert!(
        all.iter().any(|l| l.contains(&path)),
        "the record was looked up: {all:?}"
    );
    assert_eq!(
        writes(api_server),
        Vec::<String>::new(),
        "all requests: {all:?}"
    );
}

#[tokio::test]
async fn a_forged_status_offload_runs_no_job() {
    let eb = forged_of(
        "EgressBenchmark",
        "0b6e1f7c",
        json!({"cases": [{"name": "c", "client": {"nodeName": "n1"}, "server": {"address": "198.18.20.2"}}]}),
        json!({"runId": "0b6e1f7c-g1", "phase": "Failed", "offload": [{
            "case": "c", "node": "control-plane-1", "interface": "eth0", "profile": "p",
            "before": {"tx-checksumming": false}, "restore": {"tx-checksum-ip-generic": false},
            "recorded": true, "restored": false}]}),
    );
    let api_server = reconcile_once::<crds::EgressBenchmark>(eb, Reconcile::Cleanup).await;
    assert_record_read_and_nothing_written(&api_server, "netbench-offload-");
}

#[tokio::test]
async fn a_forged_saved_target_patches_nothing() {
    let ib = forged_of(
        "IngressBenchmark",
        "1b6e1f7c",
        json!({"target": {"url": "http://x/"}}),
        json!({"runId": "1b6e1f7c-g1", "phase": "Failed", "savedTarget": {
            "kind": "Deployment", "namespace": "team-b", "name": "victim", "container": "c",
            "containerIndex": 0, "replicas": 9, "resourcesJson": "{}", "restored": false}}),
    );
    let api_server = reconcile_once::<crds::IngressBenchmark>(ib, Reconcile::Cleanup).await;
    assert_record_read_and_nothing_written(&api_server, "netbench-target-");
    let all = api_server.requests();
    assert!(
        !all.iter().any(|l| l.contains("deployments")),
        "the Deployment was not even read: {all:?}"
    );
}

/// Applies `ib` (its status forged) once; returns the writes other than Events and the run
/// record (which must record the operator's end of the run).
async fn apply_once(ib: Value) -> Vec<String> {
    let api_server = reconcile_once::<crds::IngressBenchmark>(ib, Reconcile::Apply).await;
    let (record, others): (Vec<String>, Vec<String>) = writes(&api_server)
        .into_iter()
        .filter(|l| !l.starts_with("POST /apis/events.k8s.io/"))
        .partition(|l| l.starts_with("POST /api/v1/namespaces/netbench-system/configmaps"));
    // This fake server answers the write 404: tried in the finish handler and once more
    // before status.
    assert_eq!(record.len(), 2, "the run's end is recorded: {record:?}");
    for part in ["netbench-run-", r#"\"phase\":\"Failed\""#, "InvalidStatus"] {
        assert!(record[0].contains(part), "{part} missing: {}", record[0]);
    }
    // The run ended from a measuring phase, so a result is due: it says Failed, and why.
    let (result, others): (Vec<String>, Vec<String>) = others.into_iter().partition(|l| {
        l.starts_with("POST /apis/netbench.io/v1alpha1/namespaces/team-a/benchmarkresults")
    });
    for r in &result {
        for part in [
            r#""phase":"Failed""#,
            "the status was changed outside the operator",
        ] {
            assert!(r.contains(part), "{part} missing: {r}");
        }
    }
    others
}

/// The benchmark of `kind` team-a/forged, whose uid starts with `uid_start`, with `spec` and a
/// `status` not written by the operator.
fn forged_of(kind: &str, uid_start: &str, spec: Value, status: Value) -> Value {
    json!({
        "apiVersion": "netbench.io/v1alpha1", "kind": kind,
        "metadata": {"name": "forged", "namespace": "team-a", "uid": format!("{uid_start}-0000-4c1d-9e3f-1234567890ab"),
                     "generation": 1, "finalizers": ["netbench.io/cleanup"]},
        "spec": spec,
        "status": status,
    })
}

fn forged(spec: Value, status: Value) -> Value {
    forged_of("IngressBenchmark", "2b6e1f7c", spec, status)
}

/// The only write is the benchmark's own status, failing the run InvalidStatus with `why`.
fn assert_failed_invalid_status(writes: &[String], why: &str) {
    assert_eq!(writes.len(), 1, "one status write only: {writes:?}");
    let patch = &writes[0];
    assert!(
        patch.starts_with(
            "PATCH /apis/netbench.io/v1alpha1/namespaces/team-a/ingressbenchmarks/forged/status"
        ),
        "{patch}"
    );
    for part in [r#""phase":"Failed""#, r#""reason":"InvalidStatus""#, why] {
        assert!(patch.contains(part), "{part} missing: {patch}");
    }
}

/// A status that names a step the spec does not have (written by someone other than the
/// operator) ends the run Failed with `InvalidStatus`, and the only write is the benchmark's own
/// status: no target is patched, no pod created.
#[tokio::test]
async fn a_status_naming_a_step_the_spec_lacks_fails_the_run() {
    let ib = forged(
        json!({"target": {"url": "http://x/"}}),
        json!({"runId": "2b6e1f7c-g1", "phase": "Running", "currentStep": 7}),
    );
    let writes = apply_once(ib).await;
    assert_failed_invalid_status(&writes, "status names step 7, which the spec does not have");
}

/// The same for a sample beyond what spec.samples allows: no pod of a slot outside the plan.
#[tokio::test]
async fn a_status_naming_a_sample_the_spec_lacks_fails_the_run() {
    let ib = forged(
        json!({"target": {"url": "http://x/"}, "samples": {"count": 2}}),
        json!({"runId": "2b6e1f7c-g1", "phase": "Preparing", "currentStep": 0,
               "currentSample": 4000000000u32}),
    );
    let writes = apply_once(ib).await;
    assert_failed_invalid_status(
        &writes,
        "status names sample 4000000000, but the spec asks for at most 2",
    );
}
