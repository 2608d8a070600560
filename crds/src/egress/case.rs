//! One case of an EgressBenchmark: what it measures (its protocol and the fields and CEL rules
//! each protocol takes, its sweep, its direction) and what it measured (its result, one per
//! finished case in the status). A protocol's fields in the CRD are all here.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::{ClientEndpoint, PairAggregate, PairResult, Protocol, ServerEndpoint, Topology};
use crate::common::{Duration, LatencyMillis};

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
    /// Why the case has no overheadPercent against the baseline although it has a figure of
    /// the same kind, e.g. "not comparable: nb-node1->nb-node1 vs nb-node2->nb-node0" (the two
    /// measured different node pairs or paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub not_comparable: Option<String>,
    /// Streams: the rate the senders sent (udp-stream: the rate actually sent, which a sender
    /// short of CPU keeps below `offeredBitsPerSecond`). Absent for request/response cases
    /// (see `payloadBitsPerSecond`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_bits_per_second: Option<f64>,
    /// Streams: measured by the receiving end (the figure to quote, as iperf3's receiver line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_bits_per_second: Option<f64>,
    pub retransmits: u64,
    /// Mean smoothed RTT over the streams, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_micros: Option<f64>,
    /// CPU used by the client process, percent of one core.
    pub client_cpu_percent: f64,
    /// CPU used by the server process, percent of one core.
    pub server_cpu_percent: f64,
    /// Main figure lost against the baseline case, percent (negative = better): receiver
    /// throughput, or transactions/s for request/response protocols. Only between cases of the
    /// same protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_percent: Option<f64>,
    /// The test that ran (absent in results from before the field: tcp-stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// The declared case a swept run belongs to (its name is "case/messageSize=N,...").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
    /// Message size of this run (bytes; request/response protocols: request and response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_size: Option<u32>,
    /// Streams of this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<u32>,
    /// The path to the server: pod, service, hostNetwork or external.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The address the client's test connected to, as it reported it ("10.96.4.2:5201": a
    /// Service's cluster IP on the Service path, the pod's IP on the pod path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub server_address: Option<String>,
    /// Request/response: transactions per second, all streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions_per_second: Option<f64>,
    /// Request/response: latency of the answered transactions (merged exactly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyMillis>,
    /// Request/response: transactions that failed (refused, timed out, reset, no local port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures: Option<u64>,
    /// udp-rr and udp-stream: datagrams lost, percent of those sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_percent: Option<f64>,
    /// udp-stream: RFC 3550 interarrival jitter, milliseconds: the mean of the streams' jitter,
    /// each stream counting once (as iperf3's sum line), of the case's direction (with
    /// `direction: Both`, client to server; the other way is `returnJitterMs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<f64>,
    /// udp-stream: the worst stream's jitter of the same direction, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_max_ms: Option<f64>,
    /// udp-stream with `direction: Both`: the streams' mean and worst jitter server to client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_jitter_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_jitter_max_ms: Option<f64>,
    /// udp-stream: each stream's jitter, milliseconds, in stream order (client to server
    /// first); only for a case of one pair.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub stream_jitter_ms: Vec<f64>,
    /// udp-stream paced (`bitrate` or `packetsPerSecond`): the rate asked of all senders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_bits_per_second: Option<f64>,
    /// udp-stream paced: datagrams sent more than 1 ms after their intended time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_sends: Option<u64>,
    /// udp-stream paced: intended sends never made (the sender was too far behind its
    /// schedule), plus sends that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_sends: Option<u64>,
    /// Open loop (udp-stream paced, request/response with `rate`): percent of the schedule that
    /// was never sent. Above 1 % the load asked for was not offered: the case gets a
    /// `warning`, and loss gates on it fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_missed_percent: Option<f64>,
    /// udp-stream: datagrams that arrived out of order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_order: Option<u64>,
    /// udp-stream: datagrams that arrived more than once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<u64>,
    /// Request/response: CPU time of the client's worker PROCESS per transaction,
    /// microseconds. Not netperf's service demand (see `clientNodeCpuUsPerTransaction`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_us_per_transaction: Option<f64>,
    /// Request/response: CPU time of the server's worker process per transaction, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_us_per_transaction: Option<f64>,
    /// Request/response: busy CPU time of the client's whole NODE per transaction,
    /// microseconds (/proc/stat, every CPU, softirq included: netperf's `-c` service demand).
    /// Only for a case of one pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_node_cpu_us_per_transaction: Option<f64>,
    /// Request/response: the same for the server's node (netperf's `-C`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_node_cpu_us_per_transaction: Option<f64>,
    /// Streams: CPU seconds of both ends' worker processes per GB received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds_per_gb: Option<f64>,
    /// Streams: busy CPU seconds of both ends' whole nodes per GB received (a case of one
    /// pair).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_cpu_seconds_per_gb: Option<f64>,
    /// Percent of all the client's node's CPUs busy over the test (/proc/stat: user, nice,
    /// system, irq, softirq); a case of one pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_node_cpu_percent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_node_cpu_percent: Option<f64>,
    /// Request/response: transactions/s x (request + response size) x 8: the payload both ways,
    /// computed from the measured rate and the configured sizes (not a measured wire rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_bits_per_second: Option<f64>,
    /// tcp-stream with latencyProbe: the probe's latency while the streams ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_latency: Option<LatencyMillis>,
    /// What the measurement warns about, e.g. ephemeral ports exhausted (tcp-crr).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// A case with a topology: one row per pair (the case's own figures are their sum and
    /// exact merge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<PairResult>,
    /// A case with a topology: the main figure across its pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<PairAggregate>,
}
