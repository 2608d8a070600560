//! Worker API handlers. Each checks the run's bearer token and the worker's membership first.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use loadgen::worker::protocol::*;
use serde::Deserialize;

use super::ApiState;
use crate::context::Wake;
use crate::runs::{BarrierState, RegistryError};

/// A counted 4xx answer.
pub struct Refusal(StatusCode, String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (self.0, Json(ApiError { error: self.1 })).into_response()
    }
}

fn refuse(s: &ApiState, code: StatusCode, reason: &str, message: impl Into<String>) -> Refusal {
    s.metrics.api_rejected.with_label_values(&[reason]).inc();
    Refusal(code, message.into())
}

fn bearer(headers: &HeaderMap) -> &str {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
}

fn registry_refusal(s: &ApiState, e: RegistryError) -> Refusal {
    match e {
        RegistryError::UnknownRun => refuse(
            s,
            StatusCode::NOT_FOUND,
            "unknown_run",
            "unknown or finished run",
        ),
        RegistryError::BadToken => refuse(
            s,
            StatusCode::UNAUTHORIZED,
            "bad_token",
            "missing or wrong run token",
        ),
        RegistryError::UnknownWorker => refuse(
            s,
            StatusCode::NOT_FOUND,
            "unknown_worker",
            "this worker is not part of the run's current step",
        ),
        RegistryError::WrongStep { current } => refuse(
            s,
            StatusCode::CONFLICT,
            "wrong_step",
            format!("the run is at step {current}"),
        ),
    }
}

/// Unwraps a JSON body, turning a malformed one into a counted 4xx.
fn body<T>(s: &ApiState, body: Result<Json<T>, JsonRejection>) -> Result<T, Refusal> {
    match body {
        Ok(Json(v)) => Ok(v),
        Err(JsonRejection::BytesRejection(e)) => {
            Err(refuse(s, e.status(), "too_large", e.body_text()))
        }
        Err(e) => Err(refuse(
            s,
            StatusCode::UNPROCESSABLE_ENTITY,
            "malformed",
            e.body_text(),
        )),
    }
}

fn check_version(s: &ApiState, version: u32) -> Result<(), Refusal> {
    if version == PROTOCOL_VERSION {
        Ok(())
    } else {
        Err(refuse(
            s,
            StatusCode::UNPROCESSABLE_ENTITY,
            "version",
            format!("protocol version {version} is not supported (this operator speaks {PROTOCOL_VERSION})"),
        ))
    }
}

fn barrier_body(b: BarrierState) -> BarrierResponse {
    BarrierResponse {
        version: PROTOCOL_VERSION,
        start_at_unix_ms: b.start_at_unix_ms,
        registered: b.registered,
        expected: b.expected,
        servers: b.servers,
    }
}

pub async fn register(
    State(s): State<ApiState>,
    Path(run): Path<String>,
    headers: HeaderMap,
    req: Result<Json<RegisterRequest>, JsonRejection>,
) -> Result<Response, Refusal> {
    let req = body(&s, req)?;
    check_version(&s, req.version)?;
    let failed = req.preflight_error.is_some();
    let spec = s
        .runs
        .authorize(&run, bearer(&headers), &req.worker, req.step)
        .map_err(|e| registry_refusal(&s, e))?;
    let b = s.runs.register(&run, req, loadgen::worker::now_unix_ms());
    if failed {
        // The run ends now, not at the next poll.
        let _ = s.wake.send(Wake {
            kind: spec.kind,
            namespace: spec.namespace,
            name: spec.benchmark,
        });
    }
    let resp = RegisterResponse {
        version: PROTOCOL_VERSION,
        registered: b.registered,
        expected: b.expected,
    };
    Ok(Json(resp).into_response())
}

#[derive(Deserialize)]
pub struct BarrierQuery {
    worker: String,
    step: u32,
}

pub async fn barrier(
    State(s): State<ApiState>,
    Path(run): Path<String>,
    headers: HeaderMap,
    Query(q): Query<BarrierQuery>,
) -> Result<Response, Refusal> {
    s.runs
        .authorize(&run, bearer(&headers), &q.worker, q.step)
        .map_err(|e| registry_refusal(&s, e))?;
    let b = s
        .runs
        .barrier(&run, &q.worker)
        .ok_or_else(|| refuse(&s, StatusCode::NOT_FOUND, "unregistered", "register first"))?;
    let code = if b.start_at_unix_ms.is_some() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((code, Json(barrier_body(b))).into_response())
}

pub async fn progress(
    State(s): State<ApiState>,
    Path(run): Path<String>,
    headers: HeaderMap,
    update: Result<Json<ProgressUpdate>, JsonRejection>,
) -> Result<Response, Refusal> {
    let update = body(&s, update)?;
    check_version(&s, update.version)?;
    let spec = s
        .runs
        .authorize(&run, bearer(&headers), &update.worker, update.step)
        .map_err(|e| registry_refusal(&s, e))?;
    s.metrics
        .set_live(&spec.namespace, &spec.benchmark, &update);
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn report(
    State(s): State<ApiState>,
    Path(run): Path<String>,
    headers: HeaderMap,
    report: Result<Json<FinalReport>, JsonRejection>,
) -> Result<Response, Refusal> {
    let report = body(&s, report)?;
    check_version(&s, report.version)?;
    let spec = s
        .runs
        .authorize(&run, bearer(&headers), &report.worker, report.step)
        .map_err(|e| registry_refusal(&s, e))?;
    let malformed = |m: String| refuse(&s, StatusCode::UNPROCESSABLE_ENTITY, "malformed", m);
    if let Err(m) = check_report_kind(&spec.kind, &report.report) {
        return Err(malformed(m));
    }
    if let Err(e) = s.sink.store(&run, &spec, &report).await {
        tracing::warn!(run, worker = report.worker, "storing report failed: {e}");
        let body = ApiError {
            error: format!("could not store the report yet: {e}"),
        };
        return Ok((StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response());
    }
    s.metrics
        .forget_live(&spec.namespace, &spec.benchmark, &report.worker);
    let _ = s.wake.send(Wake {
        kind: spec.kind,
        namespace: spec.namespace,
        name: spec.benchmark,
    });
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// An EgressBenchmark takes tcp reports, an IngressBenchmark http reports; each must parse.
fn check_report_kind(benchmark_kind: &str, report: &serde_json::Value) -> Result<(), String> {
    let kind = report.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    let expected = if benchmark_kind == "EgressBenchmark" {
        loadgen::tcp::report::REPORT_KIND
    } else {
        "http"
    };
    if kind != expected {
        return Err(format!("expected a {expected} report, got {kind:?}"));
    }
    if expected == loadgen::tcp::report::REPORT_KIND {
        let tcp: loadgen::tcp::TcpReport =
            serde_json::from_value(report.clone()).map_err(|e| format!("report: {e}"))?;
        if tcp.version != loadgen::tcp::report::REPORT_VERSION {
            return Err(format!("unsupported tcp report version {}", tcp.version));
        }
        return Ok(());
    }
    loadgen::report::Report::from_json(&report.to_string())
        .map(|_| ())
        .map_err(|e| format!("report: {e}"))
}

#[cfg(test)]
mod report_kind_tests {
    use super::check_report_kind;
    use serde_json::json;

    fn tcp_report() -> serde_json::Value {
        let t = json!({"bytes": 10, "seconds": 1.0, "bits_per_second": 80.0});
        let cpu = json!({"user_percent": 1.0, "system_percent": 2.0, "total_percent": 3.0});
        json!({"version": 1, "kind": "tcp", "started_at_unix_ms": 1, "ended_at_unix_ms": 2,
               "sender": t, "receiver": t, "retransmits": 0, "mean_rtt_us": null,
               "cpu": {"client": cpu, "server": cpu}, "runs": [], "streams": []})
    }

    #[test]
    fn egress_takes_tcp_reports_only() {
        assert_eq!(check_report_kind("EgressBenchmark", &tcp_report()), Ok(()));
        let err = check_report_kind("IngressBenchmark", &tcp_report()).unwrap_err();
        assert!(err.contains("expected a http report"), "{err}");
        let mut broken = tcp_report();
        broken["sender"] = json!("fast");
        assert!(check_report_kind("EgressBenchmark", &broken).is_err());
        let mut future = tcp_report();
        future["version"] = json!(2);
        assert!(check_report_kind("EgressBenchmark", &future).is_err());
    }
}
