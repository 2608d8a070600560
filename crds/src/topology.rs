//! Many clients and servers in one EgressBenchmark case: `pairs`, `fanIn`, `fanOut` and the
//! node-pair `matrix`, with the nodes they run on. Every topology is a list of client/server
//! pairs (pair i: client worker 2i, server worker 2i+1); the pairs of a case start together
//! (or in waves of `matrix.concurrency`), and the case's result is the sum and the exact merge
//! of theirs, with a row per pair.

use std::collections::BTreeMap;

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// Most pairs one case runs (each is a client and a server pod).
pub const MAX_PAIRS: u32 = 128;

/// How many client/server pairs a case runs and where. Set exactly one of pairs, fanIn, fanOut
/// and matrix.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("(has(self.pairs) ? 1 : 0) + (has(self.fanIn) ? 1 : 0) + (has(self.fanOut) ? 1 : 0) + (has(self.matrix) ? 1 : 0) == 1").message("topology: set exactly one of pairs, fanIn, fanOut and matrix"),
    validation = Rule::new("!has(self.fanIn) || (has(self.serverNodes) && has(self.serverNodes.names) && size(self.serverNodes.names) == 1 && !has(self.serverNodes.selector))").message("topology.fanIn runs every server on one node: name it in serverNodes.names (exactly one name)"),
    validation = Rule::new("!has(self.fanOut) || (has(self.clientNodes) && has(self.clientNodes.names) && size(self.clientNodes.names) == 1 && !has(self.clientNodes.selector))").message("topology.fanOut runs every client on one node: name it in clientNodes.names (exactly one name)"),
    validation = Rule::new("!has(self.matrix) || has(self.clientNodes)").message("topology.matrix pairs the nodes of clientNodes (names or a selector) with those of serverNodes, or with each other when serverNodes is absent: set clientNodes"),
)]
pub struct Topology {
    /// N client/server pairs measuring at once, each client on another node than its server
    /// (unless sameNode); nodes are used round-robin from clientNodes and serverNodes, or
    /// chosen by the scheduler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 128))]
    pub pairs: Option<u32>,
    /// N clients to one server node (serverNodes.names, one name): one server process per
    /// client on that node, so it is the node's network that is measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 128))]
    pub fan_in: Option<u32>,
    /// One client node (clientNodes.names, one name) to N servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 128))]
    pub fan_out: Option<u32>,
    /// Every ordered pair of clientNodes x serverNodes (or of clientNodes with itself), a
    /// client never on its server's node unless sameNode. A selector stands for the nodes it
    /// matches when the run begins that a worker can use (Ready, not cordoned, no NoSchedule
    /// or NoExecute taint), in name order, at most 64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<Matrix>,
    /// Where the clients run; absent: wherever the scheduler puts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_nodes: Option<NodeSet>,
    /// Where the servers run; absent: wherever the scheduler puts them (matrix: clientNodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_nodes: Option<NodeSet>,
    /// Allow a client on its own server's node (the loopback path of that node).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub same_node: bool,
}

/// Nodes by name, or by labels.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.names) != has(self.selector)").message("a node set lists names or a selector, one of the two"),
)]
pub struct NodeSet {
    /// Node names, used in order (round-robin when there are more pairs than names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 64), inner(length(min = 1, max = 253)))]
    #[x_kube(validation = Rule::new("self.all(m, self.exists_one(n, n == m))").message("node names must not repeat"))]
    pub names: Vec<String>,
    /// Node labels that must all match (a nodeSelector).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("minProperties" = 1, "maxProperties" = 16))]
    #[x_kube(validation = Rule::new("self.all(k, size(k) <= 317 && size(self[k]) <= 63)").message("selector keys are at most 317 and values at most 63 characters"))]
    pub selector: BTreeMap<String, String>,
}

/// The node-pair matrix's options.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Matrix {
    /// Measure only this many pairs, spread evenly over the matrix (in its order: by client
    /// node, then server node). Absent: every pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 128))]
    pub sample: Option<u32>,
    /// Pairs measuring at the same time; the others wait their turn (waves of this many, one
    /// case duration apart). 1 measures one pair after another. Absent: all at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 128))]
    pub concurrency: Option<u32>,
}

/// One pair's figures in a case's result.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PairResult {
    /// Index of the pair (0-based; its workers are -w{2i} and -w{2i+1}).
    pub pair: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_node: Option<String>,
    /// The case's main figure for this pair: receiver bits/s, or transactions/s for
    /// request/response protocols.
    pub value: f64,
    /// Request/response: this pair's p99 latency, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// UDP: datagrams lost, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_percent: Option<f64>,
    /// How much later than the earliest client of its wave this pair's client started, ms.
    pub start_lateness_ms: f64,
    /// The pair's value is far below the median of the pairs (see PairAggregate.outliers).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outlier: bool,
}

/// The main figure across the pairs of a case.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PairAggregate {
    pub pairs: u32,
    /// Sum over the pairs (the case's total).
    pub sum: f64,
    pub median: f64,
    /// 5th and 95th percentile across the pairs (nearest rank).
    pub p05: f64,
    pub p95: f64,
    pub min: f64,
    pub max: f64,
    /// Latest minus earliest client start within a wave, milliseconds (the largest over the
    /// waves).
    pub start_spread_ms: f64,
    /// The pairs whose value is below 80 % of the median, slowest first, as "client->server".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outliers: Vec<String>,
}
