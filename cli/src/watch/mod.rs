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
    /// A (re)list starts: the object must show up before it ends.
    Listing,
    /// The list ended.
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
                Ok(Event::Init) => Some(Ok(Update::Listing)),
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
            Ok(Update::Listing) => seen = false,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crds::Phase;

    fn seen(phase: Phase) -> Result<Update, watcher::Error> {
        Ok(Update::Seen(Box::new(Snapshot {
            title: "IngressBenchmark n/web".into(),
            phase: Some(phase),
            measurements: 2,
            samples: 1,
            ..Default::default()
        })))
    }

    async fn end(updates: Vec<Result<Update, watcher::Error>>) -> Result<End> {
        follow(
            futures::stream::iter(updates),
            &ProgressBar::hidden(),
            "ib n/web",
        )
        .await
    }

    #[tokio::test]
    async fn the_watch_ends_with_the_run() {
        let ok = end(vec![
            Ok(Update::Listing),
            seen(Phase::Running),
            Ok(Update::Listed),
            seen(Phase::Succeeded),
        ]);
        assert_eq!(ok.await.unwrap(), End::Run(Outcome::Succeeded));
        let failed = end(vec![
            seen(Phase::Preparing),
            Ok(Update::Listed),
            seen(Phase::Failed),
        ]);
        assert_eq!(failed.await.unwrap(), End::Run(Outcome::Failed));
    }

    #[tokio::test]
    async fn a_missing_or_deleted_benchmark_is_an_error() {
        let e = end(vec![Ok(Update::Listing), Ok(Update::Listed)])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("no longer exists"), "{e}");
        // Deleted while the watch was down: the relist no longer has it.
        let relist = vec![
            Ok(Update::Listing),
            seen(Phase::Running),
            Ok(Update::Listed),
            Err(watcher::Error::NoResourceVersion),
            Ok(Update::Listing),
            Ok(Update::Listed),
        ];
        let e = end(relist).await.unwrap_err().to_string();
        assert!(e.contains("no longer exists"), "{e}");
        let e = end(vec![seen(Phase::Running), Ok(Update::Deleted)])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("was deleted"), "{e}");
        let e = end(vec![seen(Phase::Running)])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("ended before its run did"), "{e}");
    }

    #[tokio::test]
    async fn watch_errors_are_retried_a_few_times_in_a_row() {
        let err = || Err(watcher::Error::NoResourceVersion);
        let mut some = vec![err(), err(), err(), err(), seen(Phase::Running), err()];
        some.push(seen(Phase::Succeeded));
        assert_eq!(end(some).await.unwrap(), End::Run(Outcome::Succeeded));
        let too_many = (0..MAX_ERRORS).map(|_| err()).collect();
        let e = format!("{:#}", end(too_many).await.unwrap_err());
        assert!(e.contains("cannot watch ib n/web"), "{e}");
    }
}
