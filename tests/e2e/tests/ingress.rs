//! IngressBenchmark end to end on the real test cluster: each test in its own namespace.
//! Needs `eval "$(tests/e2e/setup.sh)"` (tests/run-all.sh does it).

use std::time::Duration;

use e2e::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams};
use serde_json::{json, Value};

/// ingress-simple.yaml, shortened, pointed at `url`.
fn simple(ns: &str, url: &str, duration: &str) -> Value {
    ingress_simple(ns, url, duration, 8)
}

/// A 4 s ingress-simple.yaml in `ns` against TARGET with `value` at `pointer`: it must end Failed
/// within 60 s, with no worker pod created.
async fn simple_fails_with(client: &kube::Client, ns: &str, pointer: &str, value: Value) -> Value {
    let mut ib = simple(ns, TARGET, "4s");
    set(&mut ib, pointer, value);
    fails_without_pods(client, &ib, Duration::from_secs(60)).await
}

/// Runs `ib` to its end within `timeout`: it must end Failed, with no worker pod created.
async fn fails_without_pods(client: &kube::Client, ib: &Value, timeout: Duration) -> Value {
    let done = create_and_wait(client, ib, FINISHED, timeout).await;
    assert_eq!(done["status"]["phase"], "Failed");
    let ns = ib["metadata"]["namespace"].as_str().unwrap();
    assert!(worker_pods(client, ns).await.unwrap().is_empty());
    done
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
    rolled_out(ns, name);
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
    let done = create_and_wait(&client, &ib, FINISHED, RUN_TIMEOUT).await;
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

    wait_no_children(&client, &ns.name, Duration::from_secs(30)).await;
    let metrics = operator_metrics(&client).await.unwrap();
    let series = format!(
        "netbench_ingress_rps{{controller=\"\",name=\"ingress-simple\",namespace=\"{}\",step=\"0\"}}",
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
    let done = create_and_wait(&client, &ib, FINISHED, RUN_TIMEOUT * 2).await;
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

/// Two "controllers" (nginx Deployments with their Services) swept side by side: every size
/// measures both, each scaled to it first; a scaling table each; both restored.
#[tokio::test]
async fn controllers_swept_side_by_side_each_scale_their_own_target_and_are_restored() {
    let client = client().await;
    let ns = TestNs::new(&client, "ctlsweep").await;
    let before_a = deploy_nginx(&client, &ns.name, "web-a", "100m").await;
    let before_b = deploy_nginx(&client, &ns.name, "web-b", "100m").await;
    let generation = async |name: &str| {
        Api::<Deployment>::namespaced(client.clone(), &ns.name)
            .get(name)
            .await
            .unwrap()
            .metadata
            .generation
            .unwrap()
    };
    let (gen_a, gen_b) = (generation("web-a").await, generation("web-b").await);
    let mut ib = simple(&ns.name, TARGET, "3s");
    set(&mut ib, "/metadata/name", json!("ctlsweep"));
    let controller = |name: &str| {
        json!({"name": name, "url": format!("http://web-{name}.{}.svc.cluster.local/", ns.name),
               "sweepTarget": {"name": format!("web-{name}")}})
    };
    set(
        &mut ib,
        "/spec/controllers",
        json!([controller("a"), controller("b")]),
    );
    set(
        &mut ib,
        "/spec/sweep",
        json!({"steps": [{"cpu": "250m"}, {"cpu": "500m"}], "settle": "1s"}),
    );
    let done = create_and_wait(&client, &ib, FINISHED, RUN_TIMEOUT * 3).await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    // Every controller at every size, a size's controllers together.
    let steps: Vec<(u64, &str, &str)> = st["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["index"].as_u64().unwrap(),
                s["controller"].as_str().unwrap(),
                s["cpu"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            (0, "a", "250m"),
            (1, "b", "250m"),
            (2, "a", "500m"),
            (3, "b", "500m")
        ]
    );
    for s in st["steps"].as_array().unwrap() {
        assert!(s["rps"].as_f64().unwrap() > 0.0, "{s:#}");
    }
    // A scaling table per controller, each against its own first step.
    let rows = st["scaling"]["rows"].as_array().unwrap();
    let of = |c: &str| rows.iter().filter(|r| r["controller"] == c).count();
    assert_eq!((rows.len(), of("a"), of("b")), (4, 2, 2), "{rows:#?}");
    let summary = st["scaling"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("a: 500m CPU: ") && summary.contains("; b: 500m CPU: "),
        "{summary}"
    );
    // The controllers compared at the largest size, in status and in the Event.
    let compared = st["comparison"]["summary"].as_str().unwrap();
    assert!(compared.starts_with("at 500m CPU:\na: "), "{compared}");
    let events = event_messages(&ns.name, "ControllersCompared").unwrap();
    assert!(events.contains("at 500m CPU: a: "), "{events}");
    // Both targets saved before the first patch, restored and read back as saved.
    let saved = st["savedTargets"].as_array().unwrap();
    let names: Vec<&str> = saved.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["web-a", "web-b"]);
    assert!(saved.iter().all(|t| t["restored"] == true), "{saved:#?}");
    let restored = condition(&done, "TargetRestored");
    assert_eq!(restored["status"], "True", "{restored}");
    for (name, before) in [("web-a", &before_a), ("web-b", &before_b)] {
        let after = deployment_spec(&client, &ns.name, name).await;
        assert_eq!(after["template"], before["template"], "{name} restored");
    }
    // Each was patched to both sizes and back: three new generations each.
    assert_eq!(generation("web-a").await, gen_a + 3);
    assert_eq!(generation("web-b").await, gen_b + 3);
}

#[tokio::test]
async fn invalid_spec_is_rejected_by_the_api_server_with_the_rules_message() {
    let client = client().await;
    let ns = TestNs::new(&client, "invalid").await;
    for (url, threads, rule) in [
        (
            "http://x/",
            9,
            "load.connections must be at least load.threads",
        ),
        (
            "ftp://x/",
            1,
            "target.url must be an absolute http:// or https:// URL",
        ),
    ] {
        let mut ib = simple(&ns.name, url, "4s");
        set(&mut ib, "/spec/load/threads", json!(threads));
        let err = create(&client, &ns.name, &ib)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(rule), "{err}");
    }
}

#[tokio::test]
async fn unknown_node_fails_clearly_and_creates_no_pods() {
    let client = client().await;
    let ns = TestNs::new(&client, "nonode").await;
    let workers = json!({"nodeNames": ["no-such-node"]});
    let done = simple_fails_with(&client, &ns.name, "/spec/workers", workers).await;
    let invalid = condition(&done, "Invalid");
    assert_eq!(invalid["status"], "True");
    assert!(
        invalid["message"]
            .as_str()
            .unwrap()
            .contains("node no-such-node does not exist"),
        "{invalid}"
    );
}

#[tokio::test]
async fn host_network_is_refused_without_the_admins_permission() {
    let client = client().await;
    let ns = TestNs::new(&client, "hostnet").await;
    let done = simple_fails_with(&client, &ns.name, "/spec/workers/hostNetwork", json!(true)).await;
    assert!(done["status"]["message"]
        .as_str()
        .unwrap()
        .contains("hostNetwork workers are not enabled"));
}

#[tokio::test]
async fn worker_deleted_mid_run_fails_the_run_and_leaks_nothing() {
    let client = client().await;
    let ns = TestNs::new(&client, "podkill").await;
    let ib = simple(&ns.name, TARGET, "60s");
    create_and_wait(&client, &ib, &["Running"], RUN_TIMEOUT).await;
    let pod = eventually(Duration::from_secs(60), async || {
        let pods = worker_pods(&client, &ns.name).await.unwrap();
        pods.into_iter()
            .next()
            .ok_or_else(|| "no worker pod while Running".to_string())
    })
    .await;
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
    .await;
    assert_eq!(done["status"]["phase"], "Failed");
    let message = done["status"]["message"].as_str().unwrap();
    assert!(
        message.contains(&name),
        "the reason names the pod: {message}"
    );
    wait_no_children(&client, &ns.name, Duration::from_secs(30)).await;
}

#[tokio::test]
async fn operator_restart_mid_run_gives_one_run_and_one_result() {
    let client = client().await;
    let ns = TestNs::new(&client, "restart").await;
    let ib = simple(&ns.name, TARGET, "20s");
    let done = restart_mid_run(&client, &ib, 1).await;
    assert_eq!(done["status"]["steps"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn deleting_mid_run_restores_the_target_and_removes_children() {
    let client = client().await;
    let ns = TestNs::new(&client, "delete").await;
    let before = deploy_nginx(&client, &ns.name, "web", "100m").await;
    let ib = sweep_over_web(&ns.name, "del", "60s", ["300m", "400m"]);
    create_and_wait(&client, &ib, &["Running"], RUN_TIMEOUT).await;
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
    wait_no_children(&client, &ns.name, Duration::from_secs(30)).await;
}

/// deploy/examples/target.yaml (netbench-loadgen http-server) applied as a user would, then
/// ingress-simple.yaml pointed at it: Succeeded, every request answered.
#[tokio::test]
async fn the_target_that_ships_with_the_project_answers_a_benchmark() {
    let client = client().await;
    let ns = TestNs::new(&client, "target").await;
    let file = repo_root().join("deploy/examples/target.yaml");
    kubectl(&["-n", &ns.name, "apply", "-f", file.to_str().unwrap()]).unwrap();
    rolled_out(&ns.name, "netbench-target");
    let url = format!("http://netbench-target.{}.svc.cluster.local/", ns.name);
    let done = create_and_wait(
        &client,
        &simple(&ns.name, &url, "3s"),
        FINISHED,
        RUN_TIMEOUT,
    )
    .await;
    let step = &done["status"]["steps"][0];
    assert_eq!(done["status"]["phase"], "Succeeded", "{:#}", done["status"]);
    assert!(step["requests"].as_u64().unwrap() > 100, "{step:#}");
    let errors: u64 = step["errors"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(errors, 0, "{step:#}");
    // "hello\n" per request: 6 bytes of body each, plus the headers.
    let bytes = step["bytesPerSecond"].as_f64().unwrap();
    assert!(bytes >= 6.0 * step["rps"].as_f64().unwrap(), "{step:#}");
}
