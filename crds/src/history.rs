//! What both kinds share to make results last: repeated samples, the history of results kept,
//! the baseline a run is judged against, and a schedule of runs. Every field is optional; a
//! benchmark without them runs once and keeps its latest result, as before.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::common::Duration;

/// Most samples of one step or case (with `maxCount` in adaptive mode).
pub const MAX_SAMPLES: u32 = 20;
/// Most results kept per benchmark.
pub const MAX_HISTORY: u32 = 100;
/// Results kept per benchmark when `historyLimit` is not set.
pub const DEFAULT_HISTORY: u32 = 10;

/// Repeat each step (or case) to measure the noise: the result gives mean, standard deviation
/// and a 95% confidence interval of every figure.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.maxCount) || self.maxCount >= self.count").message("samples.maxCount must be at least samples.count"),
    validation = Rule::new("!has(self.maxCount) || has(self.targetCiPercent)").message("samples.maxCount needs samples.targetCiPercent (adaptive mode)"),
)]
pub struct Samples {
    /// Samples of each step or case (at least; adaptive mode may take more).
    #[serde(default = "default_count")]
    #[schemars(range(min = 1, max = 20))]
    pub count: u32,
    /// Pause between two samples of the same step or case ("5s").
    #[serde(default = "default_pause")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN), length(max = 32))]
    #[x_kube(validation = Rule::new("duration(self) <= duration('10m')").message("samples.pause must be at most 10m"))]
    pub pause: Duration,
    /// Adaptive mode: after `count` samples, keep sampling until the 95% confidence interval of
    /// the main figure (requests/s, receiver bits/s) is within this many percent of its mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.1, max = 100.0))]
    pub target_ci_percent: Option<f64>,
    /// Adaptive mode: never more samples than this (default: `count` + 5, at most 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 20))]
    pub max_count: Option<u32>,
}

fn default_count() -> u32 {
    1
}
fn default_pause() -> Duration {
    std::time::Duration::from_secs(5).into()
}

impl Default for Samples {
    fn default() -> Self {
        Samples {
            count: 1,
            pause: default_pause(),
            target_ci_percent: None,
            max_count: None,
        }
    }
}

impl Samples {
    /// The fewest samples of a measurement, within bounds (the spec may predate the schema).
    pub fn min(&self) -> u32 {
        self.count.clamp(1, MAX_SAMPLES)
    }

    /// The most samples of a measurement.
    pub fn max(&self) -> u32 {
        match self.target_ci_percent {
            None => self.min(),
            Some(_) => self
                .max_count
                .unwrap_or(self.min().saturating_add(5))
                .clamp(self.min(), MAX_SAMPLES),
        }
    }
}

/// What a run is compared with. A run with a baseline sets the Regressed condition.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.result) != has(self.previous)").message("baseline must set exactly one of result and previous"),
)]
pub struct Baseline {
    /// A BenchmarkResult in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub result: Option<String>,
    /// The last N succeeded results of this benchmark with the same spec (their samples
    /// pooled). The first run has none and reports Regressed=Unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 20))]
    pub previous: Option<u32>,
    /// The figures judged and how much worse each may get. Default: requests/s (10%) and p99
    /// latency (20%) for IngressBenchmark, receiver bits/s (10%) for EgressBenchmark.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub metrics: Vec<MetricTolerance>,
    /// Fields of the environment fingerprint left out when choosing the baseline's results:
    /// kubernetes, kernel, cpu, network, cni, ingressController, placement, or all. By default
    /// every field must match this run's, and results of another environment are skipped
    /// (the verdict names them); `all` also admits results written before fingerprints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub ignore_environment: Vec<crate::environment::EnvironmentField>,
}

/// How much worse one figure may get before the run counts as regressed.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MetricTolerance {
    /// A figure's name as results list it: rps, p50Ms, p90Ms, p99Ms, p999Ms, errorRate
    /// (IngressBenchmark); receiverBitsPerSecond, senderBitsPerSecond, retransmits
    /// (EgressBenchmark).
    #[schemars(length(min = 1, max = 64))]
    pub name: String,
    /// Worse by more than this many percent of the baseline (and beyond the noise) regresses.
    #[serde(default = "default_tolerance")]
    #[schemars(range(min = 0.0, max = 1000.0))]
    pub tolerance_percent: f64,
    /// Which way is better; defaults to the figure's own (Higher for rps, Lower for latency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub better: Option<Better>,
}

fn default_tolerance() -> f64 {
    10.0
}

/// Which way a figure improves.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum Better {
    Higher,
    Lower,
}

/// What a scheduled run does when the previous one has not finished (as a CronJob's).
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema, Default,
)]
pub enum ConcurrencyPolicy {
    /// Skip the new run (an Event says so). Two runs of one benchmark never overlap: they
    /// would skew each other's numbers.
    #[default]
    Forbid,
    /// Stop the run under way and start the new one.
    Replace,
}

/// Where a scheduled benchmark stands. Kept across runs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleStatus {
    /// How many scheduled runs have started; part of the run id.
    #[serde(default)]
    pub round: u64,
    /// When the last scheduled run was due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
    /// When the next one is due (absent while suspended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<Time>,
    /// Fingerprint of the spec the current round's run uses, without schedule, suspend and
    /// concurrencyPolicy: a spec change restarts the round's run only when this changes (so
    /// suspending, resuming or editing the schedule starts nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_hash: Option<String>,
}

/// The fields both kinds' specs share to make results last (flattened into each spec).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Repetition {
    /// Repeat each step (IngressBenchmark) or case (EgressBenchmark) this many times and report mean, standard deviation and a 95%
    /// confidence interval of every figure (optionally until the interval is narrow enough).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<Samples>,
    /// BenchmarkResults of this benchmark kept, newest first (default 10); they outlive the
    /// benchmark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub history_limit: Option<u32>,
    /// Compare every run with a result or with this benchmark's previous results; sets the
    /// Regressed condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    /// Run on a schedule, in cron syntax ("*/30 * * * *", "@daily"). With a schedule, runs start
    /// only when due (none at creation); each gives a BenchmarkResult.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128), regex(pattern = r"^[0-9A-Za-z*/,?#@ -]+$"))]
    pub schedule: Option<String>,
    /// Start no scheduled run while true (a run under way goes on).
    #[serde(default)]
    pub suspend: bool,
    /// A scheduled run due while the previous one has not finished: Forbid (skip it, the
    /// default) or Replace (stop the old run).
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,
}

impl Repetition {
    /// Results kept, within bounds.
    pub fn history_limit(&self) -> u32 {
        self.history_limit
            .unwrap_or(DEFAULT_HISTORY)
            .clamp(1, MAX_HISTORY)
    }

    pub fn samples(&self) -> Samples {
        self.samples.clone().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_bounds_hold_even_for_values_the_schema_would_refuse() {
        let s = Samples {
            count: 0,
            ..Default::default()
        };
        assert_eq!((s.min(), s.max()), (1, 1));
        let adaptive = Samples {
            count: 3,
            target_ci_percent: Some(5.0),
            max_count: Some(1000),
            ..Default::default()
        };
        assert_eq!((adaptive.min(), adaptive.max()), (3, MAX_SAMPLES));
        let default_max = Samples {
            count: 3,
            target_ci_percent: Some(5.0),
            ..Default::default()
        };
        assert_eq!(default_max.max(), 8);
    }
}
