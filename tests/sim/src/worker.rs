//! One simulated worker, speaking the real protocol (`protocol::worker`) as
//! `loadgen/src/worker/client.rs` does: register, poll the barrier every 100 ms, start at the
//! common instant, push progress every second, deliver the final report (retried while the
//! operator answers 5xx/408/404), with the pod's own bound ServiceAccount token.
//!
//! On purpose it can also lie, in the namespaces it is told to (worker w0 of each run does):
//! - `lie`: before its honest report, a report naming another worker of the run, one for the
//!   next step, one for a run that is not its own; after the run ended, its report again;
//! - `late`: it withholds its report until the operator has failed the run at its deadline,
//!   then posts it.
//!
//! Each attempt is written to the lies file with the operator's answer (all must be 4xx).

use std::collections::HashMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::Method;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use kube::api::{Api as KubeApi, ApiResource, DynamicObject, PostParams};
use protocol::worker::{
    now_unix_ms, BarrierResponse, FinalReport, LiveLatency, ProgressUpdate, RegisterRequest, Role,
    PROTOCOL_VERSION,
};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;

use crate::args::Work;
use crate::client::{Answer, Api};
use crate::pod::WorkerPod;
use crate::record::{Recorder, Sent, StepKey};
use crate::report::{self, LatencyModel};

/// The audience of worker tokens (operator/src/k8s/workers.rs).
pub const AUDIENCE: &str = "netbench";
/// How long a worker keeps retrying the operator (the real worker: 120 s).
const RETRY_FOR: Duration = Duration::from_secs(120);
/// Pause between retries (the real worker: 500 ms) and between barrier polls (100 ms).
const RETRY_PAUSE: Duration = Duration::from_millis(500);
const BARRIER_POLL: Duration = Duration::from_millis(100);
/// How long a worker waits at the barrier (the real worker: 600 s).
const BARRIER_TIMEOUT: Duration = Duration::from_secs(600);
/// One request's bound.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
const PROGRESS_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a lying worker waits for its run to end.
const END_TIMEOUT: Duration = Duration::from_secs(900);
/// Lifetime asked for a worker token (the pods' projected tokens: 600 s).
const TOKEN_SECONDS: i64 = 600;

/// What every simulated worker shares.
pub struct Sim {
    pub kube: kube::Client,
    pub api: Api,
    pub recorder: Recorder,
    pub model: LatencyModel,
    /// Most latency samples one worker sends.
    pub max_samples: u64,
    /// Throughput a TCP client claims, Gbit/s.
    pub gbps: f64,
    /// The operator's worker API as reached from here (else the pods' URL, a Service name
    /// resolved to its ClusterIP, which this machine routes).
    pub operator_url: Option<String>,
    pub lie_namespaces: Vec<String>,
    pub late_namespaces: Vec<String>,
    pub lies_file: Option<PathBuf>,
    resolved: Mutex<HashMap<String, String>>,
    lies: Mutex<()>,
    /// The address each simulated server registered, by (namespace, worker).
    listens: Mutex<HashMap<(String, String), String>>,
}

/// One lie and the operator's answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LieOutcome {
    pub namespace: String,
    pub benchmark: String,
    pub run: String,
    pub worker: String,
    pub lie: &'static str,
    pub status: u16,
    pub answer: String,
    pub refused: bool,
}

impl Sim {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kube: kube::Client,
        api: Api,
        recorder: Recorder,
        model: LatencyModel,
        max_samples: u64,
        gbps: f64,
        operator_url: Option<String>,
        lie_namespaces: Vec<String>,
        late_namespaces: Vec<String>,
        lies_file: Option<PathBuf>,
    ) -> Sim {
        Sim {
            kube,
            api,
            recorder,
            model,
            max_samples,
            gbps,
            operator_url,
            lie_namespaces,
            late_namespaces,
            lies_file,
            resolved: Mutex::new(HashMap::new()),
            lies: Mutex::new(()),
            listens: Mutex::new(HashMap::new()),
        }
    }

    /// Notes the address a server registers (before it registers: the barrier opens only once
    /// every server did, so its clients find it here).
    fn note_listen(&self, w: &WorkerPod) {
        if let Some(listen) = w.listen() {
            self.listens
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert((w.namespace.clone(), w.worker.clone()), listen);
        }
    }

    /// A paired client: whether the barrier named exactly its own pair's server. None for
    /// workers that are not paired clients.
    fn pairing(&self, w: &WorkerPod, servers: &[String]) -> Option<Result<(), String>> {
        let server = w.pair_server()?;
        let expected = self
            .listens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(w.namespace.clone(), server.clone()))
            .cloned();
        Some(match expected {
            Some(e) if servers == std::slice::from_ref(&e) => Ok(()),
            e => Err(format!(
                "{}: given {servers:?}, its server {server} registered {e:?}",
                w.worker
            )),
        })
    }

    /// The pod's token: a TokenRequest for its ServiceAccount, audience `netbench`, bound to
    /// the pod (what the kubelet writes into the pod's projected token volume).
    async fn token(&self, w: &WorkerPod) -> Result<String, String> {
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(vec![AUDIENCE.to_string()]),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(w.pod.clone()),
                    uid: Some(w.uid.clone()),
                }),
                expiration_seconds: Some(TOKEN_SECONDS),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let sa: KubeApi<ServiceAccount> = KubeApi::namespaced(self.kube.clone(), &w.namespace);
        let answer = sa
            .create_token_request(&w.service_account, &PostParams::default(), &request)
            .await
            .map_err(|e| format!("TokenRequest for {}/{}: {e}", w.namespace, w.pod))?;
        answer
            .status
            .and_then(|s| s.token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| "TokenRequest answered without a token".into())
    }

    /// The base URL to use for the pods' `NETBENCH_OPERATOR_URL`.
    async fn base_url(&self, pod_url: &str) -> Result<String, String> {
        if let Some(u) = &self.operator_url {
            return Ok(u.trim_end_matches('/').to_string());
        }
        if let Some(u) = self
            .resolved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(pod_url)
        {
            return Ok(u.clone());
        }
        let resolved = self.resolve(pod_url).await?;
        self.resolved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(pod_url.to_string(), resolved.clone());
        Ok(resolved)
    }

    /// `http://NAME.NS.svc[.cluster.local]:PORT/...` -> `http://CLUSTER_IP:PORT/...`.
    async fn resolve(&self, pod_url: &str) -> Result<String, String> {
        let mut url = url::Url::parse(pod_url).map_err(|e| format!("{pod_url}: {e}"))?;
        let host = url.host_str().unwrap_or_default().to_string();
        let labels: Vec<&str> = host.split('.').collect();
        if let [name, namespace, "svc", ..] = labels.as_slice() {
            let services: KubeApi<Service> = KubeApi::namespaced(self.kube.clone(), namespace);
            let svc = services
                .get(name)
                .await
                .map_err(|e| format!("Service {namespace}/{name}: {e}"))?;
            let ip = svc
                .spec
                .and_then(|s| s.cluster_ip)
                .filter(|ip| !ip.is_empty() && ip != "None")
                .ok_or_else(|| format!("Service {namespace}/{name} has no ClusterIP"))?;
            url.set_host(Some(&ip))
                .map_err(|e| format!("{pod_url} with host {ip}: {e}"))?;
        }
        Ok(url.as_str().trim_end_matches('/').to_string())
    }

    fn write_lie(&self, outcome: &LieOutcome) {
        tracing::info!(
            lie = outcome.lie,
            status = outcome.status,
            refused = outcome.refused,
            worker = %outcome.worker,
            "lie answered: {}",
            outcome.answer
        );
        let Some(path) = &self.lies_file else { return };
        let _guard = self
            .lies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let line = match serde_json::to_string(outcome) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!("cannot encode a lie outcome: {e}");
                return;
            }
        };
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = written {
            tracing::warn!("{}: {e}", path.display());
        }
    }

    /// The phase of the worker's benchmark while it is still at `run`; None once it is gone
    /// or at another run.
    async fn phase(&self, w: &WorkerPod) -> Result<Option<String>, String> {
        let resource = benchmark_resource(w.kind == "egressbenchmark");
        let api: KubeApi<DynamicObject> =
            KubeApi::namespaced_with(self.kube.clone(), &w.namespace, &resource);
        let Some(obj) = api.get_opt(&w.benchmark).await.map_err(|e| {
            format!(
                "reading {} {}/{}: {e}",
                resource.kind, w.namespace, w.benchmark
            )
        })?
        else {
            return Ok(None);
        };
        let status = obj.data.get("status");
        let run = status.and_then(|s| s.get("runId")).and_then(|r| r.as_str());
        if run.is_some_and(|r| r != w.run) {
            return Ok(None);
        }
        Ok(status
            .and_then(|s| s.get("phase"))
            .and_then(|p| p.as_str())
            .map(str::to_string))
    }

    /// Waits (polling, with a deadline) until the benchmark's run ended: Succeeded, Failed, or
    /// the object moved on. Returns the phase seen last.
    async fn wait_run_end(&self, w: &WorkerPod) -> Result<String, String> {
        let deadline = Instant::now() + END_TIMEOUT;
        loop {
            match self.phase(w).await? {
                None => return Ok("gone".into()),
                Some(p) if p == "Succeeded" || p == "Failed" => return Ok(p),
                Some(_) => {}
            }
            if Instant::now() >= deadline {
                return Err(format!("the run did not end within {END_TIMEOUT:?}"));
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}

/// Whether an answer is worth another try: the real worker's rule (5xx, 408, and 404 for
/// register and report: a new leader learns of a run only when it reconciles it).
fn retried(status: u16, what: &str) -> bool {
    status >= 500 || status == 408 || (status == 404 && matches!(what, "register" | "report"))
}

fn text(body: &[u8]) -> String {
    String::from_utf8_lossy(body).chars().take(300).collect()
}

/// A worker's session with the operator.
struct Session<'a> {
    sim: &'a Sim,
    w: &'a WorkerPod,
    token: String,
    /// The operator's base URL as reached from here, and this run's prefix under it.
    base: String,
    run_url: String,
}

impl Session<'_> {
    async fn once(&self, method: Method, tail: &str, body: Option<Vec<u8>>) -> Answer {
        let url = format!("{}{tail}", self.run_url);
        self.sim
            .api
            .call(method, &url, &self.token, body, REQUEST_TIMEOUT)
            .await
    }

    /// One call with the real worker's retries; a final 4xx is an error.
    async fn call(
        &self,
        what: &'static str,
        method: Method,
        tail: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, bytes::Bytes), String> {
        let deadline = Instant::now() + RETRY_FOR;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let last = match self.once(method.clone(), tail, body.clone()).await {
                Ok((status, body)) if status < 400 => return Ok((status, body)),
                Ok((status, body)) if !retried(status, what) => {
                    return Err(format!("{what}: HTTP {status}: {}", text(&body)))
                }
                Ok((status, body)) => format!("HTTP {status}: {}", text(&body)),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(format!(
                    "{what}: no success after {attempts} attempts: {last}"
                ));
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    async fn register(&self) -> Result<(), String> {
        let req = RegisterRequest {
            version: PROTOCOL_VERSION,
            worker: self.w.worker.clone(),
            node: Some(self.w.node.clone()),
            step: self.w.step,
            role: self.w.role,
            listen: self.w.listen(),
            preflight_error: None,
        };
        let body = serde_json::to_vec(&req).map_err(|e| e.to_string())?;
        self.call("register", Method::POST, "/register", Some(body))
            .await
            .map(|_| ())
    }

    /// Asks until the barrier opens (each ask held until it opens, as the real worker's;
    /// re-registering after a 404, as after an operator
    /// restart), then sleeps until the common start. Returns the barrier's answer.
    async fn barrier(&self) -> Result<BarrierResponse, String> {
        let deadline = Instant::now() + BARRIER_TIMEOUT;
        let polled = format!("/barrier?worker={}&step={}", self.w.worker, self.w.step);
        let held_tail = protocol::worker::barrier_tail(&self.w.worker, self.w.step);
        loop {
            // A held ask that failed in a way the real worker retries is asked again below.
            let asked = match self.sim.api.try_hold() {
                Some(held) => {
                    let url = format!("{}{held_tail}", self.run_url);
                    let api = &self.sim.api;
                    match api
                        .call_held(&held, Method::GET, &url, &self.token, REQUEST_TIMEOUT)
                        .await
                    {
                        Ok((status, body)) if status < 400 => Some(Ok(body)),
                        Ok((status, body)) if !retried(status, "barrier") => {
                            Some(Err(format!("barrier: HTTP {status}: {}", text(&body))))
                        }
                        Ok(_) | Err(_) => None,
                    }
                }
                None => Some(
                    self.call("barrier", Method::GET, &polled, None)
                        .await
                        .map(|(_, body)| body),
                ),
            };
            match asked {
                None => {}
                Some(Ok(body)) => {
                    let b: BarrierResponse = serde_json::from_slice(&body)
                        .map_err(|e| format!("barrier: malformed answer: {e}"))?;
                    if let Some(at) = b.start_at_unix_ms {
                        sleep_until_unix_ms(at).await;
                        return Ok(b);
                    }
                }
                Some(Err(e)) if e.starts_with("barrier: HTTP 404") => self.register().await?,
                Some(Err(e)) => return Err(e),
            }
            if Instant::now() >= deadline {
                return Err(format!("the barrier stayed closed for {BARRIER_TIMEOUT:?}"));
            }
            tokio::time::sleep(BARRIER_POLL).await;
        }
    }

    /// Best effort, like the real worker: a lost update costs a point on a live chart.
    async fn progress(&self, update: &ProgressUpdate) {
        let Ok(body) = serde_json::to_vec(update) else {
            return;
        };
        let url = format!("{}/progress", self.run_url);
        let _ = self
            .sim
            .api
            .call(
                Method::POST,
                &url,
                &self.token,
                Some(body),
                PROGRESS_TIMEOUT,
            )
            .await;
    }

    /// Posts `report` once to `run` (ours unless a lie says otherwise) and records the answer.
    async fn lie(&self, lie: &'static str, run: &str, report: &FinalReport) {
        let answer = match serde_json::to_vec(report) {
            Ok(body) => {
                let url = format!("{}{}/report", self.base, protocol::worker::run_path(run));
                self.sim
                    .api
                    .call(Method::POST, &url, &self.token, Some(body), REQUEST_TIMEOUT)
                    .await
            }
            Err(e) => Err(e.to_string()),
        };
        let (status, answer) = match answer {
            Ok((s, b)) => (s, text(&b)),
            Err(e) => (0, e),
        };
        self.sim.write_lie(&LieOutcome {
            namespace: self.w.namespace.clone(),
            benchmark: self.w.benchmark.clone(),
            run: self.w.run.clone(),
            worker: self.w.worker.clone(),
            lie,
            status,
            answer,
            refused: (400..500).contains(&status),
        });
    }
}

async fn sleep_until_unix_ms(at: u64) {
    let now = now_unix_ms();
    if at > now {
        tokio::time::sleep(Duration::from_millis(at - now)).await;
    }
}

/// What the worker measured, ready to report.
struct Measured {
    report: serde_json::Value,
    /// HTTP: every latency sample, each one request.
    samples: Vec<u64>,
    /// Request/response: each latency with the count of transactions it stands for.
    counted: Vec<(u64, u64)>,
    receiver_bytes: u64,
    /// The figure a topology case's pair row shows for this client (receiver bits/s, or
    /// transactions/s for request/response).
    main_figure: f64,
}

/// What a worker draws before the barrier (that CPU work must not delay the start).
enum Drawn {
    Http(Vec<u64>),
    Rr(report::RrDraw),
    Udp(Vec<protocol::udp::UdpStream>),
    Nothing,
}

impl Drawn {
    fn of(sim: &Sim, work: &Work, rng: &mut StdRng) -> Drawn {
        match work {
            Work::Http(h) => {
                let n = report::http_requests(h, &sim.model, sim.max_samples);
                Drawn::Http(report::sample_latencies(&sim.model, n, rng))
            }
            Work::Rr(r) => Drawn::Rr(report::draw_rr(
                r,
                &r.model(&sim.model),
                sim.max_samples,
                rng,
            )),
            Work::Udp(u) => Drawn::Udp(report::udp_streams(u, sim.gbps, rng)),
            Work::Tcp(_) | Work::Server { .. } | Work::Unsupported(_) => Drawn::Nothing,
        }
    }
}

/// What a worker's progress says each second (the real workers' fields for its test).
fn progress_figures(
    sim: &Sim,
    w: &WorkerPod,
    drawn: &Drawn,
    live: Option<LiveLatency>,
    run_s: f64,
) -> ProgressUpdate {
    let base = ProgressUpdate {
        version: PROTOCOL_VERSION,
        worker: w.worker.clone(),
        step: w.step,
        ..ProgressUpdate::default()
    };
    match drawn {
        Drawn::Http(samples) => ProgressUpdate {
            rps: samples.len() as f64 / run_s.max(1e-3),
            errors_per_second: Some(0.0),
            latency: live,
            ..base
        },
        Drawn::Rr(d) => ProgressUpdate {
            transactions_per_second: Some(d.transactions() as f64 / run_s.max(1e-3)),
            ..base
        },
        Drawn::Udp(streams) => {
            let (bits_per_second, loss_percent) = report::udp_progress(streams);
            ProgressUpdate {
                bits_per_second,
                loss_percent,
                ..base
            }
        }
        Drawn::Nothing if matches!(w.work, Work::Tcp(_)) => ProgressUpdate {
            bits_per_second: sim.gbps * 1e9,
            ..base
        },
        Drawn::Nothing => base,
    }
}

/// Plays one worker pod to the end. Ok(what happened) or Err(why it stopped).
pub async fn play(sim: Arc<Sim>, w: WorkerPod) -> Result<String, String> {
    if let Work::Unsupported(why) = &w.work {
        return Err(format!("not simulated: {why}"));
    }
    let token = sim.token(&w).await?;
    let base = sim.base_url(&w.operator_url).await?;
    let session = Session {
        sim: &sim,
        w: &w,
        token,
        run_url: format!("{base}{}", protocol::worker::run_path(&w.run)),
        base,
    };
    // The samples are drawn before the barrier: that CPU work must not delay the start.
    let mut rng = StdRng::from_os_rng();
    let drawn = Drawn::of(&sim, &w.work, &mut rng);
    sim.note_listen(&w);
    session.register().await?;
    let barrier = session.barrier().await?;
    let started_at = now_unix_ms();
    let pairing = sim.pairing(&w, &barrier.servers);
    if w.role == Role::Server {
        return Ok("served (servers send no report)".into());
    }
    let live = match &drawn {
        Drawn::Http(samples) => report::histogram_of(samples)
            .ok()
            .filter(|h| !h.is_empty())
            .map(|h| LiveLatency {
                p50_ms: h.value_at_quantile(0.5) as f64 / 1000.0,
                p99_ms: h.value_at_quantile(0.99) as f64 / 1000.0,
                max_ms: h.max() as f64 / 1000.0,
            }),
        _ => None,
    };
    let run_ms = (w.work.run_seconds() * 1000.0).round() as u64;
    let seconds = run_ms.div_ceil(1000);
    let every_second = progress_figures(&sim, &w, &drawn, live, run_ms as f64 / 1000.0);
    let requests = match &drawn {
        Drawn::Http(samples) => samples.len() as u64,
        _ => 0,
    };
    for second in 1..=seconds {
        sleep_until_unix_ms(started_at + (second * 1000).min(run_ms)).await;
        let update = ProgressUpdate {
            elapsed_s: (second * 1000).min(run_ms) as f64 / 1000.0,
            requests: ((second as f64 * every_second.rps) as u64).min(requests),
            ..every_second.clone()
        };
        session.progress(&update).await;
    }
    sleep_until_unix_ms(started_at + run_ms).await;
    let measured = measure(&sim, &w, started_at, &barrier, drawn, &mut rng)?;
    let final_report = FinalReport::new(
        &w.worker,
        Some(&w.node),
        w.step,
        started_at,
        measured.report.clone(),
    );
    let first = w.index() == Some(0);
    if first && sim.late_namespaces.contains(&w.namespace) {
        let phase = sim.wait_run_end(&w).await?;
        session.lie("late", &w.run, &final_report).await;
        return Ok(format!(
            "withheld its report; run ended {phase}; posted it late"
        ));
    }
    let lying = first && sim.lie_namespaces.contains(&w.namespace);
    if lying {
        let mut other = final_report.clone();
        other.worker = other_worker(&w.worker);
        session.lie("foreign-worker", &w.run, &other).await;
        let mut next = final_report.clone();
        next.step = w.step + 1;
        session.lie("wrong-step", &w.run, &next).await;
        session
            .lie("other-run", &format!("{}x", w.run), &final_report)
            .await;
    }
    let body = serde_json::to_vec(&final_report).map_err(|e| e.to_string())?;
    session
        .call("report", Method::POST, "/report", Some(body))
        .await?;
    let key = StepKey {
        namespace: w.namespace.clone(),
        benchmark: w.benchmark.clone(),
        run: w.run.clone(),
        step: w.step,
    };
    sim.recorder.add(
        &key,
        &Sent {
            samples: &measured.samples,
            counted: &measured.counted,
            receiver_bytes: measured.receiver_bytes,
            main_figure: measured.main_figure,
            start_at_unix_ms: barrier.start_at_unix_ms,
            started_at_unix_ms: started_at,
            pairing,
        },
    )?;
    if lying {
        let phase = sim.wait_run_end(&w).await?;
        session.lie("after-end", &w.run, &final_report).await;
        return Ok(format!("reported; lied; run ended {phase}"));
    }
    Ok("reported".into())
}

/// Another worker of the same step: w1 for w0 (any other index works as well).
fn other_worker(worker: &str) -> String {
    match worker.rsplit_once("-w") {
        Some((stem, "0")) => format!("{stem}-w1"),
        Some((stem, _)) => format!("{stem}-w0"),
        None => format!("{worker}-other"),
    }
}

fn measure(
    sim: &Sim,
    w: &WorkerPod,
    started_at: u64,
    barrier: &BarrierResponse,
    drawn: Drawn,
    rng: &mut StdRng,
) -> Result<Measured, String> {
    // The server the barrier named (a client connects to the first), as the report names it.
    let server = || {
        barrier
            .servers
            .first()
            .cloned()
            .unwrap_or_else(|| "external:5201".into())
    };
    match (&w.work, drawn) {
        (Work::Http(h), Drawn::Http(samples)) => {
            let window_start = started_at + (h.warmup_s * 1000.0).round() as u64;
            let r = report::http_report(h, window_start, &samples)?;
            Ok(Measured {
                report: report::http_json(&r)?,
                samples,
                counted: vec![],
                receiver_bytes: 0,
                main_figure: 0.0,
            })
        }
        (Work::Tcp(t), _) => {
            let r = report::tcp_report(t, &server(), started_at, sim.gbps, rng);
            Ok(Measured {
                report: report::tcp_json(&r)?,
                samples: vec![],
                counted: vec![],
                receiver_bytes: r.receiver.bytes,
                main_figure: r.receiver.bits_per_second,
            })
        }
        (Work::Rr(shape), Drawn::Rr(draw)) => {
            let r = report::rr_report(shape, &draw, &server(), started_at, rng)?;
            Ok(Measured {
                report: report::rr_json(&r)?,
                samples: vec![],
                counted: draw.answered,
                receiver_bytes: 0,
                main_figure: r.transactions_per_second,
            })
        }
        (Work::Udp(shape), Drawn::Udp(streams)) => {
            let r = report::udp_report(shape, streams, &server(), started_at, rng);
            Ok(Measured {
                report: report::udp_json(&r)?,
                samples: vec![],
                counted: vec![],
                receiver_bytes: r.received.bytes,
                main_figure: r.received.bits_per_second,
            })
        }
        _ => Err("nothing to report".into()),
    }
}

/// The API resource of IngressBenchmark, or EgressBenchmark when `egress`, for untyped access.
pub fn benchmark_resource(egress: bool) -> ApiResource {
    let (kind, plural) = if egress {
        ("EgressBenchmark", "egressbenchmarks")
    } else {
        ("IngressBenchmark", "ingressbenchmarks")
    };
    ApiResource {
        group: "netbench.io".into(),
        version: "v1alpha1".into(),
        api_version: "netbench.io/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_workers_retry_rule() {
        assert!(retried(404, "register") && retried(404, "report"));
        assert!(!retried(404, "barrier"));
        assert!(retried(503, "progress") && retried(408, "barrier"));
        for final_ in [400, 401, 403, 409, 413, 422] {
            assert!(!retried(final_, "report"));
        }
    }

    #[test]
    fn another_worker_of_the_step() {
        assert_eq!(other_worker("b-r-s0-w0"), "b-r-s0-w1");
        assert_eq!(other_worker("b-r-s0-w7"), "b-r-s0-w0");
    }
}
