//! Scheduled benchmarks through the whole driver against the in-process fake API server
//! (testing::FakeApi: it answers reads with the benchmark and empty lists, and logs every
//! request): before the first
//! scheduled time nothing but the benchmark's own status is written, and a schedule the
//! operator cannot parse fails the run InvalidSchedule without creating anything. The real
//! cluster version is tests/e2e/tests/schedule.rs.

use kube::api::Api;
use kube::runtime::controller::Action;
use serde_json::{json, Value};

use operator::admin::config::Config;
use operator::context::Context;
use operator::testing::{context, FakeApi};

/// Applies `ib` once; returns the action and every request that changes something.
async fn apply(ib: Value) -> (Action, Vec<String>, Context) {
    let api_server = FakeApi::default();
    let client = api_server.serving(ib.clone());
    let ctx = context(client.clone(), Config::for_tests());
    let api = Api::<crds::IngressBenchmark>::namespaced(client, "team-a");
    let obj: crds::IngressBenchmark = serde_json::from_value(ib).unwrap();
    let action = operator::testing::fake_api::apply(&obj, &ctx, &api)
        .await
        .unwrap();
    let writes = api_server
        .requests()
        .into_iter()
        .filter(|l| !l.starts_with("GET "))
        // Clearing the benchmark's own children (none here), or a new run's folded samples
        // left by an earlier attempt of the same run id (none here), is not a change.
        .filter(|l| !(l.starts_with("DELETE ") && l.contains("/namespaces/team-a/")))
        .filter(|l| !(l.starts_with("DELETE ") && l.contains("netbench.io%2Fsample%3Dtrue")))
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

/// The one status patch among `writes` (Events and the run record, in the operator's own
/// namespace, aside).
fn status_patch(writes: &[String]) -> &str {
    let patches: Vec<&String> = writes
        .iter()
        .filter(|l| !l.starts_with("POST /apis/events.k8s.io/"))
        .filter(|l| {
            !(l.starts_with("POST /api/v1/namespaces/netbench-system/configmaps ")
                && l.contains("netbench-run-"))
        })
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
