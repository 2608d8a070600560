//! tcp-rr, tcp-crr and udp-rr: request/response transactions (netperf's tests). Their
//! client's flags, their report ("rr", the test in its `mode`) read into the case's result
//! (transactions/s, latency, failures, the open loop's schedule), their figures.

use crds::egress::{CaseResult, EgressCase};
use crds::history::Better::{Higher, Lower};
use crds::LatencyMillis;
use prometheus::{GaugeVec, Registry};
use protocol::rr::RrReport;
use protocol::worker::CheckedReport;
use protocol::Protocol;

use super::super::readings::{
    address, behind_schedule, cpu, millis, round, round2, round4, single_run, Errors,
};
use super::family::{count, loss, missed, not_of, CaseGauges, Family, Row};
use crate::base::metrics::gauge;

pub struct RequestResponse;

impl Family for RequestResponse {
    type Report = RrReport;

    fn flags(case: &EgressCase, flag: &mut dyn FnMut(&str, String)) {
        let default = crds::cases::default_rr_size(case.protocol);
        let size = |s: Option<u32>| s.unwrap_or(default).to_string();
        flag("--request-size", size(case.request_size));
        flag("--response-size", size(case.response_size));
        if let Some(burst) = case.burst.filter(|b| *b > 0) {
            flag("--burst", burst.to_string());
        }
        if let Some(rate) = case.rate {
            flag("--rate", rate.to_string());
        }
        if let Some(t) = case.timeout {
            // Whole milliseconds, rounded up (what the loadgen takes).
            let ms = std::time::Duration::from(t).as_nanos().div_ceil(1_000_000);
            flag("--timeout", format!("{ms}ms"));
        }
    }

    /// The report of the test `p` names.
    fn report(p: Protocol, checked: CheckedReport) -> Result<RrReport, String> {
        match checked {
            CheckedReport::Rr(rr) if rr.setup.mode == p => Ok(*rr),
            CheckedReport::Rr(rr) => {
                Err(format!("measured {}, the case asks for {p}", rr.setup.mode))
            }
            other => Err(not_of(&other)),
        }
    }

    fn merge(all: &[RrReport]) -> Result<RrReport, String> {
        protocol::rr::merge(all).map_err(|e| e.to_string())
    }

    fn fill(rr: &RrReport, r: &mut CaseResult) -> Errors {
        let bytes_per_tx = f64::from(rr.setup.request_size) + f64::from(rr.setup.response_size);
        // Payload both ways, from the measured rate and the configured sizes: named for what it is,
        // never shown as a measured sender or receiver rate.
        r.payload_bits_per_second = Some(round(rr.transactions_per_second * bytes_per_tx * 8.0));
        r.transactions_per_second = Some(round2(rr.transactions_per_second));
        r.server_address = rr.runs.first().map(|run| address(&run.server));
        r.latency = Some(millis(&rr.latency));
        r.failures = Some(rr.counts.errors.checked_total().unwrap_or(u64::MAX));
        r.loss_percent = rr.loss_percent.map(round4);
        cpu(&rr.cpu, single_run(&rr.runs, |run| run.cpu), r);
        if let Some(c) = &rr.cpu_us_per_transaction {
            r.client_cpu_us_per_transaction = Some(round2(c.client));
            r.server_cpu_us_per_transaction = Some(round2(c.server));
        }
        if let Some(c) = &rr.node_cpu_us_per_transaction {
            r.client_node_cpu_us_per_transaction = Some(round2(c.client));
            r.server_node_cpu_us_per_transaction = Some(round2(c.server));
        }
        r.schedule_missed_percent = rr.missed_percent().map(round4);
        let mut warnings = Vec::new();
        if rr.port_exhausted {
            warnings.push(format!(
                "the client ran out of local ports: {} connects failed with EADDRNOTAVAIL (TIME_WAIT); transactions/s is limited by that, not by the path",
                rr.counts.errors.address_not_available
            ));
        }
        if rr.counts.skipped > 0 {
            warnings.push(behind_schedule(
                "the client",
                rr.counts.skipped,
                rr.counts.attempted,
            ));
        }
        if let Some((per_timeout, window)) = protocol::rr::window_shortfall(&rr.setup) {
            warnings.push(format!(
                "the rate asks for {per_timeout:.0} requests per stream within one {} ms timeout, but a udp-rr stream keeps at most {window} in flight: spread the rate over more streams or shorten the timeout",
                rr.setup.timeout_ms
            ));
        }
        // Failures while the node's conntrack table was near full, or that cannot be told apart
        // from that because the table could not be read.
        warnings.extend(protocol::rr::conntrack_warnings(rr));
        r.warning = (!warnings.is_empty()).then(|| warnings.join("; "));
        rr.per_stream
            .iter()
            .filter_map(|s| Some(format!("stream {}: {:.256}", s.id, s.error.as_ref()?)))
            .collect()
    }

    fn figures(r: &CaseResult) -> Vec<Row> {
        let latency = |q: fn(&LatencyMillis) -> f64| r.latency.as_ref().map(q);
        vec![
            (
                "transactionsPerSecond",
                "tx/s",
                Higher,
                r.transactions_per_second,
            ),
            ("p50Ms", "ms", Lower, latency(|l| l.p50)),
            ("p90Ms", "ms", Lower, latency(|l| l.p90)),
            ("p99Ms", "ms", Lower, latency(|l| l.p99)),
            ("p999Ms", "ms", Lower, latency(|l| l.p999)),
            ("maxMs", "ms", Lower, latency(|l| l.max)),
            ("failures", "count", Lower, count(r.failures)),
            loss(r),
            (
                "clientCpuUsPerTransaction",
                "us",
                Lower,
                r.client_cpu_us_per_transaction,
            ),
            (
                "serverCpuUsPerTransaction",
                "us",
                Lower,
                r.server_cpu_us_per_transaction,
            ),
            (
                "clientNodeCpuUsPerTransaction",
                "us",
                Lower,
                r.client_node_cpu_us_per_transaction,
            ),
            (
                "serverNodeCpuUsPerTransaction",
                "us",
                Lower,
                r.server_node_cpu_us_per_transaction,
            ),
            missed(r),
        ]
    }

    fn gauges(registry: &Registry) -> Box<dyn CaseGauges> {
        Box::new(Gauges {
            transactions: gauge(
                registry,
                "netbench_egress_transactions_per_second",
                "Transactions per second of a finished request/response case (tcp-rr, tcp-crr, \
                 udp-rr)",
                &["namespace", "name", "case", "protocol"],
            ),
            cpu_per_transaction: gauge(
                registry,
                "netbench_egress_cpu_seconds_per_transaction",
                "CPU per transaction of a request/response case: each end's worker process, \
                 and each end's whole node (/proc/stat: netperf's service demand)",
                &["namespace", "name", "case", "end", "scope"],
            ),
        })
    }
}

/// The (end, scope) labels of `netbench_egress_cpu_seconds_per_transaction`.
const CPU_ENDS: [(&str, &str); 4] = [
    ("client", "process"),
    ("server", "process"),
    ("client", "node"),
    ("server", "node"),
];

/// A request/response case's transactions/s (by protocol) and CPU per transaction.
struct Gauges {
    transactions: GaugeVec,
    cpu_per_transaction: GaugeVec,
}

impl CaseGauges for Gauges {
    fn set(&self, [namespace, name, case]: [&str; 3], c: &CaseResult) {
        if let Some(tps) = c.transactions_per_second {
            let protocol = c.protocol.unwrap_or_default();
            self.transactions
                .with_label_values(&[namespace, name, case, protocol.as_str()])
                .set(tps);
        }
        let per_transaction = [
            c.client_cpu_us_per_transaction,
            c.server_cpu_us_per_transaction,
            c.client_node_cpu_us_per_transaction,
            c.server_node_cpu_us_per_transaction,
        ];
        for ((end, scope), us) in CPU_ENDS.into_iter().zip(per_transaction) {
            if let Some(us) = us {
                self.cpu_per_transaction
                    .with_label_values(&[namespace, name, case, end, scope])
                    .set(us / 1e6);
            }
        }
    }

    fn forget(&self, [namespace, name, case]: [&str; 3]) {
        for protocol in Protocol::ALL {
            let _ =
                self.transactions
                    .remove_label_values(&[namespace, name, case, protocol.as_str()]);
        }
        for (end, scope) in CPU_ENDS {
            let _ = self
                .cpu_per_transaction
                .remove_label_values(&[namespace, name, case, end, scope]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::report::histogram::new_latency_histogram;
    use protocol::rr::{ConntrackUse, RrCounts, RrRun, RrSetup, RrStream};
    use protocol::tcp::CpuReport;

    /// A one-stream open-loop tcp-rr report over 2 s that sent `attempted` transactions of
    /// its schedule (all answered) and skipped `skipped`.
    fn open_loop(attempted: u64, skipped: u64) -> RrReport {
        let mut h = new_latency_histogram();
        for _ in 0..attempted {
            h.record(100).unwrap();
        }
        let setup = RrSetup {
            mode: Protocol::TcpRr,
            request_size: 1,
            response_size: 1,
            burst: 0,
            rate_per_stream: Some((attempted + skipped) as f64 / 2.0),
            timeout_ms: 1000,
            max_in_flight: Some(1),
        };
        let run = RrRun {
            client: "10.0.0.1:40000".into(),
            server: "10.0.0.2:5201".into(),
            streams: 1,
            duration_secs: 2.0,
            started_at_unix_ms: 1,
            ended_at_unix_ms: 2_001,
            transactions: attempted,
            transactions_in_window: Some(attempted),
            transactions_per_second: attempted as f64 / 2.0,
            server_answered: attempted,
            cpu: CpuReport::default(),
            conntrack: None,
            conntrack_note: None,
        };
        let counts = RrCounts {
            attempted,
            skipped,
            transactions: attempted,
            ..RrCounts::default()
        };
        let stream = RrStream {
            run: 0,
            id: 0,
            attempted,
            skipped: Some(skipped),
            transactions: attempted,
            failed: 0,
            error: None,
        };
        let r = RrReport::single(setup, run, counts, &h, vec![stream]).unwrap();
        protocol::rr::validate_rr(&r).unwrap();
        r
    }

    #[test]
    fn request_response_has_no_stream_rates_only_its_payload() {
        let mut r = CaseResult::default();
        RequestResponse::fill(&open_loop(200, 0), &mut r);
        assert_eq!(
            (r.sender_bits_per_second, r.receiver_bits_per_second),
            (None, None)
        );
        // 100 tx/s x (1 + 1) bytes x 8.
        assert_eq!(r.payload_bits_per_second, Some(1600.0));
        assert_eq!(r.schedule_missed_percent, Some(0.0));
        RequestResponse::fill(&open_loop(150, 50), &mut r);
        assert_eq!(r.schedule_missed_percent, Some(25.0));
    }

    #[test]
    fn an_open_loop_that_fell_behind_its_schedule_is_a_warning() {
        let mut r = CaseResult::default();
        RequestResponse::fill(&open_loop(150, 50), &mut r);
        let w = r.warning.expect("a warning");
        assert!(
            w.contains("50 of 200 intended transactions were never sent"),
            "{w}"
        );
        let mut r = CaseResult::default();
        RequestResponse::fill(&open_loop(200, 0), &mut r);
        assert_eq!(r.warning, None);
    }

    /// A tcp-crr report of 195 transactions and 5 connects that timed out, with the client's
    /// conntrack figures (or why there are none).
    fn crr_with_timeouts(conntrack: Option<ConntrackUse>, note: Option<&str>) -> RrReport {
        let mut r = open_loop(195, 5);
        r.setup.mode = Protocol::TcpCrr;
        r.counts.errors.timeout = 5;
        r.counts.attempted += 5;
        r.counts.skipped = 0;
        let s = &mut r.per_stream[0];
        (s.attempted, s.failed, s.skipped) = (200, 5, Some(0));
        r.runs[0].conntrack = conntrack;
        r.runs[0].conntrack_note = note.map(str::to_string);
        protocol::rr::validate_rr(&r).unwrap();
        r
    }

    #[test]
    fn failures_with_the_conntrack_table_near_full_blame_the_node() {
        let full = ConntrackUse {
            at_start: 1_000,
            at_end: 250_000,
            highest: 262_000,
            max: 262_144,
        };
        let mut r = CaseResult::default();
        RequestResponse::fill(&crr_with_timeouts(Some(full), None), &mut r);
        let w = r.warning.expect("a warning");
        assert!(w.contains("held up to 262000 of its 262144 entries"), "{w}");
        assert!(w.contains("timeout 5"), "{w}");
        // Room in the table: the timeouts are not blamed on it.
        let roomy = ConntrackUse {
            highest: 1_000,
            at_end: 1_000,
            ..full
        };
        let mut r = CaseResult::default();
        RequestResponse::fill(&crr_with_timeouts(Some(roomy), None), &mut r);
        assert_eq!(r.warning, None);
        // Not readable: said, with the reason, never a silent "fine".
        let mut r = CaseResult::default();
        let why = "reading /proc/sys/net/netfilter/nf_conntrack_count: permission denied";
        RequestResponse::fill(&crr_with_timeouts(None, Some(why)), &mut r);
        let w = r.warning.expect("a warning");
        assert!(
            w.contains("is unknown (reading /proc/sys/net/netfilter"),
            "{w}"
        );
    }
}
