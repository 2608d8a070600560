//! Types shared by both benchmark kinds.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::duration::{Duration, DURATION_PATTERN};

/// Where a run is in its life. Moves forward only:
/// Pending -> (Queued) -> Preparing -> Running -> Collecting -> Succeeded | Failed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum Phase {
    /// Accepted, nothing created yet.
    #[default]
    Pending,
    /// Waiting for another run that shares the target or worker nodes, or for a slot of the
    /// namespace's concurrent runs; `status.queue` says for what and where it stands.
    Queued,
    /// Creating workers, offload Jobs, or scaling the target.
    Preparing,
    /// Workers are generating load.
    Running,
    /// Merging worker reports.
    Collecting,
    /// Finished with results.
    Succeeded,
    /// Finished without (complete) results; see conditions and message.
    Failed,
}

impl Phase {
    /// Succeeded and Failed are final: the run never starts again for this generation.
    pub fn is_finished(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed)
    }
}

/// What happens to worker pods and Secrets when a run ends. Offload settings and scaled targets
/// are restored in every case.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum CleanupPolicy {
    /// Delete workers when the run ends.
    #[default]
    Always,
    /// Delete workers only after a successful run; a failed run keeps the pods of its last
    /// sample (the one that failed it, or the last measured) for debugging. Under Always and
    /// OnSuccess each earlier sample's pods go once it is collected.
    OnSuccess,
    /// Keep workers until the benchmark is deleted.
    Never,
}

/// Common status bookkeeping for both kinds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    /// Current phase of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Human-readable reason for the current phase (what it waits for, why it failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The spec generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Identifier of this run; labels every child object and authenticates worker reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// When the current phase began (timeouts count from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_since: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// When the run left Pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// When the run reached Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// Standard conditions: Ready, Invalid, Queued, WorkersScheduled, ThresholdsMet,
    /// OffloadRestored, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// While the run is Queued: its place in the queue and what it waits for (absent
    /// otherwise). Queued runs take turns across namespaces: first every namespace's oldest
    /// queued run, then every namespace's second, and so on; within a round, namespaces whose
    /// last run started longest ago (or never) go first, then older runs. So one namespace's
    /// ten queued runs do not all go before another namespace's one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueStatus>,
    /// The sample of the current step or case being taken (0-based), when `spec.samples`
    /// asks for more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_sample: Option<u32>,
    /// Every step or case measured so far: each figure's samples, mean, standard deviation
    /// and 95% confidence interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statistics: Vec<crate::result::MeasurementStats>,
    /// The BenchmarkResult of the latest finished run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_result: Option<String>,
    /// Scheduled benchmarks: the runs started so far and the next one due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<crate::history::ScheduleStatus>,
}

/// Where a queued run stands (see `RunStatus::queue` for the order).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// 1 + the number of queued runs that go first and compete with this one (share a target
    /// or node, or the namespace's run slots): 1 means next once what it waits for is done.
    pub position: u32,
    /// What this run waits for: a shared target or node ("target svc:80", "node n1"), or
    /// "namespace run slots" (the cluster admin's cap on concurrent runs per namespace).
    pub waits_for: String,
    /// The benchmark holding what it needs (running, or queued ahead of it), when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_by: Option<BenchmarkRef>,
}

/// A benchmark of either kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkRef {
    /// IngressBenchmark or EgressBenchmark.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// Latency percentiles in milliseconds, computed from the merged HDR histogram of all workers
/// (never an average of per-worker percentiles).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LatencyMillis {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

/// Errors by class. `status4xx`/`status5xx` are answers (also counted in the step's `requests`
/// and in its latency, as wrk counts them); the other classes are requests that got no answer,
/// which never enter the latency figures.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorCounts {
    pub connect: u64,
    pub timeout: u64,
    pub read: u64,
    pub write: u64,
    pub status4xx: u64,
    pub status5xx: u64,
    pub parse: u64,
}

impl ErrorCounts {
    /// Every error counted, saturating: the counts may come from a stored status that someone
    /// other than the operator wrote.
    pub fn total(&self) -> u64 {
        [
            self.connect,
            self.timeout,
            self.read,
            self.write,
            self.status4xx,
            self.status5xx,
            self.parse,
        ]
        .into_iter()
        .fold(0, u64::saturating_add)
    }

    /// Requests that got no answer (connect, timeout, read, write, parse), saturating.
    pub fn unanswered(&self) -> u64 {
        [
            self.connect,
            self.timeout,
            self.read,
            self.write,
            self.parse,
        ]
        .into_iter()
        .fold(0, u64::saturating_add)
    }

    /// The share of attempted requests that failed, given the step's `requests` (its answers,
    /// status errors among them): (4xx + 5xx + unanswered) / (answers + unanswered), so every
    /// answer a backend gave as 503 counts once. `None` when nothing was attempted. A stored
    /// status claiming more status errors than answers is held to the answers.
    pub fn error_rate(&self, requests: u64) -> Option<f64> {
        let unanswered = self.unanswered();
        let status = self.status4xx.saturating_add(self.status5xx).min(requests);
        let attempts = requests.saturating_add(unanswered);
        (attempts > 0).then(|| status.saturating_add(unanswered) as f64 / attempts as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_total_saturates_instead_of_overflowing() {
        let e = ErrorCounts {
            connect: u64::MAX,
            timeout: 2,
            parse: 3,
            ..Default::default()
        };
        assert_eq!(e.total(), u64::MAX);
        let small = ErrorCounts {
            connect: 1,
            status5xx: 4,
            ..Default::default()
        };
        assert_eq!(small.total(), 5);
    }

    #[test]
    fn error_rate_counts_each_status_error_once() {
        // 2000 answers, 1000 of them 503: half the requests failed, not a third.
        let half = ErrorCounts {
            status5xx: 1000,
            ..Default::default()
        };
        assert_eq!(half.error_rate(2000), Some(0.5));
        // Every answer a 503: all failed.
        assert_eq!(half.error_rate(1000), Some(1.0));
        // 90 answers (10 of them 404) and 10 connections refused: 20 of 100 failed.
        let mixed = ErrorCounts {
            status4xx: 10,
            connect: 10,
            ..Default::default()
        };
        assert_eq!(mixed.error_rate(90), Some(0.2));
        assert_eq!(ErrorCounts::default().error_rate(0), None);
        assert_eq!(ErrorCounts::default().error_rate(5), Some(0.0));
        // A forged status: more status errors than answers, counts at the edge of u64.
        let forged = ErrorCounts {
            status5xx: u64::MAX,
            timeout: u64::MAX,
            ..Default::default()
        };
        assert_eq!(forged.error_rate(3), Some(1.0));
    }
}
