//! What a reconcile asks the API server while a run is measured and after it ended. A Running
//! tick: nothing about the sample's pods and reports while the operator's watches can answer
//! (it listed both every two seconds before), a list of each when they cannot (not yet listed),
//! and a list of each before it fails the run on what the watches said (they lag the API
//! server). A run this process saw through to its end: nothing more on later reconciles.
//! Counted on the in-process fake API server (testing::FakeApi).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use serde_json::{json, Value};

use operator::admin::config::Config;
use operator::context::Context;
use operator::k8s::watched_pods::Place;
use operator::store::reports::WatchedReports;
use operator::testing::FakeApi;
use protocol::worker::FinalReport;

/// An IngressBenchmark of one worker, Running since `since` (RFC 3339).
fn running(since: &str) -> Value {
    json!({
        "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
        "metadata": {"name": "b", "namespace": "team-a", "uid": "3b6e1f7c-0000-4c1d-9e3f-1234567890ab",
                     "generation": 1, "resourceVersion": "5", "finalizers": ["netbench.io/cleanup"]},
        "spec": {"target": {"url": "http://x.team-a/"}, "load": {"duration": "10s"}},
        "status": {"runId": "3b6e1f7c-g1", "phase": "Running", "currentStep": 0,
                   "observedGeneration": 1, "phaseSince": since, "startTime": since}
    })
}

/// The benchmark's one worker pod, running (not yet reported).
fn worker() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "b-3b6e1f7c-g1-s0-w0", "namespace": "team-a", "uid": "p1",
                     "labels": {"app.kubernetes.io/managed-by": "netbench-operator",
                                "netbench.io/run": "3b6e1f7c-g1", "netbench.io/step": "0"}},
        "spec": {"containers": []},
        "status": {"phase": "Running"}
    })
}

/// A context whose pod and report watches have listed `pods` and no report.
fn watching(client: kube::Client, pods: &[Value]) -> Context {
    let mut ctx = operator::testing::context(client, Config::for_tests());
    let (store, mut writer) = reflector::store::<Pod>();
    writer.apply_watcher_event(&Event::Init);
    for p in pods {
        writer.apply_watcher_event(&Event::InitApply(
            serde_json::from_value(p.clone()).unwrap(),
        ));
    }
    writer.apply_watcher_event(&Event::InitDone);
    let pods = store;
    ctx.pods.add(Place::Cluster, pods);
    ctx.watched_reports = Arc::new(WatchedReports::listed(vec![]));
    ctx
}

/// Lists of the sample's pods and of the operator's report objects.
fn lists(api_server: &FakeApi) -> (usize, usize) {
    let requests = api_server.requests();
    let count = |prefix: &str| {
        requests
            .iter()
            .filter(|l| l.starts_with(prefix) && l.contains("labelSelector"))
            .count()
    };
    (
        count("GET /api/v1/namespaces/team-a/pods "),
        count("GET /api/v1/namespaces/netbench-system/configmaps "),
    )
}

async fn tick(ctx: &Context, client: kube::Client, benchmark: &Value) {
    let api = Api::<crds::IngressBenchmark>::namespaced(client, "team-a");
    let obj: crds::IngressBenchmark = serde_json::from_value(benchmark.clone()).unwrap();
    operator::testing::fake_api::apply(&obj, ctx, &api)
        .await
        .unwrap();
}

/// The benchmark of [`running`], Succeeded since now.
fn succeeded() -> Value {
    let mut b = running(&now());
    b["status"]["phase"] = json!("Succeeded");
    b
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// A client of an API server holding `benchmark` (and nothing else).
fn serving(api_server: &FakeApi, benchmark: &Value) -> kube::Client {
    api_server.serving(benchmark.clone())
}

/// A client of an API server holding `benchmark` and its worker pod.
fn with_worker(api_server: &FakeApi, benchmark: &Value) -> kube::Client {
    let holding = benchmark.clone();
    api_server.client(move |seen| {
        if seen.method == "GET" && seen.path == "/api/v1/namespaces/team-a/pods" {
            let list =
                json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [worker()]});
            return (200, list);
        }
        operator::testing::fake_api::holding(&holding, seen)
    })
}

/// One tick of a run Running since now, against the API server `client_of` makes a client of,
/// with the context `context` makes of that client; returns the API server.
async fn tick_running(
    client_of: fn(&FakeApi, &Value) -> kube::Client,
    context: impl FnOnce(kube::Client) -> Context,
) -> FakeApi {
    let b = running(&now());
    let api_server = FakeApi::default();
    let client = client_of(&api_server, &b);
    let ctx = context(client.clone());
    tick(&ctx, client, &b).await;
    api_server
}

/// The Failed status the reconcile wrote, if it wrote one.
fn failed_status(api_server: &FakeApi) -> Option<String> {
    api_server
        .requests()
        .into_iter()
        .find(|l| l.starts_with("PATCH ") && l.contains("\"phase\":\"Failed\""))
}

/// Asserts that the reconcile made `made` lists (of pods, of reports) and failed nothing.
fn assert_lists_and_no_failure(api_server: &FakeApi, made: (usize, usize)) {
    assert_eq!(lists(api_server), made, "{:#?}", api_server.requests());
    let failed = failed_status(api_server);
    assert!(failed.is_none(), "{:#?}", api_server.requests());
}

#[tokio::test]
async fn a_tick_reads_the_watches_not_the_api_server() {
    let api_server = tick_running(serving, |client| watching(client, &[worker()])).await;
    assert_lists_and_no_failure(&api_server, (0, 0));
}

#[tokio::test]
async fn before_the_watches_have_listed_a_tick_lists() {
    let unwatched = |client| operator::testing::context(client, Config::for_tests());
    let api_server = tick_running(with_worker, unwatched).await;
    assert_lists_and_no_failure(&api_server, (1, 1));
}

#[tokio::test]
async fn the_api_server_is_asked_before_a_run_fails_on_what_the_watches_said() {
    // The watch does not hold the worker's pod (deleted, or just created and not shown yet):
    // the API server is asked, and it has none either, so the run ends.
    let api_server = tick_running(serving, |client| watching(client, &[])).await;
    // One look at each (the failed run's result then reads the reports again).
    let (pods, reports) = lists(&api_server);
    assert!(pods == 1 && reports >= 1, "{:#?}", api_server.requests());
    let status = failed_status(&api_server);
    let status = status.unwrap_or_else(|| panic!("{:#?}", api_server.requests()));
    assert!(
        status.contains("was deleted before it reported"),
        "{status}"
    );
}

#[tokio::test]
async fn a_pod_the_watch_has_not_shown_yet_fails_nothing() {
    // The API server has the worker's pod, the watch not yet: the run goes on.
    let api_server = tick_running(with_worker, |client| watching(client, &[])).await;
    assert_lists_and_no_failure(&api_server, (1, 1));
}

/// An API server holding `benchmark` and its ended run's record that creates what it is sent
/// (a BenchmarkResult, a run record) and answers with it.
fn creating(api_server: &FakeApi, benchmark: &Value) -> kube::Client {
    creating_with(api_server, benchmark, run_record())
}

/// [`creating`] with the run record `record`.
fn creating_with(api_server: &FakeApi, benchmark: &Value, record: Value) -> kube::Client {
    let holding = benchmark.clone();
    api_server.client(move |seen| {
        if seen.method == "GET"
            && seen
                .path
                .ends_with(&format!("/configmaps/netbench-run-{UID}"))
        {
            return (200, record.clone());
        }
        if seen.method == "POST" {
            let sent: Value = serde_json::from_str(&seen.body).unwrap_or(Value::Null);
            return (201, sent);
        }
        operator::testing::fake_api::holding(&holding, seen)
    })
}

const UID: &str = "3b6e1f7c-0000-4c1d-9e3f-1234567890ab";

/// The run's record in the operator's namespace: admitted and ended, so its result is due.
fn run_record() -> Value {
    let record = json!({"run": "3b6e1f7c-g1", "admitted": true, "started": "2026-01-01T00:00:00Z",
        "ended": {"phase": "Succeeded", "reason": "Succeeded", "message": "1 step(s) measured",
                  "at": "2026-01-01T00:01:00Z", "measuring": false}});
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("netbench-run-{UID}"), "namespace": "netbench-system",
            "labels": {"app.kubernetes.io/managed-by": "netbench-operator", "netbench.io/benchmark": "b",
                "netbench.io/kind": "ingressbenchmark", "netbench.io/namespace": "team-a",
                "netbench.io/record": "run", "netbench.io/uid": UID}},
        "data": {"record.json": record.to_string()}
    })
}

#[tokio::test]
async fn a_run_seen_through_to_its_end_is_not_finished_again() {
    // Succeeded, its result not yet written: the first reconcile deletes the pods, writes the
    // result and the kind's wrap-up; a later one (its own status write coming back, its pods
    // going) asks the API server nothing more.
    let b = succeeded();
    let api_server = FakeApi::default();
    let client = creating(&api_server, &b);
    let ctx = watching(client.clone(), &[]);
    tick(&ctx, client.clone(), &b).await;
    let first = api_server.requests();
    assert!(
        first
            .iter()
            .any(|l| l.starts_with("POST ") && l.contains("/benchmarkresults")),
        "{first:#?}"
    );
    tick(&ctx, client, &b).await;
    let again: Vec<String> = api_server.requests().split_off(first.len());
    let asked: Vec<&String> = again
        .iter()
        .filter(|l| {
            !l.starts_with("GET /apis/netbench.io/v1alpha1/namespaces/team-a/ingressbenchmarks/b")
        })
        .collect();
    assert!(asked.is_empty(), "{asked:#?}\nfirst: {first:#?}");
}

#[tokio::test]
async fn a_status_taken_back_makes_the_run_owe_its_end_again() {
    // Finished and done; then its status is taken back to Running (by hand, or forged) and it
    // ends again: that end is done in full (pods, result, the kind's restores), not skipped.
    let ended = succeeded();
    let api_server = FakeApi::default();
    let client = creating(&api_server, &ended);
    let ctx = watching(client.clone(), &[worker()]);
    tick(&ctx, client.clone(), &ended).await;
    tick(&ctx, client.clone(), &running(&now())).await;
    let before = api_server.requests().len();
    tick(&ctx, client, &ended).await;
    let again: Vec<String> = api_server.requests().split_off(before);
    assert!(
        again
            .iter()
            .any(|l| l.starts_with("DELETE /api/v1/namespaces/team-a/pods")
                || l.starts_with("POST ") && l.contains("/benchmarkresults")),
        "{again:#?}"
    );
}

/// The benchmark of [`running`] with four workers, and their pods (running, not yet reported).
fn running_four(since: &str) -> (Value, Vec<Value>) {
    let mut b = running(since);
    b["spec"]["workers"] = json!({"replicas": 4});
    let pods = (0..4)
        .map(|i| {
            let mut p = worker();
            p["metadata"]["name"] = json!(format!("b-3b6e1f7c-g1-s0-w{i}"));
            p["metadata"]["uid"] = json!(format!("p{i}"));
            p
        })
        .collect();
    (b, pods)
}

/// The status writes that showed `count` workers reporting.
fn shown(api_server: &FakeApi, count: &str) -> usize {
    let column = format!("\"workers\":\"{count}\"");
    let requests = api_server.requests();
    requests
        .iter()
        .filter(|l| l.starts_with("PATCH ") && l.contains("/status") && l.contains(&column))
        .count()
}

/// The benchmark of [`running_four`], its pods, the API server holding it, and a context whose
/// watches hold the pods, after a tick at which worker 0 had reported (shown: "1/4").
struct Four {
    b: Value,
    pods: Vec<Value>,
    api_server: FakeApi,
    client: kube::Client,
    ctx: Context,
}

async fn four_one_reported() -> Four {
    let (b, pods) = running_four(&now());
    let api_server = FakeApi::default();
    let client = serving(&api_server, &b);
    let ctx = watching(client.clone(), &pods);
    report(&ctx, &b, 0);
    tick(&ctx, client.clone(), &b).await;
    assert_eq!(shown(&api_server, "1/4"), 1, "{:#?}", api_server.requests());
    Four {
        b,
        pods,
        api_server,
        client,
        ctx,
    }
}

/// Worker `i` of benchmark `b` has just stored its report (the watch has not shown it yet).
fn report(ctx: &Context, b: &Value, i: usize) {
    let obj: crds::IngressBenchmark = serde_json::from_value(b.clone()).unwrap();
    let owner = operator::store::reports::Owner::of(&obj);
    let worker = format!("b-3b6e1f7c-g1-s0-w{i}");
    let name = operator::store::reports::object_name(&owner, "3b6e1f7c-g1", 0, &worker);
    ctx.watched_reports
        .stored(&name, &owner.uid, "3b6e1f7c-g1", None);
}

#[tokio::test(start_paused = true)]
async fn a_new_count_of_reports_is_written_at_most_every_second() {
    // Each new count of reported clients was a status write (about 30 per run at 64 workers):
    // now the first, then one a second at most (the last, all reported, at once: the
    // registry's unit test).
    let Four {
        b,
        api_server,
        client,
        ctx,
        ..
    } = four_one_reported().await;
    report(&ctx, &b, 1);
    tick(&ctx, client.clone(), &b).await;
    assert_eq!(shown(&api_server, "2/4"), 0, "{:#?}", api_server.requests());
    tokio::time::advance(operator::store::registry::PROGRESS_EVERY).await;
    tick(&ctx, client.clone(), &b).await;
    assert_eq!(shown(&api_server, "2/4"), 1, "{:#?}", api_server.requests());
    report(&ctx, &b, 2);
    tick(&ctx, client.clone(), &b).await;
    assert_eq!(shown(&api_server, "3/4"), 0, "{:#?}", api_server.requests());
    assert!(
        failed_status(&api_server).is_none(),
        "{:#?}",
        api_server.requests()
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_that_fails_shows_its_last_count_at_once() {
    // 1 of 4 reported and shown; within the second, a second report, and the last two
    // workers' pods are gone from the watch. The API server, asked before the run fails,
    // holds no pod and no report: the failed status shows the count the failure was decided
    // on, 0/4, at once (a waiting run's new count would wait a second).
    let Four {
        b,
        pods,
        api_server,
        client,
        ctx,
    } = four_one_reported().await;
    report(&ctx, &b, 1);
    let mut losing = watching(client.clone(), &pods[..2]);
    losing.runs = ctx.runs.clone();
    losing.watched_reports = ctx.watched_reports.clone();
    tick(&losing, client.clone(), &b).await;
    let failed =
        failed_status(&api_server).unwrap_or_else(|| panic!("{:#?}", api_server.requests()));
    assert!(failed.contains("\"workers\":\"0/4\""), "{failed}");
}

/// The benchmark of [`running`], Collecting its one sample since now.
fn collecting() -> Value {
    let mut b = running(&now());
    b["status"]["phase"] = json!("Collecting");
    b
}

/// The run's record in the operator's namespace: admitted, not ended.
fn open_run_record() -> Value {
    let mut record = run_record();
    let open = json!({"run": "3b6e1f7c-g1", "admitted": true, "started": "2026-01-01T00:00:00Z"});
    record["data"]["record.json"] = json!(open.to_string());
    record
}

/// The deletions of the benchmark's worker pods the API server was asked for so far.
fn pod_deletions(api_server: &FakeApi) -> Vec<String> {
    api_server
        .requests()
        .into_iter()
        .filter(|l| l.starts_with("DELETE /api/v1/namespaces/team-a/pods"))
        .collect()
}

/// One reconcile of `b`, Collecting its one sample, whose worker has reported; returns the API
/// server once the run's end is written (phase `ended`).
async fn collect_the_one_sample(b: &Value, ended: &str) -> FakeApi {
    let api_server = FakeApi::default();
    let client = creating_with(&api_server, b, open_run_record());
    let mut ctx = watching(client.clone(), &[worker()]);
    let obj: crds::IngressBenchmark = serde_json::from_value(b.clone()).unwrap();
    let owner = operator::store::reports::Owner::of(&obj);
    let engine = operator::testing::reports::http_report(&[100, 200, 300], 1_000);
    let report = FinalReport::new("b-3b6e1f7c-g1-s0-w0", None, 0, 1_000, engine);
    let stored = operator::testing::reports::stored_report(&owner, "3b6e1f7c-g1", &report);
    ctx.watched_reports = Arc::new(WatchedReports::listed(vec![stored]));
    tick(&ctx, client, b).await;
    let written = api_server.requests();
    let end = format!("\"phase\":\"{ended}\"");
    assert!(
        written
            .iter()
            .any(|l| l.starts_with("PATCH ") && l.contains(&end)),
        "{written:#?}"
    );
    api_server
}

#[tokio::test]
async fn a_run_of_one_sample_deletes_its_pods_once() {
    // Its one sample collected, the run ends: its pods go with the run's deletion, not also
    // with one of the sample's before it (the API server deleted the same pods twice).
    let api_server = collect_the_one_sample(&collecting(), "Succeeded").await;
    // The deletion goes on behind the reconcile: wait for it.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while pod_deletions(&api_server).is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let deletions = pod_deletions(&api_server);
    assert_eq!(deletions.len(), 1, "{deletions:#?}");
    assert!(
        deletions[0].contains("labelSelector=netbench.io%2Frun%3D3b6e1f7c-g1")
            && !deletions[0].contains("step"),
        "the run's pods, not the sample's: {deletions:#?}"
    );
}

#[tokio::test]
async fn a_failed_sample_keeps_its_pods_when_the_policy_keeps_a_failed_runs() {
    // `OnSuccess` keeps a failed run's pods for debugging: the pods of the sample that failed
    // it too (they were deleted with the sample before the run's end decided).
    let mut b = collecting();
    b["spec"]["cleanup"] = json!("OnSuccess");
    b["spec"]["gates"] = json!([{"figure": "rps", "min": 1e12, "abortOnFail": true}]);
    let api_server = collect_the_one_sample(&b, "Failed").await;
    // A deletion is sent by a task the reconcile started before it wrote the run's end: by
    // now it would have been asked for.
    assert_eq!(pod_deletions(&api_server), Vec::<String>::new());
}
