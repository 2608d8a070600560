//! Worker identity on the real cluster: a worker speaks only for itself, nobody else speaks for
//! a run, a report is validated before anything is allocated for it, floods change nothing, and
//! the operator holds no Secret permissions. Needs `eval "$(tests/e2e/setup.sh)"`.
//! The helpers this file needs live here (not in the shared lib).

use std::time::Duration;

use e2e::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{json, Value};

/// A request count no real 20 s run against the test nginx reaches.
const FORGED_REQUESTS: u64 = 999_999_999;

/// A pod in `ns` that is not a worker: the pause image, doing nothing, with a token volume like
/// a worker's (so it holds a valid `netbench` token of the namespace's default ServiceAccount).
fn intruder(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"netbench.io/role": "client"}},
        "spec": {
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "pause", "image": "netbench/pause:3.10-nb1", "imagePullPolicy": "Never",
                "volumeMounts": [{"name": "token", "mountPath": "/var/run/secrets/netbench"}],
            }],
            "volumes": [{"name": "token", "projected": {"sources": [{"serviceAccountToken":
                {"audience": "netbench", "expirationSeconds": 600, "path": "token"}}]}}],
        }
    })
}

/// A token for the default ServiceAccount of `ns` with audience `netbench` bound to `pod`: what
/// the kubelet puts in that pod's projected token volume.
fn pod_token(ns: &str, pod: &Pod) -> String {
    let name = pod.metadata.name.clone().unwrap();
    let uid = pod.metadata.uid.clone().unwrap();
    let out = kubectl(&[
        "-n",
        ns,
        "create",
        "token",
        "default",
        "--audience",
        "netbench",
        "--duration",
        "10m",
        "--bound-object-kind",
        "Pod",
        "--bound-object-name",
        &name,
        "--bound-object-uid",
        &uid,
    ])
    .unwrap();
    out.trim().to_string()
}

/// The operator's worker API, reached at its pod IP (the host routes to pods).
async fn operator_url(client: &kube::Client) -> String {
    let pods = Api::<Pod>::namespaced(client.clone(), OPERATOR_NAMESPACE)
        .list(&ListParams::default().labels(OPERATOR_PODS))
        .await
        .unwrap();
    let ip = pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .find_map(|p| p.status.as_ref()?.pod_ip.clone())
        .expect("an operator pod IP");
    format!("http://{ip}:8080")
}

/// Posts a forged final report for `worker` of `run` with `token`; returns (status, body).
fn post_report(api: &str, run: &str, worker: &str, token: &str) -> (u16, String) {
    let report = json!({
        "version": 1, "worker": worker, "step": 0, "startedAtUnixMs": 1,
        "report": {"version": 1, "kind": "http", "requests": FORGED_REQUESTS},
    });
    post_body(api, run, token, &report)
}

/// A well-formed HTTP report from the engine's own types (one request of 1 ms) whose latency
/// histogram is replaced by an HDR V2 header claiming a 4 GiB payload (and nothing after it).
fn histogram_bomb(worker: &str) -> Value {
    use base64::Engine as _;
    let mut report = operator::testing::reports::http_report(&[1000], 0);
    let mut v2 = Vec::new();
    v2.extend_from_slice(&0x1c84_9313u32.to_be_bytes()); // V2 cookie
    v2.extend_from_slice(&u32::MAX.to_be_bytes()); // payload length: 4 GiB
    v2.extend_from_slice(&0u32.to_be_bytes()); // normalizing offset
    v2.extend_from_slice(&3u32.to_be_bytes()); // significant digits
    v2.extend_from_slice(&1u64.to_be_bytes()); // lowest
    v2.extend_from_slice(&3_600_000_000u64.to_be_bytes()); // highest
    v2.extend_from_slice(&1.0f64.to_be_bytes()); // conversion ratio
    report["histogram"] = base64::engine::general_purpose::STANDARD.encode(v2).into();
    json!({"version": 1, "worker": worker, "step": 0, "startedAtUnixMs": 1, "report": report})
}

fn post_body(api: &str, run: &str, token: &str, report: &Value) -> (u16, String) {
    post_to(api, run, "report", token, report)
}

/// Posts `body` to `endpoint` of `run` with `token`; returns (status, body).
fn post_to(api: &str, run: &str, endpoint: &str, token: &str, body: &Value) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    let mut resp = agent
        .post(&format!("{api}/v1/runs/{run}/{endpoint}"))
        .header("Authorization", &format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_string().unwrap_or_default())
}

/// `netbench_api_rejected_total{reason}` of the operator.
async fn rejected(client: &kube::Client, reason: &str) -> u64 {
    let metrics = operator_metrics(client).await.unwrap();
    let series = format!("netbench_api_rejected_total{{reason=\"{reason}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The benchmark's worker pods, once `count` exist (with their uids).
async fn wait_workers(client: &kube::Client, ns: &str, count: usize) -> Vec<Pod> {
    eventually(RUN_TIMEOUT, async || {
        let pods = worker_pods(client, ns).await.unwrap();
        if pods.len() == count {
            return Ok(pods);
        }
        Err(format!("{count} workers never appeared"))
    })
    .await
}

#[tokio::test]
async fn only_a_worker_pod_speaks_and_only_for_itself() {
    let client = client().await;
    let ns = TestNs::new(&client, "ident").await;
    let restarts = operator_restarts(&client).await;
    create(&client, &ns.name, &intruder("intruder"))
        .await
        .unwrap();

    // Long enough for the attempts below to happen while the run is Running.
    let mut ib = ingress_simple(&ns.name, TARGET, "20s", 4);
    set(&mut ib, "/spec/workers/replicas", json!(2));
    create(&client, &ns.name, &ib).await.unwrap();
    let workers = wait_workers(&client, &ns.name, 2).await;
    wait_phase(
        &client,
        IB,
        &ns.name,
        "ingress-simple",
        &["Running"],
        RUN_TIMEOUT,
    )
    .await;
    let labels = workers[0].metadata.labels.clone().unwrap();
    let run = labels["netbench.io/run"].clone();
    let (w0, w1) = (
        workers[0].metadata.name.clone().unwrap(),
        workers[1].metadata.name.clone().unwrap(),
    );
    let api = operator_url(&client).await;

    // A pod of the namespace that is not a worker: its valid token speaks for nobody.
    let pods = Api::<Pod>::namespaced(client.clone(), &ns.name);
    let intruder_token = pod_token(&ns.name, &pods.get("intruder").await.unwrap());
    let not_a_worker = rejected(&client, "not_a_worker").await;
    let (code, body) = post_report(&api, &run, &w0, &intruder_token);
    assert!(code == 401 || code == 403, "intruder: {code} {body}");
    assert!(rejected(&client, "not_a_worker").await > not_a_worker);

    // A worker's token speaks only for that worker.
    let w0_token = pod_token(&ns.name, &workers[0]);
    let wrong_worker = rejected(&client, "wrong_worker").await;
    let (code, body) = post_report(&api, &run, &w1, &w0_token);
    assert_eq!(code, 403, "worker 0 posting as worker 1: {body}");
    assert!(rejected(&client, "wrong_worker").await > wrong_worker);

    // A worker's own token, its own name, a histogram claiming 4 GiB: refused as invalid
    // (nothing allocated), counted; the worker's real report later still counts.
    let invalid = rejected(&client, "invalid_report").await;
    let (code, body) = post_body(&api, &run, &w0_token, &histogram_bomb(&w0));
    assert_eq!(code, 400, "a histogram claiming 4 GiB: {body}");
    assert!(
        body.contains("claims a payload of 4294967295 bytes"),
        "{body}"
    );
    assert!(rejected(&client, "invalid_report").await > invalid);

    // A token for another audience, and none at all.
    let plain = kubectl(&["-n", &ns.name, "create", "token", "default"]).unwrap();
    let (code, body) = post_report(&api, &run, &w0, plain.trim());
    assert_eq!(code, 401, "token without the netbench audience: {body}");
    let (code, body) = post_report(&api, &run, &w0, "");
    assert_eq!(code, 401, "no token: {body}");

    // The real workers' reports make the result; nothing forged is in it.
    let done = wait_succeeded(&client, IB, &ns.name, "ingress-simple").await;
    let st = &done["status"];
    let step = &st["steps"][0];
    assert_eq!(step["workers"].as_array().unwrap().len(), 2, "{step:#}");
    let requests = step["requests"].as_u64().unwrap();
    assert!(requests > 0 && requests < FORGED_REQUESTS, "{step:#}");
    assert_eq!(
        operator_restarts(&client).await,
        restarts,
        "the operator stayed up"
    );
}

/// A compromised server pod cannot steer its client elsewhere, nor a worker claim another
/// node: with the pod's own token, a registration naming a foreign address and one naming
/// another node are refused (403, counted), and the run fails with the cause within its
/// deadline. (A pod-to-pod case, so it needs no hostNetwork permission.)
#[tokio::test]
async fn a_worker_names_only_its_own_address_and_node() {
    let client = client().await;
    let ns = TestNs::new(&client, "ownaddr").await;
    let api = operator_url(&client).await;
    // One benchmark per lie: the first refusal ends its run, so a second lie in the same run
    // would meet a finished run (404) instead of the check.
    for (name, lie) in [
        ("own-address", "listen_not_own"),
        ("own-node", "node_not_own"),
    ] {
        let case = json!({
            "name": "pod-to-pod", "duration": "60s",
            "client": {"nodeName": "nb-node0"}, "server": {"nodeName": "nb-node1"},
        });
        let eb = benchmark(EB, &ns.name, name, json!({"cases": [case]}));
        create(&client, &ns.name, &eb).await.unwrap();
        let workers = wait_workers(&client, &ns.name, 2).await;
        wait_phase(&client, EB, &ns.name, name, &["Running"], RUN_TIMEOUT).await;
        let role = |p: &Pod| p.metadata.labels.as_ref().unwrap()["netbench.io/role"].clone();
        let server = workers.iter().find(|p| role(p) == "server").unwrap();
        let worker = workers.iter().find(|p| role(p) == "client").unwrap();
        let labels = server.metadata.labels.clone().unwrap();
        let (run, step) = (&labels["netbench.io/run"], &labels["netbench.io/step"]);
        let pod_name = |p: &Pod| p.metadata.name.clone().unwrap();
        let register = |p: &Pod, role: &str, node: Option<&str>, listen: Option<&str>| {
            json!({"version": 1, "worker": pod_name(p), "step": step.parse::<u32>().unwrap(),
                   "role": role, "node": node, "listen": listen})
        };
        let counted = rejected(&client, lie).await;
        let (pod, body) = if lie == "listen_not_own" {
            (
                server,
                register(server, "server", None, Some("198.51.100.7:5201")),
            )
        } else {
            (worker, register(worker, "client", Some("nb-node1"), None))
        };
        let token = pod_token(&ns.name, pod);
        // Until the API server lists the pod's address the operator answers 503 (retry).
        let (code, body) = eventually(Duration::from_secs(60), async || {
            match post_to(&api, run, "register", &token, &body) {
                (503, b) => Err(format!("503: {b}")),
                answer => Ok(answer),
            }
        })
        .await;
        assert_eq!(code, 403, "{lie}: {body}");
        if lie == "listen_not_own" {
            assert!(
                body.contains("is not server") && body.contains("own address"),
                "{body}"
            );
        } else {
            assert!(
                body.contains("but its pod runs on node") && body.contains("nb-node0"),
                "{body}"
            );
        }
        assert!(rejected(&client, lie).await > counted);

        // The run ends with the cause, long before its 60 s measurement would.
        let done = wait_phase(&client, EB, &ns.name, name, FINISHED, RUN_TIMEOUT).await;
        assert_phase(&done, "Failed");
        let message = done["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("the operator refused it"), "{message}");
        wait_no_children(&client, &ns.name, Duration::from_secs(60)).await;
    }
}

#[test]
fn the_operator_cannot_read_secrets() {
    let out = std::process::Command::new("kubectl")
        .args([
            "auth",
            "can-i",
            "get",
            "secrets",
            "-A",
            "--as=system:serviceaccount:netbench-system:netbench-operator",
        ])
        .output()
        .expect("running kubectl");
    let answer = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        answer.trim(),
        "no",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // And it may review tokens, which worker authentication needs.
    let out = std::process::Command::new("kubectl")
        .args([
            "auth",
            "can-i",
            "create",
            "tokenreviews.authentication.k8s.io",
            "--as=system:serviceaccount:netbench-system:netbench-operator",
        ])
        .output()
        .expect("running kubectl");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "yes");
}

/// `kubectl auth can-i` (subresources with --subresource: "pods/exec" would ask about a pod
/// named exec) for the operator's ServiceAccount as installed from deploy/ plus the
/// e2e opt-ins (sweeps of Deployments, offload Jobs in its own namespace): what it needs, and
/// nothing that would let a bug or a hostile input reach further.
#[test]
fn the_operators_permissions_are_least_privilege() {
    let sa = "--as=system:serviceaccount:netbench-system:netbench-operator";
    let can = |args: &[&str]| -> String {
        let out = std::process::Command::new("kubectl")
            .args(["auth", "can-i"])
            .args(args)
            .arg(sa)
            .output()
            .expect("running kubectl");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let denied: &[&[&str]] = &[
        &["get", "secrets", "-A"],
        &["list", "secrets", "-n", "netbench-system"],
        &["create", "pods", "--subresource=exec", "-A"],
        &["create", "pods", "--subresource=attach", "-A"],
        &["create", "pods", "--subresource=portforward", "-A"],
        &["escalate", "clusterroles.rbac.authorization.k8s.io"],
        &["bind", "clusterroles.rbac.authorization.k8s.io"],
        &["create", "clusterrolebindings.rbac.authorization.k8s.io"],
        &[
            "create",
            "rolebindings.rbac.authorization.k8s.io",
            "-n",
            "netbench-system",
        ],
        &["impersonate", "serviceaccounts", "-A"],
        &["create", "serviceaccounts", "--subresource=token", "-A"],
        &["patch", "nodes"],
        &["delete", "nodes"],
        // The Service path creates Services, never rewrites one.
        &["update", "services", "-n", "default"],
        &["patch", "services", "-n", "default"],
        &["create", "services", "--subresource=proxy", "-A"],
        &["create", "endpointslices.discovery.k8s.io", "-A"],
        &["create", "jobs.batch", "-n", "default"],
        &["update", "configmaps", "-n", "default"],
        &["delete", "customresourcedefinitions.apiextensions.k8s.io"],
        &[
            "create",
            "validatingadmissionpolicies.admissionregistration.k8s.io",
        ],
        &["*", "*"],
    ];
    for args in denied {
        assert_eq!(can(args), "no", "the operator may not: {}", args.join(" "));
    }
    let allowed: &[&[&str]] = &[
        &["create", "pods", "-n", "default"],
        &["delete", "pods", "-n", "default"],
        &["create", "services", "-n", "default"],
        &["get", "services", "-n", "default"],
        &["delete", "services", "-n", "default"],
        &["create", "tokenreviews.authentication.k8s.io"],
        &[
            "patch",
            "ingressbenchmarks.netbench.io",
            "--subresource=status",
            "-A",
        ],
        &["get", "nodes"],
        &["create", "configmaps", "-n", "netbench-system"],
        &["create", "jobs.batch", "-n", "netbench-system"],
    ];
    for args in allowed {
        assert_eq!(can(args), "yes", "the operator needs: {}", args.join(" "));
    }
}

/// An unauthenticated flood of huge bodies at the operator's Service, from this machine, while
/// a real run is going: every request is refused before its body is read (401, counted), the
/// operator keeps running (restartCount unchanged) and the run ends Succeeded with a real result.
#[tokio::test]
async fn an_unauthenticated_flood_of_huge_bodies_changes_nothing() {
    use std::io::{Read, Write};
    let client = client().await;
    let ns = TestNs::new(&client, "flood").await;
    let restarts = operator_restarts(&client).await;
    let before = rejected(&client, "unauthenticated").await;
    let ib = ingress_simple(&ns.name, TARGET, "10s", 4);
    let running = create_and_wait(&client, &ib, &["Running"], RUN_TIMEOUT).await;
    let run = running["status"]["runId"].as_str().unwrap().to_string();
    let service = kubectl(&[
        "-n",
        OPERATOR_NAMESPACE,
        "get",
        "service",
        "netbench-operator",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ])
    .unwrap();
    let addr = format!("{}:8080", service.trim());
    // 32 connections at once, 8 requests each, each claiming a 1 GiB body.
    let flood: Vec<_> = (0..32)
        .map(|_| {
            let (addr, run) = (addr.clone(), run.clone());
            std::thread::spawn(move || {
                let mut codes = Vec::new();
                for _ in 0..8 {
                    let Ok(mut conn) = std::net::TcpStream::connect(&addr) else {
                        codes.push("connect failed".to_string());
                        continue;
                    };
                    conn.set_read_timeout(Some(Duration::from_secs(10)))
                        .unwrap();
                    let head = format!(
                        "POST /v1/runs/{run}/report HTTP/1.1\r\nHost: x\r\n\
                         Content-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n"
                    );
                    let _ = conn.write_all(head.as_bytes());
                    let _ = conn.write_all(&[b'x'; 65536]);
                    let mut answer = [0u8; 64];
                    let n = conn.read(&mut answer).unwrap_or(0);
                    let text = String::from_utf8_lossy(&answer[..n]).to_string();
                    codes.push(text.split(' ').nth(1).unwrap_or("none").to_string());
                }
                codes
            })
        })
        .collect();
    let codes: Vec<String> = flood.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let refused = codes.iter().filter(|c| *c == "401").count();
    eprintln!("flood: {refused}/{} answered 401", codes.len());
    // 401, or the connection closed unanswered when over a connection cap ("none"): never a
    // body read, never a success.
    assert!(
        codes.iter().all(|c| c == "401" || c == "none"),
        "every flood request is refused: {codes:?}"
    );
    assert!(
        refused * 2 >= codes.len(),
        "most are answered 401: {codes:?}"
    );

    let done = wait_succeeded(&client, IB, &ns.name, "ingress-simple").await;
    let st = &done["status"];
    let requests = st["steps"][0]["requests"].as_u64().unwrap_or_default();
    assert!(requests > 0 && requests < FORGED_REQUESTS, "{st:#}");
    let after = rejected(&client, "unauthenticated").await;
    assert!(
        after - before >= refused as u64,
        "netbench_api_rejected_total{{reason=\"unauthenticated\"}} grew by {} for {refused} refusals",
        after - before
    );
    assert_eq!(
        operator_restarts(&client).await,
        restarts,
        "the operator kept running"
    );
}
