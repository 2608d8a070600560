//! The EgressBenchmark controller: cases one after another, each a server and a client pinned
//! to the case's nodes, with the case's offload profile applied by privileged Jobs before and
//! restored after (also on failure and deletion). `reconcile` only wraps the finalizer.

pub mod offload;
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

use crds::EgressBenchmark;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ingress::FINALIZER;
use crate::metrics::ReconcileTimer;

pub async fn run(
    ctx: Arc<Context>,
    wake: impl Stream<Item = ObjectRef<EgressBenchmark>> + Send + 'static,
) {
    let benchmarks = Api::<EgressBenchmark>::all(ctx.client.clone());
    let pods = Api::<Pod>::all(ctx.client.clone());
    let owned = watcher::Config::default().labels(&format!(
        "{}={}",
        crate::labels::MANAGED_BY,
        crate::labels::OPERATOR
    ));
    // Jobs are not watched: the operator may list them only in namespaces allowed offload;
    // their progress is polled while a stage waits for them.
    Controller::new(benchmarks, watcher::Config::default())
        .owns(pods, owned)
        .reconcile_on(wake)
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!("egress reconcile: {e}");
            }
        })
        .await;
}

async fn reconcile(eb: Arc<EgressBenchmark>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ReconcileTimer::start(&ctx.metrics, plan::KIND);
    let ns = eb.namespace().unwrap_or_default();
    let api: Api<EgressBenchmark> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, FINALIZER, eb, |event| async {
        match event {
            Event::Apply(eb) => phases::apply(&eb, &ctx, &api).await,
            Event::Cleanup(eb) => phases::cleanup(&eb, &ctx, &api).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

fn error_policy(eb: Arc<EgressBenchmark>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(
        benchmark = eb.name_any(),
        namespace = eb.namespace(),
        "reconcile failed: {error}"
    );
    ctx.metrics
        .reconcile_errors
        .with_label_values(&[plan::KIND, error.label()])
        .inc();
    Action::requeue(Duration::from_secs(5))
}
