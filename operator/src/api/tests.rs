//! The worker API's refusals, checked through the real router (no network). Report storage is
//! replaced by an in-memory sink and the TokenReview by a fixed table of identities here; the
//! e2e tests use a real cluster for both.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use protocol::worker::*;
use tower::ServiceExt;

use super::metrics::ApiMetrics;
use super::*;
use crate::store::registry::Registry;
use crate::store::registry::RunSpec;
use crate::testing::{register_request, run_spec, FixedTokens, MemorySink};

/// The longest a closed barrier holds an answer in these tests (as in the operator's default).
pub(super) const BARRIER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn fixed_tokens() -> FixedTokens {
    FixedTokens::new([
        ("tok", "w0"),
        ("tok2", "r2-w0"),
        ("tok2b", "r2-w1"),
        ("tok-elsewhere", "somebody"),
    ])
}

fn setup() -> (Router, Arc<MemorySink>, Arc<Metrics>) {
    let (app, sink, metrics, _) = setup_with_runs();
    (app, sink, metrics)
}

pub(super) fn setup_with_runs() -> (Router, Arc<MemorySink>, Arc<Metrics>, Arc<Registry>) {
    let runs = Arc::new(Registry::default());
    runs.announce("run1", run_spec(&[("w0", Role::Client)]));
    runs.announce("run2", run2_spec());
    let sink = Arc::new(MemorySink::default());
    let metrics = Arc::new(Metrics::new());
    let (wake, _rx) = tokio::sync::mpsc::unbounded_channel();
    let state = ApiState {
        auth: Arc::new(fixed_tokens()),
        runs: runs.clone(),
        metrics: metrics.clone(),
        sink: sink.clone(),
        wake,
        ready: Arc::new(AtomicBool::new(true)),
        barrier_wait: BARRIER_WAIT,
    };
    (router(state), sink, metrics, runs)
}

pub(super) async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    token: &str,
    body: Vec<u8>,
) -> (StatusCode, String) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

pub(super) async fn post(
    app: &Router,
    uri: &str,
    token: &str,
    body: Vec<u8>,
) -> (StatusCode, String) {
    call(app, "POST", uri, token, body).await
}

pub(super) async fn get(app: &Router, uri: &str, token: &str) -> (StatusCode, String) {
    call(app, "GET", uri, token, vec![]).await
}

/// `worker`'s http report (see [`http_report`]) posted to `uri` with `token`.
pub(super) async fn post_report(
    app: &Router,
    uri: &str,
    token: &str,
    worker: &str,
) -> (StatusCode, String) {
    post(app, uri, token, report_body(worker, http_report())).await
}

pub(super) fn register_body(worker: &str) -> Vec<u8> {
    serde_json::to_vec(&register_request(worker)).unwrap()
}

pub(super) fn http_report() -> serde_json::Value {
    // A real report from the engine's own types: one request of 1 ms.
    crate::testing::reports::http_report(&[1000], 0)
}

pub(super) fn report_body(worker: &str, report: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&FinalReport::new(worker, None, 0, 1, report)).unwrap()
}

#[tokio::test]
async fn register_then_barrier_opens() {
    let (app, _, _) = setup();
    let (code, _) = post(&app, "/v1/runs/run1/register", "tok", register_body("w0")).await;
    assert_eq!(code, StatusCode::OK);
    let (code, body) = get(&app, "/v1/runs/run1/barrier?worker=w0&step=0", "tok").await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let b: BarrierResponse = serde_json::from_str(&body).unwrap();
    assert!(b.start_at_unix_ms.is_some());
}

/// run2's barrier as r2-w0 asks for it, held up to `wait_ms`, in a task of its own.
fn ask_barrier(app: &Router, wait_ms: &str) -> tokio::task::JoinHandle<(StatusCode, String)> {
    let app = app.clone();
    let uri = format!("/v1/runs/run2/barrier?worker=r2-w0&step=0&waitMs={wait_ms}");
    tokio::spawn(async move { get(&app, &uri, "tok2").await })
}

/// Worker r2-w0 (of run2's two) registers.
async fn register_r2_w0(app: &Router) {
    let (code, _) = post(
        app,
        "/v1/runs/run2/register",
        "tok2",
        register_body("r2-w0"),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
}

/// `ask_barrier` with a 5 s wait, checked to be held 100 ms later (on the paused clock).
async fn held_ask(app: &Router) -> tokio::task::JoinHandle<(StatusCode, String)> {
    let asked = ask_barrier(app, "5000");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!asked.is_finished(), "a closed barrier holds the answer");
    asked
}

fn start_of(body: &str) -> Option<u64> {
    serde_json::from_str::<BarrierResponse>(body)
        .unwrap()
        .start_at_unix_ms
}

#[tokio::test(start_paused = true)]
async fn a_worker_waiting_at_the_barrier_learns_the_start_as_the_last_worker_registers() {
    let (app, _, _, _) = setup_with_runs();
    register_r2_w0(&app).await;
    let began = tokio::time::Instant::now();
    let asked = held_ask(&app).await;
    let (code, _) = post(
        &app,
        "/v1/runs/run2/register",
        "tok2b",
        register_body("r2-w1"),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    let (code, body) = asked.await.unwrap();
    assert_eq!(code, StatusCode::OK, "{body}");
    assert!(start_of(&body).is_some());
    assert!(
        began.elapsed() < std::time::Duration::from_secs(1),
        "answered as it opened"
    );
}

#[tokio::test(start_paused = true)]
async fn a_closed_barrier_holds_its_answer_at_most_the_operators_wait() {
    let (app, _, _, _) = setup_with_runs();
    register_r2_w0(&app).await;
    // Without waitMs (a worker that polls): at once.
    let began = tokio::time::Instant::now();
    let (code, body) = get(&app, "/v1/runs/run2/barrier?worker=r2-w0&step=0", "tok2").await;
    assert_eq!((code, start_of(&body)), (StatusCode::ACCEPTED, None));
    assert_eq!(began.elapsed(), std::time::Duration::ZERO);
    // A wait beyond the operator's: the operator's.
    let (code, body) = ask_barrier(&app, "86400000").await.unwrap();
    assert_eq!((code, start_of(&body)), (StatusCode::ACCEPTED, None));
    assert_eq!(began.elapsed(), BARRIER_WAIT);
    // A shorter one: that.
    let (code, _) = ask_barrier(&app, "250").await.unwrap();
    assert_eq!(code, StatusCode::ACCEPTED);
    assert_eq!(
        began.elapsed(),
        BARRIER_WAIT + std::time::Duration::from_millis(250)
    );
}

#[tokio::test(start_paused = true)]
async fn a_new_step_ends_a_wait_at_the_barrier_with_its_refusal() {
    let (app, _, metrics, runs) = setup_with_runs();
    register_r2_w0(&app).await;
    let began = tokio::time::Instant::now();
    let asked = held_ask(&app).await;
    runs.announce(
        "run2",
        RunSpec {
            step: 1,
            ..run2_spec()
        },
    );
    let (code, body) = asked.await.unwrap();
    assert_eq!(code, StatusCode::CONFLICT, "{body}");
    assert!(began.elapsed() < std::time::Duration::from_secs(1));
    assert_eq!(rejected(&metrics, "wrong_step"), 1);
    // And a run forgotten while its worker waits: unknown.
    runs.announce("run2", run2_spec());
    register_r2_w0(&app).await;
    let began = tokio::time::Instant::now();
    let asked = held_ask(&app).await;
    runs.forget("run2");
    let (code, body) = asked.await.unwrap();
    assert_eq!(code, StatusCode::NOT_FOUND, "{body}");
    assert!(began.elapsed() < std::time::Duration::from_secs(1));
    assert_eq!(rejected(&metrics, "unknown_run"), 1);
}

#[tokio::test]
async fn a_barrier_wait_that_is_not_a_count_of_ms_is_refused() {
    let (app, _, metrics) = setup();
    register_r2_w0(&app).await;
    for wait in ["-1", "1.5", "99999999999999999999", "soon"] {
        let uri = format!("/v1/runs/run2/barrier?worker=r2-w0&step=0&waitMs={wait}");
        let (code, body) = get(&app, &uri, "tok2").await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{wait}: {body}");
        assert!(body.contains("waitMs"), "{wait}: {body}");
    }
    assert_eq!(rejected(&metrics, "malformed"), 4);
}

#[tokio::test]
async fn refusals_are_4xx_and_counted() {
    let (app, sink, metrics) = setup();
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        Vec<u8>,
        StatusCode,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/v1/runs/run1/register",
            "wrong",
            register_body("w0"),
            StatusCode::UNAUTHORIZED,
            "bad_token",
        ),
        (
            "POST",
            "/v1/runs/nope/register",
            "tok",
            register_body("w0"),
            StatusCode::NOT_FOUND,
            "unknown_run",
        ),
        (
            "POST",
            "/v1/runs/run1/register",
            "tok",
            register_body("intruder"),
            StatusCode::FORBIDDEN,
            "wrong_worker",
        ),
        (
            "POST",
            "/v1/runs/run1/register",
            "tok",
            b"{not json".to_vec(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "malformed",
        ),
        (
            "POST",
            "/v1/runs/run1/register",
            "tok",
            vec![b' '; MAX_SMALL_BODY_BYTES + 1],
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
        (
            "POST",
            "/v1/runs/run1/report",
            "tok",
            report_body("w0", serde_json::json!({"version": 1, "kind": "http"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "malformed",
        ),
        (
            "POST",
            "/v1/runs/run1/report",
            "tok",
            report_body("w0", serde_json::json!({"version": 9})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "malformed",
        ),
        (
            "POST",
            "/v1/runs/run1/report",
            "bad",
            report_body("w0", http_report()),
            StatusCode::UNAUTHORIZED,
            "bad_token",
        ),
    ];
    for (method, uri, token, body, want, reason) in cases {
        let before = rejected(&metrics, reason);
        let (code, text) = call(&app, method, uri, token, body).await;
        assert_eq!(code, want, "{uri} {reason}: {text}");
        assert!(rejected(&metrics, reason) > before, "{reason} counted");
    }
    assert!(
        sink.0.lock().unwrap().is_empty(),
        "nothing refused was stored"
    );
}

#[tokio::test]
async fn a_well_formed_report_is_stored() {
    let (app, sink, _) = setup();
    let (code, text) = post_report(&app, "/v1/runs/run1/report", "tok", "w0").await;
    assert_eq!(code, StatusCode::NO_CONTENT, "{text}");
    assert_eq!(sink.0.lock().unwrap().len(), 1);
}

/// An HDR V2 header claiming a 4 GiB payload (and nothing after it), base64.
fn histogram_claiming_4_gib() -> String {
    use base64::Engine as _;
    let mut v2 = Vec::new();
    v2.extend_from_slice(&0x1c84_9313u32.to_be_bytes()); // V2 cookie
    v2.extend_from_slice(&u32::MAX.to_be_bytes()); // payload length
    v2.extend_from_slice(&0u32.to_be_bytes()); // normalizing offset
    v2.extend_from_slice(&3u32.to_be_bytes()); // significant digits
    v2.extend_from_slice(&1u64.to_be_bytes()); // lowest
    v2.extend_from_slice(&3_600_000_000u64.to_be_bytes()); // highest
    v2.extend_from_slice(&1.0f64.to_be_bytes()); // conversion ratio
    base64::engine::general_purpose::STANDARD.encode(v2)
}

#[tokio::test]
async fn invalid_reports_are_400_counted_and_the_worker_can_report_again() {
    let (app, sink, metrics) = setup();
    let mut huge = http_report();
    huge["histogram"] = histogram_claiming_4_gib().into();
    let mut inconsistent = http_report();
    inconsistent["counters"]["requests"] = 5.into();
    let cases = [
        (
            huge,
            "report.histogram: histogram claims a payload of 4294967295 bytes",
        ),
        (
            inconsistent,
            "report.counters.requests: 5 requests but the latency histogram holds 1 samples",
        ),
    ];
    for (report, message) in cases {
        let before = metrics
            .family::<ApiMetrics>()
            .rejected
            .with_label_values(&["invalid_report"])
            .get();
        let started = std::time::Instant::now();
        let (code, text) = post(
            &app,
            "/v1/runs/run1/report",
            "tok",
            report_body("w0", report),
        )
        .await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{text}");
        let body: ApiError = serde_json::from_str(&text).unwrap();
        assert!(
            body.error.contains(message),
            "{message:?} not in {:?}",
            body.error
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "refused slowly"
        );
        assert_eq!(
            metrics
                .family::<ApiMetrics>()
                .rejected
                .with_label_values(&["invalid_report"])
                .get(),
            before + 1
        );
    }
    assert!(
        sink.0.lock().unwrap().is_empty(),
        "nothing invalid was stored"
    );
    assert!(metrics
        .render()
        .contains(r#"netbench_api_rejected_total{reason="invalid_report"} 2"#));
    let (code, text) = post_report(&app, "/v1/runs/run1/report", "tok", "w0").await;
    assert_eq!(code, StatusCode::NO_CONTENT, "{text}");
    assert_eq!(sink.0.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn metrics_and_health() {
    let (app, _, _) = setup();
    assert_eq!(get(&app, "/healthz", "").await.0, StatusCode::OK);
    assert_eq!(get(&app, "/readyz", "").await.0, StatusCode::OK);
    let (code, body) = get(&app, "/metrics", "").await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        body.contains(r#"netbench_api_requests_total{code="200",endpoint="healthz"} 1"#),
        "{body}"
    );
}

/// w0's progress `update` (this protocol version, worker w0) posted to run1.
async fn post_progress(app: &Router, update: ProgressUpdate) -> (StatusCode, String) {
    let update = ProgressUpdate {
        version: PROTOCOL_VERSION,
        worker: "w0".into(),
        ..update
    };
    let body = serde_json::to_vec(&update).unwrap();
    post(app, "/v1/runs/run1/progress", "tok", body).await
}

/// The `netbench_*` sample lines of /metrics that mention `needle`.
fn samples(metrics: &Metrics, needle: &str) -> Vec<String> {
    metrics
        .render()
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(needle))
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn http_progress_sets_live_latency_and_errors_until_the_report() {
    let (app, _, metrics) = setup();
    let update = ProgressUpdate {
        step: 0,
        elapsed_s: 2.0,
        requests: 2000,
        errors: 3,
        rps: 1000.0,
        errors_per_second: Some(3.0),
        latency: Some(LiveLatency {
            p50_ms: 0.25,
            p99_ms: 4.0,
            max_ms: 12.5,
        }),
        ..Default::default()
    };
    let (code, text) = post_progress(&app, update).await;
    assert_eq!(code, StatusCode::NO_CONTENT, "{text}");
    let (_, body) = get(&app, "/metrics", "").await;
    for line in [
        r#"netbench_ingress_live_latency_seconds{name="b",namespace="ns",quantile="0.5",worker="w0"} 0.00025"#,
        r#"netbench_ingress_live_latency_seconds{name="b",namespace="ns",quantile="0.99",worker="w0"} 0.004"#,
        r#"netbench_ingress_live_latency_seconds{name="b",namespace="ns",quantile="1",worker="w0"} 0.0125"#,
        r#"netbench_ingress_live_errors_per_second{name="b",namespace="ns",worker="w0"} 3"#,
        r#"netbench_live_rps{name="b",namespace="ns",worker="w0"} 1000"#,
    ] {
        assert!(
            body.lines().any(|l| l == line),
            "missing {line} in:\n{body}"
        );
    }

    // The stored report ends the worker's live series, the new ones included.
    let (code, text) = post_report(&app, "/v1/runs/run1/report", "tok", "w0").await;
    assert_eq!(code, StatusCode::NO_CONTENT, "{text}");
    assert_eq!(samples(&metrics, "worker=\"w0\""), Vec::<String>::new());
}

#[tokio::test]
async fn progress_without_the_live_fields_leaves_their_series_unset() {
    // A TCP worker, or an HTTP worker from before the fields existed.
    let (app, _, metrics) = setup();
    let update = ProgressUpdate {
        rps: 10.0,
        ..Default::default()
    };
    let (code, text) = post_progress(&app, update).await;
    assert_eq!(code, StatusCode::NO_CONTENT, "{text}");
    assert_eq!(samples(&metrics, "netbench_live_rps").len(), 1);
    assert_eq!(
        samples(&metrics, "netbench_ingress_live_"),
        Vec::<String>::new()
    );
}

/// A second run with a token of its own.
fn run2_spec() -> RunSpec {
    RunSpec {
        benchmark: "b2".into(),
        uid: "u2".into(),
        ..run_spec(&[("r2-w0", Role::Client), ("r2-w1", Role::Client)])
    }
}

pub(super) fn rejected(metrics: &Metrics, reason: &str) -> u64 {
    metrics
        .family::<ApiMetrics>()
        .rejected
        .with_label_values(&[reason])
        .get()
}

/// [`post_report`], which must be refused 403.
async fn forbidden_report(app: &Router, uri: &str, token: &str, worker: &str) {
    let (code, text) = post_report(app, uri, token, worker).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{text}");
}

#[tokio::test]
async fn a_worker_of_one_run_is_refused_on_another() {
    let (app, sink, metrics) = setup();
    let uri = "/v1/runs/run2/report";
    forbidden_report(&app, uri, "tok", "r2-w0").await;
    assert_eq!(rejected(&metrics, "not_a_worker"), 1);
    let (code, _) = post_report(&app, uri, "tok2", "r2-w0").await;
    assert_eq!(code, StatusCode::NO_CONTENT, "its own token works");
    assert_eq!(sink.0.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_worker_speaks_only_for_itself() {
    let (app, sink, metrics) = setup();
    let report = "/v1/runs/run2/report";
    forbidden_report(&app, report, "tok2b", "r2-w0").await;
    let mut register = register_request("r2-w0");
    let body = serde_json::to_vec(&register).unwrap();
    let (code, _) = post(&app, "/v1/runs/run2/register", "tok2b", body).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    let barrier = "/v1/runs/run2/barrier?worker=r2-w0&step=0";
    let (code, _) = get(&app, barrier, "tok2b").await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(rejected(&metrics, "wrong_worker"), 3);
    // Nor in another role than the run gives it.
    register.role = Role::Server;
    let body = serde_json::to_vec(&register).unwrap();
    let (code, _) = post(&app, "/v1/runs/run2/register", "tok2", body).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(rejected(&metrics, "wrong_role"), 1);
    // A valid identity that is no worker of the run at all.
    forbidden_report(&app, report, "tok-elsewhere", "r2-w0").await;
    assert_eq!(rejected(&metrics, "not_a_worker"), 1);
    assert!(sink.0.lock().unwrap().is_empty());
}

/// A request body that records whether anything polled it.
fn watched_body(polled: Arc<std::sync::atomic::AtomicBool>) -> Body {
    let stream = futures::stream::poll_fn(move |_| {
        polled.store(true, Ordering::SeqCst);
        std::task::Poll::Ready(Some(Ok::<_, std::io::Error>(bytes_of(b"{}"))))
    });
    Body::from_stream(stream)
}

fn bytes_of(b: &'static [u8]) -> axum::body::Bytes {
    axum::body::Bytes::from_static(b)
}

#[tokio::test]
async fn unauthenticated_bodies_are_never_read() {
    let (app, _, metrics) = setup();
    for (auth, reason) in [
        (None, "unauthenticated"),
        (Some("Bearer wrong"), "bad_token"),
        (Some("Basic dG9rOg=="), "unauthenticated"),
    ] {
        let polled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut req = Request::builder()
            .method("POST")
            .uri("/v1/runs/run1/report")
            .header("content-type", "application/json")
            .header("content-length", "104857600");
        if let Some(auth) = auth {
            req = req.header("authorization", auth);
        }
        let req = req.body(watched_body(polled.clone())).unwrap();
        let before = rejected(&metrics, reason);
        let resp = app.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{auth:?}");
        assert_eq!(resp.headers()["connection"], "close");
        assert!(
            !polled.load(Ordering::SeqCst),
            "{auth:?}: the body was read"
        );
        assert_eq!(rejected(&metrics, reason), before + 1, "{reason} counted");
    }
}

#[tokio::test]
async fn a_declared_body_over_the_limit_is_refused_unread() {
    let (app, _, metrics) = setup();
    for (uri, limit) in [
        ("/v1/runs/run1/report", MAX_REPORT_BYTES),
        ("/v1/runs/run1/register", MAX_SMALL_BODY_BYTES),
        ("/v1/runs/run1/progress", MAX_SMALL_BODY_BYTES),
    ] {
        let polled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let req = Request::builder()
            .method("POST")
            .uri(uri)
            .header("authorization", "Bearer tok")
            .header("content-length", (limit + 1).to_string())
            .body(watched_body(polled.clone()))
            .unwrap();
        let before = rejected(&metrics, "too_large");
        let resp = app.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE, "{uri}");
        assert!(!polled.load(Ordering::SeqCst), "{uri}: the body was read");
        assert_eq!(rejected(&metrics, "too_large"), before + 1, "counted once");
    }
}

#[tokio::test]
async fn a_streamed_report_over_the_limit_is_refused() {
    let (app, sink, metrics) = setup();
    let mut big = report_body("w0", http_report());
    big.resize(MAX_REPORT_BYTES + 1, b' ');
    let (code, text) = post(&app, "/v1/runs/run1/report", "tok", big).await;
    assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
    assert_eq!(rejected(&metrics, "too_large"), 1, "counted once");
    assert!(sink.0.lock().unwrap().is_empty());
}

/// Workers register while the reconciler forgets and re-announces the run: every answer is a
/// registration or a 404, and the process is still there to give it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forget_during_register_is_refused_not_a_panic() {
    let (app, _, _, runs) = setup_with_runs();
    let spec = runs.spec("run1").unwrap();
    let churn = tokio::spawn({
        let runs = runs.clone();
        async move {
            for _ in 0..300 {
                runs.forget("run1");
                tokio::task::yield_now().await;
                runs.announce("run1", RunSpec::clone(&spec));
                tokio::task::yield_now().await;
            }
        }
    });
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let mut codes = std::collections::BTreeSet::new();
                for _ in 0..100 {
                    let uri = "/v1/runs/run1/register";
                    codes.insert(post(&app, uri, "tok", register_body("w0")).await.0);
                }
                codes
            })
        })
        .collect();
    churn.await.unwrap();
    for w in workers {
        for code in w.await.unwrap() {
            assert!(
                code == StatusCode::OK || code == StatusCode::NOT_FOUND,
                "{code}"
            );
        }
    }
}

#[tokio::test]
async fn every_rejection_reason_is_exported_from_the_start() {
    let (app, _, _) = setup();
    let (_, body) = get(&app, "/metrics", "").await;
    for reason in REASONS {
        let line = format!("netbench_api_rejected_total{{reason=\"{reason}\"}} 0");
        assert!(body.lines().any(|l| l == line), "missing {line}");
    }
}

/// Every log line a handler writes names the run, the benchmark and the worker (the handler's
/// span), in both log formats; refusals too, after authentication.
#[tokio::test]
async fn handler_log_lines_carry_the_run_benchmark_and_worker() {
    use crate::testing::log_capture::{capture, line_with};
    /// The lines logged (as JSON when `json`) while `call` is answered, which must be `want`.
    async fn logged(
        json: bool,
        want: StatusCode,
        call: impl std::future::Future<Output = (StatusCode, String)>,
    ) -> Vec<String> {
        let ((code, text), lines) = capture(json, call).await;
        assert_eq!(code, want, "{text}");
        lines
    }
    let (app, _, _) = setup();
    let report = "/v1/runs/run1/report";
    let call = post_report(&app, report, "tok", "w0");
    let lines = logged(false, StatusCode::NO_CONTENT, call).await;
    let stored = line_with(&lines, "report stored");
    for field in [
        "run=run1",
        "kind=IngressBenchmark",
        "namespace=ns",
        "benchmark=b",
        "worker=w0",
    ] {
        assert!(stored.contains(field), "{field} missing: {stored}");
    }

    // JSON (Helm logFormat=json): the fields are in the line's span.
    let call = post(&app, "/v1/runs/run1/register", "tok", register_body("w0"));
    let lines = logged(true, StatusCode::OK, call).await;
    let registered: serde_json::Value = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["fields"]["message"] == "worker registered")
        .unwrap_or_else(|| panic!("no 'worker registered' line in {lines:#?}"));
    let span = &registered["span"];
    assert_eq!(span["name"], "register", "{registered}");
    assert_eq!(span["run"], "run1", "{registered}");
    assert_eq!(span["kind"], "IngressBenchmark", "{registered}");
    assert_eq!(span["namespace"], "ns", "{registered}");
    assert_eq!(span["benchmark"], "b", "{registered}");
    assert_eq!(span["worker"], "w0", "{registered}");

    // A refusal inside a handler (a worker speaking for another) is logged with its span.
    let call = post_report(&app, report, "tok", "somebody-else");
    let lines = logged(false, StatusCode::FORBIDDEN, call).await;
    let refused = line_with(&lines, "refused:");
    assert!(
        refused.contains("reason=\"wrong_worker\"") || refused.contains("reason=wrong_worker"),
        "{refused}"
    );
    assert!(
        refused.contains("run=run1") && refused.contains("worker=w0"),
        "{refused}"
    );
}
