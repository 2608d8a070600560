//! Authentication of the run routes, as a middleware in front of the handlers: the caller is
//! known (or refused with 401/404) before anything reads the request body.

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;

use super::refusal::{refuse, registry_refusal, Refusal};
use super::server::closing;
use super::ApiState;
use crate::metrics::Metrics;
use crate::runs::{Caller, Registry, RegistryError};

/// Tells who presents `bearer` for `run`.
pub trait Authenticator: Send + Sync {
    fn authenticate<'a>(
        &'a self,
        run: &'a str,
        bearer: &'a str,
    ) -> BoxFuture<'a, Result<Caller, AuthError>>;
}

#[derive(Debug, PartialEq)]
pub enum AuthError {
    /// The registry refused (unknown run, wrong token).
    Registry(RegistryError),
}

/// The run's bearer token, checked against the registry.
pub struct RunTokens(pub Arc<Registry>);

impl Authenticator for RunTokens {
    fn authenticate<'a>(
        &'a self,
        run: &'a str,
        bearer: &'a str,
    ) -> BoxFuture<'a, Result<Caller, AuthError>> {
        let checked = self.0.check_token(run, bearer);
        Box::pin(async move {
            checked.map_err(AuthError::Registry)?;
            Ok(Caller::RunToken)
        })
    }
}

/// What the middleware hands to the run handlers.
#[derive(Clone, Debug)]
pub struct Authenticated {
    pub run: String,
    pub caller: Caller,
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
    match s.auth.authenticate(&run, &token).await {
        Ok(caller) => {
            req.extensions_mut().insert(Authenticated { run, caller });
            next.run(req).await
        }
        // The connection closes: a refused caller cannot hold it for its next attempt.
        Err(e) => closing(auth_refusal(&s.metrics, e).into_response()),
    }
}

fn auth_refusal(metrics: &Metrics, e: AuthError) -> Refusal {
    match e {
        AuthError::Registry(e) => registry_refusal(metrics, e),
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
