//! Support for the end-to-end tests: a fresh namespace per test (deleted afterwards, pod state
//! dumped on failure), benchmarks created and awaited (test_support::k8s, re-exported here with
//! polling from test_support::poll), kubectl, the operator's metrics and restarts, and the
//! egress test bed ([`EgressNet`]).
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod deny;
pub mod egress_net;
pub use deny::DenyPolicy;
pub use egress_net::EgressNet;
pub use test_support::k8s::*;
pub use test_support::poll::{eventually, eventually_every};

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, Service};
use kube::api::{Api, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

pub const IB: &str = "IngressBenchmark";
pub const EB: &str = "EgressBenchmark";
/// The phases a run ends in.
pub const FINISHED: &[&str] = &["Succeeded", "Failed"];
/// How long a whole run may take on the test cluster.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(240);
/// The nginx Service tests/cluster/demo.sh deploys.
pub const TARGET: &str = "http://nginx-target.netbench-target.svc.cluster.local/";

/// Label selector of the operator's pods (as the chart labels them).
pub const OPERATOR_PODS: &str =
    "app.kubernetes.io/name=netbench,app.kubernetes.io/component=operator";

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A client for the test cluster; fails loudly when it is not up.
pub async fn client() -> Client {
    assert!(
        std::env::var("KUBECONFIG").is_ok(),
        "KUBECONFIG is not set: run `eval \"$(tests/e2e/setup.sh)\"` first (tests/run-all.sh does)"
    );
    Client::try_default()
        .await
        .expect("a client for the test cluster")
}

/// A namespace that exists for one test.
pub struct TestNs {
    pub name: String,
}

impl TestNs {
    pub async fn new(client: &Client, prefix: &str) -> TestNs {
        let suffix: u32 = rand::random::<u32>() % 100_000;
        let name = format!("e2e-{prefix}-{suffix}");
        let ns: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
        TestNs { name }
    }
}

impl Drop for TestNs {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- state of {} at failure:", self.name);
            let _ = std::process::Command::new("kubectl")
                .args([
                    "-n",
                    &self.name,
                    "get",
                    "pods,jobs,ib,eb,events",
                    "-o",
                    "wide",
                ])
                .status();
            let _ = std::process::Command::new("kubectl")
                .args(["-n", &self.name, "get", "ib,eb", "-o", "yaml"])
                .status();
            let offload_jobs = format!("netbench.io/namespace={}", self.name);
            let _ = std::process::Command::new("kubectl")
                .args([
                    "-n",
                    OPERATOR_NAMESPACE,
                    "get",
                    "jobs,pods,configmaps",
                    "-l",
                    &offload_jobs,
                ])
                .status();
            let _ = std::process::Command::new("kubectl")
                .args([
                    "-n",
                    OPERATOR_NAMESPACE,
                    "logs",
                    "deploy/netbench-operator",
                    "--tail=40",
                ])
                .status();
        }
        let _ = std::process::Command::new("kubectl")
            .args(["delete", "namespace", &self.name, "--wait=false"])
            .output();
    }
}

/// Reads an example manifest and adapts it: namespace and JSON-pointer replacements.
pub fn example(file: &str, namespace: &str, edits: &[(&str, Value)]) -> Value {
    let text = std::fs::read_to_string(repo_root().join("deploy/examples").join(file))
        .expect("example exists");
    let mut v: Value = serde_yaml::from_str(&text).expect("example is YAML");
    v["metadata"]["namespace"] = Value::String(namespace.into());
    for (pointer, value) in edits {
        set(&mut v, pointer, value.clone());
    }
    v
}

/// Sets a JSON-pointer path, creating objects on the way.
pub fn set(v: &mut Value, pointer: &str, value: Value) {
    let mut cur = v;
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, p) in parts.iter().enumerate() {
        if i == parts.len() - 1 {
            cur[*p] = value;
            return;
        }
        if cur.get(*p).is_none() {
            cur[*p] = serde_json::json!({});
        }
        cur = &mut cur[*p];
    }
}

/// deploy/examples/ingress-simple.yaml in `ns`, loading `url` for `duration` after a 1 s
/// warm-up with `connections` connections.
pub fn ingress_simple(ns: &str, url: &str, duration: &str, connections: u32) -> Value {
    example(
        "ingress-simple.yaml",
        ns,
        &[
            ("/spec/target/url", json!(url)),
            ("/spec/load/duration", json!(duration)),
            ("/spec/load/warmup", json!("1s")),
            ("/spec/load/connections", json!(connections)),
        ],
    )
}

/// A benchmark of `kind` named `ns`/`name` with `spec`.
pub fn benchmark(kind: &str, ns: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "netbench.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    })
}

/// Waits (watching, see [`wait_for`]) until `ready` holds for the benchmark `kind` `ns`/`name`
/// as JSON; returns it. Panics naming it, its phase, conditions and message, after `timeout`.
pub async fn wait_until(
    client: &Client,
    kind: &str,
    ns: &str,
    name: &str,
    what: &str,
    timeout: Duration,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    async fn typed<K>(
        client: &Client,
        ns: &str,
        name: &str,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&Value) -> bool,
    ) -> Value
    where
        K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
            + Clone
            + Debug
            + Send
            + serde::de::DeserializeOwned
            + serde::Serialize
            + 'static,
    {
        let api = Api::<K>::namespaced(client.clone(), ns);
        let json = |b: &K| serde_json::to_value(b).expect("a benchmark is JSON");
        json(&wait_for(&api, name, what, timeout, |b| ready(&json(b))).await)
    }
    match kind {
        IB => typed::<crds::IngressBenchmark>(client, ns, name, what, timeout, ready).await,
        _ => typed::<crds::EgressBenchmark>(client, ns, name, what, timeout, ready).await,
    }
}

/// Waits until the benchmark's phase is one of `phases`; returns it as JSON.
pub async fn wait_phase(
    client: &Client,
    kind: &str,
    ns: &str,
    name: &str,
    phases: &[&str],
    timeout: Duration,
) -> Value {
    let what = format!("phase in {phases:?}");
    wait_until(client, kind, ns, name, &what, timeout, |v| {
        phases.iter().any(|p| v["status"]["phase"] == *p)
    })
    .await
}

/// Waits (up to [`RUN_TIMEOUT`]) until the benchmark's run ends: it must have Succeeded.
/// Returns it as JSON.
pub async fn wait_succeeded(client: &Client, kind: &str, ns: &str, name: &str) -> Value {
    let done = wait_phase(client, kind, ns, name, FINISHED, RUN_TIMEOUT).await;
    assert_phase(&done, "Succeeded");
    done
}

/// Waits until the EgressBenchmark `ns`/`name` has written its offload settings back
/// (condition OffloadRestored=True); returns it as JSON.
pub async fn wait_offload_restored(
    client: &Client,
    ns: &str,
    name: &str,
    timeout: Duration,
) -> Value {
    let restored = |v: &Value| condition_is(v, "OffloadRestored", "True");
    wait_until(
        client,
        EB,
        ns,
        name,
        "OffloadRestored=True",
        timeout,
        restored,
    )
    .await
}

/// Creates `benchmark` (JSON naming its kind, namespace and name) and waits until its phase is
/// one of `phases`; returns it as JSON.
pub async fn create_and_wait(
    client: &Client,
    benchmark: &Value,
    phases: &[&str],
    timeout: Duration,
) -> Value {
    let (kind, ns, name) = identity(benchmark);
    create(client, ns, benchmark).await.unwrap();
    wait_phase(client, kind, ns, name, phases, timeout).await
}

/// Kind, namespace and name of an object as JSON.
fn identity(obj: &Value) -> (&str, &str, &str) {
    fn field(v: &Value) -> &str {
        v.as_str()
            .expect("kind, metadata.namespace and metadata.name")
    }
    let meta = &obj["metadata"];
    (
        field(&obj["kind"]),
        field(&meta["namespace"]),
        field(&meta["name"]),
    )
}

/// Deletes the operator's pods: its Deployment starts a new process.
pub fn restart_operator() {
    kubectl(&[
        "-n",
        OPERATOR_NAMESPACE,
        "delete",
        "pod",
        "-l",
        OPERATOR_PODS,
        "--wait=false",
    ])
    .unwrap();
}

/// The operator restarted in the middle of a run of `benchmark`: creates it, restarts the
/// operator once it is Running and waits until it ends. The new leader must resume the same
/// run (same runId) to Succeeded, and exactly `workers` worker pods may ever exist (polled
/// before the restart and every 500 ms after it): none is created a second time. Returns the
/// finished benchmark as JSON.
pub async fn restart_mid_run(client: &Client, benchmark: &Value, workers: usize) -> Value {
    let (kind, ns, name) = identity(benchmark);
    let running = create_and_wait(client, benchmark, &["Running"], RUN_TIMEOUT).await;
    let run_id = running["status"]["runId"].clone();
    let mut seen = BTreeSet::new();
    let mut see = async || {
        for p in worker_pods(client, ns).await.unwrap() {
            seen.insert(p.metadata.uid.unwrap());
        }
    };
    see().await;
    restart_operator();
    let done = eventually(RUN_TIMEOUT, async || {
        see().await;
        let v = get_benchmark(client, kind, ns, name).await.unwrap();
        if FINISHED.contains(&v["status"]["phase"].as_str().unwrap_or_default()) {
            return Ok(v);
        }
        Err(format!("run did not finish: {:#}", v["status"]))
    })
    .await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{:#}", done["status"]);
    assert_eq!(done["status"]["runId"], run_id, "the same run resumed");
    assert_eq!(
        seen.len(),
        workers,
        "exactly {workers} worker pod(s) were ever created: {seen:?}"
    );
    done
}

/// The first data row of a `kubectl get` table, by column header. Cells may hold spaces
/// ("15.3 Gbit/s"): each cell runs from its header's offset to the next header's.
pub fn table_row(table: &str) -> Result<std::collections::BTreeMap<String, String>> {
    let mut lines = table.lines();
    let header = lines.next().context("no header line")?;
    let row = lines.next().context("no data row")?;
    let mut starts: Vec<(usize, &str)> = Vec::new();
    let mut offset = 0;
    for word in header.split_whitespace() {
        let at = offset + header[offset..].find(word).expect("word of the header");
        starts.push((at, word));
        offset = at + word.len();
    }
    let cell = |from: usize, to: usize| {
        row.get(from.min(row.len())..to.min(row.len()))
            .unwrap_or("")
            .trim()
            .to_string()
    };
    Ok(starts
        .iter()
        .enumerate()
        .map(|(i, (at, word))| {
            let end = starts.get(i + 1).map_or(row.len(), |(next, _)| *next);
            (word.to_string(), cell(*at, end))
        })
        .collect())
}

pub async fn get_benchmark(client: &Client, kind: &str, ns: &str, name: &str) -> Result<Value> {
    let v = match kind {
        "IngressBenchmark" => serde_json::to_value(
            Api::<crds::IngressBenchmark>::namespaced(client.clone(), ns)
                .get(name)
                .await?,
        )?,
        _ => serde_json::to_value(
            Api::<crds::EgressBenchmark>::namespaced(client.clone(), ns)
                .get(name)
                .await?,
        )?,
    };
    Ok(v)
}

/// The operator's namespace (tests/e2e/setup.sh installs it there); offload Jobs run in it.
pub const OPERATOR_NAMESPACE: &str = "netbench-system";

/// Label selector of everything the operator creates.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by=netbench-operator";

/// Restarts of the operator's containers, summed over its pods ("the operator stayed up").
pub async fn operator_restarts(client: &Client) -> i32 {
    Api::<Pod>::namespaced(client.clone(), OPERATOR_NAMESPACE)
        .list(&ListParams::default().labels(OPERATOR_PODS))
        .await
        .expect("listing the operator's pods")
        .items
        .iter()
        .flat_map(|p| {
            p.status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
        })
        .map(|c| c.restart_count)
        .sum()
}

/// Pods the operator created in `ns`.
pub async fn worker_pods(client: &Client, ns: &str) -> Result<Vec<Pod>> {
    Ok(Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(MANAGED_BY))
        .await?
        .items)
}

/// Waits until no child of the operator is left for `ns` (see [`children`]).
pub async fn wait_no_children(client: &Client, ns: &str, timeout: Duration) {
    eventually(timeout, async || {
        let left = children(client, ns).await.unwrap();
        if left.is_empty() {
            return Ok(());
        }
        Err(format!("children left for {ns}: {}", left.join(", ")))
    })
    .await
}

/// The operator's pods, Services, Jobs, Secrets and ConfigMaps in `ns`, and the offload Jobs
/// (and their pods) and report ConfigMaps it keeps for `ns` in its own namespace, as
/// "namespace/kind/name".
pub async fn children(client: &Client, ns: &str) -> Result<Vec<String>> {
    let mut left = Vec::new();
    left.extend(names::<Pod>(client, ns, MANAGED_BY).await?);
    left.extend(names::<Service>(client, ns, MANAGED_BY).await?);
    left.extend(names::<Job>(client, ns, MANAGED_BY).await?);
    left.extend(names::<Secret>(client, ns, MANAGED_BY).await?);
    left.extend(names::<ConfigMap>(client, ns, MANAGED_BY).await?);
    left.extend(offload_jobs_and_pods(client, ns).await?);
    left.extend(stored_reports(client, ns).await?);
    Ok(left)
}

/// The report ConfigMaps in the operator's namespace that belong to benchmarks in `ns`.
pub async fn stored_reports(client: &Client, ns: &str) -> Result<Vec<String>> {
    let selector = format!("{MANAGED_BY},netbench.io/report=true,netbench.io/namespace={ns}");
    names::<ConfigMap>(client, OPERATOR_NAMESPACE, &selector).await
}

/// The stored reports of benchmarks in `ns`: the worker reports, and the folded samples (one
/// object per sample, `netbench.io/sample=true`).
pub async fn stored_reports_by_form(
    client: &Client,
    ns: &str,
) -> Result<(Vec<String>, Vec<String>)> {
    let base = format!("{MANAGED_BY},netbench.io/report=true,netbench.io/namespace={ns}");
    let workers = format!("{base},!netbench.io/sample");
    let samples = format!("{base},netbench.io/sample=true");
    Ok((
        names::<ConfigMap>(client, OPERATOR_NAMESPACE, &workers).await?,
        names::<ConfigMap>(client, OPERATOR_NAMESPACE, &samples).await?,
    ))
}

/// The offload Jobs and their pods in the operator's namespace that belong to benchmarks in `ns`.
pub async fn offload_jobs_and_pods(client: &Client, ns: &str) -> Result<Vec<String>> {
    let selector = format!("{MANAGED_BY},netbench.io/namespace={ns}");
    let mut found = names::<Job>(client, OPERATOR_NAMESPACE, &selector).await?;
    found.extend(names::<Pod>(client, OPERATOR_NAMESPACE, &selector).await?);
    Ok(found)
}

/// Every pod and Job in `ns` whoever made them, and the offload Jobs and pods for `ns`: for
/// "nothing was created" checks.
pub async fn all_pods_and_jobs(client: &Client, ns: &str) -> Result<Vec<String>> {
    let mut all = names::<Pod>(client, ns, "").await?;
    all.extend(names::<Job>(client, ns, "").await?);
    all.extend(offload_jobs_and_pods(client, ns).await?);
    Ok(all)
}

/// "namespace/kind/name" of the objects of kind K in `ns` matching `selector` ("" = all).
async fn names<K>(client: &Client, ns: &str, selector: &str) -> Result<Vec<String>>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).to_lowercase();
    let list = Api::<K>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(selector))
        .await?;
    Ok(list
        .items
        .iter()
        .map(|o| format!("{ns}/{kind}/{}", o.meta().name.clone().unwrap_or_default()))
        .collect())
}

/// Waits (up to 120 s) until Deployment `name` in `ns` rolled out; panics if it does not.
pub fn rolled_out(ns: &str, name: &str) {
    let deployment = format!("deployment/{name}");
    kubectl(&["-n", ns, "rollout", "status", &deployment, "--timeout=120s"])
        .unwrap_or_else(|e| panic!("{ns}/{name} did not roll out: {e}"));
}

/// kubectl with the test cluster's KUBECONFIG; returns stdout.
pub fn kubectl(args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("kubectl")
        .args(args)
        .output()
        .context("running kubectl")?;
    if !out.status.success() {
        bail!("kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `kubectl get events` in `ns` with reason `reason`, with `output` (e.g. `["-o",
/// "jsonpath={.items[*].type}"]`; none: the table). The operator publishes a reconcile's Events
/// after the reconcile, in the background: this waits up to 30 s for one to show, then returns
/// what there is. To check that there is none, use `events_now`.
pub fn events(ns: &str, reason: &str, output: &[&str]) -> Result<String> {
    events_until(ns, reason, output, |seen| !seen.trim().is_empty())
}

/// `events` once `done` says they are complete, or what there is after 30 s.
pub fn events_until(
    ns: &str,
    reason: &str,
    output: &[&str],
    done: impl Fn(&str) -> bool,
) -> Result<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let seen = events_now(ns, reason, output)?;
        if done(&seen) || std::time::Instant::now() > deadline {
            return Ok(seen);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `events` as they are now, without waiting for one. An object's Events are published in
/// order: to check that one is absent, first wait for one published after it would have been.
pub fn events_now(ns: &str, reason: &str, output: &[&str]) -> Result<String> {
    let selector = format!("reason={reason}");
    let args = ["-n", ns, "get", "events", "--field-selector", &selector];
    kubectl(&[&args[..], output].concat())
}

/// The messages of `ns`'s Events with `reason`, space-separated (waits as `events` does).
pub fn event_messages(ns: &str, reason: &str) -> Result<String> {
    events(ns, reason, &["-o", "jsonpath={.items[*].message}"])
}

/// The operator's /metrics, fetched from its pod IP (the host routes to pods).
pub async fn operator_metrics(client: &Client) -> Result<String> {
    let pods = Api::<Pod>::namespaced(client.clone(), "netbench-system")
        .list(&ListParams::default().labels(OPERATOR_PODS))
        .await?;
    let ip = pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .find_map(|p| p.status.as_ref()?.pod_ip.clone())
        .context("no operator pod IP")?;
    let mut resp = ureq::get(&format!("http://{ip}:8080/metrics")).call()?;
    Ok(resp.body_mut().read_to_string()?)
}

/// deploy/examples/target.yaml renamed to `name` in `ns` (Deployment, Service, labels, and the
/// name it answers with in X-Netbench-Backend), its http-server given `args` more (e.g.
/// `["--delay", "50ms"]`), created and rolled out.
pub async fn shipped_target(client: &Client, ns: &str, name: &str, args: &[&str]) {
    shipped_target_with(client, ns, name, args, |_| {}).await
}

/// [`shipped_target`], its objects changed by `edit` before they are created.
pub async fn shipped_target_with(
    client: &Client,
    ns: &str,
    name: &str,
    args: &[&str],
    edit: impl Fn(&mut Value),
) {
    let file = repo_root().join("deploy/examples/target.yaml");
    let text = std::fs::read_to_string(file).unwrap();
    let renamed = text.replace("netbench-target", name);
    for doc in serde_yaml::Deserializer::from_str(&renamed) {
        let mut object: Value = serde::Deserialize::deserialize(doc).unwrap();
        if let Some(given) = object.pointer_mut("/spec/template/spec/containers/0/args") {
            let given = given.as_array_mut().unwrap();
            given.extend(args.iter().map(|a| json!(a)));
        }
        edit(&mut object);
        create(client, ns, &object).await.unwrap();
    }
    rolled_out(ns, name);
}

/// Creates the Deployment and the Service of `nginx(name, cpu)` in `ns`.
pub async fn create_nginx(client: &Client, ns: &str, name: &str, cpu: &str) {
    let (deploy, svc) = nginx(name, cpu);
    for obj in [&deploy, &svc] {
        create(client, ns, obj).await.unwrap();
    }
}

/// A Deployment + Service of the in-cluster nginx image, for sweeps.
pub fn nginx(name: &str, cpu: &str) -> (Value, Value) {
    let deploy = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "nginx",
                    "image": "netbench/nginx-target:0.1.0",
                    "imagePullPolicy": "Never",
                    "ports": [{"containerPort": 8080}],
                    "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
                    "resources": {"requests": {"cpu": cpu, "memory": "32Mi"}, "limits": {"memory": "64Mi"}}
                }]}
            }
        }
    });
    let svc = serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]}
    });
    (deploy, svc)
}
