//! Validation of TCP reports (pure). The invariants are the ones [`TcpReport::single`] and
//! [`super::merge`] build: totals are the sums of the streams, each run has one stream per flow
//! of its direction, CPU totals are the sums of the runs.

use super::report::{cpu_per_gb, node_cpu_per_gb, RunSummary, Throughput, REPORT_VERSION};
use super::{TcpReport, MAX_LEN};
use crate::cpu::{check_derived, check_sum, check_usage, MAX_CPU_PERCENT};
use crate::report::validate::{check_kind, check_runs, check_stream_run};
use crate::report::{
    check_close, check_number, check_text, invalid, InvalidReport, MAX_DURATION_S,
};
use crate::rr::check_probe;
use crate::ReportKind;

/// Largest throughput a report may claim (1 Pbit/s).
pub const MAX_BITS_PER_SECOND: f64 = 1e15;

/// Checks a TCP report (single run or merged).
pub fn validate_tcp(r: &TcpReport) -> Result<(), InvalidReport> {
    check_kind(r.version, &r.kind, REPORT_VERSION, ReportKind::Tcp.as_str())?;
    if r.ended_at_unix_ms < r.started_at_unix_ms {
        return Err(invalid("ended_at_unix_ms", "before started_at_unix_ms"));
    }
    check_runs(&r.runs, check_run)?;
    check_streams(r)?;
    check_totals(r)?;
    check_sum(&r.cpu, r.runs.iter().map(|run| &run.cpu))?;
    check_extras(r)
}

/// The optional figures: CPU per gigabyte (absent in older reports; when present, the one
/// the runs give) and the latency probe.
fn check_extras(r: &TcpReport) -> Result<(), InvalidReport> {
    let received = r.receiver.bytes;
    check_derived(
        "cpu_seconds_per_gb",
        r.cpu_seconds_per_gb.as_ref(),
        cpu_per_gb(&r.runs, received),
        false,
    )?;
    check_derived(
        "node_cpu_seconds_per_gb",
        r.node_cpu_seconds_per_gb.as_ref(),
        node_cpu_per_gb(&r.runs, received),
        false,
    )?;
    match &r.latency_probe {
        Some(p) => check_probe("latency_probe", p),
        None => Ok(()),
    }
}

fn check_run(i: usize, run: &RunSummary) -> Result<(), InvalidReport> {
    let prefix = format!("runs[{i}]");
    let field = |name: &str| format!("{prefix}.{name}");
    check_stream_run!(&prefix, run, 1..=MAX_LEN)?;
    check_usage(&field("cpu.client"), &run.cpu.client, MAX_CPU_PERCENT)?;
    check_usage(&field("cpu.server"), &run.cpu.server, MAX_CPU_PERCENT)
}

/// A throughput with sane numbers; `exact`: its rate must be its bytes over its seconds.
fn check_throughput(field: &str, t: &Throughput, exact: bool) -> Result<(), InvalidReport> {
    check_number(&format!("{field}.seconds"), t.seconds, 0.0, MAX_DURATION_S)?;
    let bps = format!("{field}.bits_per_second");
    check_number(&bps, t.bits_per_second, 0.0, MAX_BITS_PER_SECOND)?;
    if exact {
        check_close(
            &bps,
            t.bits_per_second,
            Throughput::new(t.bytes, t.seconds).bits_per_second,
        )?;
    }
    Ok(())
}

/// Every stream belongs to a run, and each run has one stream per flow of its direction.
fn check_streams(r: &TcpReport) -> Result<(), InvalidReport> {
    let mut per_run = vec![0usize; r.runs.len()];
    for (i, s) in r.streams.iter().enumerate() {
        let field = |name: &str| format!("streams[{i}].{name}");
        let count = usize::try_from(s.run)
            .ok()
            .and_then(|run| per_run.get_mut(run))
            .ok_or_else(|| {
                invalid(
                    field("run"),
                    format!("{} but the report has {} run(s)", s.run, r.runs.len()),
                )
            })?;
        *count += 1;
        check_throughput(&field("sender"), &s.sender, true)?;
        check_throughput(&field("receiver"), &s.receiver, true)?;
        if let Some(e) = &s.error {
            check_text(&field("error"), e)?;
        }
    }
    for (i, (run, n)) in r.runs.iter().zip(per_run).enumerate() {
        let want = run.direction.flows(run.streams).len();
        if n != want {
            return Err(invalid(
                format!("runs[{i}].streams"),
                format!("{n} stream report(s), the run's direction and streams make {want}"),
            ));
        }
    }
    Ok(())
}

/// Totals are the sums of the streams (rates exact for a single run, summed when merged).
fn check_totals(r: &TcpReport) -> Result<(), InvalidReport> {
    let single = r.runs.len() == 1;
    for (field, total, part) in [
        (
            "sender",
            &r.sender,
            r.streams.iter().map(|s| &s.sender).collect::<Vec<_>>(),
        ),
        (
            "receiver",
            &r.receiver,
            r.streams.iter().map(|s| &s.receiver).collect(),
        ),
    ] {
        check_throughput(field, total, single)?;
        let bytes = part
            .iter()
            .try_fold(0u64, |acc, t| acc.checked_add(t.bytes));
        if bytes != Some(total.bytes) {
            return Err(invalid(
                format!("{field}.bytes"),
                format!("{} is not the sum of the streams' bytes", total.bytes),
            ));
        }
        let seconds = part.iter().fold(0f64, |acc, t| acc.max(t.seconds));
        check_close(&format!("{field}.seconds"), total.seconds, seconds)?;
    }
    let snapshots: Vec<_> = r.streams.iter().filter_map(|s| s.tcp.as_ref()).collect();
    let retransmits = snapshots
        .iter()
        .try_fold(0u64, |acc, t| acc.checked_add(t.retransmits));
    if retransmits != Some(r.retransmits) {
        return Err(invalid(
            "retransmits",
            format!(
                "{} is not the sum of the streams' retransmits",
                r.retransmits
            ),
        ));
    }
    let rtts: f64 = snapshots.iter().map(|t| f64::from(t.rtt_us)).sum();
    match (r.mean_rtt_us, snapshots.len()) {
        (None, 0) => Ok(()),
        (Some(mean), n) if n > 0 => check_close("mean_rtt_us", mean, rtts / n as f64),
        _ => Err(invalid(
            "mean_rtt_us",
            "present exactly when a stream has TCP_INFO",
        )),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cpu::CpuReport;
    use crate::report::validate::assert_refused;
    use crate::tcp::report::{StreamReport, TcpInfoSnapshot};
    use crate::tcp::{Direction, Flow};

    /// A single-run report as the client builds it: two streams sent, the server's view back.
    pub(crate) fn tcp_report(start: u64, scale: u64) -> TcpReport {
        let stream =
            |id: u32, bytes: u64, seconds: f64, retransmits: u64, rtt_us: u32| StreamReport {
                run: 0,
                id,
                flow: Flow::ClientToServer,
                sender: Throughput::new(bytes, seconds),
                receiver: Throughput::new(bytes - 1000, seconds + 0.001),
                tcp: Some(TcpInfoSnapshot {
                    retransmits,
                    rtt_us,
                    ..TcpInfoSnapshot::default()
                }),
                error: None,
            };
        let usage = crate::cpu::test_usage(10.0, 40.0, 50.0);
        let run = RunSummary {
            client: "198.18.0.1:40000".into(),
            server: "198.18.0.2:5201".into(),
            streams: 2,
            duration_secs: 2.0,
            len: 131072,
            direction: Direction::Send,
            started_at_unix_ms: start,
            ended_at_unix_ms: start + 2000,
            cpu: CpuReport {
                client: usage,
                server: usage,
            },
        };
        TcpReport::single(
            run,
            vec![
                stream(0, 1_000_000 * scale, 2.0, 3, 100),
                stream(1, 3_000_000 * scale, 1.9, 1, 300),
            ],
        )
    }

    #[test]
    fn client_and_merged_reports_are_valid_before_and_after_json() {
        let r = tcp_report(1000, 1);
        validate_tcp(&r).unwrap();
        let back: TcpReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        validate_tcp(&back).unwrap();
        let merged = super::super::merge(&[r, tcp_report(1500, 3)]).unwrap();
        validate_tcp(&merged).unwrap();
    }

    #[test]
    fn totals_that_are_not_the_streams_sums_are_refused() {
        let mut r = tcp_report(0, 1);
        r.retransmits = 1;
        assert_refused(validate_tcp(&r), "retransmits", "not the sum");
        let mut r = tcp_report(0, 1);
        r.receiver.bytes += 1;
        assert_refused(validate_tcp(&r), "receiver.bytes", "not the sum");
        let mut r = tcp_report(0, 1);
        r.receiver.bits_per_second *= 10.0;
        assert_refused(
            validate_tcp(&r),
            "receiver.bits_per_second",
            "does not match",
        );
        let mut r = tcp_report(0, 1);
        r.streams[1].sender.bytes = u64::MAX;
        r.streams[1].sender.bits_per_second = r.streams[1].sender.bytes as f64 * 8.0 / 1.9;
        assert_refused(
            validate_tcp(&r),
            "streams[1].sender.bits_per_second",
            "outside",
        );
        let mut r = tcp_report(0, 1);
        r.cpu.client.total_percent = 99.0;
        assert_refused(
            validate_tcp(&r),
            "cpu.client.total_percent",
            "does not match",
        );
        let mut r = tcp_report(0, 1);
        r.mean_rtt_us = None;
        assert_refused(validate_tcp(&r), "mean_rtt_us", "present exactly when");
        let mut r = tcp_report(0, 1);
        if let Some(c) = r.cpu_seconds_per_gb.as_mut() {
            c.client += 1.0;
        }
        assert_refused(
            validate_tcp(&r),
            "cpu_seconds_per_gb.client",
            "does not match",
        );
    }

    #[test]
    fn cpu_per_gigabyte_is_the_runs_cpu_seconds_over_the_bytes_received() {
        let r = tcp_report(0, 1);
        let cost = r.cpu_seconds_per_gb.unwrap();
        // 50 % of a CPU for 2 s on each end, 3 998 000 bytes received.
        let want = 0.5 * 2.0 / (3_998_000.0 / 1e9);
        assert!((cost.client - want).abs() < 1e-6, "{cost:?}");
        assert!((cost.server - want).abs() < 1e-6, "{cost:?}");
        // A report of an older build has no such figure and stays valid.
        let mut json = serde_json::to_value(&r).unwrap();
        json.as_object_mut().unwrap().remove("cpu_seconds_per_gb");
        let old: TcpReport = serde_json::from_value(json).unwrap();
        assert_eq!(old.cpu_seconds_per_gb, None);
        validate_tcp(&old).unwrap();
    }

    #[test]
    fn a_latency_probe_travels_validated_and_merges_exactly() {
        let probe = |latencies: &[u64]| {
            let mut h = crate::report::histogram::new_latency_histogram();
            for &v in latencies {
                h.record(v).unwrap();
            }
            let counts = crate::rr::ProbeCounts {
                attempted: latencies.len() as u64,
                ..Default::default()
            };
            crate::rr::LatencyProbe::single(50.0, 1, 1, counts, &h, None).unwrap()
        };
        let a = tcp_report(0, 1).with_probe(probe(&[100, 200]));
        let b = tcp_report(0, 2).with_probe(probe(&[2_000]));
        validate_tcp(&a).unwrap();
        let json = serde_json::to_string(&a).unwrap();
        assert!(json.contains("\"latency_probe\""), "{json}");
        let m = super::super::merge(&[a.clone(), b]).unwrap();
        validate_tcp(&m).unwrap();
        let p = m.latency_probe.unwrap();
        assert_eq!(
            (p.transactions, p.latency.max_us, p.rate),
            (3, 2_000, 100.0)
        );
        // Without a probe, the field is absent from the JSON.
        assert!(!serde_json::to_string(&tcp_report(0, 1))
            .unwrap()
            .contains("latency_probe"));
        let mut bad = a;
        if let Some(p) = bad.latency_probe.as_mut() {
            p.transactions = 7;
        }
        assert_refused(
            validate_tcp(&bad),
            "latency_probe.attempted",
            "do not add up",
        );
    }

    #[test]
    fn impossible_numbers_and_indexes_are_refused() {
        let mut r = tcp_report(0, 1);
        r.streams[0].receiver.seconds = f64::NAN;
        assert_refused(validate_tcp(&r), "streams[0].receiver.seconds", "NaN");
        let mut r = tcp_report(0, 1);
        r.streams[0].run = 7;
        assert_refused(
            validate_tcp(&r),
            "streams[0].run",
            "7 but the report has 1 run(s)",
        );
        let mut r = tcp_report(0, 1);
        r.streams.pop();
        assert_refused(validate_tcp(&r), "runs[0].streams", "1 stream report(s)");
        let mut r = tcp_report(0, 1);
        r.runs[0].cpu.server.user_percent = -1.0;
        assert_refused(
            validate_tcp(&r),
            "runs[0].cpu.server.user_percent",
            "outside",
        );
        let mut r = tcp_report(0, 1);
        r.runs.clear();
        assert_refused(validate_tcp(&r), "runs", "0 runs");
        let mut r = tcp_report(0, 1);
        r.kind = "http".into();
        assert_refused(validate_tcp(&r), "version", "\"http\" report");
    }
}
