//! An EgressBenchmark's observed state: the run, the case under way and one result per
//! finished case.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::{OffloadRecord, PairAggregate, PairResult, Protocol};
use crate::common::{LatencyMillis, RunStatus};

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
