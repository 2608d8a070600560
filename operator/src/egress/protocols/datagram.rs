//! udp-stream: datagram streams, paced or not (iperf3's `-u`). Its client's flags, its report
//! ("udp") read into the case's result (loss, jitter, the paced sender's schedule), its
//! figures.

use crds::egress::{CaseResult, EgressCase};
use crds::history::Better::{Higher, Lower};
use prometheus::{GaugeVec, Registry};
use protocol::tcp::{Direction, Flow};
use protocol::udp::UdpReport;
use protocol::worker::CheckedReport;
use protocol::Protocol;

use super::super::readings::{address, cpu, round, round4, single_run, Errors};
use super::family::{
    count, direction, loss, missed, not_of, received, sent, CaseGauges, Family, Row,
};
use crate::base::metrics::{gauge, set_each};
use crate::policy::gates::MISSED_LIMIT_PERCENT;

pub struct Datagram;

impl Family for Datagram {
    type Report = UdpReport;

    fn flags(case: &EgressCase, flag: &mut dyn FnMut(&str, String)) {
        if let Some(len) = case.message_size {
            flag("-l", len.to_string());
        }
        flag("--direction", direction(case));
        if let Some(b) = &case.bitrate {
            flag("-b", b.clone());
        }
        if let Some(pps) = case.packets_per_second {
            flag("--pps", pps.to_string());
        }
    }

    fn report(_: Protocol, checked: CheckedReport) -> Result<UdpReport, String> {
        match checked {
            CheckedReport::Udp(u) => Ok(*u),
            other => Err(not_of(&other)),
        }
    }

    fn merge(all: &[UdpReport]) -> Result<UdpReport, String> {
        protocol::udp::merge(all).map_err(|e| e.to_string())
    }

    fn fill(u: &UdpReport, r: &mut CaseResult) -> Errors {
        r.sender_bits_per_second = Some(round(u.sent.bits_per_second));
        r.receiver_bits_per_second = Some(round(u.received.bits_per_second));
        r.loss_percent = Some(round4(u.loss_percent));
        r.server_address = u.runs.first().map(|run| address(&run.server));
        jitter(u, r);
        r.out_of_order = Some(u.received.out_of_order);
        r.duplicates = Some(u.received.duplicates);
        cpu(&u.cpu, single_run(&u.runs, |run| run.cpu), r);
        r.cpu_seconds_per_gb = u.cpu_seconds_per_gb.map(|c| round4(c.client + c.server));
        r.node_cpu_seconds_per_gb = u
            .node_cpu_seconds_per_gb
            .map(|c| round4(c.client + c.server));
        if let (Some(offered), Some(missed)) = (u.offered, u.missed_percent()) {
            r.offered_bits_per_second = Some(round(offered.bits_per_second));
            let never_sent = u.sent.missed();
            r.late_sends = Some(u.sent.late);
            r.skipped_sends = Some(never_sent);
            r.schedule_missed_percent = Some(round4(missed));
            if missed > MISSED_LIMIT_PERCENT {
                r.warning = Some(format!(
                    "the senders missed {missed:.1} % of their schedule: {never_sent} of {} intended datagrams were never sent, {} bit/s sent of {} bit/s offered (the client was short of CPU or its sends failed); loss and jitter are of the datagrams sent, at a rate that was not the one asked",
                    u.sent.packets.saturating_add(never_sent),
                    round(u.sent.bits_per_second),
                    round(offered.bits_per_second),
                ));
            }
        }
        u.streams
            .iter()
            .filter_map(|s| Some(format!("stream {}: {:.256}", s.id, s.error.as_ref()?)))
            .collect()
    }

    fn figures(r: &CaseResult) -> Vec<Row> {
        vec![
            received(r),
            sent(r),
            (
                "offeredBitsPerSecond",
                "bit/s",
                Higher,
                r.offered_bits_per_second,
            ),
            missed(r),
            loss(r),
            ("jitterMs", "ms", Lower, r.jitter_ms),
            ("jitterMaxMs", "ms", Lower, r.jitter_max_ms),
            ("returnJitterMs", "ms", Lower, r.return_jitter_ms),
            ("returnJitterMaxMs", "ms", Lower, r.return_jitter_max_ms),
            ("outOfOrder", "count", Lower, count(r.out_of_order)),
        ]
    }

    fn gauges(registry: &Registry) -> Box<dyn CaseGauges> {
        Box::new(Gauges {
            jitter: gauge(
                registry,
                "netbench_egress_jitter_seconds",
                "RFC 3550 interarrival jitter of a finished udp-stream case",
                &["namespace", "name", "case"],
            ),
            sends: gauge(
                registry,
                "netbench_egress_paced_sends",
                "A paced udp-stream case's sends more than 1 ms late, and intended sends never \
                 made (skipped or failed)",
                &["namespace", "name", "case", "kind"],
            ),
        })
    }
}

/// The `kind` labels of `netbench_egress_paced_sends`.
const SEND_KINDS: [&str; 2] = ["late", "skipped"];

/// A udp-stream case's jitter and a paced one's late and skipped sends.
struct Gauges {
    jitter: GaugeVec,
    sends: GaugeVec,
}

impl CaseGauges for Gauges {
    fn set(&self, labels: [&str; 3], c: &CaseResult) {
        if let Some(j) = c.jitter_ms {
            self.jitter.with_label_values(&labels).set(j / 1000.0);
        }
        let sends = SEND_KINDS.into_iter().zip([c.late_sends, c.skipped_sends]);
        let counted = sends.filter_map(|(kind, n)| Some((kind, n? as f64)));
        set_each(&self.sends, &labels, counted);
    }

    fn forget(&self, [namespace, name, case]: [&str; 3]) {
        let _ = self.jitter.remove_label_values(&[namespace, name, case]);
        for kind in SEND_KINDS {
            let _ = self
                .sends
                .remove_label_values(&[namespace, name, case, kind]);
        }
    }
}

/// Most streams whose jitter status lists one by one (the schema's bound).
const MAX_STREAM_JITTERS: usize = 256;

/// The streams' jitter as iperf3 states it: per direction, their unweighted mean and the worst;
/// each stream's for a case of one run.
fn jitter(u: &UdpReport, r: &mut CaseResult) {
    let main = match u.runs.first().map(|run| run.direction) {
        Some(Direction::Receive) => Flow::ServerToClient,
        _ => Flow::ClientToServer,
    };
    for j in &u.jitter_by_flow {
        let (mean, max) = (Some(round4(j.mean_ms)), Some(round4(j.max_ms)));
        if j.flow == main {
            (r.jitter_ms, r.jitter_max_ms) = (mean, max);
        } else {
            (r.return_jitter_ms, r.return_jitter_max_ms) = (mean, max);
        }
    }
    if u.runs.len() == 1 {
        r.stream_jitter_ms = u
            .streams
            .iter()
            .filter_map(|s| s.jitter_ms.map(round4))
            .take(MAX_STREAM_JITTERS)
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::tcp::CpuReport;

    /// A paced udp-stream report: one stream at 1000 datagrams/s of 1000 bytes for 2 s that
    /// sent `sent` datagrams and skipped `skipped` intended sends, all received.
    fn paced_udp(sent: u64, skipped: u64) -> UdpReport {
        use protocol::udp::{Rate, Received, Sent, UdpRun, UdpStream};
        let run = UdpRun {
            client: "10.0.0.1:40000".into(),
            server: "10.0.0.2:5201".into(),
            streams: 1,
            duration_secs: 2.0,
            len: 1000,
            direction: Direction::Send,
            target: Some(Rate {
                bits_per_second: 8e6,
                packets_per_second: 1000.0,
            }),
            started_at_unix_ms: 1,
            ended_at_unix_ms: 2_001,
            cpu: CpuReport::default(),
            cpu_seconds: Default::default(),
        };
        let stream = UdpStream {
            jitter_ms: Some(0.02),
            ..UdpStream::new(
                0,
                Flow::ClientToServer,
                Sent {
                    skipped,
                    ..Sent::new(sent, sent * 1000, 2.0)
                },
                Received::new(sent, sent * 1000, 2.0),
            )
        };
        let r = UdpReport::single(run, vec![stream]);
        protocol::udp::validate_udp(&r).unwrap();
        r
    }

    #[test]
    fn a_paced_sender_that_missed_its_schedule_shows_it_and_warns() {
        // A client starved of CPU: 1040 of 2000 datagrams sent, none lost.
        let mut r = CaseResult::default();
        Datagram::fill(&paced_udp(1040, 960), &mut r);
        assert_eq!(r.loss_percent, Some(0.0));
        assert_eq!(r.offered_bits_per_second, Some(8e6));
        assert_eq!(r.sender_bits_per_second, Some(1040.0 * 8000.0 / 2.0));
        assert_eq!((r.late_sends, r.skipped_sends), (Some(0), Some(960)));
        assert_eq!(r.schedule_missed_percent, Some(48.0));
        let w = r.warning.expect("a warning");
        assert!(
            w.contains("missed 48.0 % of their schedule")
                && w.contains("960 of 2000 intended datagrams were never sent")
                && w.contains("4160000 bit/s sent of 8000000 bit/s offered"),
            "{w}"
        );
        // Within 1 %: the figures, no warning.
        let mut r = CaseResult::default();
        Datagram::fill(&paced_udp(1990, 10), &mut r);
        assert_eq!(r.schedule_missed_percent, Some(0.5));
        assert_eq!(r.warning, None);
        assert_eq!(r.stream_jitter_ms, [0.02]);
        assert_eq!((r.jitter_ms, r.jitter_max_ms), (Some(0.02), Some(0.02)));
        assert_eq!(r.return_jitter_ms, None);
    }
}
