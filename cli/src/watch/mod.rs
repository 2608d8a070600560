//! `netbench watch KIND/NAME`: live progress of a benchmark's run until it ends, from a kube
//! watcher on that one object; drawing is [`render::render`] (pure) fed to an indicatif bar.

pub mod render;

use std::time::Duration;

use anyhow::{bail, Context, Result};
use crds::{EgressBenchmark, IngressBenchmark};
use futures::{Stream, StreamExt};
use indicatif::{ProgressBar, ProgressStyle};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::kube_client::{BenchKind, BenchRef, ClusterArgs};
use render::{Outcome, Snapshot, View};

/// `netbench watch` arguments.
#[derive(clap::Args, Debug)]
pub struct WatchArgs {
    /// The benchmark (KIND/NAME: ib/web, eb/vxlan).
    #[arg(value_name = "KIND/NAME")]
    pub benchmark: BenchRef,
    /// Give up after this long ("90s", "30m"; exit 2). Default: until the run ends or ctrl-c.
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<crds::Duration>,
}

/// How a watch ended, besides an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Run(Outcome),
    Interrupted,
}

/// Consecutive watch errors tolerated (the watcher retries with backoff in between).
const MAX_ERRORS: u32 = 5;

enum Update {
    Seen(Box<Snapshot>),
    Deleted,
    Listed,
}

fn updates<K>(
    api: Api<K>,
    name: &str,
    snapshot: fn(&K) -> Snapshot,
) -> impl Stream<Item = Result<Update, watcher::Error>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    watcher::watcher(api, config)
        .default_backoff()
        .filter_map(move |event| {
            let update = match event {
                Ok(Event::Apply(o) | Event::InitApply(o)) => {
                    Some(Ok(Update::Seen(Box::new(snapshot(&o)))))
                }
                Ok(Event::Delete(_)) => Some(Ok(Update::Deleted)),
                Ok(Event::InitDone) => Some(Ok(Update::Listed)),
                Ok(Event::Init) => None,
                Err(e) => Some(Err(e)),
            };
            std::future::ready(update)
        })
}

fn bar() -> ProgressBar {
    let bar = ProgressBar::new(1);
    let style = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] [{bar:40}] {pos}/{len} samples\n{msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style.progress_chars("=> "));
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

/// Shows a view: on the bar, or as plain lines when the output is not a terminal.
fn draw(bar: &ProgressBar, view: &View, last: &mut Vec<String>) {
    bar.set_length(view.length);
    bar.set_position(view.position);
    if view.lines != *last {
        if bar.is_hidden() {
            println!(
                "[{}/{}] {}",
                view.position,
                view.length,
                view.lines.join(" | ")
            );
        }
        bar.set_message(view.lines.join("\n"));
        last.clone_from(&view.lines);
    }
}

async fn deadline(timeout: Option<Duration>) {
    match timeout {
        Some(t) => tokio::time::sleep(t).await,
        None => std::future::pending().await,
    }
}

/// `netbench watch`.
pub async fn run(args: &WatchArgs, cluster: &ClusterArgs) -> Result<End> {
    let (client, ns) = crate::kube_client::connect(cluster).await?;
    let b = &args.benchmark;
    // Fails fast, with the API's words, when the object is missing or not readable.
    crate::source::cluster::run_status(&client, &ns, b).await?;
    let stream = match b.kind {
        BenchKind::Ingress => updates(
            api::<IngressBenchmark>(&client, &ns),
            &b.name,
            render::from_ingress,
        )
        .boxed(),
        BenchKind::Egress => updates(
            api::<EgressBenchmark>(&client, &ns),
            &b.name,
            render::from_egress,
        )
        .boxed(),
    };
    let timeout = args.timeout.map(|t| t.as_std());
    let what = format!("{} {ns}/{}", b.kind.kind_name(), b.name);
    let bar = bar();
    let end = tokio::select! {
        end = follow(stream, &bar, &what) => end,
        _ = tokio::signal::ctrl_c() => Ok(End::Interrupted),
        () = deadline(timeout) => Err(anyhow::anyhow!(
            "{what} did not finish within {}", args.timeout.map(|t| t.to_string()).unwrap_or_default()
        )),
    };
    match &end {
        Ok(End::Run(_)) => bar.finish(),
        _ => bar.abandon(),
    }
    end
}

fn api<K>(client: &Client, ns: &str) -> Api<K>
where
    K: Resource<Scope = kube::core::NamespaceResourceScope>,
    <K as Resource>::DynamicType: Default,
{
    Api::namespaced(client.clone(), ns)
}

async fn follow(
    mut stream: impl Stream<Item = Result<Update, watcher::Error>> + Unpin,
    bar: &ProgressBar,
    what: &str,
) -> Result<End> {
    let mut last = vec![];
    let mut errors = 0u32;
    let mut seen = false;
    while let Some(update) = stream.next().await {
        match update {
            Ok(Update::Seen(s)) => {
                (errors, seen) = (0, true);
                let view = render::render(&s);
                draw(bar, &view, &mut last);
                if let Some(outcome) = view.outcome {
                    return Ok(End::Run(outcome));
                }
            }
            Ok(Update::Listed) if !seen => bail!("{what} no longer exists"),
            Ok(Update::Listed) => {}
            Ok(Update::Deleted) => bail!("{what} was deleted before its run ended"),
            Err(e) => {
                errors = errors.saturating_add(1);
                if errors >= MAX_ERRORS {
                    return Err(e).with_context(|| format!("cannot watch {what}"));
                }
                bar.println(format!("watch error (retrying): {e}"));
            }
        }
    }
    bail!("the watch of {what} ended before its run did")
}
