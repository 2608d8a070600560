//! netbench-operator: wiring only. Serves the worker API, /metrics and health at once; runs the
//! controllers once it holds the leader Lease.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::Parser;
use futures::StreamExt;
use kube::runtime::events::Reporter;
use kube::runtime::reflector::ObjectRef;
use tokio_stream::wrappers::UnboundedReceiverStream;

use operator::api::{self, ApiState};
use operator::config::Config;
use operator::context::Context;
use operator::leader::Elector;
use operator::metrics::Metrics;
use operator::runs::Registry;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,kube=warn".into()),
        )
        .init();
    let config = Config::parse();
    let client = kube::Client::try_default().await?;
    let metrics = Arc::new(Metrics::new());
    let runs = Arc::new(Registry::default());
    let (wake_tx, wake_rx) = tokio::sync::mpsc::unbounded_channel();
    let ready = Arc::new(AtomicBool::new(false));

    let state = ApiState {
        runs: runs.clone(),
        metrics: metrics.clone(),
        sink: Arc::new(client.clone()),
        wake: wake_tx.clone(),
        ready: ready.clone(),
    };
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    tracing::info!(
        "serving the worker API, /metrics and health on {}",
        config.listen
    );
    let server = tokio::spawn(async move { axum::serve(listener, api::router(state)).await });

    let elector = Elector::new(client.clone(), &config.namespace, &config.pod_name);
    if config.leader_election {
        tracing::info!("waiting for the leader Lease");
        elector.acquire().await;
    }
    tracing::info!("leading: starting controllers");
    metrics.leader.set(1);
    ready.store(true, Ordering::Relaxed);

    let ctx = Arc::new(Context {
        client,
        reporter: Reporter {
            controller: "netbench-operator".into(),
            instance: Some(config.pod_name.clone()),
        },
        config: config.clone(),
        metrics,
        runs,
        wake: wake_tx,
    });
    let wake = UnboundedReceiverStream::new(wake_rx)
        .filter(|w| futures::future::ready(w.kind == operator::ingress::plan::KIND))
        .map(|w| ObjectRef::new(&w.name).within(&w.namespace));
    let controllers = operator::ingress::run(ctx, wake);
    tokio::select! {
        _ = controllers => tracing::info!("controllers stopped"),
        _ = async { if config.leader_election { elector.hold().await } else { std::future::pending().await } } => {
            tracing::error!("lost the leader Lease; exiting so a fresh replica can follow");
            std::process::exit(1);
        }
        r = server => tracing::error!("API server stopped: {r:?}"),
    }
    Ok(())
}
