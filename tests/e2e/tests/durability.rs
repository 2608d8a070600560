//! Results that are neither lost nor forged nor forgotten, on the real test cluster: a
//! ValidatingAdmissionPolicy holds back the status write that records Succeeded (the reports
//! must outlive it), forged and squatting report ConfigMaps are planted around a run (none may
//! count, each must raise a Warning Event), and the operator is restarted after a run (its
//! results must come back on /metrics). Each test in its own namespace.
//! Needs `eval "$(tests/e2e/setup.sh)"` (tests/run-all.sh does it).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use e2e::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crds::IngressBenchmark;
use operator::base::labels;
use operator::store::reports::{object_name, Owner};

const NAME: &str = "ingress-simple";

/// ingress-simple.yaml with two workers and a short run.
fn two_workers(ns: &str) -> Value {
    let mut ib = ingress_simple(ns, TARGET, "3s", 4);
    set(&mut ib, "/spec/workers/replicas", json!(2));
    ib
}

/// A ValidatingAdmissionPolicy and its binding that deny, in one namespace, every status write
/// of an IngressBenchmark recording phase Succeeded. Dropping it deletes both.
struct HoldSucceeded(DenyPolicy);

impl HoldSucceeded {
    async fn new(client: &Client, ns: &str) -> HoldSucceeded {
        let rule = json!({"apiGroups": ["netbench.io"], "apiVersions": ["*"],
                          "operations": ["UPDATE"], "resources": ["ingressbenchmarks/status"]});
        HoldSucceeded(
            DenyPolicy::create(
                client,
                format!("netbench-e2e-hold-{ns}"),
                ns,
                rule,
                "!has(object.status) || !has(object.status.phase) || object.status.phase != 'Succeeded'",
                format!("netbench-e2e {ns}: Succeeded is held back"),
            )
            .await,
        )
    }

    /// Waits until the API server enforces the hold: a dry-run status write recording
    /// Succeeded on `probe` is denied with our message.
    async fn wait_enforced(&self, client: &Client, ns: &str, probe: &str) {
        let api = Api::<IngressBenchmark>::namespaced(client.clone(), ns);
        let pp = PatchParams {
            dry_run: true,
            field_manager: Some("netbench-e2e".into()),
            ..Default::default()
        };
        let patch = Patch::Merge(json!({"status": {"phase": "Succeeded"}}));
        eventually(Duration::from_secs(60), async || {
            let last = match api.patch_status(probe, &pp, &patch).await {
                Err(e) if e.to_string().contains(&self.0.message) => return Ok(()),
                other => format!("{other:?}"),
            };
            Err(format!(
                "the policy is not enforced after 60s; last answer: {last}"
            ))
        })
        .await
    }
}

/// Waits until the operator's log shows a write denied with `message`; returns that line.
/// Fails at once if the run ends meanwhile (it must not, while the hold is on).
async fn wait_operator_denied(client: &Client, ns: &str, message: &str) -> String {
    eventually(RUN_TIMEOUT, async || {
        let logs = kubectl(&[
            "-n",
            OPERATOR_NAMESPACE,
            "logs",
            "-l",
            OPERATOR_PODS,
            "--tail=1000",
        ])
        .unwrap();
        if let Some(line) = logs.lines().find(|l| l.contains(message)) {
            return Ok(line.to_string());
        }
        let v = get_benchmark(client, IB, ns, NAME).await.unwrap();
        let phase = v["status"]["phase"].as_str().unwrap_or("");
        assert!(
            phase != "Succeeded" && phase != "Failed",
            "the run ended while held: {:#}",
            v["status"]
        );
        Err(format!(
            "the operator never hit the hold; status: {:#}",
            v["status"]
        ))
    })
    .await
}

/// The value of one series on the operator's /metrics, if present.
fn gauge(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Operator pod name -> restarts of its containers (pods being deleted left out).
async fn operator_restarts(client: &Client) -> BTreeMap<String, i32> {
    let pods = Api::<Pod>::namespaced(client.clone(), OPERATOR_NAMESPACE)
        .list(&ListParams::default().labels(OPERATOR_PODS))
        .await
        .unwrap();
    pods.items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let restarts = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .map_or(0, |cs| cs.iter().map(|c| c.restart_count).sum());
            (p.metadata.name.clone().unwrap_or_default(), restarts)
        })
        .collect()
}

/// `netbench_reports_rejected_total` by reason.
async fn rejections(client: &Client) -> BTreeMap<String, f64> {
    let metrics = operator_metrics(client).await.unwrap();
    ["forged", "outside", "shadowed", "conflict"]
        .iter()
        .map(|r| {
            let series = format!("netbench_reports_rejected_total{{reason=\"{r}\"}}");
            (r.to_string(), gauge(&metrics, &series).unwrap_or(0.0))
        })
        .collect()
}

/// The pod names of a step's per-worker results.
fn result_workers(step: &Value) -> BTreeSet<String> {
    step["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["pod"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_denied_success_write_loses_no_result_and_a_restart_keeps_the_gauges() {
    let client = client().await;
    let ns = TestNs::new(&client, "durable").await;
    let hold = HoldSucceeded::new(&client, &ns.name).await;
    // A probe the operator refuses at once (no hostNetwork here): its status shows the hold
    // is enforced before the real run starts.
    let mut probe = two_workers(&ns.name);
    set(&mut probe, "/metadata/name", json!("probe"));
    set(&mut probe, "/spec/workers/hostNetwork", json!(true));
    create_and_wait(&client, &probe, &["Failed"], Duration::from_secs(60)).await;
    hold.wait_enforced(&client, &ns.name, "probe").await;

    create(&client, &ns.name, &two_workers(&ns.name))
        .await
        .unwrap();
    let denied = wait_operator_denied(&client, &ns.name, &hold.0.message).await;
    eprintln!("the operator hit the hold: {denied}");
    // Held: not Succeeded, and both workers' reports are still kept.
    let held = get_benchmark(&client, IB, &ns.name, NAME).await.unwrap();
    assert_ne!(held["status"]["phase"], "Succeeded", "{:#}", held["status"]);
    let kept = stored_reports(&client, &ns.name).await.unwrap();
    assert_eq!(
        kept.len(),
        2,
        "reports deleted before the result was stored: {kept:?}"
    );

    hold.0.lift(&client).await;
    let lifted = std::time::Instant::now();
    let done = wait_succeeded(&client, IB, &ns.name, NAME).await;
    // A refused write is retried at most 10 s apart (it took 214 s with a backoff grown to
    // minutes); the policy's removal takes a moment to reach the API server.
    let took = lifted.elapsed();
    assert!(
        took < Duration::from_secs(40),
        "Succeeded {took:?} after the hold was lifted"
    );
    let st = &done["status"];
    let steps = st["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{st:#}");
    assert!(steps[0]["rps"].as_f64().unwrap() > 0.0, "{st:#}");
    let run = st["runId"].as_str().unwrap();
    let expected: BTreeSet<String> = (0..2)
        .map(|i| labels::worker_name(NAME, run, 0, i))
        .collect();
    assert_eq!(result_workers(&steps[0]), expected);
    assert_eq!(st["workers"], "2/2");
    // Once the result is stored, the reports go.
    wait_no_children(&client, &ns.name, Duration::from_secs(30)).await;

    // A new operator process publishes the stored result again.
    let rps = steps[0]["rps"].as_f64().unwrap();
    let series = format!(
        "netbench_ingress_rps{{controller=\"\",name=\"{NAME}\",namespace=\"{}\",step=\"0\"}}",
        ns.name
    );
    restart_operator();
    // operator_metrics skips pods being deleted: every answer below comes from a new process.
    let v = eventually(Duration::from_secs(180), async || {
        let m = operator_metrics(&client).await.unwrap_or_default();
        gauge(&m, &series).ok_or_else(|| format!("{series} not back on /metrics after the restart"))
    })
    .await;
    assert!(
        (v - rps).abs() <= 1e-6 * rps,
        "{series} is {v}, status says {rps}"
    );
}

/// A forged report as it would sit in a ConfigMap.
fn forged_report(worker: &str) -> String {
    json!({
        "version": 1, "worker": worker, "step": 0, "startedAtUnixMs": 1,
        "report": {"version": 1, "kind": "http", "forged": true}
    })
    .to_string()
}

fn config_map(name: &str, labels: BTreeMap<String, String>, data: &[(&str, String)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "data": data.iter().cloned().collect::<BTreeMap<_, _>>(),
    }))
    .unwrap()
}

/// Plants, for a run of `owner` whose step 0 has `workers`: (a) an old-style report of
/// worker 0 in the benchmark's namespace, (b) an unlabelled ConfigMap holding the name worker
/// 0's report will get, (c) a fully labelled report of worker 1 under another name and (d) one
/// of a worker that is not in the run, both in the operator's namespace. Returns them as
/// "namespace/name".
async fn plant_forgeries(
    client: &Client,
    owner: &Owner,
    run: &str,
    workers: &[String; 2],
) -> [String; 4] {
    let pp = PostParams::default();
    let in_ns = Api::<ConfigMap>::namespaced(client.clone(), &owner.namespace);
    let in_operator_ns = Api::<ConfigMap>::namespaced(client.clone(), OPERATOR_NAMESPACE);
    let mut old_style = labels::run_labels(&owner.kind, &owner.name, run);
    old_style.insert(labels::STEP.into(), "0".into());
    old_style.insert(labels::REPORT.into(), "true".into());
    let a = format!("{}-report", workers[0]);
    let data = [("report.json", forged_report(&workers[0]))];
    in_ns
        .create(&pp, &config_map(&a, old_style.clone(), &data))
        .await
        .unwrap();
    let b = object_name(owner, run, 0, &workers[0]);
    let squat = config_map(&b, BTreeMap::new(), &[("squatter", "yes".into())]);
    in_operator_ns
        .create(&pp, &squat)
        .await
        .expect("the squatter must be planted before worker 0 reports");
    let labelled = |worker: &str| {
        let mut l = old_style.clone();
        l.insert(labels::NAMESPACE.into(), owner.namespace.clone());
        l.insert(labels::BENCHMARK_UID.into(), owner.uid.clone());
        l.insert(labels::WORKER.into(), worker.into());
        l
    };
    let c = format!("forged-{}", workers[1]);
    let data = [("report.json", forged_report(&workers[1]))];
    in_operator_ns
        .create(&pp, &config_map(&c, labelled(&workers[1]), &data))
        .await
        .unwrap();
    let d = object_name(owner, run, 0, "intruder");
    let data = [("report.json", forged_report("intruder"))];
    in_operator_ns
        .create(&pp, &config_map(&d, labelled("intruder"), &data))
        .await
        .unwrap();
    let ns = &owner.namespace;
    let op = OPERATOR_NAMESPACE;
    [
        format!("{ns}/{a}"),
        format!("{op}/{b}"),
        format!("{op}/{c}"),
        format!("{op}/{d}"),
    ]
}

/// Waits until Warning Events with reason ForgedReport on the benchmark name every object in
/// `names` ("namespace/name"; the name whole, not as a prefix of another); returns their notes.
async fn wait_forgery_events(client: &Client, ns: &str, names: &[String]) -> Vec<String> {
    let api = Api::<Event>::namespaced(client.clone(), ns);
    eventually(Duration::from_secs(60), async || {
        let notes: Vec<String> = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.type_.as_deref() == Some("Warning"))
            .filter(|e| e.reason.as_deref() == Some("ForgedReport"))
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(NAME))
            .filter_map(|e| e.note)
            .collect();
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| {
                let (whole, spaced) = (format!("{n}:"), format!("{n} "));
                !notes
                    .iter()
                    .any(|note| note.contains(&whole) || note.contains(&spaced))
            })
            .collect();
        if missing.is_empty() {
            return Ok(notes);
        }
        Err(format!(
            "no ForgedReport Event names {missing:?}; Events: {notes:#?}"
        ))
    })
    .await
}

#[tokio::test]
async fn forged_and_squatting_report_objects_change_nothing_and_raise_warnings() {
    let client = client().await;
    let ns = TestNs::new(&client, "forged").await;
    let restarts = operator_restarts(&client).await;
    let rejected_before = rejections(&client).await;
    create(&client, &ns.name, &two_workers(&ns.name))
        .await
        .unwrap();
    let ib = Api::<IngressBenchmark>::namespaced(client.clone(), &ns.name)
        .get(NAME)
        .await
        .unwrap();
    let owner = Owner::of(&ib);
    let run = labels::run_id(&owner.uid, ib.metadata.generation.unwrap_or(1));
    let workers = [0, 1].map(|i| labels::worker_name(NAME, &run, 0, i));
    let planted = plant_forgeries(&client, &owner, &run, &workers).await;

    let done = wait_succeeded(&client, IB, &ns.name, NAME).await;
    let st = &done["status"];
    let steps = st["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{st:#}");
    let real: BTreeSet<String> = workers.iter().cloned().collect();
    assert_eq!(
        result_workers(&steps[0]),
        real,
        "exactly the real workers count"
    );
    assert!(steps[0]["rps"].as_f64().unwrap() > 0.0, "{st:#}");
    assert_eq!(st["workers"], "2/2");

    let notes = wait_forgery_events(&client, &ns.name, &planted).await;
    eprintln!("ForgedReport Events: {notes:#?}");
    // The operator never touches the benchmark namespace's ConfigMap (it may not).
    let a_name = planted[0].rsplit('/').next().unwrap();
    let a = Api::<ConfigMap>::namespaced(client.clone(), &ns.name)
        .get(a_name)
        .await
        .unwrap();
    assert_eq!(a.data.unwrap()["report.json"], forged_report(&workers[0]));
    // Every report object of the run is gone with it: (b) was replaced by the real report, (c)
    // and (d) carry the run's labels.
    eventually(Duration::from_secs(30), async || {
        let left = stored_reports(&client, &ns.name).await.unwrap();
        if left.is_empty() {
            return Ok(());
        }
        Err(format!("left behind: {left:?}"))
    })
    .await;
    let rejected = rejections(&client).await;
    for (reason, at_least) in [("forged", 2.0), ("outside", 1.0), ("shadowed", 1.0)] {
        let delta = rejected[reason] - rejected_before[reason];
        assert!(
            delta >= at_least,
            "{reason}: +{delta}, want +{at_least}: {rejected:?}"
        );
    }
    assert_eq!(
        operator_restarts(&client).await,
        restarts,
        "the operator restarted"
    );
}
