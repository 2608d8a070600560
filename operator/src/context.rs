//! Handles shared by the controllers and the worker API.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::Reporter;
use kube::Client;

use crate::admin::config::Config;
use crate::base::events::PendingEvent;
use crate::base::metrics::Metrics;
use crate::store::registry::Registry;
use crate::store::reports::Store;

pub struct Context {
    pub client: Client,
    pub config: Config,
    pub metrics: Arc<Metrics>,
    pub runs: Arc<Registry>,
    pub reporter: Reporter,
    /// Wakes the controller for an object when a worker report arrives.
    pub wake: tokio::sync::mpsc::UnboundedSender<Wake>,
}

impl Context {
    /// The worker reports, kept in the operator's namespace.
    pub fn reports(&self) -> Store {
        Store::new(self.client.clone(), self.config.namespace.clone())
    }

    /// Publishes and clears `events` about `reference` (see `k8s::events`).
    pub async fn publish(&self, reference: &ObjectReference, events: &mut Vec<PendingEvent>) {
        crate::k8s::events::publish(&self.client, &self.reporter, reference, events).await;
    }
}

/// A request to reconcile one object now.
#[derive(Clone, Debug)]
pub struct Wake {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}
