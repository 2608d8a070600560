//! A client's report read into a case's result, one reader per report kind: "tcp" (tcp-stream,
//! with its latency probe), "rr" (tcp-rr, tcp-crr, udp-rr) and "udp" (udp-stream). Every
//! report is validated again here (`protocol::worker::validate_final`): a stored report is as
//! hostile as the request that brought it. Pure.

use crds::egress::CaseResult;
use crds::LatencyMillis;
use protocol::cpu::{CpuReport, CpuUsage};
use protocol::report::LatencySummary;
use protocol::rr::RrReport;
use protocol::tcp::{Direction, Flow, TcpReport};
use protocol::udp::UdpReport;
use protocol::worker::{validate_final, CheckedReport, FinalReport};
use protocol::Protocol;

use crate::policy::gates::MISSED_LIMIT_PERCENT;

/// What a reader gives: the figures into `r`, and why streams ended early (if they did).
pub type Errors = Vec<String>;

/// A client's report, validated, of a kind an egress case reads.
pub enum EgressReport {
    Tcp(Box<TcpReport>),
    Udp(Box<UdpReport>),
    Rr(Box<RrReport>),
}

/// `client`'s report validated as one of protocol `p`: the kind `p` delivers, and for
/// request/response the test `p` names.
pub fn check(p: Protocol, client: &FinalReport) -> Result<EgressReport, String> {
    let checked = validate_final(client, p.report_kind())
        .map_err(|e| format!("report of worker {:.253}: {e}", client.worker))?;
    match checked {
        CheckedReport::Tcp(t) => Ok(EgressReport::Tcp(t)),
        CheckedReport::Udp(u) => Ok(EgressReport::Udp(u)),
        CheckedReport::Rr(rr) if rr.setup.mode == p => Ok(EgressReport::Rr(rr)),
        CheckedReport::Rr(rr) => Err(format!(
            "report of worker {:.253} measured {}, the case asks for {p}",
            client.worker, rr.setup.mode
        )),
        CheckedReport::Http(_) => Err(format!(
            "report of worker {:.253} is an HTTP report",
            client.worker
        )),
    }
}

/// Fills `r` from one checked report; returns why streams ended early (if they did).
pub fn fill(report: &EgressReport, r: &mut CaseResult) -> Errors {
    match report {
        EgressReport::Tcp(t) => stream(t, r),
        EgressReport::Udp(u) => datagrams(u, r),
        EgressReport::Rr(rr) => request_response(rr, r),
    }
}

/// Fills `r` from the checked reports of clients that ran at the same time (a topology's
/// pairs), merged exactly: rates and counts add up, latency histograms merge, percentiles are
/// recomputed. One report is read as it is.
pub fn read_all(reports: Vec<EgressReport>, r: &mut CaseResult) -> Result<Errors, String> {
    let n = reports.len();
    if let [one] = reports.as_slice() {
        return Ok(fill(one, r));
    }
    let merge_failed = |e: String| format!("merging the reports of {n} clients: {e}");
    let mismatched = || "the clients' reports are of different kinds".to_string();
    match reports.first() {
        None => Err("no client report to read".into()),
        Some(EgressReport::Tcp(_)) => {
            let all: Vec<TcpReport> = reports
                .into_iter()
                .filter_map(|c| match c {
                    EgressReport::Tcp(t) => Some(*t),
                    _ => None,
                })
                .collect();
            if all.len() != n {
                return Err(mismatched());
            }
            let merged = protocol::tcp::merge(&all).map_err(|e| merge_failed(e.to_string()))?;
            Ok(stream(&merged, r))
        }
        Some(EgressReport::Udp(_)) => {
            let all: Vec<UdpReport> = reports
                .into_iter()
                .filter_map(|c| match c {
                    EgressReport::Udp(u) => Some(*u),
                    _ => None,
                })
                .collect();
            if all.len() != n {
                return Err(mismatched());
            }
            let merged = protocol::udp::merge(&all).map_err(|e| merge_failed(e.to_string()))?;
            Ok(datagrams(&merged, r))
        }
        Some(EgressReport::Rr(_)) => {
            let all: Vec<RrReport> = reports
                .into_iter()
                .filter_map(|c| match c {
                    EgressReport::Rr(rr) => Some(*rr),
                    _ => None,
                })
                .collect();
            if all.len() != n {
                return Err(mismatched());
            }
            let merged = protocol::rr::merge(&all).map_err(|e| merge_failed(e.to_string()))?;
            Ok(request_response(&merged, r))
        }
    }
}

fn stream(t: &TcpReport, r: &mut CaseResult) -> Errors {
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

fn request_response(rr: &RrReport, r: &mut CaseResult) -> Errors {
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

/// An open loop that did not send all it was asked to (`skipped` intended sends never used).
fn behind_schedule(who: &str, skipped: u64, attempted: u64) -> String {
    format!(
        "{who} fell behind its open-loop schedule: {skipped} of {} intended transactions were never sent (the client was short of CPU, its window was full, or a stream ended early on an error); the rate asked was not offered and the latency leaves them out",
        attempted.saturating_add(skipped)
    )
}

fn datagrams(u: &UdpReport, r: &mut CaseResult) -> Errors {
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

/// The one run of a report, if it has exactly one (node figures are per node: a merge of runs
/// has none).
fn single_run<R, T>(runs: &[R], of: impl Fn(&R) -> T) -> Option<T> {
    match runs {
        [one] => Some(of(one)),
        _ => None,
    }
}

/// Both ends' CPU: the worker processes' (summed over runs) and, for one run, each node's.
fn cpu(total: &CpuReport, one_run: Option<CpuReport>, r: &mut CaseResult) {
    r.client_cpu_percent = round2(total.client.total_percent);
    r.server_cpu_percent = round2(total.server.total_percent);
    let node = |u: Option<CpuUsage>| Some(round2(u?.node?.busy_percent));
    r.client_node_cpu_percent = node(one_run.map(|c| c.client));
    r.server_node_cpu_percent = node(one_run.map(|c| c.server));
}

/// A reported address as status shows it: at most 64 characters (the schema's bound), no
/// control characters (a report is hostile input until the schema and this say otherwise).
fn address(reported: &str) -> String {
    reported
        .chars()
        .filter(|c| !c.is_control())
        .take(64)
        .collect()
}

fn millis(l: &LatencySummary) -> LatencyMillis {
    let ms = |us: u64| round4(us as f64 / 1000.0);
    LatencyMillis {
        p50: ms(l.p50_us),
        p90: ms(l.p90_us),
        p99: ms(l.p99_us),
        p999: ms(l.p999_us),
        max: ms(l.max_us),
        mean: round4(l.mean_us / 1000.0),
    }
}

fn round(v: f64) -> f64 {
    v.round()
}

pub fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
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
        datagrams(&paced_udp(1040, 960), &mut r);
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
        datagrams(&paced_udp(1990, 10), &mut r);
        assert_eq!(r.schedule_missed_percent, Some(0.5));
        assert_eq!(r.warning, None);
        assert_eq!(r.stream_jitter_ms, [0.02]);
        assert_eq!((r.jitter_ms, r.jitter_max_ms), (Some(0.02), Some(0.02)));
        assert_eq!(r.return_jitter_ms, None);
    }

    #[test]
    fn request_response_has_no_stream_rates_only_its_payload() {
        let mut r = CaseResult::default();
        request_response(&open_loop(200, 0), &mut r);
        assert_eq!(
            (r.sender_bits_per_second, r.receiver_bits_per_second),
            (None, None)
        );
        // 100 tx/s x (1 + 1) bytes x 8.
        assert_eq!(r.payload_bits_per_second, Some(1600.0));
        assert_eq!(r.schedule_missed_percent, Some(0.0));
        request_response(&open_loop(150, 50), &mut r);
        assert_eq!(r.schedule_missed_percent, Some(25.0));
    }

    #[test]
    fn an_open_loop_that_fell_behind_its_schedule_is_a_warning() {
        let mut r = CaseResult::default();
        request_response(&open_loop(150, 50), &mut r);
        let w = r.warning.expect("a warning");
        assert!(
            w.contains("50 of 200 intended transactions were never sent"),
            "{w}"
        );
        let mut r = CaseResult::default();
        request_response(&open_loop(200, 0), &mut r);
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
        request_response(&crr_with_timeouts(Some(full), None), &mut r);
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
        request_response(&crr_with_timeouts(Some(roomy), None), &mut r);
        assert_eq!(r.warning, None);
        // Not readable: said, with the reason, never a silent "fine".
        let mut r = CaseResult::default();
        let why = "reading /proc/sys/net/netfilter/nf_conntrack_count: permission denied";
        request_response(&crr_with_timeouts(None, Some(why)), &mut r);
        let w = r.warning.expect("a warning");
        assert!(
            w.contains("is unknown (reading /proc/sys/net/netfilter"),
            "{w}"
        );
    }
}
