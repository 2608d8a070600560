//! BenchmarkResults from the cluster: by name, or a benchmark's latest result (status.latestResult)
//! with the results of its earlier runs.

use anyhow::{anyhow, bail, Context, Result};
use crds::result::{BenchmarkResult, BENCHMARK_LABEL};
use crds::{EgressBenchmark, IngressBenchmark, RunStatus};
use kube::api::ListParams;
use kube::{Api, Client};

use super::{Loaded, MAX_RESULTS};
use crate::kube_client::{BenchKind, BenchRef};

/// Objects asked for per list call.
const PAGE: u32 = 250;
/// Most list calls for one benchmark's history (10000 objects looked at).
const MAX_PAGES: usize = 40;

fn loaded(r: BenchmarkResult, namespace: &str) -> Loaded {
    let name = r.metadata.name.clone().unwrap_or_default();
    Loaded {
        origin: format!("result {namespace}/{}", crate::text::label(&name)),
        name,
        created: r.metadata.creation_timestamp.clone(),
        spec: r.spec,
        conditions: vec![],
    }
}

/// One result by name.
pub async fn by_name(client: &Client, namespace: &str, name: &str) -> Result<Loaded> {
    let api: Api<BenchmarkResult> = Api::namespaced(client.clone(), namespace);
    let r = api
        .get(name)
        .await
        .with_context(|| format!("cannot read BenchmarkResult {namespace}/{name}"))?;
    Ok(loaded(r, namespace))
}

/// The run status of a benchmark.
pub async fn run_status(client: &Client, namespace: &str, b: &BenchRef) -> Result<RunStatus> {
    let what = || format!("cannot read {} {namespace}/{}", b.kind.kind_name(), b.name);
    let status = match b.kind {
        BenchKind::Ingress => {
            let ib: IngressBenchmark = get(client, namespace, &b.name, what).await?;
            ib.status.map(|s| s.run)
        }
        BenchKind::Egress => {
            let eb: EgressBenchmark = get(client, namespace, &b.name, what).await?;
            eb.status.map(|s| s.run)
        }
    };
    Ok(status.unwrap_or_default())
}

/// Object `name` of kind `K` in `namespace`; an error says `what` could not be read.
async fn get<K>(
    client: &Client,
    namespace: &str,
    name: &str,
    what: impl FnOnce() -> String,
) -> Result<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    api.get(name).await.with_context(what)
}

/// A benchmark's latest result (with the benchmark's conditions), followed by up to `history`
/// earlier results of the same benchmark, newest first.
pub async fn of_benchmark(
    client: &Client,
    namespace: &str,
    b: &BenchRef,
    history: usize,
) -> Result<Vec<Loaded>> {
    let status = run_status(client, namespace, b).await?;
    let latest_name = status.latest_result.clone().ok_or_else(|| {
        anyhow!(
            "{} {namespace}/{} has no result yet (status.latestResult is empty; phase {:?})",
            b.kind.kind_name(),
            b.name,
            status.phase.unwrap_or_default()
        )
    })?;
    let mut latest = by_name(client, namespace, &latest_name).await?;
    latest.conditions = status.conditions;
    let mut out = vec![latest];
    if history > 0 {
        let mut earlier = results_of(client, namespace, b).await?;
        earlier.retain(|r| r.name != latest_name);
        earlier.sort_by(|x, y| y.when().cmp(&x.when()));
        earlier.truncate(history);
        out.extend(earlier);
    }
    Ok(out)
}

/// Every result of a benchmark (at most [`MAX_RESULTS`]), found by its label and checked
/// against the result's own record of its benchmark.
async fn results_of(client: &Client, namespace: &str, b: &BenchRef) -> Result<Vec<Loaded>> {
    let api: Api<BenchmarkResult> = Api::namespaced(client.clone(), namespace);
    // Label values are at most 63 characters; longer names are matched on the spec alone.
    let selector = (b.name.len() <= 63).then(|| format!("{BENCHMARK_LABEL}={}", b.name));
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut lp = ListParams::default().limit(PAGE);
        if let Some(s) = &selector {
            lp = lp.labels(s);
        }
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api
            .list(&lp)
            .await
            .with_context(|| format!("cannot list BenchmarkResults in {namespace}"))?;
        for r in page.items {
            let spec = &r.spec.benchmark;
            if spec.kind == b.kind.kind_name() && spec.name == b.name && spec.namespace == namespace
            {
                out.push(loaded(r, namespace));
            }
        }
        if out.len() > MAX_RESULTS {
            bail!("{} has more than {MAX_RESULTS} results", b.name);
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(out);
        }
    }
    bail!(
        "looked at {} BenchmarkResults in {namespace} without reaching the end; name results with --result",
        MAX_PAGES.saturating_mul(PAGE as usize)
    )
}
