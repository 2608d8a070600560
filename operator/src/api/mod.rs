//! The operator's HTTP server: the worker API (register, barrier, progress, report), /metrics,
//! /healthz and /readyz. Every refused request gets a 4xx with a JSON `{"error": ...}` body and
//! is counted in `netbench_api_rejected_total{reason}`.

mod handlers;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures::future::BoxFuture;
use loadgen::worker::protocol::FinalReport;

use crate::context::Wake;
use crate::metrics::Metrics;
use crate::runs::{Registry, RunSpec};

/// Largest final report accepted (an HDR histogram is a few KiB; this leaves ample room).
pub const MAX_REPORT_BYTES: usize = 4 * 1024 * 1024;
/// Largest body of the other endpoints.
pub const MAX_SMALL_BODY_BYTES: usize = 16 * 1024;

/// Where accepted reports go: ConfigMaps in the operator's namespace (`reports::ApiSink`).
pub trait ReportSink: Send + Sync {
    fn store<'a>(
        &'a self,
        run: &'a str,
        spec: &'a RunSpec,
        report: &'a FinalReport,
    ) -> BoxFuture<'a, Result<(), String>>;
}

#[derive(Clone)]
pub struct ApiState {
    pub runs: Arc<Registry>,
    pub metrics: Arc<Metrics>,
    pub sink: Arc<dyn ReportSink>,
    pub wake: tokio::sync::mpsc::UnboundedSender<Wake>,
    /// True while this replica leads (and so serves workers).
    pub ready: Arc<AtomicBool>,
}

pub fn router(state: ApiState) -> Router {
    let small = DefaultBodyLimit::max(MAX_SMALL_BODY_BYTES);
    Router::new()
        .route(
            "/v1/runs/{run}/register",
            post(handlers::register).layer(small),
        )
        .route("/v1/runs/{run}/barrier", get(handlers::barrier))
        .route(
            "/v1/runs/{run}/progress",
            post(handlers::progress).layer(small),
        )
        .route(
            "/v1/runs/{run}/report",
            post(handlers::report).layer(DefaultBodyLimit::max(MAX_REPORT_BYTES)),
        )
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
        .api_requests
        .with_label_values(&[&endpoint, code.as_str()])
        .inc();
    if code == StatusCode::PAYLOAD_TOO_LARGE {
        s.metrics
            .api_rejected
            .with_label_values(&["too_large"])
            .inc();
    }
    resp
}

#[cfg(test)]
mod tests;
