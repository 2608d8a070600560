//! A BenchmarkResult whose creation keeps being refused (RBAC removed, an admission policy):
//! the run keeps its phase, ResultRecorded=False says so (ResultWritePending while it is
//! retried, ResultWriteFailed with a Warning Event once the operator gave up), the run's
//! reports stay, and a later reconcile whose write is allowed creates the result and only then
//! turns ResultRecorded True (and releases the reports). A status forged to say Succeeded
//! without the reports to back it gives a Failed result. Against the in-process fake API server
//! (testing::FakeApi), which here keeps the last status written and the results created.

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

/// A run that ended Failed a minute ago, its result not written yet.
fn finished() -> Value {
    let ago = |s: i64| {
        jiff::Timestamp::now()
            .checked_sub(jiff::SignedDuration::from_secs(s))
            .unwrap()
            .to_string()
    };
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
}

/// Applies the benchmark holding `status` once; the API server refuses result creation while
/// `refuse` (403, as an admission policy or missing RBAC would) and keeps what it creates in
/// `created`.
async fn apply(status: Value, refuse: bool, created: &Arc<Mutex<Vec<Value>>>) -> Applied {
    let bm = benchmark(status.clone());
    let api_server = FakeApi::default();
    let kept = created.clone();
    let served = bm.clone();
    let client = api_server.client(move |seen: &Seen| {
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
    });
    let ctx = context(client.clone(), Config::for_tests());
    let api = Api::<crds::IngressBenchmark>::namespaced(client, "team-a");
    let obj: crds::IngressBenchmark = serde_json::from_value(bm).unwrap();
    let action = operator::driver::apply(&obj, &ctx, &api).await.unwrap();
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
    assert!(released(&fourth.requests), "{:?}", fourth.requests);
}

/// A status forged to say Succeeded (with statistics) has no stored reports behind it: the
/// result says Failed and why, and its times stay within what the API server stamped.
#[tokio::test]
async fn a_forged_succeeded_status_gives_a_failed_result() {
    let created = Arc::new(Mutex::new(vec![]));
    let mut status = finished();
    status["phase"] = json!("Succeeded");
    status["message"] = json!("all good, trust me");
    status["startTime"] = json!("2000-01-01T00:00:00Z");
    status["completionTime"] = json!("2999-01-01T00:00:00Z");
    status["statistics"] = json!([{"index": 0, "name": "step 0", "metrics": [
        {"name": "rps", "unit": "req/s", "better": "Higher", "values": [1e9], "mean": 1e9,
         "stddev": 0.0, "ci95": 0.0}]}]);
    apply(status, false, &created).await;
    let results = created.lock().unwrap().clone();
    assert_eq!(results.len(), 1, "{results:?}");
    let spec = &results[0]["spec"];
    assert_eq!(spec["phase"], "Failed", "{spec}");
    let message = spec["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("0 of the 1 sample(s) of step 0"),
        "{message}"
    );
    assert_eq!(
        spec["startTime"], "2026-01-01T00:00:00Z",
        "not before the benchmark existed"
    );
    let completion: jiff::Timestamp = spec["completionTime"].as_str().unwrap().parse().unwrap();
    assert!(
        completion <= jiff::Timestamp::now(),
        "not in the future: {completion}"
    );
    assert!(
        spec["measurements"].as_array().is_none_or(|m| m.is_empty()),
        "{spec}"
    );
}
