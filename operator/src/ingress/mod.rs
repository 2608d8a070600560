//! The IngressBenchmark controller. `reconcile` only wraps the finalizer; `phases` moves a run
//! through Pending -> (Queued) -> Preparing -> Running -> Collecting -> Succeeded | Failed,
//! recording every step in status so a restarted operator resumes the same run.

pub mod phases;
pub mod plan;
pub mod result;
pub mod validate;

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{finalizer, Event};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, Controller};
use kube::ResourceExt;

use crds::IngressBenchmark;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::metrics::ReconcileTimer;

pub const FINALIZER: &str = "netbench.io/cleanup";

pub async fn run(
    ctx: Arc<Context>,
    wake: impl Stream<Item = ObjectRef<IngressBenchmark>> + Send + 'static,
) {
    let benchmarks = Api::<IngressBenchmark>::all(ctx.client.clone());
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
                tracing::debug!("ingress reconcile: {e}");
            }
        })
        .await;
}

async fn reconcile(ib: Arc<IngressBenchmark>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ReconcileTimer::start(&ctx.metrics, plan::KIND);
    let ns = ib.namespace().unwrap_or_default();
    let api: Api<IngressBenchmark> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, FINALIZER, ib, |event| async {
        match event {
            Event::Apply(ib) => phases::apply(&ib, &ctx, &api).await,
            Event::Cleanup(ib) => phases::cleanup(&ib, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

fn error_policy(ib: Arc<IngressBenchmark>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(
        benchmark = ib.name_any(),
        namespace = ib.namespace(),
        "reconcile failed: {error}"
    );
    ctx.metrics
        .reconcile_errors
        .with_label_values(&[plan::KIND, error.label()])
        .inc();
    Action::requeue(Duration::from_secs(5))
}
