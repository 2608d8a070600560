//! A BenchmarkResult whose creation keeps being refused (RBAC removed, an admission policy):
//! the run keeps its phase, ResultRecorded=False says so (ResultWritePending while it is
//! retried, ResultWriteFailed with a Warning Event once the operator gave up), the run's
//! reports stay, and a later reconcile whose write is allowed creates the result and only then
//! turns ResultRecorded True (and releases the reports). A result's phase, message and times
//! come from the run record in the operator's namespace, never from status: a status forged to
//! say Succeeded (or with its start cleared, or naming a result not written) changes nothing in
//! the result and releases no report early. Against the in-process fake API server
//! (testing::FakeApi), which here serves the run record and the results created.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::Api;
use kube::runtime::controller::Action;
use serde_json::{json, Value};

use operator::admin::config::Config;
use operator::testing::fake_api::{self, holding, Seen};
use operator::testing::{context, FakeApi};

const UID: &str = "7d1e2f3a-0000-4c1d-9e3f-1234567890ab";
const RUN: &str = "7d1e2f3a-g1";
const RESULTS: &str = "/apis/netbench.io/v1alpha1/namespaces/team-a/benchmarkresults";

fn benchmark(status: Value) -> Value {
    json!({
        "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
        "metadata": {"name": "web", "namespace": "team-a", "uid": UID, "generation": 1,
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "finalizers": ["netbench.io/cleanup"]},
        "spec": {"target": {"url": "http://x/"}},
        "status": status,
    })
}

fn ago(s: i64) -> String {
    jiff::Timestamp::now()
        .checked_sub(jiff::SignedDuration::from_secs(s))
        .unwrap()
        .to_string()
}

/// A run that ended Failed a minute ago, its result not written yet.
fn finished() -> Value {
    json!({"runId": RUN, "phase": "Failed", "message": "the deadline passed",
           "observedGeneration": 1, "startTime": ago(120), "completionTime": ago(60)})
}

/// What one reconcile did.
struct Applied {
    action: Action,
    /// The status written (the object's as read when none was).
    status: Value,
    /// Reasons of the Events published.
    events: Vec<String>,
    requests: Vec<String>,
    api_server: FakeApi,
}

/// The run record the operator keeps in its namespace: `RUN` started two minutes ago, and
/// ended (phase, reason, message) a minute ago if `ended`.
fn record(ended: Option<(&str, &str, &str)>) -> Value {
    let mut data = json!({"run": RUN, "started": ago(120), "admitted": true});
    if let Some((phase, reason, message)) = ended {
        data["ended"] = json!({"phase": phase, "reason": reason, "message": message,
                               "at": ago(60), "measuring": true});
    }
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": RECORD, "namespace": "netbench-system", "resourceVersion": "1",
                     "labels": {"app.kubernetes.io/managed-by": "netbench-operator",
                                "netbench.io/kind": "ingressbenchmark",
                                "netbench.io/namespace": "team-a",
                                "netbench.io/benchmark": "web", "netbench.io/uid": UID,
                                "netbench.io/record": "run"}},
        "data": {"record.json": data.to_string()},
    })
}

const RECORD: &str = "netbench-run-7d1e2f3a-0000-4c1d-9e3f-1234567890ab";

/// The record of a run the operator ended Failed.
fn failed_record() -> Option<Value> {
    Some(record(Some((
        "Failed",
        "DeadlineExceeded",
        "the deadline passed",
    ))))
}

/// Applies the benchmark holding `status` once, with the run record `run_record` in the
/// operator's namespace; the API server refuses result creation while `refuse` (403, as an
/// admission policy or missing RBAC would), keeps what it creates in `created` and serves it.
async fn apply(status: Value, refuse: bool, created: &Arc<Mutex<Vec<Value>>>) -> Applied {
    apply_with(status, failed_record(), refuse, created).await
}

async fn apply_with(
    status: Value,
    run_record: Option<Value>,
    refuse: bool,
    created: &Arc<Mutex<Vec<Value>>>,
) -> Applied {
    let bm = benchmark(status.clone());
    let api_server = FakeApi::default();
    let client = serving(&api_server, &bm, run_record, refuse, false, created);
    let ctx = context(client.clone(), Config::for_tests());
    let api = Api::<crds::IngressBenchmark>::namespaced(client, "team-a");
    let obj: crds::IngressBenchmark = serde_json::from_value(bm).unwrap();
    let action = fake_api::apply(&obj, &ctx, &api).await.unwrap();
    applied(action, status, &api_server)
}

/// A client of an API server holding the benchmark `bm` and the run record `run_record`; it
/// refuses result creation while `refuse`, and report deletion while `fail_release` (500).
fn serving(
    api_server: &FakeApi,
    bm: &Value,
    run_record: Option<Value>,
    refuse: bool,
    fail_release: bool,
    created: &Arc<Mutex<Vec<Value>>>,
) -> kube::Client {
    let kept = created.clone();
    let served = bm.clone();
    api_server.client(move |seen: &Seen| {
        let reports = "/api/v1/namespaces/netbench-system/configmaps";
        if fail_release && seen.method == "DELETE" && seen.path == reports {
            return (500, fake_api::status(500, "InternalError"));
        }
        let record_path = format!("/api/v1/namespaces/netbench-system/configmaps/{RECORD}");
        if seen.method == "GET" && seen.path == record_path {
            return match &run_record {
                Some(r) => (200, r.clone()),
                None => (404, fake_api::status(404, "NotFound")),
            };
        }
        if seen.method == "GET" && seen.path.starts_with(&format!("{RESULTS}/")) {
            let name = seen.path.rsplit('/').next().unwrap_or_default();
            let found = kept
                .lock()
                .unwrap()
                .iter()
                .find(|r| r["metadata"]["name"] == name)
                .cloned();
            return match found {
                Some(r) => (200, r),
                None => (404, fake_api::status(404, "NotFound")),
            };
        }
        if seen.method == "POST" && seen.path == RESULTS {
            if refuse {
                return (403, fake_api::status(403, "Forbidden"));
            }
            let body: Value = serde_json::from_str(&seen.body).unwrap_or(Value::Null);
            kept.lock().unwrap().push(body.clone());
            return (201, body);
        }
        if seen.method == "PATCH" && seen.path.ends_with("/status") {
            // The status as written, as the API server returns it.
            let patch: Value = serde_json::from_str(&seen.body).unwrap_or(Value::Null);
            let mut stored = served.clone();
            stored["status"] = patch["status"].clone();
            return (200, stored);
        }
        holding(&served, seen)
    })
}

/// What the reconcile that returned `action` did, from the fake server's log.
fn applied(action: Action, status: Value, api_server: &FakeApi) -> Applied {
    let requests = api_server.requests();
    let body = |line: &String| -> Value {
        line.find('{')
            .and_then(|i| serde_json::from_str(&line[i..]).ok())
            .unwrap_or(Value::Null)
    };
    let written = requests
        .iter()
        .filter(|l| l.starts_with("PATCH ") && l.contains("/ingressbenchmarks/web/status"))
        .map(|l| body(l)["status"].clone())
        .next_back()
        .unwrap_or(status);
    let events = requests
        .iter()
        .filter(|l| l.starts_with("POST /apis/events.k8s.io/"))
        .map(|l| body(l)["reason"].as_str().unwrap_or_default().to_string())
        .collect();
    Applied {
        action,
        status: written,
        events,
        requests,
        api_server: api_server.clone(),
    }
}

impl Applied {
    /// Whether the run's reports are deleted within 10 s (the deletion is handed to a task of
    /// its own: the reconcile does not wait for it).
    async fn released_soon(&self) -> bool {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::time::Instant::now() < deadline {
            if released(&self.api_server.requests()) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }
}

fn condition(status: &Value, type_: &str) -> Value {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Whether the run's report objects were deleted.
fn released(requests: &[String]) -> bool {
    requests.iter().any(|l| {
        l.starts_with("DELETE /api/v1/namespaces/netbench-system/configmaps ")
            && l.contains(&format!("netbench.io%2Frun%3D{RUN}"))
    })
}

#[tokio::test]
async fn a_refused_result_gives_up_keeps_the_reports_and_is_written_later() {
    let created = Arc::new(Mutex::new(vec![]));

    // 1. Refused: retried soon, ResultRecorded=False (pending), one Warning Event.
    let first = apply(finished(), true, &created).await;
    assert_eq!(first.action, Action::requeue(Duration::from_secs(10)));
    let c = condition(&first.status, "ResultRecorded");
    assert_eq!(c["status"], "False", "{c}");
    assert_eq!(c["reason"], "ResultWritePending", "{c}");
    assert!(c["message"].as_str().unwrap().contains("Forbidden"), "{c}");
    assert_eq!(first.status["phase"], "Failed", "the run keeps its phase");
    assert!(first.status["latestResult"].is_null());
    assert!(
        first.events.contains(&"ResultWritePending".to_string()),
        "{:?}",
        first.events
    );
    assert!(!released(&first.requests), "{:?}", first.requests);

    // 2. Still refused once the bound (300 s by default) has passed since the first failure:
    //    given up, with a Warning Event; the run waits for a change, its reports stay.
    let mut status = first.status.clone();
    for c in status["conditions"].as_array_mut().unwrap() {
        if c["type"] == "ResultRecorded" {
            c["lastTransitionTime"] = json!("2026-01-01T00:00:00Z");
        }
    }
    let second = apply(status, true, &created).await;
    assert_eq!(second.action, Action::await_change());
    let c = condition(&second.status, "ResultRecorded");
    assert_eq!(
        (&c["status"], &c["reason"]),
        (&json!("False"), &json!("ResultWriteFailed")),
        "{c}"
    );
    assert!(c["message"].as_str().unwrap().contains("gave up"), "{c}");
    assert!(
        second.events.contains(&"ResultWriteFailed".to_string()),
        "{:?}",
        second.events
    );
    assert!(!released(&second.requests), "{:?}", second.requests);
    assert_eq!(second.status["phase"], "Failed");

    // 3. Given up and refused again: tried once, quietly (no Event, no status change).
    let third = apply(second.status.clone(), true, &created).await;
    assert_eq!(third.action, Action::await_change());
    assert!(third.events.is_empty(), "{:?}", third.events);
    assert!(third
        .requests
        .iter()
        .any(|l| l.starts_with(&format!("POST {RESULTS}"))));
    assert!(!released(&third.requests));

    // 4. Allowed again: the result is created, and only then ResultRecorded turns True and the
    //    reports are released.
    assert!(created.lock().unwrap().is_empty());
    let fourth = apply(second.status.clone(), false, &created).await;
    let results = created.lock().unwrap().clone();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["spec"]["runId"], RUN);
    assert_eq!(results[0]["spec"]["phase"], "Failed");
    let c = condition(&fourth.status, "ResultRecorded");
    assert_eq!(
        (&c["status"], &c["reason"]),
        (&json!("True"), &json!("ResultWritten")),
        "{c}"
    );
    assert_eq!(fourth.status["latestResult"], format!("web-{RUN}"));
    assert!(
        fourth.events.contains(&"ResultWritten".to_string()),
        "{:?}",
        fourth.events
    );
    assert!(fourth.released_soon().await, "{:?}", fourth.requests);
    // The operator created the result itself in this reconcile: it releases the reports
    // without reading the result back.
    let read_back = format!("GET {RESULTS}/web-{RUN}");
    assert!(
        !fourth.requests.iter().any(|l| l.starts_with(&read_back)),
        "{:?}",
        fourth.requests
    );
}

/// A status forged to say Succeeded (with statistics, times and a message of its own) of a
/// run the operator ended Failed: the result takes phase, message and times from the run
/// record, clamped to what the API server stamped.
#[tokio::test]
async fn a_forged_succeeded_status_gives_the_operators_failed_result() {
    let created = Arc::new(Mutex::new(vec![]));
    let gate = Some(record(Some((
        "Failed",
        "GateFailed",
        "gate p99Ms <= 250 failed",
    ))));
    apply_with(forged_succeeded(), gate, false, &created).await;
    let results = created.lock().unwrap().clone();
    assert_eq!(results.len(), 1, "{results:?}");
    let spec = &results[0]["spec"];
    assert_eq!(spec["phase"], "Failed", "{spec}");
    assert_eq!(spec["message"], "gate p99Ms <= 250 failed", "{spec}");
    let at = |field: &str| -> jiff::Timestamp { spec[field].as_str().unwrap().parse().unwrap() };
    let now = jiff::Timestamp::now();
    let (start, end) = (at("startTime"), at("completionTime"));
    // The record's: two minutes and one minute ago, not 2000 and 2999.
    assert!((now - start).get_seconds().abs_diff(120) <= 5, "{start}");
    assert!((now - end).get_seconds().abs_diff(60) <= 5, "{end}");
    assert!(
        spec["measurements"].as_array().is_none_or(|m| m.is_empty()),
        "{spec}"
    );
}

/// A status forged to say Succeeded for a run the operator never ended (its record holds no
/// end): the result says Failed, and that no end was recorded.
#[tokio::test]
async fn a_run_the_operator_did_not_end_gives_a_failed_result() {
    let created = Arc::new(Mutex::new(vec![]));
    let applied = apply_with(forged_succeeded(), Some(record(None)), false, &created).await;
    let results = created.lock().unwrap().clone();
    assert_eq!(results.len(), 1, "{results:?}");
    let spec = &results[0]["spec"];
    assert_eq!(spec["phase"], "Failed", "{spec}");
    let message = spec["message"].as_str().unwrap_or_default();
    assert!(message.contains("no record of the run's end"), "{message}");
    assert!(
        !spec["startTime"]
            .as_str()
            .unwrap_or_default()
            .starts_with("2000"),
        "{spec}"
    );
    // Released only now that the result exists.
    assert!(applied.released_soon().await, "{:?}", applied.requests);
}

fn forged_succeeded() -> Value {
    let mut status = finished();
    status["phase"] = json!("Succeeded");
    status["message"] = json!("all good, trust me");
    status["startTime"] = json!("2000-01-01T00:00:00Z");
    status["completionTime"] = json!("2999-01-01T00:00:00Z");
    status["statistics"] = json!([{"index": 0, "name": "step 0", "metrics": [
        {"name": "rps", "unit": "req/s", "better": "Higher", "values": [1e9], "mean": 1e9,
         "stddev": 0.0, "ci95": 0.0}]}]);
    status
}

/// Clearing status.startTime (once "no result due") releases no report while the result is
/// refused, nor does a status.latestResult naming a result that does not exist; the result
/// is written once allowed, from the record.
#[tokio::test]
async fn a_cleared_start_or_a_forged_latest_result_releases_no_reports_early() {
    let created = Arc::new(Mutex::new(vec![]));
    let mut status = finished();
    status.as_object_mut().unwrap().remove("startTime");
    let refused = apply(status.clone(), true, &created).await;
    assert!(!released(&refused.requests), "{:?}", refused.requests);
    let mut claimed = status.clone();
    claimed["latestResult"] = json!(format!("web-{RUN}"));
    let forged = apply(claimed, true, &created).await;
    assert!(!released(&forged.requests), "{:?}", forged.requests);
    assert!(created.lock().unwrap().is_empty());
    let allowed = apply(status, false, &created).await;
    let results = created.lock().unwrap().clone();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["spec"]["message"], "the deadline passed");
    assert!(results[0]["spec"]["startTime"].is_string());
    assert!(allowed.released_soon().await, "{:?}", allowed.requests);
}

/// A run the operator ended without admitting it (refused in the queue: its record says so)
/// gets no result, and its reports (if any) go at once, whatever status says of its start.
#[tokio::test]
async fn a_run_refused_in_the_queue_gets_no_result() {
    let created = Arc::new(Mutex::new(vec![]));
    let mut refused = record(Some(("Failed", "InvalidSpec", "no")));
    let mut data: Value =
        serde_json::from_str(refused["data"]["record.json"].as_str().unwrap()).unwrap();
    data.as_object_mut().unwrap().remove("started");
    data["admitted"] = json!(false);
    data["ended"]["measuring"] = json!(false);
    refused["data"]["record.json"] = json!(data.to_string());
    let applied = apply_with(forged_succeeded(), Some(refused), false, &created).await;
    assert!(created.lock().unwrap().is_empty());
    assert!(released(&applied.requests), "{:?}", applied.requests);
    // With no record at all (a run ended before records were kept): no result, reports kept.
    let none = apply_with(forged_succeeded(), None, false, &created).await;
    assert!(created.lock().unwrap().is_empty());
    assert!(!released(&none.requests), "{:?}", none.requests);
}

/// The reports of a run whose result this process created are deleted by a task of their own:
/// the reconcile neither waits for the deletion nor fails with it. A deletion that fails for
/// good (three tries) wakes the benchmark half a minute later, whose next reconcile hands it
/// over once more; a reconcile while one is under way sends none.
#[tokio::test(start_paused = true)]
async fn a_report_deletion_that_fails_holds_no_reconcile_and_comes_again() {
    let created = Arc::new(Mutex::new(vec![]));
    let bm = benchmark(finished());
    let api_server = FakeApi::default();
    let client = serving(&api_server, &bm, failed_record(), false, true, &created);
    let mut ctx = context(client.clone(), Config::for_tests());
    let (wake, mut woken) = tokio::sync::mpsc::unbounded_channel();
    ctx.wake = wake;
    let api = Api::<crds::IngressBenchmark>::namespaced(client, "team-a");
    let obj: crds::IngressBenchmark = serde_json::from_value(bm).unwrap();
    let deletions = || {
        api_server
            .requests()
            .iter()
            .filter(|l| released(std::slice::from_ref(*l)))
            .count()
    };

    // The result is created; the deletion's 500 does not fail the reconcile.
    let action = fake_api::apply(&obj, &ctx, &api).await.unwrap();
    assert_eq!(action, Action::await_change());
    assert_eq!(created.lock().unwrap().len(), 1);
    // While it is tried, another reconcile sends no deletion of its own.
    fake_api::apply(&obj, &ctx, &api).await.unwrap();
    let since = tokio::time::Instant::now();
    let tried = tokio::time::timeout(Duration::from_secs(60), woken.recv()).await;
    let again = tried
        .expect("woken once the deletion failed for good")
        .unwrap();
    assert_eq!(
        (again.namespace.as_str(), again.name.as_str()),
        ("team-a", "web")
    );
    assert_eq!(deletions(), 3, "three tries: {:?}", api_server.requests());
    // Not in a tight loop: woken half a minute after the last try.
    assert!(
        since.elapsed() >= Duration::from_secs(30),
        "{:?}",
        since.elapsed()
    );

    // Woken: the next reconcile hands it over again.
    fake_api::apply(&obj, &ctx, &api).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while deletions() < 4 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(deletions(), 4, "{:?}", api_server.requests());
}
