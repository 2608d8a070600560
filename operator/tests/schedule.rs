//! Scheduled benchmarks through the whole driver against an in-process fake API server (it
//! answers reads with the benchmark and empty lists, and logs every request): before the first
//! scheduled time nothing but the benchmark's own status is written, and a schedule the
//! operator cannot parse fails the run InvalidSchedule without creating anything. The real
//! cluster version is tests/e2e/tests/schedule.rs.

use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::api::Api;
use kube::client::Body;
use kube::runtime::controller::Action;
use kube::runtime::events::Reporter;
use serde_json::{json, Value};

use operator::admin::config::Config;
use operator::context::Context;

type Log = Arc<Mutex<Vec<String>>>;

/// The benchmark by name (also as the answer to its status patch), empty lists, 404 otherwise.
fn fake_client(benchmark: Value, log: Log) -> kube::Client {
    let svc = tower::service_fn(move |req: Request<Body>| {
        let (log, benchmark) = (log.clone(), benchmark.clone());
        async move {
            let (method, path) = (req.method().to_string(), req.uri().path().to_string());
            let body = http_body_util::BodyExt::collect(req.into_body())
                .await
                .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                .unwrap_or_default();
            log.lock().unwrap().push(format!("{method} {path} {body}"));
            let name = benchmark["metadata"]["name"].as_str().unwrap_or_default();
            let own = path.ends_with(&format!("/ingressbenchmarks/{name}"))
                || path.ends_with(&format!("/ingressbenchmarks/{name}/status"));
            let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
            let collection = match parts.iter().position(|p| *p == "namespaces") {
                Some(i) => parts.len() == i + 3,
                None => parts.len() <= 3 || parts.get(1).is_some_and(|v| v.starts_with('v')),
            };
            let (code, body) = match method.as_str() {
                "GET" | "PATCH" if own => (200, benchmark.clone()),
                "GET" | "DELETE" if collection => (
                    200,
                    json!({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}),
                ),
                _ => (
                    404,
                    json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Failure", "reason": "NotFound", "code": 404}),
                ),
            };
            Ok::<_, std::convert::Infallible>(
                Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Body::from(body.to_string().into_bytes()))
                    .unwrap(),
            )
        }
    });
    kube::Client::new(svc, "default")
}

fn context(client: kube::Client) -> Context {
    let (wake, _) = tokio::sync::mpsc::unbounded_channel();
    Context {
        client,
        config: Config::for_tests(),
        metrics: Arc::new(operator::base::metrics::Metrics::new()),
        runs: Arc::new(operator::store::registry::Registry::default()),
        reporter: Reporter {
            controller: "netbench-operator".into(),
            instance: None,
        },
        wake,
    }
}

/// Applies `ib` once; returns the action and every request that changes something.
async fn apply(ib: Value) -> (Action, Vec<String>, Context) {
    let log = Log::default();
    let client = fake_client(ib.clone(), log.clone());
    let ctx = context(client.clone());
    let api = Api::<crds::IngressBenchmark>::namespaced(client, "team-a");
    let obj: crds::IngressBenchmark = serde_json::from_value(ib).unwrap();
    let action = operator::driver::apply(&obj, &ctx, &api).await.unwrap();
    let writes = log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| !l.starts_with("GET "))
        // Clearing the benchmark's own children (none here) is not a change.
        .filter(|l| !(l.starts_with("DELETE ") && l.contains("/namespaces/team-a/")))
        .cloned()
        .collect();
    (action, writes, ctx)
}

fn benchmark(schedule: &str) -> Value {
    benchmark_with(schedule, json!({}), json!(null))
}

fn benchmark_with(schedule: &str, more_spec: Value, status: Value) -> Value {
    let mut spec = json!({"target": {"url": "http://x/"}, "schedule": schedule});
    if let (Some(spec), Some(more)) = (spec.as_object_mut(), more_spec.as_object()) {
        spec.extend(more.clone());
    }
    json!({
        "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
        "metadata": {"name": "nightly", "namespace": "team-a",
                     "uid": "5c6e1f7c-0000-4c1d-9e3f-1234567890ab",
                     "generation": 1, "finalizers": ["netbench.io/cleanup"]},
        "spec": spec,
        "status": status,
    })
}

/// The one status patch among `writes` (Events aside).
fn status_patch(writes: &[String]) -> &str {
    let patches: Vec<&String> = writes
        .iter()
        .filter(|l| !l.starts_with("POST /apis/events.k8s.io/"))
        .collect();
    assert_eq!(patches.len(), 1, "one status write only: {writes:?}");
    let patch = patches[0];
    assert!(
        patch.starts_with(
            "PATCH /apis/netbench.io/v1alpha1/namespaces/team-a/ingressbenchmarks/nightly/status"
        ),
        "{patch}"
    );
    patch
}

#[tokio::test]
async fn before_the_first_scheduled_time_nothing_runs() {
    let (action, writes, ctx) = apply(benchmark("@daily")).await;
    let patch = status_patch(&writes);
    for part in [
        r#""phase":"Pending""#,
        "scheduled: next run at ",
        r#""nextScheduleTime":""#,
        r#""round":0"#,
    ] {
        assert!(patch.contains(part), "{part} missing: {patch}");
    }
    assert!(!patch.contains(r#""runId""#), "no run yet: {patch}");
    assert_ne!(action, Action::await_change(), "it wakes for the time");
    let metrics = ctx.metrics.render();
    assert!(
        metrics.contains(
            r#"netbench_schedule_next_run_timestamp_seconds{kind="IngressBenchmark",name="nightly",namespace="team-a"}"#
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_schedule_with_seconds_fails_invalid_schedule_and_creates_nothing() {
    let (_, writes, _) = apply(benchmark("*/10 * * * * *")).await;
    let patch = status_patch(&writes);
    for part in [
        r#""phase":"Failed""#,
        r#""reason":"InvalidSchedule""#,
        r#""status":"True","type":"Invalid""#,
        r#"spec.schedule \"*/10 * * * * *\" is refused: "#,
        "5 fields",
    ] {
        assert!(patch.contains(part), "{part} missing: {patch}");
    }
}

/// Round 1's run is still running when the next time comes due with concurrencyPolicy
/// Replace: its pods go, round 2 starts, and the Events say it was replaced by a scheduled run,
/// not that the spec changed.
#[tokio::test]
async fn replace_stops_the_run_under_way_with_its_own_event() {
    let status = json!({
        "runId": "5c6e1f7c-g1-r1", "phase": "Running", "currentStep": 0,
        "schedule": {"round": 1, "lastScheduleTime": "2020-01-01T00:00:00Z",
                     "nextScheduleTime": "2020-01-01T00:01:00Z", "specHash": "0"},
    });
    let ib = benchmark_with("* * * * *", json!({"concurrencyPolicy": "Replace"}), status);
    let (_, writes, _) = apply(ib).await;
    let all = writes.join("\n");
    for part in [
        r#""reason":"ScheduledRun""#,
        r#""reason":"RunReplaced""#,
        "run 5c6e1f7c-g1-r1 had not finished",
        r#""runId":"5c6e1f7c-g1-r2""#,
        r#""round":2"#,
    ] {
        assert!(all.contains(part), "{part} missing: {all}");
    }
    assert!(!all.contains("SpecChanged"), "{all}");
}
