//! The kube-runtime Controller, the same for both kinds: watch the kind and the operator's pods,
//! wake at once when a worker report arrives, wrap every reconcile in the finalizer (Apply /
//! Cleanup), and log and count errors before a retry.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{finalizer, Event};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, Controller};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::metrics::ReconcileTimer;

/// Held by every benchmark until its cleanup (restores, children) is done.
pub const FINALIZER: &str = "netbench.io/cleanup";

/// A benchmark kind's phase machine.
pub trait Benchmark:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
    /// Moves the run on; idempotent.
    fn apply<'a>(&'a self, ctx: &'a Context, api: &'a Api<Self>) -> BoxFuture<'a, Result<Action>>;
    /// Deletion: restore what the run changed, delete every child. Works even if apply never ran.
    fn cleanup<'a>(&'a self, ctx: &'a Context, api: &'a Api<Self>)
        -> BoxFuture<'a, Result<Action>>;
}

pub async fn run<K: Benchmark>(
    ctx: Arc<Context>,
    wake: impl Stream<Item = ObjectRef<K>> + Send + 'static,
) {
    let benchmarks = Api::<K>::all(ctx.client.clone());
    let pods = Api::<Pod>::all(ctx.client.clone());
    let owned = watcher::Config::default().labels(&format!(
        "{}={}",
        crate::labels::MANAGED_BY,
        crate::labels::OPERATOR
    ));
    Controller::new(benchmarks, watcher::Config::default())
        .owns(pods, owned)
        .reconcile_on(wake)
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(kind = %K::kind(&()), "reconcile: {e}");
            }
        })
        .await;
}

async fn reconcile<K: Benchmark>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action> {
    let kind = K::kind(&());
    let _timer = ReconcileTimer::start(&ctx.metrics, &kind);
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    finalizer(&api, FINALIZER, obj, |event| async {
        match event {
            Event::Apply(obj) => obj.apply(&ctx, &api).await,
            Event::Cleanup(obj) => obj.cleanup(&ctx, &api).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

fn error_policy<K: Benchmark>(obj: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    let kind = K::kind(&());
    tracing::warn!(
        %kind,
        benchmark = obj.name_any(),
        namespace = obj.namespace(),
        "reconcile failed: {error}"
    );
    ctx.metrics
        .reconcile_errors
        .with_label_values(&[&kind, error.label()])
        .inc();
    Action::requeue(Duration::from_secs(5))
}
