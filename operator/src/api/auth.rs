//! Authentication of the run routes, as a middleware in front of the handlers: the caller is
//! known (or refused with 401/404) before anything reads the request body.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;

use super::refusal::{refuse, registry_refusal, Refusal};
use super::server::closing;
use super::ApiState;
use crate::base::metrics::Metrics;
use crate::store::registry::{Caller, RegistryError};

/// Tells who presents `bearer` for `run` (in the operator: `PodTokens`, a TokenReview).
pub trait Authenticator: Send + Sync {
    fn authenticate<'a>(
        &'a self,
        run: &'a str,
        bearer: &'a str,
    ) -> BoxFuture<'a, Result<Caller, AuthError>>;
}

#[derive(Debug, PartialEq)]
pub enum AuthError {
    UnknownRun,
    /// Not a valid token for the `netbench` audience.
    BadToken,
    /// A valid token, but not of a worker pod of this run.
    NotAWorker(String),
    /// The token could not be checked now (the API server did not answer).
    Unavailable(String),
}

/// What the middleware hands to the run handlers: the caller and the benchmark of its run
/// (each handler's span carries them, so every log line of a request names both).
#[derive(Clone, Debug)]
pub struct Authenticated {
    pub run: String,
    pub caller: Caller,
    /// The run's benchmark kind and name (its namespace is the caller's).
    pub kind: String,
    pub benchmark: String,
}

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
