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
    s.runs
        .authorize(&run, bearer(&headers), &req.worker, req.step)
        .map_err(|e| registry_refusal(&s, e))?;
    let b = s.runs.register(&run, req, loadgen::worker::now_unix_ms());
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
    let labels = [
        spec.namespace.as_str(),
        spec.benchmark.as_str(),
        update.worker.as_str(),
    ];
    s.metrics
        .live_rps
        .with_label_values(&labels)
        .set(update.rps);
    s.metrics
        .live_bits
        .with_label_values(&labels)
        .set(update.bits_per_second);
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
    let expected_kind = if spec.kind == "EgressBenchmark" {
        "tcp"
    } else {
        "http"
    };
    let malformed = |m: String| refuse(&s, StatusCode::UNPROCESSABLE_ENTITY, "malformed", m);
    match loadgen::report::Report::from_json(&report.report.to_string()) {
        Ok(r) if r.kind() == expected_kind => {}
        Ok(r) => {
            return Err(malformed(format!(
                "expected a {expected_kind} report, got {}",
                r.kind()
            )))
        }
        Err(e) => return Err(malformed(format!("report: {e}"))),
    }
    if let Err(e) = s.sink.store(&run, &spec, &report).await {
        tracing::warn!(run, worker = report.worker, "storing report failed: {e}");
        let body = ApiError {
            error: format!("could not store the report yet: {e}"),
        };
        return Ok((StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response());
    }
    let labels = [
        spec.namespace.as_str(),
        spec.benchmark.as_str(),
        report.worker.as_str(),
    ];
    let _ = s.metrics.live_rps.remove_label_values(&labels);
    let _ = s.metrics.live_bits.remove_label_values(&labels);
    let _ = s.wake.send(Wake {
        kind: spec.kind,
        namespace: spec.namespace,
        name: spec.benchmark,
    });
    Ok(StatusCode::NO_CONTENT.into_response())
}
