//! Refused requests: a 4xx/5xx with a JSON `{"error": ...}` body, counted by reason in
//! `netbench_api_rejected_total{reason}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use protocol::worker::ApiError;

use super::metrics::ApiMetrics;
use crate::base::metrics::Metrics;
use crate::store::registry::RegistryError;

/// A counted refusal.
pub struct Refusal(StatusCode, String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (self.0, Json(ApiError { error: self.1 })).into_response()
    }
}

/// Counts a refusal for `reason` and builds its answer.
pub fn refuse(
    metrics: &Metrics,
    code: StatusCode,
    reason: &'static str,
    message: impl Into<String>,
) -> Refusal {
    metrics
        .family::<ApiMetrics>()
        .rejected
        .with_label_values(&[reason])
        .inc();
    let message = message.into();
    // In a handler, the line carries the request's run, benchmark and worker (its span).
    tracing::debug!(reason, code = code.as_u16(), "refused: {message}");
    Refusal(code, message)
}

/// The answer to a registry check that failed.
pub fn registry_refusal(metrics: &Metrics, e: RegistryError) -> Refusal {
    let (code, reason, message) = match e {
        RegistryError::UnknownRun => (
            StatusCode::NOT_FOUND,
            "unknown_run",
            "unknown or finished run".to_string(),
        ),
        RegistryError::UnknownWorker => (
            StatusCode::NOT_FOUND,
            "unknown_worker",
            "this worker is not part of the run's current step".to_string(),
        ),
        RegistryError::NotAWorker => (
            StatusCode::FORBIDDEN,
            "not_a_worker",
            "not a worker of this run's current step".to_string(),
        ),
        RegistryError::WrongRole => (
            StatusCode::FORBIDDEN,
            "wrong_role",
            "the run does not give this worker that role".to_string(),
        ),
        RegistryError::NotThisWorker => (
            StatusCode::FORBIDDEN,
            "wrong_worker",
            "a worker may speak only for itself".to_string(),
        ),
        RegistryError::WrongStep { current } => (
            StatusCode::CONFLICT,
            "wrong_step",
            format!("the run is at step {current}"),
        ),
        RegistryError::Unregistered => (
            StatusCode::NOT_FOUND,
            "unregistered",
            "register first".to_string(),
        ),
        RegistryError::ListenNotOwn(why) => (StatusCode::FORBIDDEN, "listen_not_own", why),
        RegistryError::NodeNotOwn(why) => (StatusCode::FORBIDDEN, "node_not_own", why),
        // The pod's status lags its start: the worker retries (5xx) and finds it.
        RegistryError::AddressUnknown => (
            StatusCode::SERVICE_UNAVAILABLE,
            "address_unknown",
            "the API server does not list this pod's address yet; retry".to_string(),
        ),
    };
    refuse(metrics, code, reason, message)
}
