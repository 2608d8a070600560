//! An IngressBenchmark's sweep: the sizes to scale its target to (`spec.sweep`), the target's
//! fields saved before the first step and restored after the last, and how throughput grew
//! across the steps (`status.scaling`).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::common::Duration;

/// Repeat the run at increasing sizes of the target to see how throughput scales. With
/// controllers, every step measures every controller, each scaled to the step's size.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SweepSpec {
    /// The workload serving the target (e.g. the ingress controller). Its original spec is saved
    /// before the first step and restored after the last one, on failure, or on deletion.
    /// Required without controllers; with controllers, each names its own
    /// (controllers[].sweepTarget) and this is left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// The sizes to measure, smallest first.
    #[schemars(length(min = 1, max = 16))]
    #[x_kube(
        validation = Rule::new("self.all(s, has(s.cpu) || has(s.replicas))").message("each sweep step must set cpu and/or replicas"),
        validation = Rule::new("self.all(s, has(s.cpu)) || self.all(s, !has(s.cpu))").message("set cpu on every sweep step or on none"),
        validation = Rule::new("self.all(s, has(s.replicas)) || self.all(s, !has(s.replicas))").message("set replicas on every sweep step or on none"),
        validation = Rule::new("!self.all(s, has(s.cpu)) || (self.map(s, quantity(s.cpu).asApproximateFloat()).isSorted() && self.all(a, self.exists_one(b, quantity(b.cpu).compareTo(quantity(a.cpu)) == 0)))").message("sweep steps must be strictly increasing in cpu"),
        validation = Rule::new("!self.all(s, has(s.replicas)) || (self.map(s, s.replicas).isSorted() && (self.all(s, has(s.cpu)) || self.all(a, self.exists_one(b, b.replicas == a.replicas))))").message("sweep steps must be increasing in replicas (strictly, when cpu is not set)"),
    )]
    pub steps: Vec<SweepStep>,
    /// Wait this long after the target's rollout finished before measuring.
    #[serde(default = "default_settle")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN), length(max = 32))]
    #[x_kube(validation = Rule::new("duration(self) <= duration('1h')").message("sweep.settle must be at most 1h"))]
    pub settle: Duration,
}

fn default_settle() -> Duration {
    std::time::Duration::from_secs(10).into()
}

/// The workload a sweep scales.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TargetRef {
    /// Deployment or DaemonSet (DaemonSets scale CPU only).
    #[serde(default)]
    pub kind: TargetKind,
    /// Name of the workload.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Namespace of the workload; defaults to the benchmark's namespace. The operator must be
    /// allowed (Helm values) to patch workloads there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Container whose CPU is set; defaults to the first container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

/// Kinds a sweep can scale.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema, Default,
)]
pub enum TargetKind {
    #[default]
    Deployment,
    DaemonSet,
}

/// One size of the target.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SweepStep {
    /// CPU requests = limits of the target container, e.g. "1", "2", "500m".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // maxLength bounds the CEL cost estimate of the ordering rules on steps.
    #[schemars(extend("maxLength" = 16))]
    #[x_kube(validation = Rule::new("isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0')) && quantity(string(self)).compareTo(quantity('256')) <= 0").message("sweep steps' cpu must be a quantity such as 500m or 2, more than 0 and at most 256"))]
    pub cpu: Option<Quantity>,
    /// Replicas of the target Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub replicas: Option<i32>,
}

/// Throughput per step against linear scaling from the first step.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Scaling {
    pub rows: Vec<ScalingRow>,
    /// One-line verdict, e.g. "8 CPUs: 6.45x of 1 CPU, 81% of linear" (a line per controller
    /// when controllers are swept).
    pub summary: String,
}

/// One row of the scaling table.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScalingRow {
    pub index: u32,
    /// The controller of the step (controllers swept side by side).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 40))]
    pub controller: Option<String>,
    /// The step's size relative to the first step (CPU ratio, or replica ratio).
    pub size_factor: f64,
    pub rps: f64,
    /// rps / first step's rps.
    pub speedup: f64,
    /// speedup / sizeFactor: 1.0 is perfectly linear.
    pub efficiency: f64,
}

/// The target's scaled fields before the sweep, restored afterwards.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SavedTarget {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub container: String,
    /// Index of the container in the pod template (JSON patches address it by index).
    pub container_index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The container's resources as they were, JSON-encoded (absent fields stay absent).
    pub resources_json: String,
    /// True once the original spec has been written back.
    #[serde(default)]
    pub restored: bool,
}
