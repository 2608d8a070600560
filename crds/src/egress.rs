//! EgressBenchmark: network paths between nodes, over the overlay, through a Service and from a
//! pod through the egress node to a target, measured per case with one of five tests (TCP stream
//! throughput, TCP and UDP request/response, TCP connect/request/response, UDP datagrams at a
//! rate), with NIC/vxlan checksum offload tuned and restored.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::{CleanupPolicy, Duration};
pub use crate::topology::{Matrix, NodeSet, PairAggregate, PairResult, Topology};
pub use protocol::Protocol;

mod offload;
mod status;
pub use offload::{OffloadProfile, OffloadRecord, OffloadSetting, OffloadSpec};
pub use status::{CaseResult, EgressBenchmarkStatus};

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

/// One measurement between a client and a server.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.protocol in ['tcp-rr', 'tcp-crr', 'udp-rr'] || (!has(self.requestSize) && !has(self.responseSize) && !has(self.rate))").message("requestSize, responseSize and rate apply to protocols tcp-rr, tcp-crr and udp-rr only"),
    validation = Rule::new("self.protocol != 'udp-rr' || ((!has(self.requestSize) || self.requestSize >= 8) && (!has(self.responseSize) || self.responseSize >= 8) && (!has(self.sweep) || !has(self.sweep.messageSizes) || self.sweep.messageSizes.all(m, m >= 8)))").message("udp-rr carries an 8-byte sequence number in every datagram: requestSize, responseSize and sweep.messageSizes must be at least 8"),
    validation = Rule::new("self.protocol in ['tcp-rr', 'udp-rr'] || !has(self.burst)").message("burst applies to protocols tcp-rr and udp-rr only"),
    validation = Rule::new("self.protocol == 'udp-rr' || !has(self.timeout)").message("timeout applies to protocol udp-rr only"),
    validation = Rule::new("self.protocol == 'udp-stream' || (!has(self.bitrate) && !has(self.packetsPerSecond))").message("bitrate and packetsPerSecond apply to protocol udp-stream only"),
    validation = Rule::new("!(has(self.bitrate) && has(self.packetsPerSecond))").message("set bitrate or packetsPerSecond, not both"),
    validation = Rule::new("self.protocol == 'tcp-stream' || !has(self.latencyProbe)").message("latencyProbe applies to protocol tcp-stream only"),
    validation = Rule::new("self.protocol in ['tcp-stream', 'udp-stream'] || !has(self.messageSize)").message("messageSize applies to tcp-stream and udp-stream; request/response protocols take requestSize and responseSize"),
    validation = Rule::new("self.protocol in ['tcp-stream', 'udp-stream'] || self.direction == 'Send'").message("direction applies to tcp-stream and udp-stream only"),
    validation = Rule::new("self.protocol != 'udp-stream' || ((!has(self.messageSize) || self.messageSize >= 32) && (!has(self.sweep) || !has(self.sweep.messageSizes) || self.sweep.messageSizes.all(m, m >= 32)))").message("udp-stream datagrams carry a 32-byte header: messageSize and sweep.messageSizes must be at least 32"),
    validation = Rule::new("!(self.protocol in ['tcp-rr', 'tcp-crr', 'udp-rr']) || !has(self.sweep) || !has(self.sweep.messageSizes) || self.sweep.messageSizes.all(m, m <= 1048576)").message("request/response messages are at most 1048576 bytes (1 MiB): sweep.messageSizes of tcp-rr, tcp-crr and udp-rr must be at most 1048576"),
    validation = Rule::new("self.protocol != 'tcp-rr' || !has(self.burst) || self.burst == 0 || ((!has(self.requestSize) || (self.burst + 1) * self.requestSize <= 65536) && (!has(self.responseSize) || (self.burst + 1) * self.responseSize <= 65536) && (!has(self.sweep) || !has(self.sweep.messageSizes) || self.sweep.messageSizes.all(m, (self.burst + 1) * m <= 65536)))").message("tcp-rr with burst keeps (burst + 1) requests in flight each way: (burst + 1) times requestSize, responseSize and every sweep.messageSizes must be at most 65536 bytes, or both ends could block on full socket buffers"),
    validation = Rule::new("!has(self.topology) || (!has(self.client.nodeName) && !has(self.server.nodeName))").message("a case with a topology places its workers with topology.clientNodes and topology.serverNodes, not client.nodeName or server.nodeName"),
    validation = Rule::new("!has(self.topology) || (!has(self.server.address) && !(has(self.server.service) && self.server.service))").message("a topology runs a server pod per pair on its pod or host address: server.address and server.service do not go with it"),
    validation = Rule::new("!has(self.topology) || !has(self.sweep)").message("a case with a topology cannot also have a sweep: make one case per value"),
    validation = Rule::new("!self.protocol.startsWith('udp') || ((!has(self.messageSize) || self.messageSize <= 65507) && (!has(self.requestSize) || self.requestSize <= 65507) && (!has(self.responseSize) || self.responseSize <= 65507) && (!has(self.sweep) || !has(self.sweep.messageSizes) || self.sweep.messageSizes.all(m, m <= 65507)))").message("a UDP datagram carries at most 65507 bytes: messageSize, requestSize, responseSize and sweep.messageSizes of udp protocols must be at most 65507"),
)]
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
    /// What to measure. tcp-stream (the default): TCP throughput, iperf3-style. tcp-rr:
    /// request/response on long-lived connections, transactions/s and latency percentiles
    /// (netperf TCP_RR). tcp-crr: a new connection per transaction, the cost of connection
    /// set-up, conntrack and NAT (netperf TCP_CRR). udp-rr: request/response over UDP; a request
    /// not answered within `timeout` counts as lost (netperf UDP_RR without its stall).
    /// udp-stream: datagrams at `bitrate` or `packetsPerSecond`, with loss, reordering and
    /// jitter (iperf3 -u).
    #[serde(default)]
    pub protocol: Protocol,
    /// Parallel streams: TCP connections, UDP sockets, or request/response connections
    /// (iperf3 -P).
    #[serde(default = "default_streams")]
    #[schemars(range(min = 1, max = 128))]
    pub streams: u32,
    /// How long to measure ("10s").
    #[serde(default = "default_case_duration")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN), length(max = 32))]
    #[x_kube(validation = Rule::new("duration(self) >= duration('1s') && duration(self) <= duration('24h')").message("case duration must be between 1s and 24h"))]
    pub duration: Duration,
    /// tcp-stream: bytes per write (iperf3 -l), default 128 KiB. udp-stream: bytes of UDP
    /// payload per datagram, at most 65507; default the largest that fits the path's MTU
    /// (at most 1472).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 16777216))]
    pub message_size: Option<u32>,
    /// Send: client to server (default). Receive: server to client (iperf3 -R). Both: both at
    /// once. tcp-stream and udp-stream only.
    #[serde(default)]
    pub direction: Direction,
    /// tcp-rr, tcp-crr, udp-rr: bytes per request (netperf -r). Default 1; udp-rr: at least
    /// and by default 8 (its sequence number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1048576))]
    pub request_size: Option<u32>,
    /// tcp-rr, tcp-crr, udp-rr: bytes per response. Default 1; udp-rr: at least and by default
    /// 8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1048576))]
    pub response_size: Option<u32>,
    /// tcp-rr, udp-rr: requests kept in flight per stream beyond the first (netperf -b).
    /// Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 256))]
    pub burst: Option<u32>,
    /// tcp-rr, tcp-crr, udp-rr: transactions per second of each stream, paced (open loop:
    /// latency counts from the intended send time, so a slow answer cannot hide the requests
    /// it held up). Absent: the next request goes when an answer comes (closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000))]
    pub rate: Option<u32>,
    /// udp-rr: how long a request waits for its answer before it counts as lost, 1ms to 10s,
    /// rounded up to whole milliseconds. Default 100ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN), length(max = 32))]
    #[x_kube(validation = Rule::new("duration(self) >= duration('1ms') && duration(self) <= duration('10s')").message("timeout must be between 1ms and 10s"))]
    pub timeout: Option<Duration>,
    /// udp-stream: bits of UDP payload per second of each stream, with an optional k, M or G
    /// suffix (1000-based), e.g. 500M; 0 sends as fast as possible. At least 1k (1000), at
    /// most 100G. Default 1M (iperf3's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        regex(
            pattern = r"^(0|[1-9][0-9]{3,11}(\.[0-9]{1,3})?|[1-9][0-9]{0,11}(\.[0-9]{1,3})?[kMG])$"
        ),
        length(max = 16)
    )]
    pub bitrate: Option<String>,
    /// udp-stream: datagrams per second of each stream, instead of bitrate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000000))]
    pub packets_per_second: Option<u32>,
    /// tcp-stream: latency under load. A request/response probe of this many transactions per
    /// second (1-byte requests and answers, paced) runs on a connection of its own to the same
    /// server while the streams run; its percentiles are reported next to the throughput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub latency_probe: Option<u32>,
    /// Run the case once per message size and/or stream count (a table in status and in the
    /// report). A swept case's runs are named like "rr/messageSize=64".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<CaseSweep>,
    /// Offload profile applied while this case runs; absent = the nodes' settings as found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub offload_profile: Option<String>,
    /// Many client/server pairs at once: pairs, fanIn, fanOut or a node-pair matrix. Absent:
    /// one client and one server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
}

fn default_streams() -> u32 {
    1
}
fn default_case_duration() -> Duration {
    std::time::Duration::from_secs(10).into()
}

/// The values a case is run with, one run per combination (at most 16).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.messageSizes) || has(self.streams)").message("sweep must list messageSizes or streams"),
    validation = Rule::new("(has(self.messageSizes) ? size(self.messageSizes) : 1) * (has(self.streams) ? size(self.streams) : 1) <= 16").message("a sweep runs a case at most 16 times: the number of messageSizes times the number of streams must be at most 16"),
)]
pub struct CaseSweep {
    /// Message sizes in bytes, each one run: the write size of tcp-stream, the datagram payload
    /// of udp-stream, the request and the response size of tcp-rr, tcp-crr and udp-rr.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 16), inner(range(min = 1, max = 16777216)))]
    #[x_kube(validation = Rule::new("self.all(m, self.exists_one(n, n == m))").message("sweep.messageSizes must not repeat a value"))]
    pub message_sizes: Vec<u32>,
    /// Stream counts, each one run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 16), inner(range(min = 1, max = 128)))]
    #[x_kube(validation = Rule::new("self.all(m, self.exists_one(n, n == m))").message("sweep.streams must not repeat a value"))]
    pub streams: Vec<u32>,
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
    validation = Rule::new("!has(self.service) || !self.service || (!has(self.address) && !self.hostNetwork && !has(self.bindInterface) && !has(self.bindAddress))").message("server.service reaches a server pod the operator runs on its pod address: it cannot be combined with server.address, hostNetwork, bindInterface or bindAddress"),
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
    /// Reach the server pod through a ClusterIP Service the operator creates for it (the
    /// kube-proxy or eBPF Service path) instead of the pod's own address, so one benchmark can
    /// compare pod, Service and host network paths.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub service: bool,
    /// Host or IP of an external `netbench-loadgen server` (outside the cluster, behind the
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
