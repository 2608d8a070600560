//! `netbench-sim run`: plays every netbench worker pod placed on a kwok fake node.
//! `netbench-sim check`: compares what IngressBenchmarks' status says with what was sent.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::watcher;
use serde_json::{json, Value};

use sim::client::Api as WorkerApi;
use sim::pod::{worker_pod, Skip, FAKE_NODE_SELECTOR, WORKER_SELECTOR};
use sim::record::{read_records, Recorder, StepRecord};
use sim::report::LatencyModel;
use sim::worker::{play, Sim};

#[derive(Parser)]
#[command(
    name = "netbench-sim",
    about = "Simulated netbench workers for kwok fake nodes"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Play every worker pod on a fake node (label netbench.io/fake-node=true) until stopped.
    Run(RunArgs),
    /// Compare IngressBenchmarks' merged percentiles and start skew with what was sent.
    Check(CheckArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// Directory of the per-step records (what was sent).
    #[arg(long)]
    record: Option<PathBuf>,
    /// Play only pods in namespaces starting with this.
    #[arg(long, default_value = "")]
    namespace_prefix: String,
    /// The operator's worker API as reached from here (default: the pods' URL, its Service
    /// resolved to the ClusterIP, which the test cluster routes from this machine).
    #[arg(long)]
    operator_url: Option<String>,
    /// Requests in flight at once, all workers together (the operator allows 64 connections
    /// per client address by default, and this process is one address; connections being
    /// closed still count there for a moment, hence the margin).
    #[arg(long, default_value_t = 32)]
    max_in_flight: usize,
    /// Most latency samples one worker sends.
    #[arg(long, default_value_t = 20_000)]
    max_samples: u64,
    /// Median latency (µs) and log-spread of the simulated requests.
    #[arg(long, default_value_t = 800.0)]
    median_us: f64,
    #[arg(long, default_value_t = 0.5)]
    sigma: f64,
    /// Throughput a simulated TCP client claims, Gbit/s.
    #[arg(long, default_value_t = 2.0)]
    gbps: f64,
    /// Namespaces whose worker w0 lies (foreign worker, wrong step, other run, after the end).
    #[arg(long = "lie-namespace")]
    lie_namespaces: Vec<String>,
    /// Namespaces whose worker w0 withholds its report until the run failed, then posts it.
    #[arg(long = "late-namespace")]
    late_namespaces: Vec<String>,
    /// JSON lines: each lie and the operator's answer.
    #[arg(long)]
    lies: Option<PathBuf>,
}

#[derive(clap::Args)]
struct CheckArgs {
    /// Directory of the records written by `run --record`.
    #[arg(long)]
    record: PathBuf,
    /// IngressBenchmarks to check, by label selector (all namespaces).
    #[arg(long, short = 'l')]
    selector: String,
    /// Exit 1 unless every benchmark Succeeded with status equal to what was sent.
    #[arg(long)]
    strict: bool,
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Run(a) => run(a).await,
        Command::Check(a) => check(a).await,
    }
}

/// Fake nodes, looked up once each.
struct FakeNodes {
    api: Api<Node>,
    known: HashMap<String, bool>,
}

impl FakeNodes {
    async fn is_fake(&mut self, name: &str) -> Result<bool> {
        if let Some(f) = self.known.get(name) {
            return Ok(*f);
        }
        let fake = self.api.get_opt(name).await?.is_some_and(|n| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("netbench.io/fake-node"))
                .is_some_and(|v| v == "true")
        });
        self.known.insert(name.to_string(), fake);
        Ok(fake)
    }
}

async fn run(a: RunArgs) -> Result<()> {
    let kube = kube::Client::try_default()
        .await
        .context("a kubeconfig with the cluster admin's rights (KUBECONFIG)")?;
    let nodes: Api<Node> = Api::all(kube.clone());
    let listed = nodes
        .list(&ListParams::default().labels(FAKE_NODE_SELECTOR))
        .await?;
    let mut fake = FakeNodes {
        api: nodes,
        known: listed
            .items
            .iter()
            .filter_map(|n| Some((n.metadata.name.clone()?, true)))
            .collect(),
    };
    tracing::info!(
        fake_nodes = fake.known.len(),
        "watching worker pods on fake nodes"
    );
    let recorder = Recorder::new(a.record.clone()).map_err(anyhow::Error::msg)?;
    let model = LatencyModel {
        median_us: a.median_us,
        sigma: a.sigma,
        ..LatencyModel::default()
    };
    let sim = Arc::new(Sim::new(
        kube.clone(),
        WorkerApi::new(a.max_in_flight),
        recorder,
        model,
        a.max_samples,
        a.gbps,
        a.operator_url.clone(),
        a.lie_namespaces.clone(),
        a.late_namespaces.clone(),
        a.lies.clone(),
    ));
    let pods: Api<Pod> = Api::all(kube);
    let config = watcher::Config::default().labels(WORKER_SELECTOR);
    let mut events = watcher(pods, config).boxed();
    let mut started: HashSet<String> = HashSet::new();
    let mut stop = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        let event = tokio::select! {
            e = events.next() => e,
            _ = tokio::signal::ctrl_c() => break,
            _ = stop.recv() => break,
        };
        let pod = match event {
            Some(Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p))) => p,
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                // The watcher re-lists by itself; a failed watch is worth a line.
                tracing::warn!("pod watch: {e}");
                continue;
            }
            None => bail!("the pod watch ended"),
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if started.contains(&uid) {
            continue;
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        if !namespace.starts_with(&a.namespace_prefix) {
            continue;
        }
        let w = match worker_pod(&pod) {
            Ok(w) => w,
            Err(Skip::NotReady(_)) => continue,
            Err(Skip::Foreign(why)) => {
                tracing::debug!(pod = ?pod.metadata.name, "not played: {why}");
                started.insert(uid);
                continue;
            }
        };
        if !fake.is_fake(&w.node).await.unwrap_or(false) {
            started.insert(uid);
            continue;
        }
        started.insert(uid);
        let sim = sim.clone();
        tokio::spawn(async move {
            let (ns, worker) = (w.namespace.clone(), w.worker.clone());
            match play(sim, w).await {
                Ok(what) => tracing::info!(namespace = %ns, %worker, "{what}"),
                Err(why) => tracing::warn!(namespace = %ns, %worker, "stopped: {why}"),
            }
        });
    }
    tracing::info!(workers = started.len(), "stopping");
    Ok(())
}

/// `us` microseconds in status's unit (what operator/src/ingress/result.rs writes).
fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// One step of status against its record: every figure, and whether all are equal.
fn compare(step: &Value, record: &StepRecord) -> (bool, Value) {
    let latency = &step["latencyMs"];
    let l = &record.latency;
    let pairs = [
        ("p50", ms(l.p50_us)),
        ("p90", ms(l.p90_us)),
        ("p99", ms(l.p99_us)),
        ("p999", ms(l.p999_us)),
        ("max", ms(l.max_us)),
    ];
    let mut exact = step["requests"].as_u64() == Some(l.count);
    let mut figures = serde_json::Map::new();
    figures.insert("requests".into(), json!([step["requests"], l.count]));
    for (name, sent) in pairs {
        let got = latency[name].as_f64();
        exact &= got == Some(sent);
        figures.insert(name.into(), json!([got, sent]));
    }
    // The mean of one histogram against the mean of the merged ones: equal up to float
    // rounding of the sums (the operator's mean_us / 1000).
    let mean = latency["mean"].as_f64();
    let mean_sent = l.mean_us / 1000.0;
    exact &= mean.is_some_and(|m| (m - mean_sent).abs() <= 1e-9 * mean_sent.abs().max(1.0));
    figures.insert("mean".into(), json!([mean, mean_sent]));
    figures.insert(
        "startSkewMs".into(),
        json!([step["startSkewMs"], record.start_spread_ms()]),
    );
    figures.insert("maxLatenessMs".into(), json!(record.max_lateness_ms()));
    figures.insert("reports".into(), json!(record.reports));
    figures.insert("exact".into(), json!(exact));
    (exact, Value::Object(figures))
}

async fn check(a: CheckArgs) -> Result<()> {
    let kube = kube::Client::try_default().await?;
    let resource = ApiResource {
        group: "netbench.io".into(),
        version: "v1alpha1".into(),
        api_version: "netbench.io/v1alpha1".into(),
        kind: "IngressBenchmark".into(),
        plural: "ingressbenchmarks".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(kube, &resource);
    let list = api.list(&ListParams::default().labels(&a.selector)).await?;
    let mut all_good = !list.items.is_empty();
    for obj in &list.items {
        let ns = obj.metadata.namespace.clone().unwrap_or_default();
        let name = obj.metadata.name.clone().unwrap_or_default();
        let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
        let phase = status["phase"].as_str().unwrap_or("").to_string();
        let run = status["runId"].as_str().unwrap_or("").to_string();
        let status_steps = status["steps"].as_array().cloned().unwrap_or_default();
        // The operator may finish the run before this simulator has recorded the answer to
        // the last report: wait (bounded) until every worker in status is in the record.
        let reported = |records: &[StepRecord]| {
            status_steps.iter().all(|step| {
                let workers = step["workers"].as_array().map_or(0, Vec::len);
                records.iter().any(|r| {
                    r.run == run
                        && Some(u64::from(r.step)) == step["index"].as_u64()
                        && r.reports as usize >= workers
                })
            })
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        let records = loop {
            let records = read_records(&a.record, &ns, &name).map_err(anyhow::Error::msg)?;
            if reported(&records) || std::time::Instant::now() >= deadline {
                break records;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        let mut steps = vec![];
        let mut exact = phase == "Succeeded";
        if status_steps.is_empty() {
            exact = false;
        }
        for (i, step) in status_steps.iter().enumerate() {
            let index = step["index"].as_u64().unwrap_or(i as u64);
            match records
                .iter()
                .find(|r| r.run == run && u64::from(r.step) == index)
            {
                Some(record) => {
                    let (ok, figures) = compare(step, record);
                    exact &= ok;
                    steps.push(figures);
                }
                None => {
                    exact = false;
                    steps.push(json!({"index": index, "error": "nothing recorded for this step"}));
                }
            }
        }
        all_good &= exact;
        println!(
            "{}",
            json!({"namespace": ns, "name": name, "phase": phase, "run": run, "exact": exact,
                   "message": status["message"], "steps": steps})
        );
    }
    if a.strict && !all_good {
        bail!("not every benchmark Succeeded with status equal to what the simulator sent");
    }
    Ok(())
}
