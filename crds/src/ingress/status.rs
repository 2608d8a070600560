//! An IngressBenchmark's observed state: the run, the step under way and one result per
//! finished step, with each worker's share.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::{
    Comparison, RouteChangeLog, RouteChangeResult, RouteScaleLog, RouteScaleResult, SavedTarget,
    Scaling, WorkloadUsage,
};
use crate::common::{ErrorCounts, LatencyMillis, RunStatus};

/// Observed state of an IngressBenchmark.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IngressBenchmarkStatus {
    #[serde(flatten)]
    pub run: RunStatus,
    /// Index of the sweep step being run (0-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step: Option<u32>,
    /// One result per finished step (a single entry without a sweep).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepResult>,
    /// The controllers side by side (spec.controllers, when several), once the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// The route changes of the sample under way (spec.routeChanges).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_change_log: Option<RouteChangeLog>,
    /// The routes the sample under way created (a route scale: controllers[].route.count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_scale_log: Option<RouteScaleLog>,
    /// How throughput grew across sweep steps compared with linear scaling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<Scaling>,
    /// When the sweep target finished rolling out for the current step (settle counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ready_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// The sweep target's spec before the first step, kept until it has been restored (with
    /// controllers swept, the target of the step under way; savedTargets has them all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_target: Option<SavedTarget>,
    /// Every controller's sweep target as saved before the first step (controllers[].sweepTarget).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub saved_targets: Vec<SavedTarget>,
    /// Requests per second of the last finished step (printer column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps: Option<f64>,
    /// Requests per second of the last finished step as mean ± 95% confidence interval over
    /// its samples, e.g. "12034 ± 210" ("12034" with one sample) (printer column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps_interval: Option<String>,
    /// 99th percentile latency of the last finished step, e.g. "4.21ms" (printer column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<String>,
    /// Workers reporting / requested, e.g. "2/2" (printer column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<String>,
}

/// The result of one run (one sweep step).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    /// 0-based step index.
    pub index: u32,
    /// The controller measured in this step (spec.controllers), if several are compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 40))]
    pub controller: Option<String>,
    /// Target CPU during this step, if the sweep set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Quantity>,
    /// Target replicas during this step, if the sweep set them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Completed requests per second over all workers: every response, whatever its status,
    /// as wrk counts them (errors.status4xx and status5xx say how many were not 2xx/3xx).
    pub rps: f64,
    /// Requested rate (open loop only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_rps: Option<f64>,
    /// Completed requests (any status) whose request began in the measured duration.
    pub requests: u64,
    /// Response bytes per second over all workers.
    pub bytes_per_second: f64,
    /// Percentiles from the merged histogram of all workers.
    pub latency_ms: LatencyMillis,
    /// Failed requests by class.
    pub errors: ErrorCounts,
    /// Spread of the workers' actual start times after the barrier, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_skew_ms: Option<f64>,
    /// Per-worker figures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerSummary>,
    /// How the route changes (spec.routeChanges, action SwapBackend) showed in the answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_changes: Option<RouteChangeResult>,
    /// How the route's creations (routeChanges action DeleteAndCreate) showed: to the first
    /// 2xx answer from the route's backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_creations: Option<RouteChangeResult>,
    /// How the route's deletions (routeChanges action DeleteAndCreate) showed: to the first
    /// 404 answered by the Gateway itself (no X-Netbench-Backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_deletions: Option<RouteChangeResult>,
    /// The route scale's routes (controllers[].route.count > 1): how soon each answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_scale: Option<RouteScaleResult>,
    /// CPU and memory of the controller's workloads (controllers[].workloads) during the
    /// measured window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4))]
    pub workloads: Vec<WorkloadUsage>,
}

/// One worker's share of a step.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkerSummary {
    pub pod: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub rps: f64,
    pub requests: u64,
    pub errors: u64,
    pub p99_ms: f64,
}
