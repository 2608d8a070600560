//! The TCP engine's worker mode end to end against the operator's REAL worker API (router,
//! registry, handlers) on 127.0.0.1: the real `netbench-loadgen` binary runs twice, as the
//! server worker and as the client worker, exactly as the EgressBenchmark pods run it.
//! Only report storage is in memory (the cluster e2e tests store ConfigMaps).
//!
//! The loadgen binary: `CARGO_BIN_EXE_*` exists only for a package's own binaries, and cargo
//! does not build a dependency's binaries for this package's tests. So the test builds it
//! itself with the cargo that runs the test (`cargo build -p loadgen --bin netbench-loadgen`,
//! same profile and target directory: a no-op when it is fresh) and takes the path cargo
//! reports. That way it can never run a stale binary.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use loadgen::tcp::TcpReport;
use loadgen::worker::protocol::{FinalReport, Role};
use operator::api::{router, ApiState, ReportSink};
use operator::metrics::Metrics;
use operator::runs::{Registry, RunSpec};

const RUN: &str = "egress-run";
const TOKEN: &str = "run-token";

#[derive(Default)]
struct MemorySink(Mutex<Vec<FinalReport>>);

impl ReportSink for MemorySink {
    fn store<'a>(
        &'a self,
        _run: &'a str,
        _spec: &'a RunSpec,
        report: &'a FinalReport,
    ) -> BoxFuture<'a, Result<(), String>> {
        self.0.lock().unwrap().push(report.clone());
        Box::pin(async { Ok(()) })
    }
}

/// The operator's worker API served on 127.0.0.1 from a runtime of its own.
struct Api {
    url: String,
    runs: Arc<Registry>,
    sink: Arc<MemorySink>,
    metrics: Arc<Metrics>,
    _runtime: tokio::runtime::Runtime,
}

impl Api {
    fn start(workers: &[(&str, Role)]) -> Api {
        let runs = Arc::new(Registry::default());
        runs.announce(
            RUN,
            RunSpec {
                kind: "EgressBenchmark".into(),
                namespace: "ns".into(),
                benchmark: "egress".into(),
                uid: "uid".into(),
                token: TOKEN.into(),
                step: 0,
                workers: workers
                    .iter()
                    .map(|(w, role)| (w.to_string(), *role))
                    .collect::<BTreeMap<_, _>>(),
            },
        );
        let sink = Arc::new(MemorySink::default());
        let metrics = Arc::new(Metrics::new());
        let (wake, wake_rx) = tokio::sync::mpsc::unbounded_channel();
        std::mem::forget(wake_rx); // keep the channel open; nothing reconciles here
        let state = ApiState {
            runs: runs.clone(),
            metrics: metrics.clone(),
            sink: sink.clone(),
            wake,
            ready: Arc::new(AtomicBool::new(true)),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("binding the API");
        let url = format!("http://{}", listener.local_addr().unwrap());
        runtime.spawn(async move { axum::serve(listener, router(state)).await });
        Api {
            url,
            runs,
            sink,
            metrics,
            _runtime: runtime,
        }
    }

    /// `netbench-loadgen ARGS` with the worker environment of `worker`.
    fn worker(&self, worker: &str, args: &[&str]) -> Worker {
        let child = Command::new(loadgen_binary())
            .args(args)
            .env("NETBENCH_OPERATOR_URL", &self.url)
            .env("NETBENCH_RUN", RUN)
            .env("NETBENCH_TOKEN", TOKEN)
            .env("NETBENCH_WORKER", worker)
            .env("NETBENCH_NODE", format!("node-of-{worker}"))
            .env("NETBENCH_STEP", "0")
            .env_remove("NETBENCH_POD_IP")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting netbench-loadgen");
        Worker(Some(child))
    }

    fn progress_updates(&self) -> u64 {
        self.metrics
            .api_requests
            .with_label_values(&["progress", "204"])
            .get()
    }
}

/// A worker process, killed on Drop if still running.
struct Worker(Option<Child>);

struct Exit {
    success: bool,
    stdout: String,
    stderr: String,
}

impl Worker {
    /// Waits for the exit (at most `limit`; then kills and fails).
    fn wait(mut self, limit: Duration) -> Exit {
        let mut child = self.0.take().unwrap();
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = child.try_wait().expect("waiting for netbench-loadgen") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("netbench-loadgen did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let (mut stdout, mut stderr) = (String::new(), String::new());
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        Exit {
            success: status.success(),
            stdout,
            stderr,
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Builds netbench-loadgen with the cargo running this test and returns its path.
fn loadgen_binary() -> PathBuf {
    static PATH: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut path = PATH.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = path.as_ref() {
        return p.clone();
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "-p",
        "loadgen",
        "--bin",
        "netbench-loadgen",
        "--message-format=json-render-diagnostics",
    ])
    .current_dir(env!("CARGO_MANIFEST_DIR"))
    .stderr(Stdio::inherit());
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let out = cmd.output().expect("running cargo build -p loadgen");
    assert!(out.status.success(), "cargo build -p loadgen failed");
    let found = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|m| {
            (m["reason"] == "compiler-artifact" && m["target"]["name"] == "netbench-loadgen")
                .then(|| m["executable"].as_str().map(PathBuf::from))
                .flatten()
        })
        .expect("cargo reported no netbench-loadgen executable");
    *path = Some(found.clone());
    found
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("finding a free port")
        .port()
}

#[test]
fn tcp_server_and_client_workers_run_one_test_through_the_operator() {
    let api = Api::start(&[("server-0", Role::Server), ("client-0", Role::Client)]);
    let port = free_port().to_string();
    let server = api.worker("server-0", &["tcp-server", "-B", "127.0.0.1", "-p", &port]);
    // No -c: the client learns the server's address at the barrier.
    let client = api.worker(
        "client-0",
        &["tcp-client", "-t", "3", "-P", "2", "--output", "json"],
    );

    let client = client.wait(Duration::from_secs(60));
    assert!(client.success, "client failed: {}", client.stderr);
    let server = server.wait(Duration::from_secs(30));
    assert!(server.success, "server failed: {}", server.stderr);
    assert!(
        server.stdout.is_empty(),
        "the server prints nothing: {}",
        server.stdout
    );

    // The server registered the address it advertised (-B), which the barrier gave the client.
    let barrier = api
        .runs
        .barrier(RUN, "client-0")
        .expect("client registered");
    assert_eq!(barrier.servers, vec![format!("127.0.0.1:{port}")]);
    assert!(barrier.start_at_unix_ms.is_some());

    // Exactly one report, the client's; the server sends none.
    let stored = api.sink.0.lock().unwrap().clone();
    assert_eq!(
        stored.iter().map(|r| r.worker.as_str()).collect::<Vec<_>>(),
        ["client-0"]
    );
    let stored = &stored[0];
    assert_eq!(stored.node.as_deref(), Some("node-of-client-0"));
    assert_eq!(stored.report["kind"], "tcp");
    let report: TcpReport = serde_json::from_value(stored.report.clone()).expect("a tcp report");
    assert!(report.receiver.bytes > 0, "{:?}", report.receiver);
    assert!(
        report.cpu.server.total_percent > 0.0,
        "the server's CPU came over the control connection: {:?}",
        report.cpu
    );
    assert_eq!(report.streams.len(), 2);
    assert_eq!(report.runs[0].server, format!("127.0.0.1:{port}"));
    assert!(stored.started_at_unix_ms <= report.started_at_unix_ms);
    // The same report is printed on stdout, as in standalone mode.
    let printed: TcpReport = serde_json::from_str(&client.stdout).expect("JSON on stdout");
    assert_eq!(printed, report);
    assert!(
        api.progress_updates() >= 1,
        "a 3 s test pushes progress every second"
    );
}

#[test]
fn a_client_without_a_registered_server_fails_clearly() {
    let api = Api::start(&[("client-0", Role::Client)]);
    let client = api
        .worker("client-0", &["tcp-client", "-t", "1"])
        .wait(Duration::from_secs(30));
    assert!(!client.success);
    assert!(
        client.stderr.contains("no server registered"),
        "{}",
        client.stderr
    );
    assert!(api.sink.0.lock().unwrap().is_empty());
}

/// After an operator restart the registry is empty until the new leader reconciles the run:
/// a final report answered 404 meanwhile is retried, not lost.
#[test]
fn a_report_waits_for_a_restarted_operator_to_know_the_run() {
    let api = Api::start(&[("client-0", Role::Client)]);
    let spec = api.runs.authorize(RUN, TOKEN, "client-0", 0).unwrap();
    api.runs.forget(RUN); // what a restart loses
    let client = loadgen::worker::WorkerClient::new(loadgen::worker::WorkerEnv {
        operator_url: api.url.clone(),
        run: RUN.into(),
        token: TOKEN.into(),
        worker: "client-0".into(),
        node: None,
        step: 0,
    });
    let t = serde_json::json!({"bytes": 10, "seconds": 1.0, "bits_per_second": 80.0});
    let cpu = serde_json::json!({"user_percent": 1.0, "system_percent": 2.0, "total_percent": 3.0});
    let report = serde_json::json!({"version": 1, "kind": "tcp", "started_at_unix_ms": 1,
        "ended_at_unix_ms": 2, "sender": t, "receiver": t, "retransmits": 0, "mean_rtt_us": null,
        "cpu": {"client": cpu, "server": cpu}, "runs": [], "streams": []});
    let sender = std::thread::spawn(move || client.report(1, report));
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        api.sink.0.lock().unwrap().is_empty(),
        "nothing stored while the run is unknown"
    );
    api.runs.announce(RUN, spec); // the new leader reconciles the benchmark
    sender
        .join()
        .unwrap()
        .expect("the report is delivered once the run is known");
    assert_eq!(api.sink.0.lock().unwrap().len(), 1);
}
