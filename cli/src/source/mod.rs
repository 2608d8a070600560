//! Where results come from: BenchmarkResult objects in the cluster (by name, or a benchmark's
//! latest result and its history), or YAML/JSON files. Everything read is untrusted: files are
//! bounded in size, results in number, and each result's lists in length before anything
//! else looks at it.

pub mod cluster;
pub mod file;

use anyhow::{bail, Result};
use crds::result::BenchmarkResultSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Largest file read.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Most results one command reads.
pub const MAX_RESULTS: usize = 1000;

/// One BenchmarkResult, from wherever it came.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// Where it came from, for messages ("result team-a/web-x1", "file r.yaml, item 2").
    pub origin: String,
    /// The object's name ("" when a file's object has none).
    pub name: String,
    pub created: Option<Time>,
    pub spec: BenchmarkResultSpec,
    /// The benchmark's conditions (ThresholdsMet, ...), when it was read from the cluster and
    /// this result is its latest.
    pub conditions: Vec<Condition>,
}

impl Loaded {
    /// The benchmark this result belongs to, as one key.
    pub fn benchmark_key(&self) -> (String, String, String) {
        let b = &self.spec.benchmark;
        (b.kind.clone(), b.namespace.clone(), b.name.clone())
    }

    /// When it ran: its start, else its creation.
    pub fn when(&self) -> Option<&Time> {
        self.spec.start_time.as_ref().or(self.created.as_ref())
    }

    /// A name to show: the object's name, else its run id, else its origin.
    pub fn display_name(&self) -> &str {
        [&self.name, &self.spec.run_id, &self.origin]
            .into_iter()
            .find(|s| !s.is_empty())
            .map_or("", |s| s.as_str())
    }
}

/// The lengths the CRD schema allows; a file or a stored object older than the schema may
/// claim more, and is refused rather than drawn.
const MAX_MEASUREMENTS: usize = 64;
const MAX_METRICS: usize = 32;
const MAX_VALUES: usize = crds::history::MAX_SAMPLES as usize;
const MAX_NODES: usize = 128;
const MAX_VERDICT_METRICS: usize = 512;
const MAX_VERDICT_NOTES: usize = 20;

/// Refuses a result whose lists are longer than the schema allows.
pub fn check_bounds(r: &Loaded) -> Result<()> {
    let s = &r.spec;
    let over = |what: &str, n: usize, max: usize| -> Result<()> {
        if n > max {
            bail!(
                "{}: {n} {what}, more than the {max} a BenchmarkResult may hold",
                r.origin
            );
        }
        Ok(())
    };
    over("measurements", s.measurements.len(), MAX_MEASUREMENTS)?;
    over("nodes", s.cluster.nodes.len(), MAX_NODES)?;
    for m in &s.measurements {
        over("figures in one measurement", m.metrics.len(), MAX_METRICS)?;
        for f in &m.metrics {
            over("samples of one figure", f.values.len(), MAX_VALUES)?;
        }
    }
    if let Some(v) = &s.verdict {
        over("verdict lines", v.metrics.len(), MAX_VERDICT_METRICS)?;
        over(
            "skipped baseline results",
            v.skipped.len(),
            MAX_VERDICT_NOTES,
        )?;
        over(
            "ignored environment differences",
            v.ignored.len(),
            MAX_VERDICT_NOTES,
        )?;
    }
    if let Some(e) = &s.environment {
        let longest = crds::environment::EnvironmentField::FIELDS
            .iter()
            .filter_map(|f| e.get(*f))
            .map(|v| v.chars().count())
            .max()
            .unwrap_or(0);
        over(
            "characters in an environment field",
            longest,
            crds::environment::MAX_FIELD,
        )?;
    }
    Ok(())
}

/// Adds results to a list, refusing to hold more than [`MAX_RESULTS`].
pub fn push_bounded(into: &mut Vec<Loaded>, more: Vec<Loaded>) -> Result<()> {
    if into.len().saturating_add(more.len()) > MAX_RESULTS {
        bail!("more than {MAX_RESULTS} results; name fewer");
    }
    for r in &more {
        check_bounds(r)?;
    }
    into.extend(more);
    Ok(())
}

/// The results a command reads: from the cluster, from files, or both.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SourceArgs {
    /// A benchmark (KIND/NAME: ib/web, eb/vxlan): its latest result and its history.
    #[arg(long, value_name = "KIND/NAME")]
    pub benchmark: Vec<crate::kube_client::BenchRef>,
    /// With --benchmark: how many earlier results to read besides the latest (0: none).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub history: usize,
    /// A BenchmarkResult by name (repeatable).
    #[arg(long, value_name = "NAME")]
    pub result: Vec<String>,
    /// A YAML or JSON file of BenchmarkResults, or a List of them (repeatable; needs no cluster).
    #[arg(long, value_name = "PATH")]
    pub file: Vec<std::path::PathBuf>,
}

impl SourceArgs {
    pub fn is_empty(&self) -> bool {
        self.benchmark.is_empty() && self.result.is_empty() && self.file.is_empty()
    }

    /// Reads every named result: files first, then results by name, then benchmarks.
    pub async fn load(&self, cluster: &crate::kube_client::ClusterArgs) -> Result<Vec<Loaded>> {
        if self.is_empty() {
            bail!("name what to read: --benchmark KIND/NAME, --result NAME or --file PATH");
        }
        let mut out = Vec::new();
        for path in &self.file {
            push_bounded(&mut out, file::read(path)?)?;
        }
        if self.benchmark.is_empty() && self.result.is_empty() {
            return Ok(out);
        }
        let (client, ns) = crate::kube_client::connect(cluster).await?;
        for name in &self.result {
            push_bounded(&mut out, vec![cluster::by_name(&client, &ns, name).await?])?;
        }
        let history = self.history.min(MAX_RESULTS);
        for b in &self.benchmark {
            push_bounded(
                &mut out,
                cluster::of_benchmark(&client, &ns, b, history).await?,
            )?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(measurements: usize, values: usize) -> Loaded {
        let spec: BenchmarkResultSpec = serde_json::from_value(serde_json::json!({
            "benchmark": {"kind": "IngressBenchmark", "namespace": "n", "name": "b"},
            "benchmarkUid": "u", "runId": "r", "specHash": "h", "benchmarkSpec": "{}",
            "phase": "Succeeded",
            "measurements": (0..measurements).map(|i| serde_json::json!({
                "index": i, "name": format!("step {i}"),
                "metrics": [{"name": "rps", "unit": "req/s", "better": "Higher",
                             "values": vec![1.0; values], "mean": 1.0, "stddev": 0.0, "ci95": 0.0}]
            })).collect::<Vec<_>>()
        }))
        .unwrap();
        Loaded {
            origin: "test".into(),
            name: "r".into(),
            created: None,
            spec,
            conditions: vec![],
        }
    }

    #[test]
    fn results_longer_than_the_schema_allows_are_refused() {
        assert!(check_bounds(&loaded(64, 20)).is_ok());
        let e = check_bounds(&loaded(65, 1)).unwrap_err().to_string();
        assert!(e.contains("65 measurements, more than the 64"), "{e}");
        let e = check_bounds(&loaded(1, 21)).unwrap_err().to_string();
        assert!(e.contains("21 samples of one figure"), "{e}");
        let mut many = vec![];
        assert!(push_bounded(&mut many, vec![loaded(1, 1); MAX_RESULTS]).is_ok());
        assert!(push_bounded(&mut many, vec![loaded(1, 1)]).is_err());
    }
}
