//! What every handler and middleware of the worker API shares ([`ApiState`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

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
}
