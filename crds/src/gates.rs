//! SLO gates (`spec.gates`, both kinds): a limit on one figure a run produces, judged on the
//! data merged across the measurement's workers (never per worker), and optionally an early
//! abort (`abortOnFail`) that ends the run Failed as soon as a gate is broken for good.
//! docs/gates.md says what each verdict means.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::common::Duration;

/// Most gates per benchmark.
pub const MAX_GATES: usize = 16;
/// The abortAfter of a gate that sets none.
pub const DEFAULT_ABORT_AFTER_SECS: u64 = 5;

/// A figure a gate can judge, named as results and `netbench report` list it.
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    schemars::JsonSchema,
)]
pub enum GateFigure {
    /// Requests per second (IngressBenchmark).
    #[serde(rename = "rps")]
    Rps,
    /// Latency quantiles in milliseconds (IngressBenchmark; request/response cases).
    #[serde(rename = "p50Ms")]
    P50Ms,
    #[serde(rename = "p90Ms")]
    P90Ms,
    #[serde(rename = "p99Ms")]
    P99Ms,
    #[serde(rename = "p999Ms")]
    P999Ms,
    /// Failed requests and 4xx/5xx responses over all requests, 0 to 1 (IngressBenchmark).
    #[serde(rename = "errorRate")]
    ErrorRate,
    /// Bits per second (tcp-stream, udp-stream cases).
    #[serde(rename = "receiverBitsPerSecond")]
    ReceiverBitsPerSecond,
    #[serde(rename = "senderBitsPerSecond")]
    SenderBitsPerSecond,
    /// TCP retransmits (tcp-stream).
    #[serde(rename = "retransmits")]
    Retransmits,
    /// Latency probes beside a tcp-stream, milliseconds.
    #[serde(rename = "probeP50Ms")]
    ProbeP50Ms,
    #[serde(rename = "probeP99Ms")]
    ProbeP99Ms,
    /// Datagrams lost, percent (udp-stream, udp-rr).
    #[serde(rename = "lossPercent")]
    LossPercent,
    /// Jitter in milliseconds (udp-stream).
    #[serde(rename = "jitterMs")]
    JitterMs,
    /// Datagrams out of order (udp-stream).
    #[serde(rename = "outOfOrder")]
    OutOfOrder,
    /// Transactions per second (tcp-rr, tcp-crr, udp-rr).
    #[serde(rename = "transactionsPerSecond")]
    TransactionsPerSecond,
    /// Slowest transaction, milliseconds (request/response cases).
    #[serde(rename = "maxMs")]
    MaxMs,
    /// Failed transactions (request/response cases).
    #[serde(rename = "failures")]
    Failures,
    /// CPU per transaction, microseconds (request/response cases).
    #[serde(rename = "clientCpuUsPerTransaction")]
    ClientCpuUsPerTransaction,
    #[serde(rename = "serverCpuUsPerTransaction")]
    ServerCpuUsPerTransaction,
    /// CPU seconds per GB moved.
    #[serde(rename = "cpuSecondsPerGb")]
    CpuSecondsPerGb,
    /// The whole nodes' busy CPU per transaction, microseconds (netperf's service demand).
    #[serde(rename = "clientNodeCpuUsPerTransaction")]
    ClientNodeCpuUsPerTransaction,
    #[serde(rename = "serverNodeCpuUsPerTransaction")]
    ServerNodeCpuUsPerTransaction,
    /// The whole nodes' busy CPU seconds per GB moved.
    #[serde(rename = "nodeCpuSecondsPerGb")]
    NodeCpuSecondsPerGb,
    /// The rate a paced udp-stream asked of its senders.
    #[serde(rename = "offeredBitsPerSecond")]
    OfferedBitsPerSecond,
    /// Percent of an open loop's schedule never sent (udp-stream paced, request/response with
    /// a rate).
    #[serde(rename = "scheduleMissedPercent")]
    ScheduleMissedPercent,
    /// udp-stream: the worst stream's jitter, and (direction Both) the return direction's mean
    /// and worst, milliseconds.
    #[serde(rename = "jitterMaxMs")]
    JitterMaxMs,
    #[serde(rename = "returnJitterMs")]
    ReturnJitterMs,
    #[serde(rename = "returnJitterMaxMs")]
    ReturnJitterMaxMs,
    /// Route changes under load (IngressBenchmark routeChanges): the share of a sample's
    /// changes that showed in the answers (0 to 1), and the 99th percentile of their time to
    /// show in milliseconds, a change not shown counted at the time it was given. Swaps:
    #[serde(rename = "routeChangesShown")]
    RouteChangesShown,
    #[serde(rename = "routeChangeP99Ms")]
    RouteChangeP99Ms,
    /// Creations and deletions (action DeleteAndCreate):
    #[serde(rename = "routeCreationsShown")]
    RouteCreationsShown,
    #[serde(rename = "routeCreationP99Ms")]
    RouteCreationP99Ms,
    #[serde(rename = "routeDeletionsShown")]
    RouteDeletionsShown,
    #[serde(rename = "routeDeletionP99Ms")]
    RouteDeletionP99Ms,
    /// Route scale (controllers[].route.count above 1): the share of a sample's routes that
    /// answered (0 to 1), and the time from its first creation request until all of them did
    /// in milliseconds (a sample whose routes did not all answer counts the time it gave them).
    #[serde(rename = "routesAnswered")]
    RoutesAnswered,
    #[serde(rename = "routesAllAnsweredMs")]
    RoutesAllAnsweredMs,
}

impl GateFigure {
    /// Every figure, in the order above.
    pub const ALL: [GateFigure; 36] = [
        GateFigure::Rps,
        GateFigure::P50Ms,
        GateFigure::P90Ms,
        GateFigure::P99Ms,
        GateFigure::P999Ms,
        GateFigure::ErrorRate,
        GateFigure::ReceiverBitsPerSecond,
        GateFigure::SenderBitsPerSecond,
        GateFigure::Retransmits,
        GateFigure::ProbeP50Ms,
        GateFigure::ProbeP99Ms,
        GateFigure::LossPercent,
        GateFigure::JitterMs,
        GateFigure::OutOfOrder,
        GateFigure::TransactionsPerSecond,
        GateFigure::MaxMs,
        GateFigure::Failures,
        GateFigure::ClientCpuUsPerTransaction,
        GateFigure::ServerCpuUsPerTransaction,
        GateFigure::CpuSecondsPerGb,
        GateFigure::ClientNodeCpuUsPerTransaction,
        GateFigure::ServerNodeCpuUsPerTransaction,
        GateFigure::NodeCpuSecondsPerGb,
        GateFigure::OfferedBitsPerSecond,
        GateFigure::ScheduleMissedPercent,
        GateFigure::JitterMaxMs,
        GateFigure::ReturnJitterMs,
        GateFigure::ReturnJitterMaxMs,
        GateFigure::RouteChangesShown,
        GateFigure::RouteChangeP99Ms,
        GateFigure::RouteCreationsShown,
        GateFigure::RouteCreationP99Ms,
        GateFigure::RouteDeletionsShown,
        GateFigure::RouteDeletionP99Ms,
        GateFigure::RoutesAnswered,
        GateFigure::RoutesAllAnsweredMs,
    ];

    /// The figure's name, as results list it.
    pub const fn as_str(self) -> &'static str {
        match self {
            GateFigure::Rps => "rps",
            GateFigure::P50Ms => "p50Ms",
            GateFigure::P90Ms => "p90Ms",
            GateFigure::P99Ms => "p99Ms",
            GateFigure::P999Ms => "p999Ms",
            GateFigure::ErrorRate => "errorRate",
            GateFigure::ReceiverBitsPerSecond => "receiverBitsPerSecond",
            GateFigure::SenderBitsPerSecond => "senderBitsPerSecond",
            GateFigure::Retransmits => "retransmits",
            GateFigure::ProbeP50Ms => "probeP50Ms",
            GateFigure::ProbeP99Ms => "probeP99Ms",
            GateFigure::LossPercent => "lossPercent",
            GateFigure::JitterMs => "jitterMs",
            GateFigure::OutOfOrder => "outOfOrder",
            GateFigure::TransactionsPerSecond => "transactionsPerSecond",
            GateFigure::MaxMs => "maxMs",
            GateFigure::Failures => "failures",
            GateFigure::ClientCpuUsPerTransaction => "clientCpuUsPerTransaction",
            GateFigure::ServerCpuUsPerTransaction => "serverCpuUsPerTransaction",
            GateFigure::CpuSecondsPerGb => "cpuSecondsPerGb",
            GateFigure::ClientNodeCpuUsPerTransaction => "clientNodeCpuUsPerTransaction",
            GateFigure::ServerNodeCpuUsPerTransaction => "serverNodeCpuUsPerTransaction",
            GateFigure::NodeCpuSecondsPerGb => "nodeCpuSecondsPerGb",
            GateFigure::OfferedBitsPerSecond => "offeredBitsPerSecond",
            GateFigure::ScheduleMissedPercent => "scheduleMissedPercent",
            GateFigure::JitterMaxMs => "jitterMaxMs",
            GateFigure::ReturnJitterMs => "returnJitterMs",
            GateFigure::ReturnJitterMaxMs => "returnJitterMaxMs",
            GateFigure::RouteChangesShown => "routeChangesShown",
            GateFigure::RouteChangeP99Ms => "routeChangeP99Ms",
            GateFigure::RouteCreationsShown => "routeCreationsShown",
            GateFigure::RouteCreationP99Ms => "routeCreationP99Ms",
            GateFigure::RouteDeletionsShown => "routeDeletionsShown",
            GateFigure::RouteDeletionP99Ms => "routeDeletionP99Ms",
            GateFigure::RoutesAnswered => "routesAnswered",
            GateFigure::RoutesAllAnsweredMs => "routesAllAnsweredMs",
        }
    }

    /// The largest limit that makes sense for the figure (the schema refuses more): a ratio
    /// is at most 1, a percentage 100, a latency an hour, a rate what no cluster reaches.
    pub const fn ceiling(self) -> f64 {
        match self {
            GateFigure::ErrorRate
            | GateFigure::RouteChangesShown
            | GateFigure::RouteCreationsShown
            | GateFigure::RouteDeletionsShown
            | GateFigure::RoutesAnswered => 1.0,
            GateFigure::LossPercent | GateFigure::ScheduleMissedPercent => 100.0,
            GateFigure::P50Ms
            | GateFigure::P90Ms
            | GateFigure::P99Ms
            | GateFigure::P999Ms
            | GateFigure::ProbeP50Ms
            | GateFigure::ProbeP99Ms
            | GateFigure::JitterMs
            | GateFigure::JitterMaxMs
            | GateFigure::ReturnJitterMs
            | GateFigure::ReturnJitterMaxMs
            | GateFigure::RouteChangeP99Ms
            | GateFigure::RouteCreationP99Ms
            | GateFigure::RouteDeletionP99Ms
            | GateFigure::RoutesAllAnsweredMs
            | GateFigure::MaxMs => MAX_MS,
            GateFigure::Rps | GateFigure::TransactionsPerSecond => MAX_PER_SECOND,
            GateFigure::ReceiverBitsPerSecond
            | GateFigure::SenderBitsPerSecond
            | GateFigure::OfferedBitsPerSecond => MAX_BITS,
            GateFigure::Retransmits | GateFigure::OutOfOrder | GateFigure::Failures => MAX_COUNT,
            GateFigure::ClientCpuUsPerTransaction
            | GateFigure::ServerCpuUsPerTransaction
            | GateFigure::ClientNodeCpuUsPerTransaction
            | GateFigure::ServerNodeCpuUsPerTransaction => MAX_PER_SECOND,
            GateFigure::CpuSecondsPerGb | GateFigure::NodeCpuSecondsPerGb => MAX_CPU_PER_GB,
        }
    }

    /// The figures an IngressBenchmark step produces.
    pub fn of_ingress(self) -> bool {
        INGRESS_FIGURES.contains(&self.as_str())
    }

    /// The message of the Gate's CEL rule that bounds a limit on the figure by its
    /// [`ceiling`](Self::ceiling).
    pub(crate) fn ceiling_rule(self) -> &'static str {
        match self {
            GateFigure::ErrorRate => "an errorRate gate's limit is a ratio: at most 1",
            GateFigure::RouteChangesShown
            | GateFigure::RouteCreationsShown
            | GateFigure::RouteDeletionsShown
            | GateFigure::RoutesAnswered => {
                "a route*Shown or routesAnswered gate's limit is a share: at most 1"
            }
            GateFigure::LossPercent | GateFigure::ScheduleMissedPercent => {
                "a percent gate's limit is a percentage: at most 100"
            }
            f if f.as_str().ends_with("Ms") => {
                "a latency gate's limit must be at most 3600000 (1h in ms)"
            }
            f if f.as_str().ends_with("BitsPerSecond") => {
                "a bits/s gate's limit must be at most 1e13 (10 Tbit/s)"
            }
            GateFigure::Retransmits | GateFigure::OutOfOrder | GateFigure::Failures => {
                "a count gate's limit must be at most 1e12"
            }
            GateFigure::CpuSecondsPerGb | GateFigure::NodeCpuSecondsPerGb => {
                "a CPU per GB gate's limit must be at most 1e6"
            }
            _ => "a gate's limit on a rate must be at most 1e9",
        }
    }
}

/// A latency limit: an hour, in milliseconds (the histograms' own maximum).
pub const MAX_MS: f64 = 3_600_000.0;
/// Requests or transactions per second (and microseconds of CPU per transaction).
pub const MAX_PER_SECOND: f64 = 1e9;
/// Bits per second: 10 Tbit/s.
pub const MAX_BITS: f64 = 1e13;
/// Retransmits, datagrams out of order, failed transactions.
pub const MAX_COUNT: f64 = 1e12;
/// CPU seconds per GB moved.
pub const MAX_CPU_PER_GB: f64 = 1e6;
/// The figures an IngressBenchmark's gates may name (its CEL rule lists the same).
pub const INGRESS_FIGURES: [&str; 14] = [
    "rps",
    "p50Ms",
    "p90Ms",
    "p99Ms",
    "p999Ms",
    "errorRate",
    "routeChangesShown",
    "routeChangeP99Ms",
    "routeCreationsShown",
    "routeCreationP99Ms",
    "routeDeletionsShown",
    "routeDeletionP99Ms",
    "routesAnswered",
    "routesAllAnsweredMs",
];

/// Where a gate is judged.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema, Default,
)]
pub enum GateScope {
    /// Every sample of every step or case, each on its own merged data (all its workers).
    /// The only scope `abortOnFail` acts on.
    #[default]
    Each,
    /// Once, when the run ends: each step's or case's figure over all its samples (their
    /// mean, the figure the result reports). One unlucky sample of several does not fail it.
    Run,
}

/// A limit on one figure: the run fails when a merged figure is above `max` (or below `min`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.max) != has(self.min)").message("a gate sets exactly one of max and min"),
    validation = Rule::new("(!has(self.max) || self.max >= 0.0) && (!has(self.min) || self.min >= 0.0)").message("a gate's limit must not be negative"),
    validation = Rule::new("self.figure != 'errorRate' || ((!has(self.max) || self.max <= 1.0) && (!has(self.min) || self.min <= 1.0))").message("an errorRate gate's limit is a ratio: at most 1"),
    validation = Rule::new("!(self.figure in ['routeChangesShown', 'routeCreationsShown', 'routeDeletionsShown', 'routesAnswered']) || ((!has(self.max) || self.max <= 1.0) && (!has(self.min) || self.min <= 1.0))").message("a route*Shown or routesAnswered gate's limit is a share: at most 1"),
    validation = Rule::new("!(self.figure in ['lossPercent', 'scheduleMissedPercent']) || ((!has(self.max) || self.max <= 100.0) && (!has(self.min) || self.min <= 100.0))").message("a percent gate's limit is a percentage: at most 100"),
    validation = Rule::new("!self.figure.endsWith('Ms') || ((!has(self.max) || self.max <= 3600000.0) && (!has(self.min) || self.min <= 3600000.0))").message("a latency gate's limit must be at most 3600000 (1h in ms)"),
    validation = Rule::new("!(self.figure in ['rps', 'transactionsPerSecond', 'clientCpuUsPerTransaction', 'serverCpuUsPerTransaction', 'clientNodeCpuUsPerTransaction', 'serverNodeCpuUsPerTransaction']) || ((!has(self.max) || self.max <= 1e9) && (!has(self.min) || self.min <= 1e9))").message("a gate's limit on a rate must be at most 1e9"),
    validation = Rule::new("!self.figure.endsWith('BitsPerSecond') || ((!has(self.max) || self.max <= 1e13) && (!has(self.min) || self.min <= 1e13))").message("a bits/s gate's limit must be at most 1e13 (10 Tbit/s)"),
    validation = Rule::new("!(self.figure in ['retransmits', 'outOfOrder', 'failures']) || ((!has(self.max) || self.max <= 1e12) && (!has(self.min) || self.min <= 1e12))").message("a count gate's limit must be at most 1e12"),
    validation = Rule::new("!(self.figure in ['cpuSecondsPerGb', 'nodeCpuSecondsPerGb']) || ((!has(self.max) || self.max <= 1e6) && (!has(self.min) || self.min <= 1e6))").message("a CPU per GB gate's limit must be at most 1e6"),
    validation = Rule::new("!self.abortOnFail || self.scope == 'Each'").message("abortOnFail needs scope Each"),
)]
pub struct Gate {
    /// How messages, Events and the condition name the gate (default: "<figure> <= <max>" or
    /// "<figure> >= <min>").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[A-Za-z0-9]([-A-Za-z0-9_. ]*[A-Za-z0-9])?$")
    )]
    pub name: Option<String>,
    /// The figure judged, as results name it: rps, p50Ms, p90Ms, p99Ms, p999Ms, errorRate
    /// (IngressBenchmark); receiverBitsPerSecond, senderBitsPerSecond, retransmits, lossPercent,
    /// jitterMs, transactionsPerSecond, p99Ms, ... (EgressBenchmark, per protocol).
    pub figure: GateFigure,
    /// The figure must be at most this (latency, errors, loss). Units: the figure's own (ms,
    /// a 0-1 ratio for errorRate, percent for lossPercent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1e13))]
    pub max: Option<f64>,
    /// The figure must be at least this (throughput).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1e13))]
    pub min: Option<f64>,
    /// Each (default): every sample of every step or case. Run: each step's or case's mean
    /// over its samples, when the run ends.
    #[serde(default)]
    pub scope: GateScope,
    /// End the run Failed as soon as this gate is broken: on the live figures merged across
    /// the workers, once it has been broken without a break for `abortAfter`; otherwise when
    /// a sample's report breaks it. Without it a broken gate fails the run at its end.
    #[serde(default)]
    pub abort_on_fail: bool,
    /// How long the live merged figure must break the gate, every second of it, before the run
    /// is aborted ("5s"; also the least time a measurement runs before an abort).
    #[serde(default = "default_abort_after")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN), length(max = 32))]
    #[x_kube(validation = Rule::new("duration(self) >= duration('1s') && duration(self) <= duration('1h')").message("a gate's abortAfter must be between 1s and 1h"))]
    pub abort_after: Duration,
}

fn default_abort_after() -> Duration {
    std::time::Duration::from_secs(DEFAULT_ABORT_AFTER_SECS).into()
}

impl Gate {
    /// The limit and whether it is an upper one (max).
    pub fn limit(&self) -> Option<(f64, bool)> {
        match (self.max, self.min) {
            (Some(max), None) => Some((max, true)),
            (None, Some(min)) => Some((min, false)),
            _ => None,
        }
    }

    /// The gate's name: its own, or "<figure> <= <max>" / "<figure> >= <min>".
    pub fn display_name(&self) -> String {
        if let Some(n) = &self.name {
            return n.clone();
        }
        match self.limit() {
            Some((v, true)) => format!("{} <= {v}", self.figure.as_str()),
            Some((v, false)) => format!("{} >= {v}", self.figure.as_str()),
            None => self.figure.as_str().to_string(),
        }
    }

    /// True when `value` breaks the gate. A value that is not a number breaks every gate (a
    /// figure that cannot be read cannot pass).
    pub fn broken_by(&self, value: f64) -> bool {
        match self.limit() {
            _ if !value.is_finite() => true,
            Some((max, true)) => value > max,
            Some((min, false)) => value < min,
            None => false,
        }
    }
}

/// The message of the IngressBenchmark's rule on gate figures.
pub const INGRESS_RULE_MESSAGE: &str = "an IngressBenchmark's gates judge rps, p50Ms, p90Ms, p99Ms, p999Ms, errorRate, (with routeChanges) routeChangesShown, routeChangeP99Ms, routeCreationsShown, routeCreationP99Ms, routeDeletionsShown, routeDeletionP99Ms or (with a route scale) routesAnswered, routesAllAnsweredMs";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde() {
        for f in GateFigure::ALL {
            let json = serde_json::to_value(f).unwrap();
            assert_eq!(json, serde_json::json!(f.as_str()));
            assert_eq!(serde_json::from_value::<GateFigure>(json).unwrap(), f);
        }
        assert!(serde_json::from_value::<GateFigure>(serde_json::json!("p98Ms")).is_err());
    }

    #[test]
    fn a_gate_is_broken_above_its_max_or_below_its_min_and_by_no_number() {
        let g: Gate =
            serde_json::from_value(serde_json::json!({"figure": "p99Ms", "max": 5})).unwrap();
        assert_eq!(g.display_name(), "p99Ms <= 5");
        assert!(!g.broken_by(5.0) && g.broken_by(5.01) && g.broken_by(f64::NAN));
        assert_eq!(g.abort_after.as_std().as_secs(), DEFAULT_ABORT_AFTER_SECS);
        let g: Gate = serde_json::from_value(
            serde_json::json!({"figure": "rps", "min": 1000, "name": "floor"}),
        )
        .unwrap();
        assert_eq!(g.display_name(), "floor");
        assert!(!g.broken_by(1000.0) && g.broken_by(999.9) && g.broken_by(f64::INFINITY));
    }
}
