//! `netbench-sim run`: plays every netbench worker pod placed on a kwok fake node.
//! `netbench-sim check`: compares what IngressBenchmarks' status says with what was sent, or
//! checks EgressBenchmark topology cases (pairs, their nodes, the sums) against what was sent.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, ListParams};
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
    /// Compare IngressBenchmarks' merged percentiles and start skew with what was sent, or
    /// (--kind egress) EgressBenchmark topology cases' pairs and sums.
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
    /// Benchmarks to check, by label selector (all namespaces).
    #[arg(long, short = 'l')]
    selector: String,
    /// Which kind: ingress (IngressBenchmark) or egress (EgressBenchmark topology cases).
    #[arg(long, value_enum, default_value_t = Kind::Ingress)]
    kind: Kind,
    /// Exit 1 unless every benchmark Succeeded with status equal to what was sent.
    #[arg(long)]
    strict: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Kind {
    Ingress,
    Egress,
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

/// The records of one benchmark's run, waiting (bounded) until `done` says every report the
/// status counts is in them: the operator may finish the run before this simulator has
/// recorded the answer to the last report.
async fn records_when(
    dir: &std::path::Path,
    ns: &str,
    name: &str,
    done: impl Fn(&[StepRecord]) -> bool,
) -> Result<Vec<StepRecord>> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let records = read_records(dir, ns, name).map_err(anyhow::Error::msg)?;
        if done(&records) || std::time::Instant::now() >= deadline {
            return Ok(records);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

fn benchmarks_api(kube: kube::Client, kind: Kind) -> Api<DynamicObject> {
    let resource = sim::worker::benchmark_resource(matches!(kind, Kind::Egress));
    Api::all_with(kube, &resource)
}

/// A benchmark as `check` finds it: where it is and what its status says.
struct Observed {
    ns: String,
    name: String,
    status: Value,
    phase: String,
    run: String,
}

impl Observed {
    fn of(obj: &DynamicObject) -> Observed {
        let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
        Observed {
            ns: obj.metadata.namespace.clone().unwrap_or_default(),
            name: obj.metadata.name.clone().unwrap_or_default(),
            phase: status["phase"].as_str().unwrap_or("").to_string(),
            run: status["runId"].as_str().unwrap_or("").to_string(),
            status,
        }
    }

    /// Prints the benchmark's line of `check`'s output: whether it is `exact`, and its `steps`
    /// (or cases) compared with what the simulator sent.
    fn print(&self, exact: bool, steps: Vec<Value>) {
        println!(
            "{}",
            json!({"namespace": self.ns, "name": self.name, "phase": self.phase,
                   "run": self.run, "exact": exact, "message": self.status["message"],
                   "steps": steps})
        );
    }
}

async fn check(a: CheckArgs) -> Result<()> {
    let kube = kube::Client::try_default().await?;
    let api = benchmarks_api(kube, a.kind);
    let list = api.list(&ListParams::default().labels(&a.selector)).await?;
    if a.kind == Kind::Egress {
        return check_egress(&a, &list.items).await;
    }
    let mut all_good = !list.items.is_empty();
    for obj in &list.items {
        let seen = Observed::of(obj);
        let status_steps = seen.status["steps"].as_array().cloned().unwrap_or_default();
        let reported = |records: &[StepRecord]| {
            status_steps.iter().all(|step| {
                let workers = step["workers"].as_array().map_or(0, Vec::len);
                records.iter().any(|r| {
                    r.run == seen.run
                        && Some(u64::from(r.step)) == step["index"].as_u64()
                        && r.reports as usize >= workers
                })
            })
        };
        let records = records_when(&a.record, &seen.ns, &seen.name, reported).await?;
        let mut steps = vec![];
        let mut exact = seen.phase == "Succeeded";
        if status_steps.is_empty() {
            exact = false;
        }
        for (i, step) in status_steps.iter().enumerate() {
            let index = step["index"].as_u64().unwrap_or(i as u64);
            match records
                .iter()
                .find(|r| r.run == seen.run && u64::from(r.step) == index)
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
        seen.print(exact, steps);
    }
    if a.strict && !all_good {
        bail!("not every benchmark Succeeded with status equal to what the simulator sent");
    }
    Ok(())
}

/// Node `i` of a topology's node list used round-robin (docs/topologies.md), if it names
/// nodes.
fn round_robin(set: &Value, i: usize) -> Option<String> {
    let names = set["names"].as_array()?;
    let n = names.len();
    (n > 0)
        .then(|| names[i % n].as_str().map(str::to_string))
        .flatten()
}

/// One topology case (`pairs: N` with two distinct node lists, or a selector) of status
/// against its spec and its record: N pair rows, each pair once, nodes round-robin from the
/// named lists, aggregate.sum = the sum of the rows = what the clients sent (the operator's
/// main figure: receiver bits/s of a stream case, transactions/s of a request/response one),
/// every client given exactly its own server at the barrier.
fn compare_case(case: &Value, spec: &Value, record: Option<&StepRecord>) -> (bool, Value) {
    let topology = &spec["topology"];
    let expected = topology["pairs"].as_u64().unwrap_or(0) as usize;
    let rows = case["pairs"].as_array().cloned().unwrap_or_default();
    let aggregate = &case["aggregate"];
    let mut problems: Vec<String> = vec![];
    if expected == 0 {
        problems.push("the case's spec has no topology.pairs".into());
    }
    if rows.len() != expected {
        problems.push(format!("{} pair rows, {expected} pairs asked", rows.len()));
    }
    if aggregate["pairs"].as_u64() != Some(expected as u64) {
        problems.push(format!("aggregate.pairs is {}", aggregate["pairs"]));
    }
    let mut seen = vec![false; expected];
    let mut wrong_nodes = vec![];
    // Two distinct lists: pair i is on client list[i], server list[i] (one shared list
    // shifts the server by one: not checked here).
    let named = topology["clientNodes"] != topology["serverNodes"];
    for row in &rows {
        let Some(i) = row["pair"].as_u64().map(|i| i as usize) else {
            problems.push(format!("a pair row without its index: {row}"));
            continue;
        };
        match seen.get_mut(i) {
            Some(s) if !*s => *s = true,
            _ => problems.push(format!("pair {i} twice or out of range")),
        }
        if !named {
            continue;
        }
        for (side, list, field) in [
            ("client", &topology["clientNodes"], "clientNode"),
            ("server", &topology["serverNodes"], "serverNode"),
        ] {
            if let Some(want) = round_robin(list, i) {
                if row[field].as_str() != Some(want.as_str()) {
                    wrong_nodes.push(format!("pair {i} {side} on {} not {want}", row[field]));
                }
            }
        }
    }
    if !wrong_nodes.is_empty() {
        problems.push(format!(
            "{} pair ends on the wrong node, first: {}",
            wrong_nodes.len(),
            wrong_nodes[0]
        ));
    }
    let row_sum: f64 = rows.iter().filter_map(|r| r["value"].as_f64()).sum();
    let sum = aggregate["sum"].as_f64();
    // The operator rounds each row to whole bits/s and the sum to 0.01: equal exactly.
    if sum.is_none_or(|s| (s - row_sum).abs() > 1e-6 * row_sum.abs().max(1.0)) {
        problems.push(format!(
            "aggregate.sum {sum:?} != sum of the rows {row_sum}"
        ));
    }
    let sent = record.map(|r| r.main_figure);
    match record {
        None => problems.push("nothing recorded for this case".into()),
        Some(r) => {
            // Each row is rounded to whole bits/s (transactions/s: to 0.01): at most 0.5 off
            // per pair.
            let slack = 0.5 * expected as f64 + 1e-9 * r.main_figure;
            if (row_sum - r.main_figure).abs() > slack {
                problems.push(format!(
                    "the rows sum to {row_sum}, the clients sent {}",
                    r.main_figure
                ));
            }
            if r.reports as usize != expected {
                problems.push(format!("{} reports stored, {expected} clients", r.reports));
            }
            if r.paired as usize != expected || !r.misdirected.is_empty() {
                problems.push(format!(
                    "{} of {expected} clients given exactly their own server; {:?}",
                    r.paired,
                    r.misdirected.iter().take(3).collect::<Vec<_>>()
                ));
            }
        }
    }
    let exact = problems.is_empty();
    let figures = json!({
        "case": case["name"],
        "pairs": [rows.len(), expected],
        "sum": [sum, row_sum, sent],
        "paired": record.map(|r| r.paired),
        // The ingress steps' field name, so the scale script reads both alike.
        "startSkewMs": [aggregate["startSpreadMs"], record.and_then(StepRecord::start_spread_ms)],
        "maxLatenessMs": record.and_then(StepRecord::max_lateness_ms),
        "reports": record.map(|r| r.reports),
        "problems": problems,
        "exact": exact,
    });
    (exact, figures)
}

/// `check --kind egress`: every topology case of every benchmark, one JSON line each
/// benchmark (its cases in "steps", as for ingress).
async fn check_egress(a: &CheckArgs, items: &[DynamicObject]) -> Result<()> {
    let mut all_good = !items.is_empty();
    for obj in items {
        let seen = Observed::of(obj);
        let spec_cases = obj.data["spec"]["cases"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let cases = seen.status["cases"].as_array().cloned().unwrap_or_default();
        let clients: u64 = spec_cases
            .iter()
            .filter_map(|c| c["topology"]["pairs"].as_u64())
            .sum();
        let records = records_when(&a.record, &seen.ns, &seen.name, |records| {
            records
                .iter()
                .filter(|r| r.run == seen.run)
                .map(|r| u64::from(r.reports))
                .sum::<u64>()
                >= clients
        })
        .await?;
        let ours: Vec<&StepRecord> = records.iter().filter(|r| r.run == seen.run).collect();
        let mut exact = seen.phase == "Succeeded" && !cases.is_empty();
        let mut steps = vec![];
        for (i, case) in cases.iter().enumerate() {
            let spec = spec_cases
                .iter()
                .find(|c| c["name"] == case["name"])
                .cloned()
                .unwrap_or(Value::Null);
            // A case's step is its index (one sample per case here); a lone record is it.
            let record = ours
                .iter()
                .find(|r| r.step as usize == i)
                .or_else(|| ours.first().filter(|_| ours.len() == 1))
                .copied();
            let (ok, figures) = compare_case(case, &spec, record);
            exact &= ok;
            steps.push(figures);
        }
        all_good &= exact;
        seen.print(exact, steps);
    }
    if a.strict && !all_good {
        bail!("not every EgressBenchmark Succeeded with pairs and sums as sent");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pairs: u64) -> Value {
        json!({"name": "pairs", "topology": {"pairs": pairs,
            "clientNodes": {"names": ["c0", "c1"]}, "serverNodes": {"names": ["s0", "s1", "s2"]}}})
    }

    fn status(values: &[f64]) -> Value {
        let rows: Vec<Value> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                json!({"pair": i, "clientNode": format!("c{}", i % 2),
                       "serverNode": format!("s{}", i % 3), "value": v})
            })
            .collect();
        json!({"name": "pairs", "pairs": rows,
               "aggregate": {"pairs": values.len(), "sum": values.iter().sum::<f64>(), "startSpreadMs": 3.0}})
    }

    fn record(pairs: u32, bps: f64) -> StepRecord {
        StepRecord {
            reports: pairs,
            paired: pairs,
            main_figure: bps,
            started_at_unix_ms: vec![1000, 1003],
            ..StepRecord::default()
        }
    }

    #[test]
    fn a_topology_case_as_sent_is_exact() {
        let (ok, figures) = compare_case(
            &status(&[1e9, 2e9, 3e9, 4e9]),
            &spec(4),
            Some(&record(4, 1e10 + 1.5)),
        );
        assert!(ok, "{figures}");
        assert_eq!(figures["startSkewMs"], json!([3.0, 3]));
    }

    #[test]
    fn wrong_rows_sums_nodes_and_pairings_are_found() {
        let good = status(&[1e9, 2e9, 3e9]);
        let check = |case: &Value, r: &StepRecord| compare_case(case, &spec(3), Some(r)).0;
        assert!(check(&good, &record(3, 6e9)));
        // A missing row, a sum that is not the rows', a pair on another node.
        assert!(!check(&status(&[1e9, 2e9]), &record(3, 6e9)));
        let mut sum = good.clone();
        sum["aggregate"]["sum"] = json!(7e9);
        assert!(!check(&sum, &record(3, 6e9)));
        let mut moved = good.clone();
        moved["pairs"][1]["serverNode"] = json!("s0");
        assert!(!check(&moved, &record(3, 6e9)));
        let mut twice = good.clone();
        twice["pairs"][2]["pair"] = json!(1);
        assert!(!check(&twice, &record(3, 6e9)));
        // Not what the clients sent; a client given another server; nothing recorded.
        assert!(!check(&good, &record(3, 6.1e9)));
        let mut misdirected = record(3, 6e9);
        misdirected.paired = 2;
        misdirected.misdirected = vec!["w2: given [\"x:5201\"]".into()];
        assert!(!check(&good, &misdirected));
        assert!(!compare_case(&good, &spec(3), None).0);
    }
}
