//! Scheduled IngressBenchmarks end to end on the real test cluster: a run every minute, each
//! round its own run id, and no run while suspended. Needs `eval "$(tests/e2e/setup.sh)"`
//! (tests/run-all.sh does it). Takes about three minutes (it waits for minute boundaries).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use e2e::*;
use serde_json::{json, Value};

/// Long enough for two minute boundaries, the runs after them and the worker pods' start.
const TWO_ROUNDS: Duration = Duration::from_secs(300);
/// After the minute boundary, how long a due run would take to create its worker pods.
const MARGIN: Duration = Duration::from_secs(25);

fn round_of(v: &Value) -> u64 {
    v["status"]["schedule"]["round"].as_u64().unwrap_or(0)
}

/// The uids of the worker pods in `ns` now.
async fn pod_uids(client: &kube::Client, ns: &str) -> BTreeSet<String> {
    worker_pods(client, ns)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect()
}

/// Unix seconds of the first minute boundary after now, plus `margin`.
fn after_next_minute(margin: Duration) -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    (now / 60 + 1) * 60 + margin.as_secs()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn a_schedule_runs_every_minute_and_suspend_stops_it() {
    let client = client().await;
    let ns = TestNs::new(&client, "schedule").await;
    let ib = example(
        "ingress-scheduled.yaml",
        &ns.name,
        &[
            ("/spec/schedule", json!("* * * * *")),
            ("/spec/target/url", json!(TARGET)),
            ("/spec/load/duration", json!("2s")),
            ("/spec/load/warmup", json!("1s")),
            ("/spec/load/connections", json!(4)),
        ],
    );
    let name = ib["metadata"]["name"].as_str().unwrap().to_string();
    create(&client, &ns.name, &ib).await.unwrap();

    // Round 0: no run, the next time announced.
    let idle = wait_until(
        &client,
        IB,
        &ns.name,
        &name,
        "status.schedule.nextScheduleTime",
        Duration::from_secs(60),
        |v| v["status"]["schedule"]["nextScheduleTime"].is_string(),
    )
    .await;
    if round_of(&idle) == 0 {
        assert_phase(&idle, "Pending");
        let message = idle["status"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("scheduled: next run at "), "{message}");
        assert!(idle["status"]["runId"].is_null(), "{:#}", idle["status"]);
    }

    // Rounds 1 and 2 run, each under its own run id, and both succeed.
    let mut succeeded: BTreeMap<u64, String> = BTreeMap::new();
    let two = eventually(TWO_ROUNDS, async || {
        let v = get_benchmark(&client, IB, &ns.name, &name).await.unwrap();
        let st = &v["status"];
        let run = st["runId"].as_str().unwrap_or_default().to_string();
        assert_ne!(st["phase"], "Failed", "a scheduled run failed: {st:#}");
        if st["phase"] == "Succeeded" {
            succeeded.insert(round_of(&v), run);
        }
        if succeeded.contains_key(&1) && succeeded.contains_key(&2) {
            return Ok(v);
        }
        Err(format!(
            "rounds succeeded so far: {succeeded:?}; now {st:#}"
        ))
    })
    .await;
    for (round, run) in &succeeded {
        assert!(run.ends_with(&format!("-r{round}")), "{succeeded:?}");
    }
    assert_ne!(succeeded[&1], succeeded[&2], "each round is its own run");
    // Each scheduled run wrote its BenchmarkResult (named after its run id).
    let results = kubectl(&["-n", &ns.name, "get", "benchmarkresults", "-o", "name"]).unwrap();
    for run in succeeded.values() {
        let run = run.as_str();
        assert!(
            results.contains(&format!("-{run}")),
            "no result of {run}: {results}"
        );
    }
    let last = two["status"]["schedule"]["lastScheduleTime"].as_str();
    assert!(
        last.is_some_and(|t| t.ends_with(":00Z")),
        "{:#}",
        two["status"]
    );
    let metrics = operator_metrics(&client).await.unwrap();
    let series = format!(
        "netbench_schedule_next_run_timestamp_seconds{{kind=\"IngressBenchmark\",name=\"{name}\",namespace=\"{}\"}}",
        ns.name
    );
    assert!(metrics.contains(&series), "{series} missing");

    // Suspended: the run under way (if any) finishes, then no round starts.
    kubectl(&[
        "-n",
        &ns.name,
        "patch",
        "ingressbenchmark",
        &name,
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ])
    .unwrap();
    let suspended = wait_until(
        &client,
        IB,
        &ns.name,
        &name,
        "suspended (no nextScheduleTime) and the run finished",
        RUN_TIMEOUT,
        |v| {
            v["status"]["schedule"]["nextScheduleTime"].is_null()
                && FINISHED.contains(&v["status"]["phase"].as_str().unwrap_or_default())
        },
    )
    .await;
    let round = round_of(&suspended);
    let run = suspended["status"]["runId"].clone();
    let pods_then = pod_uids(&client, &ns.name).await;
    let results_then = kubectl(&["-n", &ns.name, "get", "benchmarkresults", "-o", "name"])
        .unwrap()
        .lines()
        .count();
    let until = after_next_minute(MARGIN);
    eventually(Duration::from_secs(120), async || {
        let v = get_benchmark(&client, IB, &ns.name, &name).await.unwrap();
        assert_eq!(round_of(&v), round, "a round started while suspended");
        let results = kubectl(&["-n", &ns.name, "get", "benchmarkresults", "-o", "name"]).unwrap();
        assert_eq!(
            results.lines().count(),
            results_then,
            "a result appeared while suspended"
        );
        assert_eq!(v["status"]["runId"], run, "{:#}", v["status"]);
        let new: Vec<String> = pod_uids(&client, &ns.name)
            .await
            .difference(&pods_then)
            .cloned()
            .collect();
        assert!(
            new.is_empty(),
            "worker pods appeared while suspended: {new:?}"
        );
        if unix_now() >= until {
            return Ok(());
        }
        Err(format!(
            "waiting until {until} (unix), past a minute boundary"
        ))
    })
    .await;

    kubectl(&[
        "-n",
        &ns.name,
        "delete",
        "ingressbenchmark",
        &name,
        "--timeout=60s",
    ])
    .unwrap();
    wait_no_children(&client, &ns.name, Duration::from_secs(60)).await;
}
