//! The worker API's refusals, checked through the real router (no network). Report storage is
//! replaced by an in-memory sink here; the e2e tests store into a real cluster.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use futures::future::BoxFuture;
use http_body_util::BodyExt;
use loadgen::worker::protocol::*;
use tower::ServiceExt;

use super::*;
use crate::runs::RunSpec;

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

fn setup() -> (Router, Arc<MemorySink>, Arc<Metrics>) {
    let runs = Arc::new(Registry::default());
    runs.announce(
        "run1",
        RunSpec {
            kind: "IngressBenchmark".into(),
            namespace: "ns".into(),
            benchmark: "b".into(),
            uid: "u".into(),
            token: "tok".into(),
            step: 0,
            workers: BTreeMap::from([("w0".into(), Role::Client)]),
        },
    );
    let sink = Arc::new(MemorySink::default());
    let metrics = Arc::new(Metrics::new());
    let (wake, _rx) = tokio::sync::mpsc::unbounded_channel();
    let state = ApiState {
        runs,
        metrics: metrics.clone(),
        sink: sink.clone(),
        wake,
        ready: Arc::new(AtomicBool::new(true)),
    };
    (router(state), sink, metrics)
}

async fn call(
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

fn register_body(worker: &str) -> Vec<u8> {
    serde_json::to_vec(&RegisterRequest {
        version: PROTOCOL_VERSION,
        worker: worker.into(),
        node: None,
        step: 0,
        role: Role::Client,
        listen: None,
        preflight_error: None,
    })
    .unwrap()
}

fn http_report() -> serde_json::Value {
    // A real report from the engine's own types: one request of 1 ms.
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    h.record(1000).unwrap();
    let cfg = loadgen::report::HttpRunConfig {
        url: "http://x/".into(),
        method: "GET".into(),
        connections: 1,
        threads: 1,
        duration_s: 1.0,
        warmup_s: 0.0,
        rate: None,
        keepalive: true,
        http2: false,
        timeout_s: 2.0,
    };
    let counters = loadgen::report::Counters {
        requests: 1,
        ..Default::default()
    };
    let r = loadgen::report::HttpReport::from_run(cfg, 0, 1000, 1.0, counters, &h, vec![]).unwrap();
    serde_json::from_str(&r.to_json()).unwrap()
}

fn report_body(worker: &str, report: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&FinalReport {
        version: PROTOCOL_VERSION,
        worker: worker.into(),
        node: None,
        step: 0,
        started_at_unix_ms: 1,
        report,
    })
    .unwrap()
}

#[tokio::test]
async fn register_then_barrier_opens() {
    let (app, _, _) = setup();
    let (code, _) = call(
        &app,
        "POST",
        "/v1/runs/run1/register",
        "tok",
        register_body("w0"),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    let (code, body) = call(
        &app,
        "GET",
        "/v1/runs/run1/barrier?worker=w0&step=0",
        "tok",
        vec![],
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let b: BarrierResponse = serde_json::from_str(&body).unwrap();
    assert!(b.start_at_unix_ms.is_some());
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
            StatusCode::NOT_FOUND,
            "unknown_worker",
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
        let before = metrics.api_rejected.with_label_values(&[reason]).get();
        let (code, text) = call(&app, method, uri, token, body).await;
        assert_eq!(code, want, "{uri} {reason}: {text}");
        assert!(
            metrics.api_rejected.with_label_values(&[reason]).get() > before,
            "{reason} counted"
        );
    }
    assert!(
        sink.0.lock().unwrap().is_empty(),
        "nothing refused was stored"
    );
}

#[tokio::test]
async fn a_well_formed_report_is_stored() {
    let (app, sink, _) = setup();
    let (code, text) = call(
        &app,
        "POST",
        "/v1/runs/run1/report",
        "tok",
        report_body("w0", http_report()),
    )
    .await;
    assert_eq!(code, StatusCode::NO_CONTENT, "{text}");
    assert_eq!(sink.0.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn metrics_and_health() {
    let (app, _, _) = setup();
    assert_eq!(
        call(&app, "GET", "/healthz", "", vec![]).await.0,
        StatusCode::OK
    );
    assert_eq!(
        call(&app, "GET", "/readyz", "", vec![]).await.0,
        StatusCode::OK
    );
    let (code, body) = call(&app, "GET", "/metrics", "", vec![]).await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        body.contains(r#"netbench_api_requests_total{code="200",endpoint="healthz"} 1"#),
        "{body}"
    );
}

fn progress_body(update: ProgressUpdate) -> Vec<u8> {
    serde_json::to_vec(&update).unwrap()
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
        version: PROTOCOL_VERSION,
        worker: "w0".into(),
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
    let (code, text) = call(
        &app,
        "POST",
        "/v1/runs/run1/progress",
        "tok",
        progress_body(update),
    )
    .await;
    assert_eq!(code, StatusCode::NO_CONTENT, "{text}");
    let (_, body) = call(&app, "GET", "/metrics", "", vec![]).await;
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
    let (code, text) = call(
        &app,
        "POST",
        "/v1/runs/run1/report",
        "tok",
        report_body("w0", http_report()),
    )
    .await;
    assert_eq!(code, StatusCode::NO_CONTENT, "{text}");
    assert_eq!(samples(&metrics, "worker=\"w0\""), Vec::<String>::new());
}

#[tokio::test]
async fn progress_without_the_live_fields_leaves_their_series_unset() {
    // A TCP worker, or an HTTP worker from before the fields existed.
    let (app, _, metrics) = setup();
    let update = ProgressUpdate {
        version: PROTOCOL_VERSION,
        worker: "w0".into(),
        rps: 10.0,
        ..Default::default()
    };
    let (code, text) = call(
        &app,
        "POST",
        "/v1/runs/run1/progress",
        "tok",
        progress_body(update),
    )
    .await;
    assert_eq!(code, StatusCode::NO_CONTENT, "{text}");
    assert_eq!(samples(&metrics, "netbench_live_rps").len(), 1);
    assert_eq!(
        samples(&metrics, "netbench_ingress_live_"),
        Vec::<String>::new()
    );
}
