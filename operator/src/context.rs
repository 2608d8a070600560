//! Handles shared by the controllers and the worker API.

use std::sync::Arc;

use kube::runtime::events::Reporter;
use kube::Client;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::runs::Registry;

pub struct Context {
    pub client: Client,
    pub config: Config,
    pub metrics: Arc<Metrics>,
    pub runs: Arc<Registry>,
    pub reporter: Reporter,
    /// Wakes the controller for an object when a worker report arrives.
    pub wake: tokio::sync::mpsc::UnboundedSender<Wake>,
}

/// A request to reconcile one object now.
#[derive(Clone, Debug)]
pub struct Wake {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}
