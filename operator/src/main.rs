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

use operator::admin::config::{Config, LogFormat};
use operator::admin::scope::Scope;
use operator::api::{self, ApiState};
use operator::base::metrics::Metrics;
use operator::context::Context;
use operator::controller::kinds::{registration, DuplicateKind, Registered};
use operator::k8s::leader::{Elector, LeaderMetrics};
use operator::store::reports::ReportMetrics;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    init_logging(config.log_format);
    let metrics = Arc::new(Metrics::new());
    // Every request the client sends is counted (netbench_kube_requests_total).
    let client = kube::client::ClientBuilder::try_from(kube::Config::infer().await?)?
        .with_layer(&operator::k8s::requests::counting(&metrics))
        .build();
    let (wake_tx, wake_rx) = tokio::sync::mpsc::unbounded_channel();
    let kinds = kinds()?;
    // The series that exist at 0 from the start (the others appear with their first value).
    kinds.prepare(&metrics);
    metrics.family::<LeaderMetrics>();
    metrics.family::<ReportMetrics>();
    let reporter = Reporter {
        controller: "netbench-operator".into(),
        instance: Some(config.pod_name.clone()),
    };
    // Every kind the operator runs (the controllers below run the same ones).
    let ctx = Arc::new(Context::new(
        client,
        config.clone(),
        metrics,
        reporter,
        wake_tx,
        kinds.kinds(),
    ));
    let ready = Arc::new(AtomicBool::new(false));
    let server = serve_api(&ctx, ready.clone()).await?;
    // On SIGTERM/SIGINT the controllers finish their reconciles and stop; the leader then
    // releases the Lease so the next replica leads at once.
    let events = ctx.events.clone();
    tokio::select! {
        r = lead(ctx, &kinds, wake_rx, ready) => match r {
            Ok(()) => {
                tracing::info!("controllers stopped");
                // The last reconciles' Events, before the process goes.
                if !events.flush(std::time::Duration::from_secs(5)).await {
                    tracing::warn!("stopping with Events not yet published");
                }
            }
            Err(e) => {
                tracing::error!("{e}; exiting so a fresh replica can follow");
                std::process::exit(1);
            }
        },
        r = server => tracing::error!("API server stopped: {r:?}"),
    }
    Ok(())
}

/// Starts the worker API, /metrics and health (served by every replica, leader or not).
async fn serve_api(
    ctx: &Context,
    ready: Arc<AtomicBool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let config = &ctx.config;
    let sink = operator::store::reports::ApiSink {
        store: ctx.reports(),
        metrics: ctx.metrics.clone(),
        reporter: ctx.reporter.clone(),
    };
    let state = ApiState {
        runs: ctx.runs.clone(),
        auth: Arc::new(api::PodTokens::new(
            ctx.client.clone(),
            ctx.runs.clone(),
            ctx.pods.clone(),
        )),
        metrics: ctx.metrics.clone(),
        sink: Arc::new(sink),
        wake: ctx.wake.clone(),
        ready,
        barrier_wait: api::barrier_wait(std::time::Duration::from_secs(
            config.api_request_timeout_s,
        )),
    };
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    tracing::info!(
        "serving the worker API, /metrics and health on {}",
        config.listen
    );
    Ok(tokio::spawn(api::serve(
        listener,
        api::router(state),
        api::ServerLimits::of(config),
        ctx.metrics.clone(),
    )))
}

/// Every kind the operator runs, each listed once (one line a kind): its reconcile series at 0,
/// its entry in the context's list of kinds, its controller and the route of its wakes.
fn kinds() -> Result<Registered, DuplicateKind> {
    Registered::new(vec![
        registration::<IngressBenchmark>(),
        registration::<EgressBenchmark>(),
    ])
}

/// Waits for the leader Lease (when election is on), then runs every kind's controller while
/// leading.
async fn lead(
    ctx: Arc<Context>,
    kinds: &Registered,
    wake_rx: tokio::sync::mpsc::UnboundedReceiver<operator::context::Wake>,
    ready: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let elector = Elector::new(
        ctx.client.clone(),
        &ctx.config.namespace,
        &ctx.config.pod_name,
    );
    let election = ctx.config.leader_election;
    if election {
        tracing::info!("waiting for the leader Lease");
        elector.acquire().await;
    }
    match &ctx.config.watch_namespaces {
        Scope::Cluster => tracing::info!("leading: starting controllers for every namespace"),
        Scope::Namespaces(names) => tracing::info!(
            "leading: starting controllers for the namespaces {} only (watchNamespaces)",
            names.join(", ")
        ),
    }
    ctx.metrics.family::<LeaderMetrics>().leader.set(1);
    ready.store(true, Ordering::Relaxed);
    // Worker reports wake the controller of their benchmark's kind at once (a kind not
    // registered: logged and counted, no controller woken).
    let (router, runs) = kinds.controllers(&ctx);
    tokio::spawn(router.serve(wake_rx));
    let controllers = async move {
        // Results back on /metrics, orphaned report objects gone, before any run moves on
        // (inside the lead, so the Lease is renewed meanwhile).
        operator::resume::on_leading(&ctx).await;
        // The report objects are watched while leading (a Running tick counts them from it),
        // until the controllers stop.
        let reports = ctx
            .watched_reports
            .run(ctx.client.clone(), &ctx.config.namespace);
        tokio::select! {
            _ = futures::future::join_all(runs) => {}
            _ = reports => tracing::error!("the watch of the report objects ended"),
        }
        // No pod is created once another replica may lead.
        ctx.creations.stop_all().await;
    };
    if election {
        elector.lead(controllers).await.map(drop)?;
    } else {
        controllers.await;
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
