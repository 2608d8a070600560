//! Authentication of the run routes, as a middleware in front of the handlers: the caller is
//! known (or refused with 401/404) before anything reads the request body.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::identity::{AuthError, Authenticated};
use super::refusal::{refuse, registry_refusal, Refusal};
use super::server::closing;
use super::state::ApiState;
use crate::base::metrics::Metrics;
use crate::store::registry::RegistryError;

/// The middleware: authenticates the caller of `/v1/runs/{run}/...` before the handler (and
/// its body extractor) runs.
pub async fn authenticate(
    State(s): State<ApiState>,
    run: Result<Path<String>, PathRejection>,
    mut req: Request,
    next: Next,
) -> Response {
    let Ok(Path(run)) = run else {
        let refusal = refuse(
            &s.metrics,
            StatusCode::BAD_REQUEST,
            "malformed",
            "malformed run name",
        );
        return closing(refusal.into_response());
    };
    let Some(token) = bearer(req.headers()).map(str::to_string) else {
        let refusal = refuse(
            &s.metrics,
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "a bearer token is required",
        );
        return closing(refusal.into_response());
    };
    let admitted = match s.auth.authenticate(&run, &token).await {
        Ok(caller) => s
            .runs
            .admit(&run, &caller)
            .map(|spec| (caller, spec))
            .map_err(|e| registry_refusal(&s.metrics, e)),
        Err(e) => Err(auth_refusal(&s.metrics, &run, e)),
    };
    match admitted {
        Ok((caller, spec)) => {
            req.extensions_mut().insert(Authenticated {
                run,
                caller,
                kind: spec.kind,
                benchmark: spec.benchmark,
            });
            next.run(req).await
        }
        // The connection closes: a refused caller cannot hold it for its next attempt.
        Err(refusal) => closing(refusal.into_response()),
    }
}

fn auth_refusal(metrics: &Metrics, run: &str, e: AuthError) -> Refusal {
    match e {
        AuthError::UnknownRun => registry_refusal(metrics, RegistryError::UnknownRun),
        AuthError::BadToken => refuse(
            metrics,
            StatusCode::UNAUTHORIZED,
            "bad_token",
            "not a valid worker token for this operator",
        ),
        AuthError::NotAWorker(why) => refuse(
            metrics,
            StatusCode::FORBIDDEN,
            "not_a_worker",
            format!("not a worker of this run: {why}"),
        ),
        AuthError::Unavailable(why) => {
            tracing::warn!(run, "cannot check a worker token: {why}");
            refuse(
                metrics,
                StatusCode::SERVICE_UNAVAILABLE,
                "auth_unavailable",
                "the worker token cannot be checked now; retry",
            )
        }
    }
}

/// The bearer token of a request; None when absent or empty.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}
