//! Who calls the run routes: what tells a caller by its token ([`Authenticator`]; in the
//! operator `PodTokens`), why it may not be told ([`AuthError`]), and the caller the
//! authentication middleware (`auth`) hands to the handlers ([`Authenticated`]).

use futures::future::BoxFuture;

use crate::store::registry::Caller;

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
