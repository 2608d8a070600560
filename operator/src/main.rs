//! netbench-operator: wiring only. Serves the worker API, /metrics and health at once; runs the
//! controllers once it holds the leader Lease.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::Parser;
use crds::{EgressBenchmark, IngressBenchmark};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::ObjectRef;
use tokio_stream::wrappers::UnboundedReceiverStream;

use operator::api::{self, ApiState};
use operator::config::{Config, LogFormat};
use operator::context::Context;
use operator::leader::Elector;
use operator::metrics::Metrics;
use operator::runs::Registry;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    init_logging(config.log_format);
    let client = kube::Client::try_default().await?;
    let metrics = Arc::new(Metrics::new());
    let runs = Arc::new(Registry::default());
    let (wake_tx, wake_rx) = tokio::sync::mpsc::unbounded_channel();
    let ready = Arc::new(AtomicBool::new(false));

    let reporter = Reporter {
        controller: "netbench-operator".into(),
        instance: Some(config.pod_name.clone()),
    };
    let sink = operator::reports::ApiSink {
        store: operator::reports::Store::new(client.clone(), &config.namespace),
        metrics: metrics.clone(),
        reporter: reporter.clone(),
    };
    let state = ApiState {
        runs: runs.clone(),
        auth: Arc::new(api::PodTokens::new(client.clone(), runs.clone())),
        metrics: metrics.clone(),
        sink: Arc::new(sink),
        wake: wake_tx.clone(),
        ready: ready.clone(),
    };
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    tracing::info!(
        "serving the worker API, /metrics and health on {}",
        config.listen
    );
    let server = tokio::spawn(api::serve(
        listener,
        api::router(state),
        config.api_limits(),
        metrics.clone(),
    ));

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
        reporter,
        config: config.clone(),
        metrics,
        runs,
        wake: wake_tx,
    });
    // Worker reports wake the controller of their benchmark's kind at once.
    let (ingress_wake, egress_wake) = split_wake(wake_rx);
    let controllers = async move {
        // Results back on /metrics, orphaned report objects gone, before any run moves on
        // (inside the lead, so the Lease is renewed meanwhile).
        operator::resume::on_leading(&ctx).await;
        futures::future::join(
            operator::controller::run::<IngressBenchmark>(ctx.clone(), ingress_wake),
            operator::controller::run::<EgressBenchmark>(ctx, egress_wake),
        )
        .await
    };
    // On SIGTERM/SIGINT the controllers finish their reconciles and stop; the leader then
    // releases the Lease so the next replica leads at once.
    let leading = async {
        if config.leader_election {
            elector.lead(controllers).await.map(drop)
        } else {
            controllers.await;
            Ok(())
        }
    };
    tokio::select! {
        r = leading => match r {
            Ok(()) => tracing::info!("controllers stopped"),
            Err(e) => {
                tracing::error!("{e}; exiting so a fresh replica can follow");
                std::process::exit(1);
            }
        },
        r = server => tracing::error!("API server stopped: {r:?}"),
    }
    Ok(())
}

/// Plain text (ANSI colours only when stderr is a terminal, never in `kubectl logs`) or JSON.
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube=warn".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}

type WakeStream<K> = UnboundedReceiverStream<ObjectRef<K>>;

/// Routes wake requests to the controller of their kind.
fn split_wake(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<operator::context::Wake>,
) -> (WakeStream<IngressBenchmark>, WakeStream<EgressBenchmark>) {
    let (ingress_tx, ingress_rx) = tokio::sync::mpsc::unbounded_channel();
    let (egress_tx, egress_rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(w) = rx.recv().await {
            if w.kind == operator::egress::plan::KIND {
                let _ = egress_tx.send(ObjectRef::new(&w.name).within(&w.namespace));
            } else {
                let _ = ingress_tx.send(ObjectRef::new(&w.name).within(&w.namespace));
            }
        }
    });
    (
        UnboundedReceiverStream::new(ingress_rx),
        UnboundedReceiverStream::new(egress_rx),
    )
}
