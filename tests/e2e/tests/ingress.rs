//! IngressBenchmark end to end on the real test cluster: each test in its own namespace.
//! Needs `eval "$(tests/e2e/setup.sh)"` (tests/run-all.sh does it).

use std::collections::BTreeSet;
use std::time::Duration;

use e2e::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams};
use serde_json::{json, Value};

const IB: &str = "IngressBenchmark";
/// The nginx Service tests/cluster/demo.sh deploys.
const TARGET: &str = "http://nginx-target.netbench-target.svc.cluster.local/";
/// The phases a run ends in.
const FINISHED: &[&str] = &["Succeeded", "Failed"];
const RUN_TIMEOUT: Duration = Duration::from_secs(240);

/// ingress-simple.yaml, shortened, pointed at `url`.
fn simple(ns: &str, url: &str, duration: &str) -> Value {
    example(
        "ingress-simple.yaml",
        ns,
        &[
            ("/spec/target/url", json!(url)),
            ("/spec/load/duration", json!(duration)),
            ("/spec/load/warmup", json!("1s")),
            ("/spec/load/connections", json!(8)),
        ],
    )
}

/// A two-step CPU sweep named `name` over the Deployment "web" in `ns`, loading its Service.
fn sweep_over_web(ns: &str, name: &str, duration: &str, cpus: [&str; 2]) -> Value {
    let mut ib = simple(ns, &format!("http://web.{ns}.svc.cluster.local/"), duration);
    set(&mut ib, "/metadata/name", json!(name));
    let steps = json!([{"cpu": cpus[0]}, {"cpu": cpus[1]}]);
    set(
        &mut ib,
        "/spec/sweep",
        json!({"targetRef": {"name": "web"}, "steps": steps, "settle": "1s"}),
    );
    ib
}

async fn deploy_nginx(client: &kube::Client, ns: &str, name: &str, cpu: &str) -> Value {
    let (d, s) = nginx(name, cpu);
    create(client, ns, &d).await.unwrap();
    create(client, ns, &s).await.unwrap();
    kubectl(&[
        "-n",
        ns,
        "rollout",
        "status",
        &format!("deployment/{name}"),
        "--timeout=120s",
    ])
    .unwrap();
    deployment_spec(client, ns, name).await
}

async fn deployment_spec(client: &kube::Client, ns: &str, name: &str) -> Value {
    let d = Api::<Deployment>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap();
    serde_json::to_value(d.spec).unwrap()
}

#[tokio::test]
async fn ingress_simple_succeeds_with_results_columns_and_metrics() {
    let client = client().await;
    let ns = TestNs::new(&client, "simple").await;
    let ib = simple(&ns.name, TARGET, "4s");
    create(&client, &ns.name, &ib).await.unwrap();
    let done = wait_phase(
        &client,
        IB,
        &ns.name,
        "ingress-simple",
        FINISHED,
        RUN_TIMEOUT,
    )
    .await
    .unwrap();
    let st = &done["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    let step = &st["steps"][0];
    assert!(step["rps"].as_f64().unwrap() > 0.0, "{step:#}");
    assert!(step["requests"].as_u64().unwrap() > 0);
    assert!(step["latencyMs"]["p99"].as_f64().unwrap() > 0.0);
    assert_eq!(step["workers"].as_array().unwrap().len(), 1);
    assert!(st["p99"].as_str().unwrap().ends_with("ms"));
    assert_eq!(st["workers"], "1/1");
    let thresholds = st["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "ThresholdsMet")
        .unwrap();
    assert_eq!(thresholds["status"], "True", "{thresholds}");

    // The printer columns, as a user sees them.
    let table = kubectl(&["-n", &ns.name, "get", "ingressbenchmark"]).unwrap();
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "PHASE", "RPS", "P99", "WORKERS", "AGE"]);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[1], "Succeeded");
    assert!(row[2].parse::<f64>().unwrap() > 0.0, "{table}");
    assert!(row[3].ends_with("ms"), "{table}");
    assert_eq!(row[4], "1/1");
    // `kubectl get benchmarks` lists both kinds' objects.
    assert!(kubectl(&["-n", &ns.name, "get", "benchmarks"])
        .unwrap()
        .contains("ingress-simple"));

    wait_no_children(&client, &ns.name, Duration::from_secs(30))
        .await
        .unwrap();
    let metrics = operator_metrics(&client).await.unwrap();
    let series = format!(
        "netbench_ingress_rps{{name=\"ingress-simple\",namespace=\"{}\",step=\"0\"}}",
        ns.name
    );
    assert!(metrics.contains(&series), "{series} missing");
    assert!(metrics.contains("netbench_reconcile_total{kind=\"IngressBenchmark\"}"));
}

#[tokio::test]
async fn two_step_sweep_gives_a_scaling_table_and_restores_the_target() {
    let client = client().await;
    let ns = TestNs::new(&client, "sweep").await;
    // The test node has 2 CPUs, so the steps are 250m and 500m rather than 1 and 2 CPUs.
    let before = deploy_nginx(&client, &ns.name, "web", "100m").await;
    let ib = sweep_over_web(&ns.name, "sweep", "3s", ["250m", "500m"]);
    create(&client, &ns.name, &ib).await.unwrap();
    let done = wait_phase(&client, IB, &ns.name, "sweep", FINISHED, RUN_TIMEOUT * 2)
        .await
        .unwrap();
    let st = &done["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    let steps = st["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["cpu"], "250m");
    assert_eq!(steps[1]["cpu"], "500m");
    let rows = st["scaling"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["sizeFactor"], 2.0);
    assert!(st["scaling"]["summary"]
        .as_str()
        .unwrap()
        .contains("of linear"));
    assert_eq!(st["savedTarget"]["restored"], true);
    let after = deployment_spec(&client, &ns.name, "web").await;
    assert_eq!(
        after["template"], before["template"],
        "the Deployment's pod template is restored"
    );
    assert_eq!(after["replicas"], before["replicas"]);
}

#[tokio::test]
async fn invalid_spec_is_rejected_by_the_api_server_with_the_rules_message() {
    let client = client().await;
    let ns = TestNs::new(&client, "invalid").await;
    let mut ib = simple(&ns.name, "http://x/", "4s");
    set(&mut ib, "/spec/load/threads", json!(9));
    let err = create(&client, &ns.name, &ib)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("load.connections must be at least load.threads"),
        "{err}"
    );
    let mut ib = simple(&ns.name, "ftp://x/", "4s");
    set(&mut ib, "/spec/load/threads", json!(1));
    let err = create(&client, &ns.name, &ib)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("target.url must be an absolute http:// or https:// URL"),
        "{err}"
    );
}

#[tokio::test]
async fn unknown_node_fails_clearly_and_creates_no_pods() {
    let client = client().await;
    let ns = TestNs::new(&client, "nonode").await;
    let mut ib = simple(&ns.name, TARGET, "4s");
    set(
        &mut ib,
        "/spec/workers",
        json!({"nodeNames": ["no-such-node"]}),
    );
    create(&client, &ns.name, &ib).await.unwrap();
    let done = wait_phase(
        &client,
        IB,
        &ns.name,
        "ingress-simple",
        FINISHED,
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(done["status"]["phase"], "Failed");
    let invalid = done["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Invalid")
        .unwrap()
        .clone();
    assert_eq!(invalid["status"], "True");
    assert!(
        invalid["message"]
            .as_str()
            .unwrap()
            .contains("node no-such-node does not exist"),
        "{invalid}"
    );
    assert!(worker_pods(&client, &ns.name).await.unwrap().is_empty());
}

#[tokio::test]
async fn host_network_is_refused_without_the_admins_permission() {
    let client = client().await;
    let ns = TestNs::new(&client, "hostnet").await;
    let mut ib = simple(&ns.name, TARGET, "4s");
    set(&mut ib, "/spec/workers/hostNetwork", json!(true));
    create(&client, &ns.name, &ib).await.unwrap();
    let done = wait_phase(
        &client,
        IB,
        &ns.name,
        "ingress-simple",
        FINISHED,
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(done["status"]["phase"], "Failed");
    assert!(done["status"]["message"]
        .as_str()
        .unwrap()
        .contains("hostNetwork workers are not enabled"));
    assert!(worker_pods(&client, &ns.name).await.unwrap().is_empty());
}

#[tokio::test]
async fn worker_deleted_mid_run_fails_the_run_and_leaks_nothing() {
    let client = client().await;
    let ns = TestNs::new(&client, "podkill").await;
    let ib = simple(&ns.name, TARGET, "60s");
    create(&client, &ns.name, &ib).await.unwrap();
    wait_phase(
        &client,
        IB,
        &ns.name,
        "ingress-simple",
        &["Running"],
        RUN_TIMEOUT,
    )
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let pod = loop {
        if let Some(p) = worker_pods(&client, &ns.name)
            .await
            .unwrap()
            .into_iter()
            .next()
        {
            break p;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no worker pod while Running"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let name = pod.metadata.name.clone().unwrap();
    Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), &ns.name)
        .delete(&name, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let done = wait_phase(
        &client,
        IB,
        &ns.name,
        "ingress-simple",
        FINISHED,
        Duration::from_secs(90),
    )
    .await
    .unwrap();
    assert_eq!(done["status"]["phase"], "Failed");
    let message = done["status"]["message"].as_str().unwrap();
    assert!(
        message.contains(&name),
        "the reason names the pod: {message}"
    );
    wait_no_children(&client, &ns.name, Duration::from_secs(30))
        .await
        .unwrap();
}

#[tokio::test]
async fn operator_restart_mid_run_gives_one_run_and_one_result() {
    let client = client().await;
    let ns = TestNs::new(&client, "restart").await;
    let ib = simple(&ns.name, TARGET, "20s");
    create(&client, &ns.name, &ib).await.unwrap();
    let running = wait_phase(
        &client,
        IB,
        &ns.name,
        "ingress-simple",
        &["Running"],
        RUN_TIMEOUT,
    )
    .await
    .unwrap();
    let run_id = running["status"]["runId"].clone();
    let mut seen = BTreeSet::new();
    for p in worker_pods(&client, &ns.name).await.unwrap() {
        seen.insert(p.metadata.uid.unwrap());
    }
    kubectl(&[
        "-n",
        "netbench-system",
        "delete",
        "pod",
        "-l",
        OPERATOR_PODS,
        "--wait=false",
    ])
    .unwrap();
    let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
    let done = loop {
        for p in worker_pods(&client, &ns.name).await.unwrap() {
            seen.insert(p.metadata.uid.unwrap());
        }
        let v = get_benchmark(&client, IB, &ns.name, "ingress-simple")
            .await
            .unwrap();
        if matches!(v["status"]["phase"].as_str(), Some("Succeeded" | "Failed")) {
            break v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "run did not finish: {:#}",
            v["status"]
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(done["status"]["phase"], "Succeeded", "{:#}", done["status"]);
    assert_eq!(done["status"]["runId"], run_id, "the same run resumed");
    assert_eq!(done["status"]["steps"].as_array().unwrap().len(), 1);
    assert_eq!(
        seen.len(),
        1,
        "exactly one worker pod was ever created: {seen:?}"
    );
}

#[tokio::test]
async fn deleting_mid_run_restores_the_target_and_removes_children() {
    let client = client().await;
    let ns = TestNs::new(&client, "delete").await;
    let before = deploy_nginx(&client, &ns.name, "web", "100m").await;
    let ib = sweep_over_web(&ns.name, "del", "60s", ["300m", "400m"]);
    create(&client, &ns.name, &ib).await.unwrap();
    wait_phase(&client, IB, &ns.name, "del", &["Running"], RUN_TIMEOUT)
        .await
        .unwrap();
    let patched = deployment_spec(&client, &ns.name, "web").await;
    assert_ne!(
        patched["template"], before["template"],
        "the sweep scaled the target"
    );
    kubectl(&[
        "-n",
        &ns.name,
        "delete",
        "ingressbenchmark",
        "del",
        "--timeout=90s",
    ])
    .unwrap();
    let after = deployment_spec(&client, &ns.name, "web").await;
    assert_eq!(
        after["template"], before["template"],
        "restored on deletion"
    );
    wait_no_children(&client, &ns.name, Duration::from_secs(30))
        .await
        .unwrap();
}
