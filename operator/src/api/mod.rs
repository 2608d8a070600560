//! The operator's HTTP server: the worker API (register, barrier, progress, report), /metrics,
//! /healthz and /readyz. The run routes authenticate the caller before any body is read (see
//! `auth`), and bound the body; the server bounds connections and time (see `server`). Every
//! refused request gets a 4xx with a JSON `{"error": ...}` body and is counted in
//! `netbench_api_rejected_total{reason}`.

mod auth;
mod handlers;
mod identity;
pub mod metrics;
pub mod pod_tokens;
mod reasons;
mod refusal;
mod server;
mod state;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;

pub use identity::{AuthError, Authenticated, Authenticator};
pub use pod_tokens::PodTokens;
pub use reasons::REASONS;
pub use server::{serve, ServerLimits};
pub use state::{barrier_wait, ApiState};

use crate::base::metrics::Metrics;
pub use crate::store::reports::ReportSink;
use metrics::ApiMetrics;

/// Largest final report accepted: well below the 1 MiB a ConfigMap (where reports are stored)
/// can hold; an HDR histogram is a few KiB.
pub const MAX_REPORT_BYTES: usize = 512 * 1024;
/// Largest body of the other endpoints.
pub const MAX_SMALL_BODY_BYTES: usize = 8 * 1024;
// A report, JSON-escaped once more into a ConfigMap value, must fit the ConfigMap's 1 MiB.
const _: () = assert!(MAX_REPORT_BYTES <= 512 * 1024);

pub fn router(state: ApiState) -> Router {
    // The refusal series exist at 0 from the start.
    state.metrics.family::<ApiMetrics>();
    let runs = Router::new()
        .route(
            "/v1/runs/{run}/register",
            capped(&state, MAX_SMALL_BODY_BYTES, post(handlers::register)),
        )
        .route("/v1/runs/{run}/barrier", get(handlers::barrier))
        .route(
            "/v1/runs/{run}/progress",
            capped(&state, MAX_SMALL_BODY_BYTES, post(handlers::progress)),
        )
        .route(
            "/v1/runs/{run}/report",
            capped(&state, MAX_REPORT_BYTES, post(handlers::report)),
        )
        // Runs after routing, before the handlers and their body extractors.
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ));
    Router::new()
        .merge(runs)
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .fallback(|| async { (StatusCode::NOT_FOUND, "no such endpoint") })
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_requests,
        ))
        .with_state(state)
}

/// `route` with its body bounded to `max` bytes: a declared length above it is refused before
/// any of the body is read, a chunked body when it passes the bound.
fn capped(state: &ApiState, max: usize, route: MethodRouter<ApiState>) -> MethodRouter<ApiState> {
    let cap = BodyCap {
        max,
        metrics: state.metrics.clone(),
    };
    route
        .layer(DefaultBodyLimit::max(max))
        .layer(middleware::from_fn_with_state(
            cap,
            refuse_declared_too_large,
        ))
}

#[derive(Clone)]
struct BodyCap {
    max: usize,
    metrics: Arc<Metrics>,
}

async fn refuse_declared_too_large(
    State(cap): State<BodyCap>,
    req: Request,
    next: Next,
) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let max = u64::try_from(cap.max).unwrap_or(u64::MAX);
    match declared {
        Some(len) if len > max => {
            let message = format!("the body may hold at most {} bytes", cap.max);
            let refusal = refusal::refuse(
                &cap.metrics,
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                message,
            );
            server::closing(refusal.into_response())
        }
        _ => next.run(req).await,
    }
}

async fn metrics(State(s): State<ApiState>) -> impl IntoResponse {
    (
        [("content-type", "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
}

async fn readyz(State(s): State<ApiState>) -> impl IntoResponse {
    if s.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not the leader")
    }
}

async fn count_requests(State(s): State<ApiState>, req: Request, next: Next) -> Response {
    let endpoint = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().rsplit('/').next().unwrap_or("").to_string())
        .unwrap_or_else(|| "unknown".into());
    let resp = next.run(req).await;
    let code = resp.status();
    s.metrics
        .family::<ApiMetrics>()
        .requests
        .with_label_values(&[&endpoint, code.as_str()])
        .inc();
    resp
}

#[cfg(test)]
mod server_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trust_tests;
