//! BenchmarkResult: the record of one finished run, written once by the operator and kept after
//! its benchmark is gone (up to the benchmark's historyLimit). It holds what ran, on what
//! cluster, every figure with its samples and confidence interval, the merged latency
//! histograms (so percentiles can be recomputed exactly later), and the regression verdict.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::{BenchmarkRef, Phase};
use crate::history::Better;
use crate::ingress::Scaling;

/// Labels every result carries, so a benchmark's history is one label selector away.
pub const BENCHMARK_LABEL: &str = "netbench.io/benchmark";
pub const KIND_LABEL: &str = "netbench.io/benchmark-kind";
/// The hash of the spec that ran (first 16 hex digits), for "previous results of this spec".
pub const SPEC_HASH_LABEL: &str = "netbench.io/spec-hash";

/// The record of one finished benchmark run. Immutable.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "netbench.io",
    version = "v1alpha1",
    kind = "BenchmarkResult",
    derive = "PartialEq",
    namespaced,
    shortname = "br",
    category = "benchmarks",
    doc = "The record of one finished benchmark run: the spec that ran, the cluster, every figure with its samples and 95% confidence interval, merged latency histograms, and the regression verdict. Written once by the operator.",
    printcolumn = r#"{"name":"Benchmark", "type":"string", "jsonPath":".spec.benchmark.name"}"#,
    printcolumn = r#"{"name":"Kind", "type":"string", "priority":1, "jsonPath":".spec.benchmark.kind"}"#,
    printcolumn = r#"{"name":"Phase", "type":"string", "jsonPath":".spec.phase"}"#,
    printcolumn = r#"{"name":"Result", "type":"string", "description":"The main figure of the last step or the best case, mean ± 95% CI", "jsonPath":".spec.summary"}"#,
    printcolumn = r#"{"name":"Regressed", "type":"string", "jsonPath":".spec.verdict.regressed"}"#,
    printcolumn = r#"{"name":"Started", "type":"date", "jsonPath":".spec.startTime"}"#,
    printcolumn = r#"{"name":"Age", "type":"date", "jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self == oldSelf").message("a BenchmarkResult is immutable"))]
pub struct BenchmarkResultSpec {
    /// The benchmark that ran.
    pub benchmark: BenchmarkRef,
    /// Its uid (a benchmark re-created under the same name continues the history).
    #[schemars(length(max = 64))]
    pub benchmark_uid: String,
    /// The run's id (labels of its pods, Events).
    #[schemars(length(max = 63))]
    pub run_id: String,
    /// SHA-256 of the benchmark's spec as it ran, hex.
    #[schemars(length(max = 64))]
    pub spec_hash: String,
    /// The benchmark's spec as it ran, JSON.
    #[schemars(length(max = 262144))]
    pub benchmark_spec: String,
    /// Succeeded or Failed.
    pub phase: Phase,
    /// How the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// What the cluster was.
    #[serde(default)]
    pub cluster: ClusterFacts,
    /// The environment fingerprint baselines are matched on (absent from results written
    /// before fingerprints existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<crate::environment::Environment>,
    /// Every step (IngressBenchmark) or case (EgressBenchmark) measured.
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub measurements: Vec<Measurement>,
    /// IngressBenchmark sweeps: throughput per step against linear scaling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<Scaling>,
    /// The main figure, e.g. "12034 ± 210 req/s" (printer column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub summary: Option<String>,
    /// The comparison with the benchmark's baseline, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

impl BenchmarkResultSpec {
    /// Each measurement's statistics (what baselines and comparisons judge).
    pub fn statistics(&self) -> Vec<MeasurementStats> {
        self.measurements
            .iter()
            .map(Measurement::statistics)
            .collect()
    }
}

impl Measurement {
    /// Its statistics, without parameters or histogram.
    pub fn statistics(&self) -> MeasurementStats {
        MeasurementStats {
            index: self.index,
            name: self.name.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

/// The cluster a run measured.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterFacts {
    /// The API server's version, e.g. v1.37.2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub kubernetes_version: Option<String>,
    /// The nodes the run's workers ran on.
    #[serde(default)]
    #[schemars(length(max = 128))]
    pub nodes: Vec<NodeFacts>,
    /// The CNI's DaemonSet and image on those nodes, when it is one the operator knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub cni: Option<String>,
    /// The image of an IngressBenchmark's sweep target (the ingress controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub ingress_controller: Option<String>,
}

/// One node as the run found it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeFacts {
    #[schemars(length(max = 253))]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub kernel_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub os_image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub architecture: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub kubelet_version: Option<String>,
    /// CPU capacity as the node reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub cpus: Option<String>,
    /// CPU model, as a worker on this node read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub cpu_model: Option<String>,
    /// Network interfaces a worker on this node saw, with their MTU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub interfaces: Vec<InterfaceFacts>,
}

/// A network interface and its MTU.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceFacts {
    #[schemars(length(max = 16))]
    pub name: String,
    pub mtu: u32,
}

/// One step or case, over all its samples.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Measurement {
    /// 0-based step or case index.
    pub index: u32,
    /// "step 0", or the case's name.
    #[schemars(length(max = 128))]
    pub name: String,
    /// What distinguishes it: cpu, replicas (sweep steps); offloadProfile, client and server
    /// nodes (cases).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// Every figure with its samples and confidence interval.
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub metrics: Vec<MetricStats>,
    /// The latency histogram of every request or transaction of every sample, merged exactly
    /// (HdrHistogram V2 + DEFLATE, base64; microseconds): ingress steps, request/response
    /// cases, and tcp-stream cases with a latency probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 262144))]
    pub histogram: Option<String>,
    /// A case with a topology: a row per client/server pair of its last sample (from the
    /// clients' reports; nodes as the workers reported them), for the node-pair matrix.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    pub pairs: Vec<crate::topology::PairResult>,
}

/// One figure over the samples of a step or case.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MetricStats {
    /// rps, p99Ms, receiverBitsPerSecond, ...
    #[schemars(length(max = 64))]
    pub name: String,
    /// req/s, ms, bit/s, ratio, count.
    #[schemars(length(max = 16))]
    pub unit: String,
    pub better: Better,
    /// One value per sample, in order.
    #[schemars(length(max = 20))]
    pub values: Vec<f64>,
    pub mean: f64,
    /// Sample standard deviation (0 with one sample).
    pub stddev: f64,
    /// Half-width of the 95% confidence interval of the mean (Student's t; 0 with one sample:
    /// the noise is unknown).
    pub ci95: f64,
}

/// The statistics of one step or case so far (status.statistics).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MeasurementStats {
    pub index: u32,
    #[schemars(length(max = 128))]
    pub name: String,
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub metrics: Vec<MetricStats>,
}

impl MeasurementStats {
    /// Samples taken (the main figure's count of values).
    pub fn samples(&self) -> u32 {
        self.metrics
            .first()
            .map_or(0, |m| u32::try_from(m.values.len()).unwrap_or(u32::MAX))
    }

    pub fn metric(&self, name: &str) -> Option<&MetricStats> {
        self.metrics.iter().find(|m| m.name == name)
    }
}

/// A run against its baseline.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// What the run was compared with, e.g. "result web-abc-g1" or "previous 3 results".
    #[schemars(length(max = 1024))]
    pub baseline: String,
    /// The results the baseline consists of.
    #[serde(default)]
    #[schemars(length(max = 20))]
    pub baseline_results: Vec<String>,
    /// "True", "False", or "Unknown" (no baseline to compare with).
    #[schemars(length(max = 8))]
    pub regressed: String,
    /// Results left out of the baseline because their environment fingerprint differs from
    /// this run's, each with the differences ("web-r3: kernel 6.1.0-18-amd64 (this run:
    /// 6.1.0-21-amd64)").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20), inner(length(max = 1024)))]
    pub skipped: Vec<String>,
    /// Differences of the baseline's results from this run's environment in fields
    /// `baseline.ignoreEnvironment` leaves out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20), inner(length(max = 1024)))]
    pub ignored: Vec<String>,
    /// One line per figure judged.
    #[serde(default)]
    #[schemars(length(max = 512))]
    pub metrics: Vec<MetricVerdict>,
}

/// One figure of one step or case against the baseline.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MetricVerdict {
    /// The step or case ("step 1", "vxlan").
    #[schemars(length(max = 128))]
    pub measurement: String,
    #[schemars(length(max = 64))]
    pub metric: String,
    pub better: Better,
    pub baseline_mean: f64,
    pub baseline_ci95: f64,
    pub mean: f64,
    pub ci95: f64,
    /// (mean - baseline) / baseline, percent.
    pub delta_percent: f64,
    pub tolerance_percent: f64,
    /// Worse than the baseline by more than the tolerance.
    pub exceeds_tolerance: bool,
    /// The two 95% intervals do not overlap (always true with one sample on both sides).
    pub beyond_noise: bool,
    /// Both: this figure regressed.
    pub regressed: bool,
}
