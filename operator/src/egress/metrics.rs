//! An EgressBenchmark's figures on /metrics: each finished case's throughput (sent, received
//! and, paced, offered), overhead, latency quantiles, loss, the share of an open loop's
//! schedule never sent, its pairs' values, and the series of one protocol family alone
//! (`protocols::case_gauges`: retransmits; jitter and a paced sender's late and skipped sends;
//! transactions and CPU per transaction of each end's process and node).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};

use prometheus::{GaugeVec, Registry};

use super::protocols::{self, CaseGauges};
use crate::base::metrics::{gauge, set_each, Family};

/// The `quantile` labels of `netbench_egress_latency_seconds`.
const CASE_QUANTILES: [&str; 5] = ["0.5", "0.9", "0.99", "0.999", "1"];

type Published = BTreeMap<(String, String), BTreeSet<(String, Option<String>)>>;
/// (namespace, name, case) -> the (pair, client node, server node) of its pair series.
type PairSeries = BTreeMap<(String, String, String), Vec<(String, String, String)>>;

pub struct EgressMetrics {
    /// The case series published per benchmark (namespace, name) -> {(case, offload profile)}:
    /// what [`EgressMetrics::keep_cases`] drops when a run no longer has them (a sweep edited
    /// to other sizes must not leave its old series behind until the operator restarts).
    published: Mutex<Published>,
    pair_series: Mutex<PairSeries>,
    bits: GaugeVec,
    overhead: GaugeVec,
    latency: GaugeVec,
    loss: GaugeVec,
    missed: GaugeVec,
    pair: GaugeVec,
    /// Each protocol family's own series.
    families: Vec<Box<dyn CaseGauges>>,
}

impl Family for EgressMetrics {
    fn register(registry: &Registry) -> Self {
        let case = ["namespace", "name", "case"];
        EgressMetrics {
            published: Mutex::default(),
            pair_series: Mutex::default(),
            bits: gauge(
                registry,
                "netbench_egress_bits_per_second",
                "Throughput of a finished case",
                &["namespace", "name", "case", "side", "offload"],
            ),
            overhead: gauge(
                registry,
                "netbench_egress_overhead_percent",
                "Throughput lost against the baseline case",
                &case,
            ),
            latency: gauge(
                registry,
                "netbench_egress_latency_seconds",
                "Latency quantiles (1 = max) of a finished request/response case, or of a \
                 tcp-stream case's latency probe",
                &["namespace", "name", "case", "quantile"],
            ),
            loss: gauge(
                registry,
                "netbench_egress_loss_ratio",
                "Datagrams lost (0 to 1) in a finished udp-rr or udp-stream case",
                &case,
            ),
            missed: gauge(
                registry,
                "netbench_egress_schedule_missed_ratio",
                "Share (0 to 1) of an open loop's schedule never sent (udp-stream paced, \
                 request/response with a rate): above 0.01 the load asked for was not offered",
                &case,
            ),
            pair: gauge(
                registry,
                "netbench_egress_pair_value",
                "A topology's pair: the case's main figure (receiver bits/s, or transactions/s \
                 for request/response) between two nodes (the node-pair heatmap)",
                &[
                    "namespace",
                    "name",
                    "case",
                    "pair",
                    "client_node",
                    "server_node",
                ],
            ),
            families: protocols::case_gauges(registry),
        }
    }
}

impl EgressMetrics {
    /// Publishes every case result an EgressBenchmark's status holds.
    pub fn export(&self, namespace: &str, name: &str, s: &crds::EgressBenchmarkStatus) {
        for c in &s.cases {
            self.set_case(namespace, name, c);
        }
    }

    /// Publishes a finished case: its throughput, overhead, latency, loss, missed schedule and
    /// pairs, and the series of each family it has figures for.
    pub fn set_case(&self, namespace: &str, name: &str, c: &crds::egress::CaseResult) {
        self.published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((namespace.to_string(), name.to_string()))
            .or_default()
            .insert((c.name.clone(), c.offload_profile.clone()));
        let offload = c.offload_profile.as_deref().unwrap_or("none");
        for (side, v) in [
            ("sender", c.sender_bits_per_second),
            ("receiver", c.receiver_bits_per_second),
            ("offered", c.offered_bits_per_second),
        ] {
            if let Some(v) = v {
                self.bits
                    .with_label_values(&[namespace, name, &c.name, side, offload])
                    .set(v);
            }
        }
        let labels = [namespace, name, c.name.as_str()];
        if let Some(o) = c.overhead_percent {
            self.overhead.with_label_values(&labels).set(o);
        }
        if let Some(l) = c.latency.as_ref().or(c.probe_latency.as_ref()) {
            let seconds = [l.p50, l.p90, l.p99, l.p999, l.max].map(|ms| ms / 1000.0);
            set_each(
                &self.latency,
                &labels,
                CASE_QUANTILES.into_iter().zip(seconds),
            );
        }
        if let Some(loss) = c.loss_percent {
            self.loss.with_label_values(&labels).set(loss / 100.0);
        }
        if let Some(m) = c.schedule_missed_percent {
            self.missed.with_label_values(&labels).set(m / 100.0);
        }
        for family in &self.families {
            family.set(labels, c);
        }
        self.forget_pairs(namespace, name, &c.name);
        let node = |n: &Option<String>| n.clone().unwrap_or_else(|| "unknown".into());
        let nodes: Vec<(String, String, String)> = c
            .pairs
            .iter()
            .map(|p| {
                (
                    p.pair.to_string(),
                    node(&p.client_node),
                    node(&p.server_node),
                )
            })
            .collect();
        for (p, (pair, client, server)) in c.pairs.iter().zip(&nodes) {
            self.pair
                .with_label_values(&[namespace, name, &c.name, pair, client, server])
                .set(p.value);
        }
        if !nodes.is_empty() {
            let key = (namespace.to_string(), name.to_string(), c.name.clone());
            self.pair_series
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(key, nodes);
        }
    }

    /// Drops the pair series a case published before.
    fn forget_pairs(&self, namespace: &str, name: &str, case: &str) {
        let key = (namespace.to_string(), name.to_string(), case.to_string());
        let old = self
            .pair_series
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key)
            .unwrap_or_default();
        for (pair, client, server) in old {
            let _ = self
                .pair
                .remove_label_values(&[namespace, name, case, &pair, &client, &server]);
        }
    }

    /// Drops the case series of benchmark `namespace`/`name` that `current` (its status' cases
    /// now) no longer has: a run of other cases or sweep values, another offload profile, or
    /// none at all (`current` empty: the benchmark is deleted). Driven by what this process
    /// published, never by a stored status.
    pub fn keep_cases(&self, namespace: &str, name: &str, current: &[crds::egress::CaseResult]) {
        let keep: BTreeSet<(String, Option<String>)> = current
            .iter()
            .map(|c| (c.name.clone(), c.offload_profile.clone()))
            .collect();
        let key = (namespace.to_string(), name.to_string());
        let stale: Vec<(String, Option<String>)> = {
            let mut published = self
                .published
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let Some(series) = published.get_mut(&key) else {
                return;
            };
            let stale = series.difference(&keep).cloned().collect();
            series.retain(|s| keep.contains(s));
            if series.is_empty() {
                published.remove(&key);
            }
            stale
        };
        for (case, profile) in stale {
            self.forget_case(namespace, name, &case, profile.as_deref());
        }
    }

    /// Drops one case's series.
    fn forget_case(&self, namespace: &str, name: &str, case: &str, profile: Option<&str>) {
        let offload = profile.unwrap_or("none");
        for side in ["sender", "receiver", "offered"] {
            let _ = self
                .bits
                .remove_label_values(&[namespace, name, case, side, offload]);
        }
        let _ = self.overhead.remove_label_values(&[namespace, name, case]);
        for q in CASE_QUANTILES {
            let _ = self
                .latency
                .remove_label_values(&[namespace, name, case, q]);
        }
        let _ = self.loss.remove_label_values(&[namespace, name, case]);
        let _ = self.missed.remove_label_values(&[namespace, name, case]);
        for family in &self.families {
            family.forget([namespace, name, case]);
        }
        self.forget_pairs(namespace, name, case);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::metrics::Metrics;
    use crds::egress::CaseResult;

    fn case(name: &str, profile: Option<&str>) -> CaseResult {
        CaseResult {
            name: name.into(),
            offload_profile: profile.map(Into::into),
            receiver_bits_per_second: Some(1e9),
            transactions_per_second: Some(10.0),
            loss_percent: Some(1.0),
            ..Default::default()
        }
    }

    fn series_of(m: &Metrics, case: &str) -> usize {
        m.render()
            .lines()
            .filter(|l| {
                l.starts_with("netbench_egress_") && l.contains(&format!("case=\"{case}\""))
            })
            .count()
    }

    #[test]
    fn a_run_that_no_longer_has_a_case_drops_its_series() {
        let metrics = Metrics::new();
        let m = metrics.family::<EgressMetrics>();
        let (old, kept) = (
            case("rr/messageSize=64", None),
            case("rr/messageSize=1024", None),
        );
        m.set_case("team", "eb", &old);
        m.set_case("team", "eb", &kept);
        m.set_case("other", "eb", &old);
        assert!(series_of(&metrics, "rr/messageSize=64") > 0);
        // The next run measures only 1024 B, with an offload profile now.
        let now = case("rr/messageSize=1024", Some("off"));
        m.set_case("team", "eb", &now);
        m.keep_cases("team", "eb", std::slice::from_ref(&now));
        let text = metrics.render();
        assert!(
            !text
                .lines()
                .any(|l| l.contains("namespace=\"team\"")
                    && l.contains("case=\"rr/messageSize=64\"")),
            "{text}"
        );
        assert!(text
            .lines()
            .any(|l| l.contains("namespace=\"team\"") && l.contains("offload=\"off\"")));
        assert!(
            !text
                .lines()
                .any(|l| l.contains("namespace=\"team\"") && l.contains("offload=\"none\"")),
            "{text}"
        );
        // Another benchmark's series are not touched; a deleted benchmark leaves none.
        assert!(text.lines().any(|l| l.contains("namespace=\"other\"")));
        m.keep_cases("team", "eb", &[]);
        assert!(!metrics
            .render()
            .lines()
            .any(|l| l.starts_with("netbench_egress_") && l.contains("namespace=\"team\"")));
        assert!(
            series_of(&metrics, "rr/messageSize=64") > 0,
            "other/eb keeps its own"
        );
    }

    #[test]
    fn pair_series_follow_the_latest_rows_and_go_with_the_case() {
        let metrics = Metrics::new();
        let m = metrics.family::<EgressMetrics>();
        let row = |c: &str, s: &str, v: f64| crds::egress::PairResult {
            client_node: Some(c.into()),
            server_node: Some(s.into()),
            value: v,
            ..Default::default()
        };
        let mut matrix = case("matrix", None);
        matrix.pairs = vec![row("a", "b", 5.0), row("b", "a", 7.0)];
        m.set_case("team", "eb", &matrix);
        let pairs = |text: &str| {
            text.lines()
                .filter(|l| l.starts_with("netbench_egress_pair_value{"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let text = metrics.render();
        assert_eq!(pairs(&text).len(), 2, "{text}");
        assert!(text.contains(
            "netbench_egress_pair_value{case=\"matrix\",client_node=\"b\",name=\"eb\",namespace=\"team\",pair=\"0\",server_node=\"a\"} 7"
        ), "{text}");
        // The next run placed the pair elsewhere: only its rows remain.
        matrix.pairs = vec![row("a", "c", 6.0)];
        m.set_case("team", "eb", &matrix);
        let text = metrics.render();
        assert_eq!(pairs(&text).len(), 1, "{text}");
        m.keep_cases("team", "eb", &[]);
        assert!(pairs(&metrics.render()).is_empty());
    }

    #[test]
    fn a_case_with_every_figure_publishes_each_series_once_and_drops_them_all() {
        let metrics = Metrics::new();
        let m = metrics.family::<EgressMetrics>();
        let l = crds::LatencyMillis {
            p50: 1.0,
            p90: 2.0,
            p99: 3.0,
            p999: 4.0,
            max: 5.0,
            mean: 1.5,
        };
        let full = CaseResult {
            protocol: Some(protocol::Protocol::UdpRr),
            sender_bits_per_second: Some(2e9),
            offered_bits_per_second: Some(3e9),
            overhead_percent: Some(12.5),
            retransmits: 7,
            latency: Some(l),
            jitter_ms: Some(0.25),
            schedule_missed_percent: Some(2.0),
            late_sends: Some(4),
            skipped_sends: Some(5),
            client_cpu_us_per_transaction: Some(10.0),
            server_cpu_us_per_transaction: Some(20.0),
            client_node_cpu_us_per_transaction: Some(30.0),
            server_node_cpu_us_per_transaction: Some(40.0),
            ..case("full", None)
        };
        m.set_case("team", "eb", &full);
        let text = metrics.render();
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("netbench_egress_"))
            .collect();
        assert_eq!(series, EVERY_SERIES.lines().collect::<Vec<_>>());
        m.keep_cases("team", "eb", &[]);
        assert_eq!(series_of(&metrics, "full"), 0);
    }

    /// What the case with every figure publishes, as /metrics renders it (each protocol
    /// family's own series among them).
    const EVERY_SERIES: &str = r#"netbench_egress_bits_per_second{case="full",name="eb",namespace="team",offload="none",side="offered"} 3000000000
netbench_egress_bits_per_second{case="full",name="eb",namespace="team",offload="none",side="receiver"} 1000000000
netbench_egress_bits_per_second{case="full",name="eb",namespace="team",offload="none",side="sender"} 2000000000
netbench_egress_cpu_seconds_per_transaction{case="full",end="client",name="eb",namespace="team",scope="node"} 0.00003
netbench_egress_cpu_seconds_per_transaction{case="full",end="client",name="eb",namespace="team",scope="process"} 0.00001
netbench_egress_cpu_seconds_per_transaction{case="full",end="server",name="eb",namespace="team",scope="node"} 0.00004
netbench_egress_cpu_seconds_per_transaction{case="full",end="server",name="eb",namespace="team",scope="process"} 0.00002
netbench_egress_jitter_seconds{case="full",name="eb",namespace="team"} 0.00025
netbench_egress_latency_seconds{case="full",name="eb",namespace="team",quantile="0.5"} 0.001
netbench_egress_latency_seconds{case="full",name="eb",namespace="team",quantile="0.9"} 0.002
netbench_egress_latency_seconds{case="full",name="eb",namespace="team",quantile="0.99"} 0.003
netbench_egress_latency_seconds{case="full",name="eb",namespace="team",quantile="0.999"} 0.004
netbench_egress_latency_seconds{case="full",name="eb",namespace="team",quantile="1"} 0.005
netbench_egress_loss_ratio{case="full",name="eb",namespace="team"} 0.01
netbench_egress_overhead_percent{case="full",name="eb",namespace="team"} 12.5
netbench_egress_paced_sends{case="full",kind="late",name="eb",namespace="team"} 4
netbench_egress_paced_sends{case="full",kind="skipped",name="eb",namespace="team"} 5
netbench_egress_retransmits{case="full",name="eb",namespace="team"} 7
netbench_egress_schedule_missed_ratio{case="full",name="eb",namespace="team"} 0.02
netbench_egress_transactions_per_second{case="full",name="eb",namespace="team",protocol="udp-rr"} 10"#;
}
