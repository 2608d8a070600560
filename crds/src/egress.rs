//! EgressBenchmark: network paths between nodes, over the overlay, through a Service and from a
//! pod through the egress node to a target, measured per case with one of five tests (TCP stream
//! throughput, TCP and UDP request/response, TCP connect/request/response, UDP datagrams at a
//! rate), with NIC/vxlan checksum offload tuned and restored.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::{CleanupPolicy, RunStatus};
pub use crate::topology::{Matrix, NodeSet, PairAggregate, PairResult, Topology};
pub use protocol::Protocol;

mod case;
mod endpoints;
mod offload;
pub use case::{CaseResult, CaseSweep, Direction, EgressCase};
pub use endpoints::{ClientEndpoint, ServerEndpoint};
pub use offload::{OffloadProfile, OffloadRecord, OffloadSetting, OffloadSpec};

/// Measure TCP stream throughput for several cases (node->node, vxlan->vxlan,
/// pod->egress node->target), optionally with checksum offload switched per case.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "netbench.io",
    version = "v1alpha1",
    kind = "EgressBenchmark",
    derive = "PartialEq",
    namespaced,
    status = "EgressBenchmarkStatus",
    shortname = "eb",
    category = "benchmarks",
    doc = "Measure TCP stream throughput node->node, vxlan->vxlan and pod->egress node->target, with checksum offload tuned per case and restored afterwards.",
    printcolumn = r#"{"name":"Phase", "type":"string", "jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Cases", "type":"string", "description":"Cases measured / requested", "jsonPath":".status.casesSummary"}"#,
    printcolumn = r#"{"name":"Best", "type":"string", "description":"Highest receiver throughput of any case", "jsonPath":".status.best"}"#,
    printcolumn = r#"{"name":"Overhead", "type":"string", "description":"Largest throughput loss against the baseline case", "jsonPath":".status.overhead"}"#,
    printcolumn = r#"{"name":"Queue", "type":"integer", "priority":1, "description":"Position in the queue while Queued (kubectl get -o wide)", "jsonPath":".status.queue.position"}"#,
    printcolumn = r#"{"name":"Age", "type":"date", "jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.baselineCase) || self.cases.exists(c, c.name == self.baselineCase)").message("baselineCase must name one of the cases"),
    validation = Rule::new("self.cases.all(c, !has(c.offloadProfile) || (has(self.offload) && self.offload.profiles.exists(p, p.name == c.offloadProfile)))").message("every case's offloadProfile must name a profile in offload.profiles"),
)]
pub struct EgressBenchmarkSpec {
    /// The measurements to make, one after another.
    #[schemars(length(min = 1, max = 16))]
    #[x_kube(validation = Rule::new("self.all(c, self.exists_one(d, d.name == c.name))").message("case names must be unique"))]
    pub cases: Vec<EgressCase>,
    /// The case the others are compared with (overheadPercent). Defaults to the first case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub baseline_case: Option<String>,
    /// Offload profiles that cases can name. Applied by privileged Jobs before the case and
    /// restored afterwards (also on failure or deletion). Needs the cluster admin's permission
    /// (operator config) for this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload: Option<OffloadSpec>,
    /// Resources of every worker pod (client and server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<EgressWorkers>,
    /// What happens to worker pods when the run ends: Always (default), OnSuccess, Never.
    #[serde(default)]
    pub cleanup: CleanupPolicy,
    /// SLO gates: limits on the case figures, judged on the data merged across the workers;
    /// a broken gate fails the run (at once with abortOnFail). See docs/gates.md.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub gates: Vec<crate::gates::Gate>,
    /// Samples, history, baseline and schedule (see crds::history::Repetition).
    #[serde(flatten)]
    pub repetition: crate::history::Repetition,
}

/// Resources of the client and server pods.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct EgressWorkers {
    /// CPU for each worker, e.g. "2". Sets requests = limits (Guaranteed QoS), so the kubelet's
    /// static CPU manager can pin it and a stream is not throttled by a neighbour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 16))]
    #[x_kube(validation = Rule::new("isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0')) && quantity(string(self)).compareTo(quantity('256')) <= 0").message("workers.cpu must be a quantity such as 500m or 2, more than 0 and at most 256"))]
    pub cpu: Option<Quantity>,
    /// Memory for each worker (requests = limits). Defaults to 256Mi when cpu is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 16))]
    #[x_kube(validation = Rule::new("isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0')) && quantity(string(self)).compareTo(quantity('1Ti')) <= 0").message("workers.memory must be a quantity such as 256Mi or 1Gi, more than 0 and at most 1Ti"))]
    pub memory: Option<Quantity>,
}

/// Observed state of an EgressBenchmark.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EgressBenchmarkStatus {
    #[serde(flatten)]
    pub run: RunStatus,
    /// Index of the case being run (0-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_case: Option<u32>,
    /// One result per finished case.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cases: Vec<CaseResult>,
    /// Offload settings seen before, applied, and restored, per node and interface.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offload: Vec<OffloadRecord>,
    /// Cases measured / requested, e.g. "3/3" (printer column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cases_summary: Option<String>,
    /// Highest receiver throughput, e.g. "15.3 Gbit/s" (printer column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best: Option<String>,
    /// Largest loss against the baseline case, e.g. "10.2% (vxlan)", and how many cases were
    /// not compared with it for another node pair ("; 2 not comparable") (printer column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<String>,
}
