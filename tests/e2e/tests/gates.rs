//! SLO gates on the real test cluster (docs/gates.md): against an nginx held to a hundredth of
//! a CPU, a `p99Ms <= 1` gate with abortOnFail ends a 60 s run Failed, naming the gate, long
//! before the 60 s are up, and its workers go; without abortOnFail the same gate lets a short
//! run finish all of it and then fails it.
//!
//!   eval "$(tests/e2e/setup.sh)"
//!   cargo test -p e2e --test gates -- --test-threads=1

use std::time::{Duration, Instant};

use e2e::*;
use serde_json::{json, Value};

/// Open connections of a gated run. The load is closed-loop, so in each 100 ms CFS period at most
/// this many requests wait for the throttled nginx's next quota: they must be well over 1% of the
/// requests it serves in its quota, or p99 never sees the throttle (with 8 connections and a
/// 50m limit, a CI run measured p99 0.35 ms).
const CONNECTIONS: u32 = 32;

/// An IngressBenchmark `name` loading `url` for `duration` with `gates`.
fn gated(ns: &str, name: &str, url: &str, duration: &str, gates: Value) -> Value {
    let mut ib = ingress_simple(ns, url, duration, CONNECTIONS);
    set(&mut ib, "/metadata/name", json!(name));
    set(&mut ib, "/spec/gates", gates);
    ib
}

#[tokio::test]
async fn a_gate_with_abort_on_fail_stops_a_run_against_a_slowed_target_well_before_its_end() {
    let client = client().await;
    let ns = TestNs::new(&client, "gates").await;
    let (mut slow, slow_svc) = nginx("slow", "10m");
    // The same nginx, held to a hundredth of a CPU (1 ms per 100 ms period, the smallest quota
    // the kubelet sets): its p99 is tens of ms, never under 1 ms.
    slow["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = json!("10m");
    for obj in [&slow, &slow_svc] {
        create(&client, &ns.name, obj).await.unwrap();
    }
    rolled_out(&ns.name, "slow");
    let url = format!("http://slow.{}.svc.cluster.local/", ns.name);

    // 60 s of load with a gate that breaks at once: aborted after 5 s of live breach.
    let gate = json!([{"figure": "p99Ms", "max": 1, "abortOnFail": true, "abortAfter": "5s"}]);
    let ib = gated(&ns.name, "aborted", &url, "60s", gate);
    let started = Instant::now();
    let done = create_and_wait(&client, &ib, FINISHED, RUN_TIMEOUT).await;
    let took = started.elapsed();
    assert_phase(&done, "Failed");
    // Pods start, 1 s of warm-up, 5 s of breach, a 2 s poll: far from the 61 s of load.
    assert!(
        took < Duration::from_secs(45),
        "aborted after {took:?}: {:#}",
        done["status"]
    );
    let ready = condition(&done, "Ready");
    assert_eq!(ready["reason"], "GateFailed", "{:#}", done["status"]);
    let message = ready["message"].as_str().unwrap();
    assert!(
        message.starts_with("gate \"p99Ms <= 1\" failed: step 0, live, broken for")
            && message.contains("> max 1"),
        "{message}"
    );
    let gates = condition(&done, "GatesPassed");
    assert_eq!(
        (&gates["status"], &gates["reason"]),
        (&json!("False"), &json!("GateFailed"))
    );
    assert!(
        done["status"]["steps"].as_array().is_none_or(Vec::is_empty),
        "no step result from an aborted step: {:#}",
        done["status"]
    );
    let events = events(&ns.name, "GateFailed", &[]).unwrap();
    assert!(events.contains("p99Ms <= 1"), "{events}");
    // Cleaned up like any failed run.
    wait_no_children(&client, &ns.name, Duration::from_secs(60)).await;

    // Without abortOnFail: the short run measures to its end, then fails on the merged report.
    let gate = json!([{"figure": "p99Ms", "max": 1, "name": "p99 under 1ms"}]);
    let ib = gated(&ns.name, "judged", &url, "4s", gate);
    let done = create_and_wait(&client, &ib, FINISHED, RUN_TIMEOUT).await;
    assert_phase(&done, "Failed");
    let ready = condition(&done, "Ready");
    assert_eq!(ready["reason"], "GateFailed", "{:#}", done["status"]);
    let message = ready["message"].as_str().unwrap();
    assert!(
        message.starts_with("gate \"p99 under 1ms\" failed: step 0: p99Ms "),
        "{message}"
    );
    assert_eq!(
        done["status"]["steps"].as_array().map(Vec::len),
        Some(1),
        "the step's result is kept: {:#}",
        done["status"]
    );

    // A gate the slowed target meets: the run succeeds with GatesPassed=True.
    let gate = json!([{"figure": "errorRate", "max": 0.5, "abortOnFail": true}]);
    let ib = gated(&ns.name, "passed", &url, "4s", gate);
    let done = create_and_wait(&client, &ib, FINISHED, RUN_TIMEOUT).await;
    assert_phase(&done, "Succeeded");
    assert!(
        condition_is(&done, "GatesPassed", "True"),
        "{:#}",
        done["status"]
    );
}
