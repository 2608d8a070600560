//! A case's result from its client's report (read per protocol by `readings`), and the
//! comparisons across cases (overhead against the baseline, the best case) for status and
//! printer columns. Pure.

use crds::cases::Measured;
use crds::egress::CaseResult;
use crds::history::Better;
use protocol::worker::FinalReport;
use protocol::Protocol;

use super::readings::{self, round2};
use crate::policy::samples::Figure;

/// The case's result; Err when the report is unreadable. Stream errors are returned beside
/// the result so the run can fail without losing what was measured.
pub fn case_result(
    case: &Measured,
    client: &FinalReport,
    server_node: Option<String>,
) -> Result<(CaseResult, Vec<String>), String> {
    let spec = &case.spec;
    let mut result = CaseResult {
        name: case.name.clone(),
        offload_profile: spec.offload_profile.clone(),
        client_node: client.node.clone(),
        server_node,
        protocol: Some(spec.protocol),
        case: (case.case != case.name).then(|| case.case.clone()),
        message_size: spec.shown_message_size(),
        streams: Some(spec.streams),
        path: Some(spec.path().to_string()),
        ..Default::default()
    };
    let errors = readings::read(spec.protocol, client, &mut result)
        .map_err(|e| format!("case {}: {e}", case.name))?;
    Ok((result, errors))
}

/// Some(why) when the case measured nothing: no byte reached its receiver, or no transaction
/// was answered (its numbers are still recorded).
pub fn nothing_transferred(r: &CaseResult) -> Option<String> {
    if let Some(tps) = r.transactions_per_second {
        // Only a positive rate counts (so NaN does not).
        let answered = tps > 0.0;
        return (!answered).then(|| {
            format!(
                "no transaction was answered ({} failed{})",
                r.failures.unwrap_or(0),
                r.loss_percent
                    .map(|l| format!(", {l}% lost"))
                    .unwrap_or_default()
            )
        });
    }
    let moved = r.receiver_bits_per_second > 0.0;
    (!moved).then(|| {
        format!(
            "no byte was transferred: the receiver got 0 bit/s (sender {})",
            format_bits(r.sender_bits_per_second.max(0.0))
        )
    })
}

/// The figure cases are compared by: transactions/s for request/response, else the
/// receiver's throughput.
fn main_figure(r: &CaseResult) -> f64 {
    r.transactions_per_second
        .unwrap_or(r.receiver_bits_per_second)
}

fn protocol_of(r: &CaseResult) -> Protocol {
    r.protocol.unwrap_or_default()
}

/// Sets every non-baseline case's overheadPercent: the main figure it lost against the
/// baseline (negative when better), between cases of the same protocol only. A swept baseline
/// case is matched by message size and streams. Without a measured baseline nothing is set.
pub fn set_overheads(cases: &mut [CaseResult], baseline: &str) {
    let bases: Vec<(Protocol, Option<u32>, Option<u32>, f64)> = cases
        .iter()
        .filter(|c| c.name == baseline || c.case.as_deref() == Some(baseline))
        .map(|c| (protocol_of(c), c.message_size, c.streams, main_figure(c)))
        .filter(|b| b.3 > 0.0)
        .collect();
    // Swept: the baseline case's runs carry their own names ("case/messageSize=N"), whether
    // one or all of them measured anything (never decided by how many measured).
    let swept = cases
        .iter()
        .any(|c| c.case.as_deref() == Some(baseline) && c.name != baseline);
    for c in cases.iter_mut() {
        let own = c.name == baseline || c.case.as_deref() == Some(baseline);
        let base = bases.iter().find(|(p, size, streams, _)| {
            *p == protocol_of(c) && (!swept || (*size == c.message_size && *streams == c.streams))
        });
        c.overhead_percent = match (own, base) {
            (false, Some(b)) => Some(round2((1.0 - main_figure(c) / b.3) * 100.0)),
            _ => None,
        };
    }
}

/// The figures of one sample, main figure first (samples, results, verdicts). Units: what
/// `netbench report` shows (lossPercent already in percent).
pub fn figures(r: &CaseResult) -> Vec<Figure> {
    let fig = |name, unit, better, value| Figure {
        name,
        unit,
        better,
        value,
    };
    let mut out = vec![];
    match protocol_of(r) {
        Protocol::TcpStream => {
            out.push(fig(
                "receiverBitsPerSecond",
                "bit/s",
                Better::Higher,
                r.receiver_bits_per_second,
            ));
            out.push(fig(
                "senderBitsPerSecond",
                "bit/s",
                Better::Higher,
                r.sender_bits_per_second,
            ));
            out.push(fig(
                "retransmits",
                "count",
                Better::Lower,
                r.retransmits as f64,
            ));
            if let Some(p) = &r.probe_latency {
                out.push(fig("probeP50Ms", "ms", Better::Lower, p.p50));
                out.push(fig("probeP99Ms", "ms", Better::Lower, p.p99));
            }
        }
        Protocol::UdpStream => {
            out.push(fig(
                "receiverBitsPerSecond",
                "bit/s",
                Better::Higher,
                r.receiver_bits_per_second,
            ));
            out.extend(
                r.loss_percent
                    .map(|v| fig("lossPercent", "%", Better::Lower, v)),
            );
            out.extend(r.jitter_ms.map(|v| fig("jitterMs", "ms", Better::Lower, v)));
            out.extend(
                r.out_of_order
                    .map(|v| fig("outOfOrder", "count", Better::Lower, v as f64)),
            );
        }
        Protocol::TcpRr | Protocol::TcpCrr | Protocol::UdpRr => {
            out.extend(
                r.transactions_per_second
                    .map(|v| fig("transactionsPerSecond", "tx/s", Better::Higher, v)),
            );
            if let Some(l) = &r.latency {
                out.push(fig("p50Ms", "ms", Better::Lower, l.p50));
                out.push(fig("p90Ms", "ms", Better::Lower, l.p90));
                out.push(fig("p99Ms", "ms", Better::Lower, l.p99));
                out.push(fig("p999Ms", "ms", Better::Lower, l.p999));
                out.push(fig("maxMs", "ms", Better::Lower, l.max));
            }
            out.extend(
                r.failures
                    .map(|v| fig("failures", "count", Better::Lower, v as f64)),
            );
            out.extend(
                r.loss_percent
                    .map(|v| fig("lossPercent", "%", Better::Lower, v)),
            );
            out.extend(
                r.client_cpu_us_per_transaction
                    .map(|v| fig("clientCpuUsPerTransaction", "us", Better::Lower, v)),
            );
            out.extend(
                r.server_cpu_us_per_transaction
                    .map(|v| fig("serverCpuUsPerTransaction", "us", Better::Lower, v)),
            );
        }
    }
    if protocol_of(r) != Protocol::TcpStream || r.cpu_seconds_per_gb.is_some() {
        out.extend(
            r.cpu_seconds_per_gb
                .map(|v| fig("cpuSecondsPerGb", "s/GB", Better::Lower, v)),
        );
    }
    out
}

/// "9.41 Gbit/s", "812.3 Mbit/s".
pub fn format_bits(bps: f64) -> String {
    match bps {
        b if b >= 1e9 => format!("{:.2} Gbit/s", b / 1e9),
        b if b >= 1e6 => format!("{:.1} Mbit/s", b / 1e6),
        b => format!("{:.0} kbit/s", b / 1e3),
    }
}

/// What a case measured, in a line (its Event): "9.41 Gbit/s received, 3 retransmits",
/// "45.2k tx/s, p99 0.21 ms", "998 Mbit/s received, 0.01% lost, jitter 0.02 ms".
pub fn headline(r: &CaseResult) -> String {
    match (r.transactions_per_second, &r.latency) {
        (Some(tps), Some(l)) => {
            let lost = r
                .loss_percent
                .map(|l| format!(", {l}% lost"))
                .unwrap_or_default();
            format!(
                "{}, p50 {} ms, p99 {} ms{lost}",
                format_tps(tps),
                l.p50,
                l.p99
            )
        }
        (Some(tps), None) => format_tps(tps),
        _ => match (r.loss_percent, r.jitter_ms) {
            (Some(loss), jitter) => format!(
                "{} received, {loss}% lost{}",
                format_bits(r.receiver_bits_per_second),
                jitter
                    .map(|j| format!(", jitter {j} ms"))
                    .unwrap_or_default()
            ),
            _ => format!(
                "{} received, {} retransmits{}",
                format_bits(r.receiver_bits_per_second),
                r.retransmits,
                r.probe_latency
                    .as_ref()
                    .map(|p| format!(", probe p99 {} ms", p.p99))
                    .unwrap_or_default()
            ),
        },
    }
}

/// "45.2k tx/s", "812 tx/s".
pub fn format_tps(tps: f64) -> String {
    if tps >= 1e3 {
        format!("{:.1}k tx/s", tps / 1e3)
    } else {
        format!("{tps:.0} tx/s")
    }
}

/// The printer columns: the best receiver throughput of the stream cases (or, with none, the
/// most transactions/s) and the largest overhead.
pub fn summary(cases: &[CaseResult]) -> (Option<String>, Option<String>) {
    let streams = cases.iter().filter(|c| c.transactions_per_second.is_none());
    let best = streams
        .max_by(|a, b| {
            a.receiver_bits_per_second
                .total_cmp(&b.receiver_bits_per_second)
        })
        .map(|c| format!("{} ({})", format_bits(c.receiver_bits_per_second), c.name))
        .or_else(|| {
            cases
                .iter()
                .filter_map(|c| Some((c.transactions_per_second?, &c.name)))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(tps, name)| format!("{} ({name})", format_tps(tps)))
        });
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
        let spec: crds::egress::EgressCase =
            serde_json::from_value(serde_json::json!({"name": "c", "client": {}, "server": {}}))
                .unwrap();
        let case = spec.measured().remove(0);
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
    fn a_swept_baseline_is_matched_by_size_even_when_one_run_measured() {
        let run = |name: &str, of: &str, size: u32, bps: f64| CaseResult {
            case: Some(of.into()),
            message_size: Some(size),
            ..case(name, bps)
        };
        let mut cases = vec![
            run("base/messageSize=64", "base", 64, 0.0),
            run("base/messageSize=1024", "base", 1024, 8e9),
            run("other/messageSize=64", "other", 64, 1e9),
            run("other/messageSize=1024", "other", 1024, 4e9),
        ];
        set_overheads(&mut cases, "base");
        // 64 B has no measured baseline run: no overhead, never one against the 1024 B run.
        assert_eq!(cases[2].overhead_percent, None);
        assert_eq!(cases[3].overhead_percent, Some(50.0));
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
