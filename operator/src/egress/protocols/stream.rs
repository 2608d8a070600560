//! tcp-stream: bulk TCP streams (iperf3's test), with an optional latency probe. Its client's
//! flags, its report ("tcp") read into the case's result, its figures.

use crds::egress::{CaseResult, EgressCase};
use crds::history::Better::Lower;
use prometheus::{GaugeVec, Registry};
use protocol::tcp::TcpReport;
use protocol::worker::CheckedReport;
use protocol::Protocol;

use super::super::readings::{
    address, behind_schedule, cpu, millis, round, round4, single_run, Errors,
};
use super::family::{direction, not_of, received, sent, CaseGauges, Family, Row};
use crate::base::metrics::gauge;

pub struct Stream;

impl Family for Stream {
    type Report = TcpReport;

    fn flags(case: &EgressCase, flag: &mut dyn FnMut(&str, String)) {
        flag(
            "-l",
            case.shown_message_size().unwrap_or_default().to_string(),
        );
        flag("--direction", direction(case));
        if let Some(rate) = case.latency_probe {
            flag("--latency-probe", rate.to_string());
        }
    }

    fn report(_: Protocol, checked: CheckedReport) -> Result<TcpReport, String> {
        match checked {
            CheckedReport::Tcp(t) => Ok(*t),
            other => Err(not_of(&other)),
        }
    }

    fn merge(all: &[TcpReport]) -> Result<TcpReport, String> {
        protocol::tcp::merge(all).map_err(|e| e.to_string())
    }

    fn fill(t: &TcpReport, r: &mut CaseResult) -> Errors {
        r.sender_bits_per_second = Some(round(t.sender.bits_per_second));
        r.receiver_bits_per_second = Some(round(t.receiver.bits_per_second));
        r.retransmits = t.retransmits;
        r.rtt_micros = t.mean_rtt_us.map(round);
        cpu(&t.cpu, single_run(&t.runs, |run| run.cpu), r);
        r.cpu_seconds_per_gb = t.cpu_seconds_per_gb.map(|c| round4(c.client + c.server));
        r.node_cpu_seconds_per_gb = t
            .node_cpu_seconds_per_gb
            .map(|c| round4(c.client + c.server));
        r.probe_latency = t.latency_probe.as_ref().map(|p| millis(&p.latency));
        if let Some(p) = t.latency_probe.as_ref().filter(|p| p.skipped > 0) {
            r.warning = Some(behind_schedule("the latency probe", p.skipped, p.attempted));
        }
        r.server_address = t.runs.first().map(|run| address(&run.server));
        let mut errors = t.stream_errors();
        if let Some(e) = t.latency_probe.as_ref().and_then(|p| p.error.as_ref()) {
            errors.push(format!("latency probe: {e:.256}"));
        }
        errors
    }

    fn figures(r: &CaseResult) -> Vec<Row> {
        let probe = |q: fn(&crds::LatencyMillis) -> f64| r.probe_latency.as_ref().map(q);
        vec![
            received(r),
            sent(r),
            ("retransmits", "count", Lower, Some(r.retransmits as f64)),
            ("probeP50Ms", "ms", Lower, probe(|l| l.p50)),
            ("probeP99Ms", "ms", Lower, probe(|l| l.p99)),
        ]
    }

    fn gauges(registry: &Registry) -> Box<dyn CaseGauges> {
        Box::new(Gauges {
            retransmits: gauge(
                registry,
                "netbench_egress_retransmits",
                "TCP retransmits of a finished case",
                &["namespace", "name", "case"],
            ),
        })
    }
}

/// `netbench_egress_retransmits`: every case has it (0 where there can be none).
struct Gauges {
    retransmits: GaugeVec,
}

impl CaseGauges for Gauges {
    fn set(&self, labels: [&str; 3], c: &CaseResult) {
        self.retransmits
            .with_label_values(&labels)
            .set(c.retransmits as f64);
    }

    fn forget(&self, labels: [&str; 3]) {
        let _ = self.retransmits.remove_label_values(&labels);
    }
}
