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

#[tokio::test]
async fn a_forged_status_offload_runs_no_job() {
    let eb = json!({
        "apiVersion": "netbench.io/v1alpha1", "kind": "EgressBenchmark",
        "metadata": {"name": "forged", "namespace": "team-a", "uid": "0b6e1f7c-0000-4c1d-9e3f-1234567890ab",
                     "generation": 1, "finalizers": ["netbench.io/cleanup"]},
        "spec": {"cases": [{"name": "c", "client": {"nodeName": "n1"}, "server": {"address": "198.18.20.2"}}]},
        "status": {"runId": "0b6e1f7c-g1", "phase": "Failed", "offload": [{
            "case": "c", "node": "control-plane-1", "interface": "eth0", "profile": "p",
            "before": {"tx-checksumming": false}, "restore": {"tx-checksum-ip-generic": false},
            "recorded": true, "restored": false}]},
    });
    let api_server = FakeApi::default();
    let client = api_server.serving(eb.clone());
    let ctx = context(client.clone());
    let api = Api::<crds::EgressBenchmark>::namespaced(client, "team-a");
    let obj: crds::EgressBenchmark = serde_json::from_value(eb).unwrap();
    operator::driver::cleanup(&obj, &ctx, &api).await.unwrap();
    let all = api_server.requests();
    assert!(
        all.iter()
            .any(|l| l.contains("/configmaps/netbench-offload-")),
        "the record was looked up: {all:?}"
    );
    assert_eq!(
        writes(&api_server),
        Vec::<String>::new(),
        "all requests: {all:?}"
    );
}

#[tokio::test]
async fn a_forged_saved_target_patches_nothing() {
    let ib = json!({
        "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
        "metadata": {"name": "forged", "namespace": "team-a", "uid": "1b6e1f7c-0000-4c1d-9e3f-1234567890ab",
                     "generation": 1, "finalizers": ["netbench.io/cleanup"]},
        "spec": {"target": {"url": "http://x/"}},
        "status": {"runId": "1b6e1f7c-g1", "phase": "Failed", "savedTarget": {
            "kind": "Deployment", "namespace": "team-b", "name": "victim", "container": "c",
            "containerIndex": 0, "replicas": 9, "resourcesJson": "{}", "restored": false}},
    });
    let api_server = FakeApi::default();
    let client = api_server.serving(ib.clone());
    let ctx = context(client.clone());
    let api = Api::<crds::IngressBenchmark>::namespaced(client, "team-a");
    let obj: crds::IngressBenchmark = serde_json::from_value(ib).unwrap();
    operator::driver::cleanup(&obj, &ctx, &api).await.unwrap();
    let all = api_server.requests();
    assert!(
        all.iter()
            .any(|l| l.contains("/configmaps/netbench-target-")),
        "the record was looked up: {all:?}"
    );
    assert!(
        !all.iter().any(|l| l.contains("deployments")),
        "the Deployment was not even read: {all:?}"
    );
    assert_eq!(
        writes(&api_server),
        Vec::<String>::new(),
        "all requests: {all:?}"
    );
}

/// Applies `ib` (its status forged) once; returns the writes other than Events and the run
/// record (which must record the operator's end of the run).
async fn apply_once(ib: Value) -> Vec<String> {
    let api_server = FakeApi::default();
    let client = api_server.serving(ib.clone());
    let ctx = context(client.clone());
    let api = Api::<crds::IngressBenchmark>::namespaced(client, "team-a");
    let obj: crds::IngressBenchmark = serde_json::from_value(ib).unwrap();
    operator::driver::apply(&obj, &ctx, &api).await.unwrap();
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

fn forged(spec: Value, status: Value) -> Value {
    json!({
        "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
        "metadata": {"name": "forged", "namespace": "team-a", "uid": "2b6e1f7c-0000-4c1d-9e3f-1234567890ab",
                     "generation": 1, "finalizers": ["netbench.io/cleanup"]},
        "spec": spec,
        "status": status,
    })
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
