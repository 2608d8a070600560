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
    match admitted(&s, run, req.headers()).await {
        Ok(who) => {
            req.extensions_mut().insert(who);
            next.run(req).await
        }
        // The connection closes: a refused caller cannot hold it for its next attempt.
        Err(refusal) => closing(refusal.into_response()),
    }
}

/// The caller of `run`, authenticated by its bearer token and admitted to the run.
async fn admitted(
    s: &ApiState,
    run: Result<Path<String>, PathRejection>,
    headers: &HeaderMap,
) -> Result<Authenticated, Refusal> {
    let refused = |code: StatusCode, reason: &'static str, message: &str| {
        refuse(&s.metrics, code, reason, message)
    };
    let Ok(Path(run)) = run else {
        return Err(refused(
            StatusCode::BAD_REQUEST,
            "malformed",
            "malformed run name",
        ));
    };
    let Some(token) = bearer(headers).map(str::to_string) else {
        return Err(refused(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "a bearer token is required",
        ));
    };
    let caller = s
        .auth
        .authenticate(&run, &token)
        .await
        .map_err(|e| auth_refusal(&s.metrics, &run, e))?;
    let spec = s
        .runs
        .admit(&run, &caller)
        .map_err(|e| registry_refusal(&s.metrics, e))?;
    Ok(Authenticated {
        run,
        caller,
        kind: spec.kind.clone(),
        benchmark: spec.benchmark.clone(),
    })
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
