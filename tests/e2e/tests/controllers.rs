//! Controllers side by side (spec.controllers) on the real test cluster: Traefik as an Ingress
//! controller and Envoy Gateway (another data plane) through an HTTPRoute the benchmark creates
//! and removes, the same backend behind both (tests/cluster/traefik and envoy-gateway, via
//! setup.sh). setup.sh allows created routes in e2e-ctl-* namespaces only.

use std::time::Duration;

use e2e::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use serde_json::{json, Value};

const TRAEFIK: &str = "http://traefik.ingress-traefik.svc.cluster.local/";
const ENVOY: &str = "http://envoy-bench.envoy-gateway-system.svc.cluster.local/";
const TRAEFIK_GATEWAY: &str = "http://traefik-gateway.gateway-traefik.svc.cluster.local/";

fn routes(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "httproutes");
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// No HTTPRoute is left in `ns`.
async fn assert_no_routes(client: &kube::Client, ns: &str) {
    let left = routes(client, ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    let names: Vec<_> = left.items.iter().map(|r| &r.metadata.name).collect();
    assert!(names.is_empty(), "routes left: {names:?}");
}

/// The Service "web" (nginx) in `ns`, and an Ingress of class traefik for `host` to it.
async fn backend_with_ingress(client: &kube::Client, ns: &str, host: &str) {
    create_nginx(client, ns, "web", "100m").await;
    let ingress = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web"},
        "spec": {"ingressClassName": "traefik", "rules": [{"host": host, "http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}
    });
    create(client, ns, &ingress).await.unwrap();
    rolled_out(ns, "web");
}

/// Two controllers, the second through a route to `web` on Envoy Gateway's Gateway.
fn comparison(ns: &str, host: &str, samples: u32) -> Value {
    benchmark(
        IB,
        ns,
        "cmp",
        json!({
            "target": {"url": TRAEFIK},
            "controllers": [
                {"name": "traefik", "url": TRAEFIK, "hostHeader": host},
                {"name": "envoy-gateway", "url": ENVOY, "route": {
                    "gateway": {"name": "bench", "namespace": "gateway-envoy", "sectionName": "web"},
                    "hostname": host,
                    "backend": {"name": "web", "port": 80},
                    "settle": "1s"}}
            ],
            "load": {"connections": 8, "duration": "3s", "warmup": "1s"},
            "workers": {"nodeNames": ["nb-node0"]},
            "samples": {"count": samples},
            "cleanup": "Never",
        }),
    )
}

#[tokio::test]
async fn two_data_planes_side_by_side_one_through_a_route_the_run_created_and_removed() {
    let client = client().await;
    let ns = TestNs::new(&client, "ctl").await;
    let host = format!("web.{}.bench.local", ns.name);
    backend_with_ingress(&client, &ns.name, &host).await;
    let restarts = operator_restarts(&client).await;

    let done = create_and_wait(
        &client,
        &comparison(&ns.name, &host, 2),
        FINISHED,
        RUN_TIMEOUT,
    )
    .await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");

    // A row per controller, each with requests that all succeeded.
    let steps = st["steps"].as_array().unwrap();
    let named: Vec<&str> = steps
        .iter()
        .map(|s| s["controller"].as_str().unwrap())
        .collect();
    assert_eq!(named, ["traefik", "envoy-gateway"]);
    for s in steps {
        assert!(s["rps"].as_f64().unwrap() > 0.0, "{s:#}");
        let errors: u64 = s["errors"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(Value::as_u64)
            .sum();
        assert_eq!(errors, 0, "{s:#}");
    }
    let cmp = &st["comparison"];
    let rows: Vec<&str> = cmp["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(rows, ["traefik", "envoy-gateway"], "{cmp:#}");
    for r in cmp["rows"].as_array().unwrap() {
        assert_eq!(r["samples"], 2, "{r:#}");
        assert!(["Best", "Worse", "WithinNoise"].contains(&r["rpsVerdict"].as_str().unwrap()));
    }
    assert_eq!(
        cmp["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["rpsVerdict"] == "Best")
            .count(),
        1
    );
    let summary = cmp["summary"].as_str().unwrap();
    eprintln!("controllers compared:\n{summary}");
    assert!(
        summary.contains("traefik: ") && summary.contains("envoy-gateway: "),
        "{summary}"
    );

    // Interleaved: step 0, step 1, then step 1, step 0 (worker slots 0, 1, 65, 64).
    let mut pods = Api::<Pod>::namespaced(client.clone(), &ns.name)
        .list(&ListParams::default().labels("netbench.io/role=client"))
        .await
        .unwrap()
        .items;
    pods.sort_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0));
    let slots: Vec<String> = pods
        .iter()
        .map(|p| p.metadata.labels.as_ref().unwrap()["netbench.io/step"].clone())
        .collect();
    assert_eq!(
        slots,
        ["0", "1", "65", "64"],
        "order of the samples' workers"
    );
    let last = "step 1 (envoy-gateway) sample 2/2";
    let messages = ["-o", "jsonpath={.items[*].message}"];
    let measured = events_until(&ns.name, "StepMeasured", &messages, |m| m.contains(last)).unwrap();
    assert!(measured.contains(last), "{measured}");

    // The route was created for the run and is gone with it; nothing else was touched.
    let created = event_messages(&ns.name, "RouteCreated").unwrap();
    assert!(
        created.contains("for controller envoy-gateway"),
        "{created}"
    );
    assert_no_routes(&client, &ns.name).await;
    assert_eq!(operator_restarts(&client).await, restarts);
    let metrics = operator_metrics(&client).await.unwrap();
    let series = format!(
        "netbench_ingress_rps{{controller=\"envoy-gateway\",name=\"cmp\",namespace=\"{}\",step=\"1\"}}",
        ns.name
    );
    assert!(metrics.contains(&series), "{series} missing");
}

#[tokio::test]
async fn a_route_where_the_admin_allows_none_is_refused_and_nothing_is_created() {
    let client = client().await;
    let ns = TestNs::new(&client, "ctldeny").await;
    let host = format!("web.{}.bench.local", ns.name);
    let done = create_and_wait(
        &client,
        &comparison(&ns.name, &host, 1),
        FINISHED,
        Duration::from_secs(60),
    )
    .await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Failed", "{st:#}");
    let message = st["message"].as_str().unwrap();
    assert!(
        message.contains("controller envoy-gateway: HTTPRoutes created by benchmarks are not enabled for namespace")
            && message.contains("security.routeNamespaces"),
        "{message}"
    );
    assert!(worker_pods(&client, &ns.name).await.unwrap().is_empty());
    assert_no_routes(&client, &ns.name).await;

    // Reading a workload's CPU and memory needs the admin's pair too: refused before any pod.
    let mut usage = comparison(&ns.name, &host, 1);
    set(&mut usage, "/metadata/name", json!("usage"));
    set(
        &mut usage,
        "/spec/controllers",
        json!([{"name": "traefik", "url": TRAEFIK, "hostHeader": host,
                "workloads": [{"name": "traefik", "namespace": "ingress-traefik"}]}]),
    );
    let done = create_and_wait(&client, &usage, FINISHED, Duration::from_secs(60)).await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Failed", "{st:#}");
    let message = st["message"].as_str().unwrap();
    assert!(
        message.contains("controller traefik: benchmarks in namespace")
            && message.contains("may not read the CPU and memory of ingress-traefik/traefik")
            && message.contains("security.usageTargets"),
        "{message}"
    );
    assert!(worker_pods(&client, &ns.name).await.unwrap().is_empty());

    // Thousands of controllers never reach the operator: the API server refuses them.
    let mut many = comparison(&ns.name, &host, 1);
    let list: Vec<Value> = (0..2000)
        .map(|i| json!({"name": format!("c{i}"), "url": TRAEFIK}))
        .collect();
    set(&mut many, "/spec/controllers", json!(list));
    set(&mut many, "/metadata/name", json!("many"));
    let refused = create(&client, &ns.name, &many)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("spec.controllers") && refused.contains("must have at most 8 items"),
        "{refused}"
    );
}

/// The shipped target held to 100m CPU by its limit (the CFS quota), in `ns` as "capped": a
/// controller whose CPU under load is known.
async fn capped_target(client: &kube::Client, ns: &str) {
    shipped_target_with(client, ns, "capped", &[], |object| {
        if let Some(resources) = object.pointer_mut("/spec/template/spec/containers/0/resources") {
            *resources =
                json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "100m", "memory": "128Mi"}});
        }
    })
    .await;
}

#[tokio::test]
async fn controller_workloads_cpu_and_memory_are_read_from_the_kubelets() {
    let client = client().await;
    let ns = TestNs::new(&client, "ctl").await;
    let host = format!("web.{}.bench.local", ns.name);
    backend_with_ingress(&client, &ns.name, &host).await;
    capped_target(&client, &ns.name).await;
    let restarts = operator_restarts(&client).await;
    let capped_url = format!("http://capped.{}.svc.cluster.local/", ns.name);
    let ib = benchmark(
        IB,
        &ns.name,
        "usage",
        json!({
            "target": {"url": capped_url},
            "controllers": [
                {"name": "capped", "url": capped_url,
                 "workloads": [{"name": "capped", "namespace": ns.name}]},
                {"name": "envoy-gateway", "url": ENVOY, "route": {
                    "gateway": {"name": "bench", "namespace": "gateway-envoy", "sectionName": "web"},
                    "hostname": host,
                    "backend": {"name": "web", "port": 80},
                    "settle": "1s"},
                 "workloads": [
                    {"name": "envoy-bench", "namespace": "envoy-gateway-system"},
                    {"name": "envoy-gateway", "namespace": "envoy-gateway-system"}]}
            ],
            // 40 s: the kubelet samples a busy pod every 10-20 s, so it has two samples.
            "load": {"connections": 8, "duration": "40s", "warmup": "2s"},
            "workers": {"nodeNames": ["nb-node0"]},
            "cleanup": "Never",
        }),
    );
    let done = create_and_wait(&client, &ib, FINISHED, RUN_TIMEOUT).await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    let steps = st["steps"].as_array().unwrap();
    let usage = |step: usize, i: usize| steps[step]["workloads"][i].clone();
    eprintln!(
        "workloads: {:#}",
        json!([steps[0]["workloads"], steps[1]["workloads"]])
    );

    // The known answer: a pod held to 100m by its CFS quota and loaded beyond it used 0.1 core.
    let capped = usage(0, 0);
    assert_eq!(
        capped["workload"],
        format!("Deployment {}/capped", ns.name),
        "{capped:#}"
    );
    assert_eq!(capped["pods"], 1, "{capped:#}");
    let cores = capped["cpuCores"].as_f64().unwrap_or(-1.0);
    assert!(
        (0.07..=0.105).contains(&cores),
        "capped target's CPU {cores}: {capped:#}"
    );
    let covered = capped["coveredSeconds"].as_f64().unwrap();
    assert!((10.0..=40.0).contains(&covered), "{capped:#}");
    let memory = capped["memoryBytes"].as_u64().unwrap();
    assert!((1 << 20..128 << 20).contains(&memory), "{capped:#}");

    // Envoy Gateway: its data plane worked under the load, its control plane hardly.
    let (data, control) = (usage(1, 0), usage(1, 1));
    assert_eq!(
        data["workload"],
        "Deployment envoy-gateway-system/envoy-bench"
    );
    assert_eq!(
        control["workload"],
        "Deployment envoy-gateway-system/envoy-gateway"
    );
    let data_cores = data["cpuCores"].as_f64().unwrap_or(-1.0);
    assert!(data_cores > 0.05, "{data:#}");
    // An idle pod may be sampled only every 15-30 s: its CPU, when two samples fell in the
    // window, or the note that says why not.
    match control["cpuCores"].as_f64() {
        Some(cores) => assert!(
            (0.0..data_cores).contains(&cores),
            "{control:#} vs {data:#}"
        ),
        None => assert!(control["note"]
            .as_str()
            .unwrap()
            .contains("fewer than two kubelet samples")),
    }
    for w in [&data, &control] {
        assert!(w["memoryBytes"].as_u64().unwrap() > 1 << 20, "{w:#}");
    }

    let metrics = operator_metrics(&client).await.unwrap();
    let series = format!(
        "netbench_ingress_workload_cpu_cores{{controller=\"capped\",name=\"usage\",namespace=\"{0}\",step=\"0\",workload=\"Deployment {0}/capped\"}}",
        ns.name
    );
    assert!(metrics.contains(&series), "{series} missing");
    assert_eq!(operator_restarts(&client).await, restarts);
}

/// A route the run creates on the test cluster's Gateway in `gateway_ns`, for `host`, to web-a.
fn route(gateway_ns: &str, host: String) -> Value {
    json!({
        "gateway": {"name": "bench", "namespace": gateway_ns, "sectionName": "web"},
        "hostname": host,
        "backend": {"name": "web-a", "port": 80},
        "settle": "2s"})
}

/// The two Gateways of the test cluster, each with a route of its own in `ns`.
fn two_gateways(ns: &str) -> Value {
    json!([
        {"name": "envoy-gateway", "url": ENVOY,
         "route": route("gateway-envoy", format!("eg.{ns}.bench.local"))},
        {"name": "traefik-gateway", "url": TRAEFIK_GATEWAY,
         "route": route("gateway-traefik", format!("tg.{ns}.bench.local"))}
    ])
}

/// Both Gateways, one after the other, 10 s each under 200 req/s open loop from nb-node0,
/// while the run makes `changes` (spec.routeChanges) every second.
fn under_churn(ns: &str, name: &str, changes: Value) -> Value {
    benchmark(
        IB,
        ns,
        name,
        json!({
            "target": {"url": ENVOY},
            "controllers": two_gateways(ns),
            "routeChanges": changes,
            "load": {"connections": 4, "threads": 1, "rate": 200, "duration": "10s", "warmup": "2s"},
            "workers": {"nodeNames": ["nb-node0"]},
        }),
    )
}

/// Two Gateways (Traefik's and Envoy Gateway's) under a steady open-loop load while the run
/// swaps each one's route between web-a and web-b every second: every change is counted, and
/// its propagation is read from the answers the workers saw, never from the route's status.
#[tokio::test]
async fn route_changes_under_load_are_read_from_the_answers_on_two_gateways() {
    let client = client().await;
    let ns = TestNs::new(&client, "ctl").await;
    shipped_target(&client, &ns.name, "web-a", &[]).await;
    shipped_target(&client, &ns.name, "web-b", &[]).await;
    let restarts = operator_restarts(&client).await;
    let changes = json!({"every": "1s", "swapTo": {"name": "web-b", "port": 80}});
    let churn = under_churn(&ns.name, "churn", changes);
    let done = create_and_wait(&client, &churn, FINISHED, RUN_TIMEOUT).await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    for s in st["steps"].as_array().unwrap() {
        let name = s["controller"].as_str().unwrap();
        let rc = &s["routeChanges"];
        eprintln!(
            "{name}: {} of {} changes shown, propagation p50 {} ms, p99 {} ms, max {} ms; errors {}",
            rc["shown"], rc["changes"], rc["p50Ms"], rc["p99Ms"], rc["maxMs"], s["errors"]
        );
        // 10 s measured, one change per second.
        assert_eq!(rc["changes"], 10, "{name}: {rc:#}");
        if rc["shown"].as_u64().unwrap() > 0 {
            // A shown change answered before the next one: under `every`.
            let max = rc["maxMs"].as_f64().unwrap();
            assert!(max > 0.0 && max < 1000.0, "{name}: {rc:#}");
            assert!(rc["p50Ms"].as_f64().unwrap() <= max, "{rc:#}");
        }
    }
    // Envoy Gateway applies each change well within the second before the next one.
    let envoy = &st["steps"][0]["routeChanges"];
    assert!(envoy["shown"].as_u64().unwrap() >= 8, "{envoy:#}");
    // Traefik lets at most one new configuration through per providersThrottleDuration (2 s on
    // the test cluster, tests/cluster/traefik/gateway.yaml): of 10 changes 1 s apart at most
    // about one in two can show, however fast it is otherwise. Read from the controller's own
    // route status, every change would look applied.
    let traefik = &st["steps"][1]["routeChanges"];
    assert!(traefik["shown"].as_u64().unwrap() <= 6, "{traefik:#}");
    // The log of the last sample's changes, each to the backend after the one before.
    let log = st["routeChangeLog"]["changes"].as_array().unwrap();
    let backends: Vec<&str> = log.iter().map(|c| c["backend"].as_str().unwrap()).collect();
    assert_eq!(backends.len(), 10);
    assert!(
        backends.chunks(2).all(|p| p == ["web-b", "web-a"]),
        "{backends:?}"
    );
    // The routes are gone with the run; nothing else was disturbed.
    assert_no_routes(&client, &ns.name).await;
    assert_eq!(operator_restarts(&client).await, restarts);
}

/// The same two Gateways while the run deletes each one's route and creates it again every
/// second: a deletion shows at the first 404 the Gateway answers itself, a creation at the
/// first answer from the route's backend; the 404s are counted as what they are (4xx) and do
/// not fail the run, which asked for them; a gate on the creations' shown share holds exactly
/// when they all showed.
#[tokio::test]
async fn route_deletions_and_creations_under_load_show_in_the_answers_on_two_gateways() {
    let client = client().await;
    let ns = TestNs::new(&client, "ctl").await;
    shipped_target(&client, &ns.name, "web-a", &[]).await;
    let restarts = operator_restarts(&client).await;
    let changes = json!({"every": "1s", "action": "DeleteAndCreate"});
    let mut churn = under_churn(&ns.name, "recreate", changes);
    // Two samples of 9 changes (D C D C D C D C D): the first ends with the route deleted, and
    // the second's preparation creates it again. A gate every creation must pass: the run
    // fails exactly when a sample's share is below 1.
    set(&mut churn, "/spec/load/duration", json!("9s"));
    set(
        &mut churn,
        "/spec/samples",
        json!({"count": 2, "pause": "1s"}),
    );
    let gates = json!([{"figure": "routeCreationsShown", "min": 1}]);
    set(&mut churn, "/spec/gates", gates);
    let done = create_and_wait(&client, &churn, FINISHED, RUN_TIMEOUT).await;
    let st = &done["status"];
    for s in st["steps"].as_array().unwrap() {
        let name = s["controller"].as_str().unwrap();
        assert!(s.get("routeChanges").is_none(), "{name}: no swaps: {s:#}");
        for (figure, made) in [("routeDeletions", 10), ("routeCreations", 8)] {
            let rc = &s[figure];
            eprintln!(
                "{name} {figure}: {} of {} shown, p50 {} ms, p99 {} ms, max {} ms; errors {}",
                rc["shown"], rc["changes"], rc["p50Ms"], rc["p99Ms"], rc["maxMs"], s["errors"]
            );
            // 9 changes in 9 s per sample, deletions first, two samples.
            assert_eq!(rc["changes"], made, "{name} {figure}: {rc:#}");
            assert_eq!(rc["samples"], json!([0, 1]), "{name} {figure}: {rc:#}");
            if rc["shown"].as_u64().unwrap() > 0 {
                let max = rc["maxMs"].as_f64().unwrap();
                assert!(max > 0.0 && max < 1000.0, "{name} {figure}: {rc:#}");
            }
        }
    }
    // Envoy Gateway applies a deletion and a creation well within a second: the Gateway's
    // own 404s were answered, and counted.
    let envoy = &st["steps"][0];
    assert_eq!(envoy["controller"], "envoy-gateway");
    for (figure, least) in [("routeDeletions", 8), ("routeCreations", 6)] {
        let shown = envoy[figure]["shown"].as_u64().unwrap();
        assert!(shown >= least, "{figure}: {envoy:#}");
    }
    assert!(
        envoy["errors"]["status4xx"].as_u64().unwrap() > 0,
        "{envoy:#}"
    );
    // The sample figures (statistics, results, gates, history), one value per sample: the
    // share shown, and a p99 that counts a change not shown at the time it was given, so
    // never below the shown ones'.
    let mut every_creation_shown = true;
    for s in st["steps"].as_array().unwrap() {
        let index = s["index"].as_u64().unwrap();
        let stats = st["statistics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["index"] == index)
            .unwrap_or_else(|| panic!("step {index} has no statistics: {st:#}"));
        let values = |name: &str| -> Vec<f64> {
            let m = stats["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == name);
            let m = m.unwrap_or_else(|| panic!("{name} missing: {stats:#}"));
            m["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect()
        };
        for name in ["rps", "p99Ms", "routeCreationP99Ms"] {
            assert_eq!(
                values(name).len(),
                2,
                "{name}: every sample recorded: {stats:#}"
            );
        }
        for (figure, share, p99) in [
            (
                "routeDeletions",
                "routeDeletionsShown",
                "routeDeletionP99Ms",
            ),
            (
                "routeCreations",
                "routeCreationsShown",
                "routeCreationP99Ms",
            ),
        ] {
            let rc = &s[figure];
            let expected = rc["shown"].as_f64().unwrap() / rc["changes"].as_f64().unwrap();
            let shares = values(share);
            let mean = shares.iter().sum::<f64>() / 2.0;
            assert!((mean - expected).abs() < 1e-9, "{stats:#}");
            if figure == "routeCreations" {
                every_creation_shown &= shares.iter().all(|v| *v >= 1.0);
            }
            // No percentile in status while none showed (never a 0 ms that reads as instant).
            let highest = values(p99).into_iter().fold(0.0, f64::max);
            match rc["p99Ms"].as_f64() {
                Some(shown_p99) => assert!(highest >= shown_p99 - 1.0, "{stats:#}"),
                None => assert_eq!(rc["shown"], 0, "{rc:#}"),
            }
        }
    }
    // The gate read the figure: it held exactly when every creation of every sample showed.
    let gates = condition(&done, "GatesPassed");
    if every_creation_shown {
        assert_eq!(st["phase"], "Succeeded", "{st:#}");
        assert_eq!(gates["status"], "True", "{gates:#}");
    } else {
        assert_eq!(st["phase"], "Failed", "{st:#}");
        assert_eq!(gates["reason"], "GateFailed", "{gates:#}");
        let message = gates["message"].as_str().unwrap();
        assert!(message.contains("routeCreationsShown"), "{message}");
    }
    // The log of the last sample: deleted, created, ..., deleted, each timed.
    let log = st["routeChangeLog"]["changes"].as_array().unwrap();
    let made: Vec<&str> = log.iter().map(|c| c["made"].as_str().unwrap()).collect();
    let expected: Vec<&str> = (0..9)
        .map(|i| if i % 2 == 0 { "Deleted" } else { "Created" })
        .collect();
    assert_eq!(made, expected);
    assert!(log.iter().all(|c| c.get("untimed").is_none()), "{log:?}");
    assert_no_routes(&client, &ns.name).await;
    assert_eq!(operator_restarts(&client).await, restarts);
}

/// The shipped target as backend `name` in `ns`, answering `status`, counting its answers on
/// port 9090 (`--count-port`), which its readiness probe reads (so probes are not answers).
async fn counted_backend(client: &kube::Client, ns: &str, name: &str, status: &str) {
    let args = ["--status", status, "--count-port", "9090"];
    shipped_target_with(client, ns, name, &args, |object| {
        let probe = "/spec/template/spec/containers/0/readinessProbe/httpGet/port";
        if let Some(port) = object.pointer_mut(probe) {
            *port = json!(9090);
        }
    })
    .await;
}

/// What backend `name` in `ns` says it answered (its count port, through the API server's pod
/// proxy).
async fn answered(client: &kube::Client, ns: &str, name: &str) -> u64 {
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!("app.kubernetes.io/name={name}")))
        .await
        .unwrap();
    let running: Vec<_> = pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    assert_eq!(running.len(), 1, "one pod of {name}");
    let pod = running[0].metadata.name.clone().unwrap();
    let path = format!("/api/v1/namespaces/{ns}/pods/{pod}:9090/proxy/");
    let text = client
        .request_text(http::Request::get(path).body(vec![]).unwrap())
        .await
        .unwrap();
    text.trim()
        .strip_prefix("answered ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{name}'s count: {text:?}"))
}

/// Route churn, counted against what the backends served: Envoy Gateway's route swapped every
/// second between web-a (200) and web-b (503) under a steady load, with no warm-up, so every
/// answer a backend gave was asked for in the measured window. The workers' 2xx are web-a's
/// answers and their 5xx web-b's, each short by at most the requests still in flight when the
/// window closed; the errorRate figure counts each 503 once (about half the requests), and a
/// gate on it fails the run. About half is on either side of the operator's own 50% limit:
/// above it, that limit fails the run first.
#[tokio::test]
async fn route_churn_errors_are_counted_as_the_backends_served_them() {
    let client = client().await;
    let ns = TestNs::new(&client, "ctl").await;
    counted_backend(&client, &ns.name, "web-a", "200").await;
    counted_backend(&client, &ns.name, "web-b", "503").await;
    let restarts = operator_restarts(&client).await;
    let changes = json!({"every": "1s", "swapTo": {"name": "web-b", "port": 80}});
    let mut churn = under_churn(&ns.name, "counted", changes);
    let controllers = two_gateways(&ns.name);
    set(&mut churn, "/spec/controllers", json!([controllers[0]]));
    set(&mut churn, "/spec/load/warmup", json!("0s"));
    set(
        &mut churn,
        "/spec/gates",
        json!([{"figure": "errorRate", "max": 0.2}]),
    );
    let connections = 4;
    let (before_a, before_b) = (
        answered(&client, &ns.name, "web-a").await,
        answered(&client, &ns.name, "web-b").await,
    );
    let done = create_and_wait(&client, &churn, FINISHED, RUN_TIMEOUT).await;
    let st = &done["status"];
    let a = answered(&client, &ns.name, "web-a").await - before_a;
    let b = answered(&client, &ns.name, "web-b").await - before_b;
    let step = &st["steps"][0];
    let e = &step["errors"];
    let requests = step["requests"].as_u64().unwrap();
    let (s4, s5) = (
        e["status4xx"].as_u64().unwrap(),
        e["status5xx"].as_u64().unwrap(),
    );
    let ok = requests - s4 - s5;
    eprintln!(
        "web-a served {a}, web-b served {b}; the workers counted {requests} answers: {ok} 2xx, {s5} 5xx, {s4} 4xx; errors {e}; changes {}",
        step["routeChanges"]
    );
    assert_eq!(st["phase"], "Failed", "web-b's 503s fail the run: {st:#}");
    if s5 * 2 > requests {
        // The operator's limit fails the step before its gates are judged.
        let message = st["message"].as_str().unwrap();
        assert!(message.contains("requests failed"), "{message}");
    } else {
        let gates = condition(&done, "GatesPassed");
        assert_eq!(gates["reason"], "GateFailed", "{gates:#}");
        let message = gates["message"].as_str().unwrap();
        assert!(message.contains("errorRate"), "{message}");
        // The figure the gate read: each 503 once, over the answers (none went unanswered).
        let metrics = st["statistics"][0]["metrics"].as_array().unwrap();
        let rate = metrics.iter().find(|m| m["name"] == "errorRate").unwrap();
        let expected = s5 as f64 / requests as f64;
        let mean = rate["mean"].as_f64().unwrap();
        assert!(
            (mean - expected).abs() < 1e-9,
            "errorRate {mean}, {s5}/{requests}"
        );
    }
    assert!(b > 0 && a > 0, "both backends served: {a} {b}");
    assert!(
        (a.saturating_sub(connections)..=a).contains(&ok),
        "2xx {ok} against web-a's {a}"
    );
    assert!(
        (b.saturating_sub(connections)..=b).contains(&s5),
        "5xx {s5} against web-b's {b}"
    );
    assert_eq!(s4, 0);
    for class in ["connect", "timeout", "read", "write", "parse"] {
        assert_eq!(e[class], 0, "{class}: {e}");
    }
    assert_eq!(step["routeChanges"]["changes"], 10);
    assert_no_routes(&client, &ns.name).await;
    assert_eq!(operator_restarts(&client).await, restarts);
}

/// A known answer for the propagation figure: the same route swaps on Envoy Gateway twice, the
/// second time with every packet from the API server to Envoy Gateway's control plane held
/// for exactly `DELAY` (an NFQUEUE stand-in on its node's namespace, test-support's impair.rs,
/// this kernel having no netem). The controller then hears of each change `DELAY` later, and
/// nothing else on the path changes (the load, the data plane and the operator's requests are
/// not touched), so the propagation figure must move by `DELAY`: its median within
/// -50 ms/+150 ms of the undelayed median plus `DELAY`, and no change shown sooner than
/// `DELAY` after it was sent.
#[tokio::test]
async fn route_propagation_moves_by_a_known_delay_of_the_controllers_watch() {
    const DELAY: Duration = Duration::from_millis(500);
    let client = client().await;
    let ns = TestNs::new(&client, "ctl").await;
    shipped_target(&client, &ns.name, "web-a", &[]).await;
    shipped_target(&client, &ns.name, "web-b", &[]).await;
    let restarts = operator_restarts(&client).await;
    // The control plane's pod (not its data plane's, envoy-bench): where its watch arrives.
    let pods = Api::<Pod>::namespaced(client.clone(), "envoy-gateway-system")
        .list(&ListParams::default().labels("control-plane=envoy-gateway"))
        .await
        .unwrap();
    let pod = pods
        .items
        .iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .expect("Envoy Gateway's control plane pod");
    let status = pod.status.as_ref().unwrap();
    let ip = status.pod_ip.clone().unwrap();
    let node = pod.spec.as_ref().unwrap().node_name.clone().unwrap();
    // Eight swaps 2 s apart: each one's effect shows well before the next, delayed or not.
    let run = |name: &str| {
        let changes = json!({"every": "2s", "swapTo": {"name": "web-b", "port": 80}});
        let mut churn = under_churn(&ns.name, name, changes);
        set(
            &mut churn,
            "/spec/controllers",
            json!([two_gateways(&ns.name)[0]]),
        );
        set(&mut churn, "/spec/load/duration", json!("16s"));
        churn
    };
    let propagation = |done: &Value| {
        let rc = done["status"]["steps"][0]["routeChanges"].clone();
        eprintln!("{rc}");
        assert_eq!(done["status"]["phase"], "Succeeded", "{:#}", done["status"]);
        assert_eq!(rc["changes"], 8, "{rc:#}");
        assert_eq!(rc["shown"], 8, "every change shows within 2 s: {rc:#}");
        (rc["p50Ms"].as_f64().unwrap(), rc["maxMs"].as_f64().unwrap())
    };
    let plain = create_and_wait(&client, &run("plain"), FINISHED, RUN_TIMEOUT).await;
    let (plain_p50, plain_max) = propagation(&plain);
    // The API server's answers to the pod, as they leave for its veth on its node: from
    // port 6443, or 443 once the Service's NAT is undone (whichever this hook sees).
    let spec = test_support::impair::Spec {
        delay: DELAY,
        loss_percent: 0.0,
    };
    let rule = [
        "-d",
        &ip,
        "-p",
        "tcp",
        "-m",
        "multiport",
        "--sports",
        "443,6443",
    ];
    let held = test_support::impair::Impairment::matching(&node, &rule, spec);
    let delayed = create_and_wait(&client, &run("delayed"), FINISHED, RUN_TIMEOUT).await;
    held.remove();
    let (delayed_p50, delayed_max) = propagation(&delayed);
    let ms = DELAY.as_secs_f64() * 1000.0;
    eprintln!(
        "propagation p50 {plain_p50} ms (max {plain_max}) plain, {delayed_p50} ms (max {delayed_max}) with {ms} ms added"
    );
    let moved = delayed_p50 - plain_p50;
    assert!(
        (ms - 50.0..=ms + 150.0).contains(&moved),
        "the median moved by {moved} ms, not {ms}"
    );
    // No change can show before the controller heard of it: the smallest delayed one is at
    // least DELAY (p50 and max bound it from above; the histogram's minimum from below).
    let histogram = delayed["status"]["steps"][0]["routeChanges"]["histogram"]
        .as_str()
        .unwrap()
        .to_string();
    let min = histogram_min_ms(&histogram);
    // (Less one HDR bucket: 256 µs at 500 ms with 3 significant digits.)
    assert!(
        min >= ms - 1.0,
        "a change showed {min} ms after it was sent, under {ms}"
    );
    assert_no_routes(&client, &ns.name).await;
    assert_eq!(operator_restarts(&client).await, restarts);
}

/// The smallest value, in ms, of a status histogram (base64 of HDR V2 deflate, in µs).
fn histogram_min_ms(text: &str) -> f64 {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap();
    let h: hdrhistogram::Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .unwrap();
    h.min() as f64 / 1000.0
}

/// A route scale on both Gateways: 50 routes created with each measurement's load (two
/// samples each, interleaved), every worker connection asking one of their hostnames; each
/// route's time from its creation to its first 2xx is read from what the workers saw, the
/// routes go after each measurement, and the requests of the measured window (after a warm-up
/// longer than the routes take) all succeed at that scale.
#[tokio::test]
async fn a_route_scale_creates_its_routes_with_the_load_and_reads_when_each_answered() {
    let client = client().await;
    let ns = TestNs::new(&client, "ctl").await;
    shipped_target(&client, &ns.name, "web-a", &[]).await;
    let restarts = operator_restarts(&client).await;
    let scaled = |name: &str, url: &str, gateway: &str, prefix: &str| {
        let mut r = route(gateway, format!("{prefix}.{}.bench.local", ns.name));
        r["count"] = json!(50);
        json!({"name": name, "url": url, "route": r})
    };
    let spec = benchmark(
        IB,
        &ns.name,
        "scale",
        json!({
            "target": {"url": ENVOY},
            "controllers": [
                scaled("envoy-50", ENVOY, "gateway-envoy", "eg"),
                scaled("traefik-50", TRAEFIK_GATEWAY, "gateway-traefik", "tg"),
            ],
            "load": {"connections": 50, "threads": 1, "rate": 500, "duration": "7s", "warmup": "6s"},
            "samples": {"count": 2, "pause": "1s"},
            "workers": {"nodeNames": ["nb-node0"]},
            "gates": [{"figure": "routesAnswered", "min": 1}],
        }),
    );
    let done = create_and_wait(&client, &spec, FINISHED, RUN_TIMEOUT).await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    for step in st["steps"].as_array().unwrap() {
        let (name, rs) = (step["controller"].as_str().unwrap(), &step["routeScale"]);
        eprintln!(
            "{name}: {} of {} routes answered, p50 {} ms, p99 {} ms, max {} ms, all within {} ms; rps {}, p99 {} ms, errors {}",
            rs["answered"], rs["created"], rs["p50Ms"], rs["p99Ms"], rs["maxMs"], rs["allAnsweredMs"],
            step["rps"], step["latencyMs"]["p99"], step["errors"]
        );
        assert_eq!(rs["routes"], 50, "{name}: {rs:#}");
        assert_eq!(rs["samples"], json!([0, 1]), "{name}: {rs:#}");
        // Two samples of 50, every one created with its instant and answered.
        assert_eq!(rs["created"], 100, "{name}: {rs:#}");
        assert_eq!(rs["answered"], 100, "{name}: {rs:#}");
        assert!(rs.get("note").is_none(), "{name}: {rs:#}");
        let (p50, max, all) = (
            rs["p50Ms"].as_f64().unwrap(),
            rs["maxMs"].as_f64().unwrap(),
            rs["allAnsweredMs"].as_f64().unwrap(),
        );
        // Each route's own time is at most the time until all answered (which also holds
        // the spread of the creations), and all answered within the warm-up. The per-route
        // figures come from an HDR histogram of 3 significant digits (its max is the top of
        // a bucket up to 0.1% wide); the time until all answered is exact.
        assert!(0.0 < p50 && p50 <= max, "{name}: {rs:#}");
        assert!(max <= all * 1.001 + 1.0, "{name}: {rs:#}");
        assert!(all < 6000.0, "{name}: {rs:#}");
        // The measured window: every request to the 50 hostnames answered by the backend.
        let e = &step["errors"];
        for class in [
            "connect",
            "timeout",
            "read",
            "write",
            "parse",
            "status4xx",
            "status5xx",
        ] {
            assert_eq!(e[class], 0, "{name} {class}: {e}");
        }
    }
    // The sample figures, one per sample and controller, gated.
    for m in st["statistics"].as_array().unwrap() {
        let metrics = m["metrics"].as_array().unwrap();
        let answered = metrics
            .iter()
            .find(|f| f["name"] == "routesAnswered")
            .unwrap();
        assert_eq!(answered["values"], json!([1.0, 1.0]), "{m:#}");
        let all = metrics
            .iter()
            .find(|f| f["name"] == "routesAllAnsweredMs")
            .unwrap();
        assert_eq!(all["values"].as_array().unwrap().len(), 2, "{m:#}");
    }
    assert_eq!(condition(&done, "GatesPassed")["status"], "True");
    // Every route of every sample is gone.
    assert_no_routes(&client, &ns.name).await;
    assert_eq!(operator_restarts(&client).await, restarts);
}

/// A route scale of 300 on Envoy Gateway with its two workloads: each one's working set
/// before the routes (the kubelets' last samples before the first was made) and its growth
/// per route in the window, as the kubelets sampled them.
#[tokio::test]
async fn a_route_scale_reads_each_workloads_memory_before_its_routes_and_per_route() {
    let client = client().await;
    let ns = TestNs::new(&client, "ctl").await;
    shipped_target(&client, &ns.name, "web-a", &[]).await;
    let restarts = operator_restarts(&client).await;
    let mut r = route("gateway-envoy", format!("mem.{}.bench.local", ns.name));
    r["count"] = json!(300);
    let spec = benchmark(
        IB,
        &ns.name,
        "memory",
        json!({
            "target": {"url": ENVOY},
            "controllers": [{"name": "envoy-300", "url": ENVOY, "route": r, "workloads": [
                {"name": "envoy-bench", "namespace": "envoy-gateway-system"},
                {"name": "envoy-gateway", "namespace": "envoy-gateway-system"}]}],
            // 30 s measured after the routes answered: the kubelets sample every 10-20 s.
            "load": {"connections": 300, "threads": 1, "rate": 600, "duration": "30s", "warmup": "8s"},
            "workers": {"nodeNames": ["nb-node0"]},
        }),
    );
    let done = create_and_wait(&client, &spec, FINISHED, RUN_TIMEOUT).await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    let step = &st["steps"][0];
    let rs = &step["routeScale"];
    assert_eq!(
        (rs["created"].as_u64(), rs["answered"].as_u64()),
        (Some(300), Some(300)),
        "{rs:#}"
    );
    eprintln!(
        "300 routes: all answered within {} ms (p50 {} ms); workloads {:#}",
        rs["allAnsweredMs"], rs["p50Ms"], step["workloads"]
    );
    for w in step["workloads"].as_array().unwrap() {
        let (before, peak, each) = (
            w["memoryBeforeRoutesBytes"]
                .as_f64()
                .unwrap_or_else(|| panic!("{w:#}")),
            w["memoryBytes"].as_f64().unwrap_or_else(|| panic!("{w:#}")),
            w["memoryPerRouteBytes"]
                .as_f64()
                .unwrap_or_else(|| panic!("{w:#}")),
        );
        assert!(before > 1e6, "a working set before the routes: {w:#}");
        // The growth over the routes the sample made, to the byte.
        assert_eq!(each, ((peak - before) / 300.0).round(), "{w:#}");
    }
    // Envoy's data plane grew with 300 routes and their 300 connections, by less than 1 MiB each.
    let envoy = &step["workloads"][0];
    let each = envoy["memoryPerRouteBytes"].as_f64().unwrap();
    assert!(0.0 < each && each < 1_048_576.0, "{envoy:#}");
    // The same figure on /metrics, for the dashboard's panel.
    let metrics = operator_metrics(&client).await.unwrap();
    let series = format!(
        "netbench_ingress_workload_memory_per_route_bytes{{controller=\"envoy-300\",name=\"memory\",namespace=\"{}\",step=\"0\",workload=\"Deployment envoy-gateway-system/envoy-bench\"}} {each}",
        ns.name
    );
    assert!(metrics.contains(&series), "{series} missing");
    assert_no_routes(&client, &ns.name).await;
    assert_eq!(operator_restarts(&client).await, restarts);
}
