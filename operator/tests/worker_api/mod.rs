//! The operator's REAL worker API (router, registry, handlers) served on 127.0.0.1 for worker
//! tests, and the real `netbench-loadgen` binary run as a worker against it. Only report
//! storage is in memory and worker identities come from a fixed table instead of a TokenReview
//! (the cluster e2e tests use both for real).
//!
//! The loadgen binary: `CARGO_BIN_EXE_*` exists only for a package's own binaries, and cargo
//! does not build a dependency's binaries for this package's tests. So the test builds it
//! itself with the cargo that runs the test (`cargo build -p loadgen --bin netbench-loadgen`,
//! same profile and target directory: a no-op when it is fresh) and takes the path cargo
//! reports. That way it can never run a stale binary.
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::BTreeMap;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use operator::api::metrics::ApiMetrics;
use operator::api::{router, serve, ApiState, ServerLimits};
use operator::base::metrics::Metrics;
use operator::store::registry::{
    BarrierState, Caller, Listen, ListenHost, Pairing, Registry, RegistryError, RunSpec,
};
use operator::testing::{run_spec, FixedTokens, MemorySink};
use protocol::worker::Role;
use protocol::ReportKind;

/// The run every test announces.
pub const RUN: &str = "run-0";

/// The bearer token worker `worker` presents here (in a cluster: its pod's ServiceAccount token).
pub fn token_of(worker: &str) -> String {
    format!("token-of-{worker}")
}

/// The operator's worker API served on 127.0.0.1 from a runtime of its own.
pub struct Api {
    pub url: String,
    /// The port each server worker was given (what the plan gives a server pod).
    ports: BTreeMap<String, u16>,
    pub runs: Arc<Registry>,
    pub sink: Arc<MemorySink>,
    pub metrics: Arc<Metrics>,
    _runtime: tokio::runtime::Runtime,
}

impl Api {
    /// Announces run [`RUN`] of the benchmark `kind` ns/`benchmark` with `workers` (an
    /// EgressBenchmark's step taking tcp reports, an IngressBenchmark's http).
    pub fn start(kind: &str, benchmark: &str, workers: &[(&str, Role)]) -> Api {
        let report_kind = if kind == "EgressBenchmark" {
            ReportKind::Tcp
        } else {
            ReportKind::Http
        };
        Api::start_taking(kind, benchmark, workers, report_kind)
    }

    /// [`Api::start`] with a step that takes reports of `report_kind`.
    pub fn start_taking(
        kind: &str,
        benchmark: &str,
        workers: &[(&str, Role)],
        report_kind: ReportKind,
    ) -> Api {
        Api::start_paired(kind, benchmark, workers, report_kind, Pairing::default())
    }

    /// [`Api::start_taking`] with clients paired to servers (an EgressBenchmark topology).
    pub fn start_paired(
        kind: &str,
        benchmark: &str,
        workers: &[(&str, Role)],
        report_kind: ReportKind,
        mut pairing: Pairing,
    ) -> Api {
        // Each server may register 127.0.0.1 or ::1 (its "pod's" addresses, see below) and a
        // port of its own, as the plan would give it.
        for (w, role) in workers {
            if *role == Role::Server && !pairing.listen.contains_key(*w) {
                let rule = Listen {
                    host: ListenHost::Own,
                    port: free_port(),
                };
                pairing.listen.insert(w.to_string(), rule);
            }
        }
        let ports = pairing
            .listen
            .iter()
            .map(|(w, l)| (w.clone(), l.port))
            .collect();
        let runs = Arc::new(Registry::default());
        runs.announce(
            RUN,
            RunSpec {
                kind: kind.into(),
                benchmark: benchmark.into(),
                uid: "uid".into(),
                report_kind,
                pairing,
                ..run_spec(workers)
            },
        );
        let sink = Arc::new(MemorySink::default());
        let metrics = Arc::new(Metrics::new());
        let (wake, wake_rx) = tokio::sync::mpsc::unbounded_channel();
        std::mem::forget(wake_rx); // keep the channel open; nothing reconciles here
        let state = ApiState {
            // Stands in for the TokenReview: `token_of(w)` is worker pod `w` of namespace "ns".
            // Worker `w`'s pod runs on node "node-of-w" at 127.0.0.1 and ::1.
            auth: Arc::new(workers.iter().fold(
                FixedTokens::new(workers.iter().map(|(w, _)| (token_of(w), *w))),
                |tokens, (w, _)| {
                    let node = format!("node-of-{w}");
                    tokens.with_pod(w, Some(&node), &LOOPBACK)
                },
            )),
            runs: runs.clone(),
            metrics: metrics.clone(),
            sink: sink.clone(),
            wake,
            ready: Arc::new(AtomicBool::new(true)),
            // As the operator's default request timeout (30 s) gives.
            barrier_wait: operator::api::barrier_wait(std::time::Duration::from_secs(30)),
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
        let limits = ServerLimits {
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_connections: 64,
            max_connections_per_peer: 64,
        };
        runtime.spawn(serve(listener, router(state), limits, metrics.clone()));
        Api {
            url,
            ports,
            runs,
            sink,
            metrics,
            _runtime: runtime,
        }
    }

    /// The port server `worker` was given, for its `-p` (0 for a worker without one).
    pub fn port_of(&self, worker: &str) -> String {
        self.ports.get(worker).copied().unwrap_or(0).to_string()
    }

    /// `netbench-loadgen ARGS` with the worker environment of `worker`.
    pub fn worker(&self, worker: &str, args: &[&str]) -> Worker {
        self.worker_with(worker, args, &[])
    }

    /// [`Api::worker`] with `env` set on top (e.g. a NETBENCH_NODE that lies).
    pub fn worker_with(&self, worker: &str, args: &[&str], env: &[(&str, &str)]) -> Worker {
        let child = Command::new(loadgen_binary())
            .args(args)
            .env("NETBENCH_OPERATOR_URL", &self.url)
            .env("NETBENCH_RUN", RUN)
            .env("NETBENCH_TOKEN", token_of(worker))
            .env_remove("NETBENCH_TOKEN_FILE")
            .env("NETBENCH_WORKER", worker)
            .env("NETBENCH_NODE", format!("node-of-{worker}"))
            .env("NETBENCH_STEP", "0")
            .env_remove("NETBENCH_POD_IP")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting netbench-loadgen");
        Worker(Some(child))
    }

    /// The barrier of [`RUN`] at step 0 as worker `worker` (of namespace "ns") asks for it.
    pub fn barrier(&self, worker: &str) -> Result<BarrierState, RegistryError> {
        let caller = Caller::named("ns", worker);
        self.runs.barrier(RUN, &caller, worker, 0)
    }

    pub fn progress_updates(&self) -> u64 {
        self.requests("progress", "204")
    }

    /// Requests to `endpoint` the API answered with `code`.
    pub fn requests(&self, endpoint: &str, code: &str) -> u64 {
        self.metrics
            .family::<ApiMetrics>()
            .requests
            .with_label_values(&[endpoint, code])
            .get()
    }
}

/// The addresses of every worker "pod" here.
const LOOPBACK: [IpAddr; 2] = [
    IpAddr::V4(Ipv4Addr::LOCALHOST),
    IpAddr::V6(Ipv6Addr::LOCALHOST),
];

/// A TCP port free on 127.0.0.1 right now (the server binds it moments later).
fn free_port() -> u16 {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    probe.local_addr().expect("its address").port()
}

/// A worker process, killed on Drop if still running.
pub struct Worker(Option<Child>);

pub struct Exit {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Worker {
    /// True until the process exits.
    pub fn running(&mut self) -> bool {
        let child = self.0.as_mut().expect("not waited for yet");
        matches!(child.try_wait(), Ok(None))
    }

    /// Waits for the exit (at most `limit`; then kills and fails).
    pub fn wait(mut self, limit: Duration) -> Exit {
        let deadline = Instant::now() + limit;
        while self.running() {
            // Drop kills it.
            assert!(
                Instant::now() < deadline,
                "netbench-loadgen did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut child = self.0.take().unwrap();
        let status = child.wait().expect("waiting for netbench-loadgen");
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
pub fn loadgen_binary() -> PathBuf {
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
    let found = ours(&found);
    *path = Some(found.clone());
    found
}

/// Cargo uplifts the binary to `<target>/<profile>/netbench-loadgen`, which every checkout
/// sharing the target directory (CARGO_TARGET_DIR) rebuilds in turn. The hard-linked original
/// in `deps/` is named by a hash that covers this checkout's package, so no other checkout
/// overwrites it: run that one.
fn ours(uplifted: &std::path::Path) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(uplifted)
        .expect("the built netbench-loadgen")
        .ino();
    let deps = uplifted.parent().expect("a profile directory").join("deps");
    std::fs::read_dir(&deps)
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("netbench_loadgen-")
                && e.metadata().is_ok_and(|m| m.ino() == inode)
        })
        .map_or_else(|| uplifted.to_path_buf(), |e| e.path())
}
