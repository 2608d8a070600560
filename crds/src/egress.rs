//! EgressBenchmark: TCP stream throughput between nodes, over the overlay, and from a pod through
//! the egress node to a target, with NIC/vxlan checksum offload tuned and restored.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::{CleanupPolicy, Duration, RunStatus};

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

/// One throughput measurement between a client and a server.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EgressCase {
    /// Short name, e.g. node-to-node.
    #[schemars(
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
        length(min = 1, max = 63)
    )]
    pub name: String,
    /// The sending side (unless direction is Receive).
    pub client: ClientEndpoint,
    /// The receiving side.
    pub server: ServerEndpoint,
    /// Parallel TCP streams (iperf3 -P).
    #[serde(default = "default_streams")]
    #[schemars(range(min = 1, max = 128))]
    pub streams: u32,
    /// How long to measure ("10s").
    #[serde(default = "default_case_duration")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN), length(max = 32))]
    #[x_kube(validation = Rule::new("duration(self) >= duration('1s') && duration(self) <= duration('24h')").message("case duration must be between 1s and 24h"))]
    pub duration: Duration,
    /// Bytes per write (iperf3 -l). Default 128 KiB.
    #[serde(default = "default_message_size")]
    #[schemars(range(min = 1, max = 16777216))]
    pub message_size: u32,
    /// Send: client to server (default). Receive: server to client (iperf3 -R). Both: both at once.
    #[serde(default)]
    pub direction: Direction,
    /// Offload profile applied while this case runs; absent = the nodes' settings as found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub offload_profile: Option<String>,
}

fn default_streams() -> u32 {
    1
}
fn default_case_duration() -> Duration {
    std::time::Duration::from_secs(10).into()
}
fn default_message_size() -> u32 {
    128 * 1024
}

/// Which way the bytes flow.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema, Default,
)]
pub enum Direction {
    #[default]
    Send,
    Receive,
    Both,
}

/// The client pod.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(has(self.bindInterface) && has(self.bindAddress))").message("set bindInterface or bindAddress, not both"))]
pub struct ClientEndpoint {
    /// Node to run the client on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub node_name: Option<String>,
    /// Use the node's network namespace (node->node and vxlan->vxlan cases). A normal pod
    /// (false) measures the pod -> egress node -> target path.
    #[serde(default)]
    pub host_network: bool,
    /// Send from this interface's address (e.g. the vxlan device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 15))]
    pub bind_interface: Option<String>,
    /// Send from this local address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 45))]
    pub bind_address: Option<String>,
}

/// The server: a pod the operator runs, or an external `netbench-loadgen tcp-server`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.address) || (!has(self.nodeName) && !has(self.bindInterface) && !has(self.bindAddress) && !self.hostNetwork)").message("server.address (an external tcp-server) cannot be combined with nodeName, hostNetwork, bindInterface or bindAddress"),
    validation = Rule::new("!(has(self.bindInterface) && has(self.bindAddress))").message("set bindInterface or bindAddress, not both"),
)]
pub struct ServerEndpoint {
    /// Node to run the server pod on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub node_name: Option<String>,
    /// Use the node's network namespace.
    #[serde(default)]
    pub host_network: bool,
    /// Listen on this interface's address; the client connects to it (e.g. the vxlan device
    /// for the vxlan->vxlan case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 15))]
    pub bind_interface: Option<String>,
    /// Listen on this address; the client connects to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 45))]
    pub bind_address: Option<String>,
    /// Host or IP of an external `netbench-loadgen tcp-server` (outside the cluster, behind the
    /// egress node); no server pod is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub address: Option<String>,
    /// TCP port of the server's control connection.
    #[serde(default = "default_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
}

fn default_port() -> u16 {
    5201
}

/// Offload profiles.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct OffloadSpec {
    #[schemars(length(min = 1, max = 8))]
    #[x_kube(validation = Rule::new("self.all(p, self.exists_one(q, q.name == p.name))").message("offload profile names must be unique"))]
    pub profiles: Vec<OffloadProfile>,
}

/// A named set of offload settings, e.g. "vxlan-csum-off".
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OffloadProfile {
    #[schemars(
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
        length(min = 1, max = 63)
    )]
    pub name: String,
    #[schemars(length(min = 1, max = 16))]
    pub settings: Vec<OffloadSetting>,
}

/// Features to set on one interface of some nodes.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OffloadSetting {
    /// Nodes to change; empty means the client and server nodes of the cases using the profile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub node_names: Vec<String>,
    /// Interface name on those nodes, e.g. vxlan.calico, flannel.1, eth0.
    #[schemars(length(min = 1, max = 15))]
    pub interface: String,
    /// ethtool feature -> true (on) / false (off), e.g. tx-checksumming: false. Legacy ethtool
    /// names (tx-checksumming, rx-checksumming, ...) and kernel names (tx-checksum-ip-generic)
    /// are both accepted.
    #[schemars(extend("minProperties" = 1, "maxProperties" = 32))]
    pub features: BTreeMap<String, bool>,
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
    /// Largest loss against the baseline case, e.g. "10.2%" (printer column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<String>,
}

/// The result of one case.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CaseResult {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_node: Option<String>,
    pub sender_bits_per_second: f64,
    /// Measured by the receiving end.
    pub receiver_bits_per_second: f64,
    pub retransmits: u64,
    /// Mean smoothed RTT over the streams, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_micros: Option<f64>,
    /// CPU used by the client process, percent of one core.
    pub client_cpu_percent: f64,
    /// CPU used by the server process, percent of one core.
    pub server_cpu_percent: f64,
    /// Receiver throughput lost against the baseline case, percent (negative = faster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_percent: Option<f64>,
}

/// Offload bookkeeping for one interface on one node.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OffloadRecord {
    /// The case the profile was applied for.
    pub case: String,
    pub node: String,
    pub interface: String,
    pub profile: String,
    /// The requested features as found before any change.
    #[serde(default)]
    pub before: BTreeMap<String, bool>,
    /// The requested features as the device reported them after the change.
    #[serde(default)]
    pub applied: BTreeMap<String, bool>,
    /// Every kernel feature that changed (including ones the kernel switched as a consequence,
    /// e.g. TSO follows checksumming), with its value before: what a restore writes back.
    #[serde(default)]
    pub restore: BTreeMap<String, bool>,
    /// The apply Job has finished and before/applied/restore are known.
    #[serde(default)]
    pub recorded: bool,
    /// True once the features before have been written back.
    #[serde(default)]
    pub restored: bool,
    /// Last restore failure, retried until it succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_error: Option<String>,
}
