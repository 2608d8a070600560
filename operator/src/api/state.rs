//! What every handler and middleware of the worker API shares ([`ApiState`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::identity::Authenticator;
use crate::base::metrics::Metrics;
use crate::context::Wake;
use crate::store::registry::Registry;
use crate::store::reports::ReportSink;

/// The worker API's state (main.rs builds it; `router` serves it).
#[derive(Clone)]
pub struct ApiState {
    pub runs: Arc<Registry>,
    /// Who may call the run routes.
    pub auth: Arc<dyn Authenticator>,
    pub metrics: Arc<Metrics>,
    pub sink: Arc<dyn ReportSink>,
    pub wake: tokio::sync::mpsc::UnboundedSender<Wake>,
    /// True while this replica leads (and so serves workers).
    pub ready: Arc<AtomicBool>,
    /// Longest a closed barrier holds a worker's answer ([`barrier_wait`]).
    pub barrier_wait: Duration,
}

/// Longest a closed barrier holds an answer: 5 s, and at most half of a request's time
/// (`--api-request-timeout`), which the answer must come well within.
pub fn barrier_wait(request_timeout: Duration) -> Duration {
    Duration::from_secs(5).min(request_timeout / 2)
}
