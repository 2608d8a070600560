//! A case's result from its client's report, and the comparisons across cases (overhead
//! against the baseline, the best case) for status and printer columns. Pure.

use crds::egress::{CaseResult, EgressCase};
use crds::history::Better;
use protocol::tcp::TcpReport;
use protocol::worker::FinalReport;
use protocol::worker::{validate_final, CheckedReport};

use crate::driver::Figure;

/// The case's result; Err when the report is unreadable. Stream errors are returned beside
/// the result so the run can fail without losing what was measured.
pub fn case_result(
    case: &EgressCase,
    client: &FinalReport,
    server_node: Option<String>,
) -> Result<(CaseResult, Vec<String>), String> {
    // Validated again: the stored report is as hostile as the request that brought it.
    let report: TcpReport = match validate_final(client, protocol::tcp::REPORT_KIND) {
        Ok(CheckedReport::Tcp(t)) => *t,
        Ok(_) => {
            return Err(format!(
                "case {}: the client's report is not tcp",
                case.name
            ))
        }
        Err(e) => {
            return Err(format!(
                "case {}: report of worker {:.253}: {e}",
                case.name, client.worker
            ))
        }
    };
    let result = CaseResult {
        name: case.name.clone(),
        offload_profile: case.offload_profile.clone(),
        client_node: client.node.clone(),
        server_node,
        sender_bits_per_second: round(report.sender.bits_per_second),
        receiver_bits_per_second: round(report.receiver.bits_per_second),
        retransmits: report.retransmits,
        rtt_micros: report.mean_rtt_us.map(round),
        client_cpu_percent: round2(report.cpu.client.total_percent),
        server_cpu_percent: round2(report.cpu.server.total_percent),
        overhead_percent: None,
    };
    Ok((result, report.stream_errors()))
}

/// Some(why) when no byte of the case reached its receiver (its numbers are still recorded).
pub fn nothing_transferred(r: &CaseResult) -> Option<String> {
    // Only a positive throughput counts (so NaN does not).
    let moved = r.receiver_bits_per_second > 0.0;
    (!moved).then(|| {
        format!(
            "no byte was transferred: the receiver got 0 bit/s (sender {})",
            format_bits(r.sender_bits_per_second.max(0.0))
        )
    })
}

fn round(v: f64) -> f64 {
    v.round()
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Sets every non-baseline case's overheadPercent: the receiver throughput it lost against the
/// baseline (negative when faster). Without a measured baseline nothing is set.
pub fn set_overheads(cases: &mut [CaseResult], baseline: &str) {
    let Some(base) = cases
        .iter()
        .find(|c| c.name == baseline)
        .map(|c| c.receiver_bits_per_second)
        .filter(|b| *b > 0.0)
    else {
        return;
    };
    for c in cases.iter_mut() {
        c.overhead_percent =
            (c.name != baseline).then(|| round2((1.0 - c.receiver_bits_per_second / base) * 100.0));
    }
}

/// The figures of one sample, main figure first (samples, results, verdicts).
pub fn figures(r: &CaseResult) -> Vec<Figure> {
    let fig = |name, unit, better, value| Figure {
        name,
        unit,
        better,
        value,
    };
    vec![
        fig(
            "receiverBitsPerSecond",
            "bit/s",
            Better::Higher,
            r.receiver_bits_per_second,
        ),
        fig(
            "senderBitsPerSecond",
            "bit/s",
            Better::Higher,
            r.sender_bits_per_second,
        ),
        fig("retransmits", "count", Better::Lower, r.retransmits as f64),
    ]
}

/// "9.41 Gbit/s", "812.3 Mbit/s".
pub fn format_bits(bps: f64) -> String {
    match bps {
        b if b >= 1e9 => format!("{:.2} Gbit/s", b / 1e9),
        b if b >= 1e6 => format!("{:.1} Mbit/s", b / 1e6),
        b => format!("{:.0} kbit/s", b / 1e3),
    }
}

/// The printer columns: the best receiver throughput and the largest overhead.
pub fn summary(cases: &[CaseResult]) -> (Option<String>, Option<String>) {
    let best = cases
        .iter()
        .max_by(|a, b| {
            a.receiver_bits_per_second
                .total_cmp(&b.receiver_bits_per_second)
        })
        .map(|c| format!("{} ({})", format_bits(c.receiver_bits_per_second), c.name));
    let overhead = cases
        .iter()
        .filter_map(|c| c.overhead_percent.map(|o| (o, &c.name)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(o, name)| format!("{o:.1}% ({name})"));
    (best, overhead)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, bps: f64) -> CaseResult {
        CaseResult {
            name: name.into(),
            receiver_bits_per_second: bps,
            ..Default::default()
        }
    }

    #[test]
    fn overhead_is_against_the_baseline() {
        let mut cases = vec![
            case("node", 10e9),
            case("vxlan", 9e9),
            case("csum-off", 2.5e9),
        ];
        set_overheads(&mut cases, "node");
        assert_eq!(cases[0].overhead_percent, None);
        assert_eq!(cases[1].overhead_percent, Some(10.0));
        assert_eq!(cases[2].overhead_percent, Some(75.0));
        let (best, overhead) = summary(&cases);
        assert_eq!(best.unwrap(), "10.00 Gbit/s (node)");
        assert_eq!(overhead.unwrap(), "75.0% (csum-off)");
    }

    #[test]
    fn an_invalid_stored_report_fails_the_case_naming_its_worker() {
        let t = serde_json::json!({"bytes": 10, "seconds": 1.0, "bits_per_second": 80.0});
        let cpu =
            serde_json::json!({"user_percent": 1.0, "system_percent": 2.0, "total_percent": 3.0});
        let run = serde_json::json!({"client": "a", "server": "b", "streams": 1,
            "duration_secs": 1.0, "len": 1000, "direction": "send", "started_at_unix_ms": 1,
            "ended_at_unix_ms": 2, "cpu": {"client": cpu, "server": cpu}});
        let stream = serde_json::json!({"run": 0, "id": 0, "flow": "client_to_server",
            "sender": t, "receiver": t, "tcp": null, "error": null});
        let report = serde_json::json!({"version": 1, "kind": "tcp", "started_at_unix_ms": 1,
            "ended_at_unix_ms": 2, "sender": t, "receiver": t, "retransmits": 0,
            "mean_rtt_us": null, "cpu": {"client": cpu, "server": cpu}, "runs": [run],
            "streams": [stream]});
        let case: EgressCase =
            serde_json::from_value(serde_json::json!({"name": "c", "client": {}, "server": {}}))
                .unwrap();
        let mut client = FinalReport {
            version: 1,
            worker: "eb-c0-client".into(),
            node: None,
            step: 0,
            started_at_unix_ms: 1,
            report,
            host: None,
        };
        let (measured, _) = case_result(&case, &client, None).unwrap();
        assert_eq!(measured.receiver_bits_per_second, 80.0);
        // A forged throughput that the bytes do not back.
        client.report["receiver"]["bits_per_second"] = 9.4e9.into();
        let err = case_result(&case, &client, None).unwrap_err();
        assert!(
            err.contains(
                "report of worker eb-c0-client: invalid report: report.receiver.bits_per_second"
            ),
            "{err}"
        );
    }

    #[test]
    fn no_baseline_no_overhead() {
        let mut cases = vec![case("vxlan", 9e9)];
        set_overheads(&mut cases, "node");
        assert_eq!(cases[0].overhead_percent, None);
        assert_eq!(summary(&cases).1, None);
        assert_eq!(format_bits(812.34e6), "812.3 Mbit/s");
    }

    #[test]
    fn a_case_that_moved_nothing_says_so() {
        assert!(nothing_transferred(&case("idle", 0.0))
            .unwrap()
            .contains("no byte"));
        assert!(nothing_transferred(&case("nan", f64::NAN)).is_some());
        assert_eq!(nothing_transferred(&case("ok", 1e6)), None);
        let lost = CaseResult {
            sender_bits_per_second: 1e6,
            ..case("lost", 0.0)
        };
        let m = nothing_transferred(&lost).unwrap();
        assert!(m.contains("sender 1.0 Mbit/s"), "{m}");
    }
}
