//! Validation of UDP reports (pure). Checks each run and stream against what the engine
//! guarantees (bytes are datagrams x length, a receiver counts each sequence number once, a
//! paced sender never sends ahead of its schedule, rates are counts over seconds), then
//! recomputes every total from the streams and compares.

use super::report::{UdpRun, REPORT_VERSION};
use super::Rate;
use super::{UdpReport, MAX_LEN, MIN_LEN};
use crate::cpu::{check_usage, MAX_CPU_PERCENT};
use crate::report::validate::{check_kind, check_runs, check_stream_run};
use crate::report::{check_close, check_number, invalid, InvalidReport, MAX_DURATION_S};
use crate::tcp::MAX_BITS_PER_SECOND;
use crate::ReportKind;

mod streams;
mod totals;

use streams::check_streams;
use totals::check_totals;

/// Largest datagram rate a report may claim (1e12 datagrams/s).
pub const MAX_PACKETS_PER_SECOND: f64 = 1e12;
/// Largest jitter a report may claim: one hour, in milliseconds.
pub const MAX_JITTER_MS: f64 = 3_600_000.0;
/// Most CPU seconds one end of one run may claim (4096 busy CPUs for the longest test).
const MAX_CPU_SECONDS: f64 = MAX_DURATION_S * MAX_CPU_PERCENT / 100.0;

/// Checks a UDP report (single run or merged); the error names the first broken field.
pub fn validate_udp(r: &UdpReport) -> Result<(), InvalidReport> {
    check_kind(r.version, &r.kind, REPORT_VERSION, ReportKind::Udp.as_str())?;
    check_runs(&r.runs, check_run)?;
    check_streams(r)?;
    check_totals(r)
}

fn check_run(i: usize, run: &UdpRun) -> Result<(), InvalidReport> {
    let prefix = format!("runs[{i}]");
    let field = |name: &str| format!("{prefix}.{name}");
    check_stream_run!(&prefix, run, MIN_LEN..=MAX_LEN)?;
    if let Some(t) = &run.target {
        check_rate(&field("target"), t)?;
        if t.packets_per_second <= 0.0 {
            return Err(invalid(
                field("target.packets_per_second"),
                "a paced run sends at more than 0 datagrams/s",
            ));
        }
        check_close(
            &field("target.bits_per_second"),
            t.bits_per_second,
            t.packets_per_second * run.len as f64 * 8.0,
        )?;
    }
    check_usage(&field("cpu.client"), &run.cpu.client, MAX_CPU_PERCENT)?;
    check_usage(&field("cpu.server"), &run.cpu.server, MAX_CPU_PERCENT)?;
    check_number(
        &field("cpu_seconds.client"),
        run.cpu_seconds.client,
        0.0,
        MAX_CPU_SECONDS,
    )?;
    check_number(
        &field("cpu_seconds.server"),
        run.cpu_seconds.server,
        0.0,
        MAX_CPU_SECONDS,
    )
}

fn check_rate(field: &str, r: &Rate) -> Result<(), InvalidReport> {
    check_number(
        &format!("{field}.bits_per_second"),
        r.bits_per_second,
        0.0,
        MAX_BITS_PER_SECOND,
    )?;
    check_number(
        &format!("{field}.packets_per_second"),
        r.packets_per_second,
        0.0,
        MAX_PACKETS_PER_SECOND,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::validate::assert_refused;
    use crate::udp::report::tests::udp_report;
    use crate::udp::{Received, Sent};

    #[test]
    fn client_and_merged_reports_are_valid_before_and_after_json() {
        let r = udp_report(1000, 2, 5);
        validate_udp(&r).unwrap();
        let back: UdpReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        validate_udp(&back).unwrap();
        let merged = crate::udp::merge(&[r, udp_report(1500, 3, 0)]).unwrap();
        validate_udp(&merged).unwrap();
    }

    #[test]
    fn impossible_loss_and_jitter_are_refused() {
        // More received than sent: loss would be negative (or beyond 100 % the other way).
        let mut r = udp_report(0, 1, 0);
        r.streams[0].received = Received::new(2001, 2_001_000, 2.0);
        assert_refused(
            validate_udp(&r),
            "streams[0].received.packets",
            "only 2000 sent",
        );
        let mut r = udp_report(0, 1, 10);
        r.streams[0].loss_percent = 150.0;
        assert_refused(validate_udp(&r), "streams[0].loss_percent", "outside");
        let mut r = udp_report(0, 1, 10);
        r.streams[0].lost = 3;
        assert_refused(validate_udp(&r), "streams[0].lost", "not sent - received");
        let mut r = udp_report(0, 1, 0);
        r.streams[0].jitter_ms = Some(-0.5);
        assert_refused(validate_udp(&r), "streams[0].jitter_ms", "outside");
        let mut r = udp_report(0, 1, 0);
        r.streams[0].jitter_ms = Some(f64::NAN);
        assert_refused(
            validate_udp(&r),
            "streams[0].jitter_ms",
            "not a finite number",
        );
        let mut r = udp_report(0, 1, 0);
        r.streams[0].jitter_ms = None;
        assert_refused(
            validate_udp(&r),
            "streams[0].jitter_ms",
            "present exactly when",
        );
        let mut r = udp_report(0, 1, 0);
        r.jitter_ms = Some(7.0);
        assert_refused(validate_udp(&r), "jitter_ms", "does not match");
    }

    #[test]
    fn counts_that_do_not_add_up_are_refused() {
        let mut r = udp_report(0, 2, 0);
        r.received.packets += 1;
        assert_refused(validate_udp(&r), "received.packets", "not the sum");
        let mut r = udp_report(0, 2, 0);
        r.lost = 0;
        r.streams[0].received.duplicates = 9;
        assert_refused(validate_udp(&r), "received.duplicates", "not the sum");
        let mut r = udp_report(0, 1, 0);
        r.streams[0].received.bytes += 1;
        assert_refused(
            validate_udp(&r),
            "streams[0].received.bytes",
            "datagrams of 1000 bytes",
        );
        let mut r = udp_report(0, 1, 0);
        r.streams[0].received.bytes -= 1000;
        r.streams[0].received.bits_per_second =
            r.streams[0].received.bytes as f64 * 8.0 / r.streams[0].received.seconds;
        assert_refused(
            validate_udp(&r),
            "streams[0].received.bytes",
            "datagrams of 1000 bytes",
        );
        let mut r = udp_report(0, 1, 0);
        r.streams[0].received.out_of_order = 5000;
        assert_refused(
            validate_udp(&r),
            "streams[0].received.out_of_order",
            "out of order among",
        );
        let mut r = udp_report(0, 1, 0);
        r.streams[0].sent.late = 2001;
        assert_refused(validate_udp(&r), "streams[0].sent.late", "late among");
        let mut r = udp_report(0, 1, 0);
        r.cpu_seconds.client = 99.0;
        assert_refused(validate_udp(&r), "cpu_seconds.client", "does not match");
        let mut r = udp_report(0, 1, 0);
        r.received.kernel_drops = None;
        assert_refused(validate_udp(&r), "received.kernel_drops", "not the sum");
    }

    #[test]
    fn rates_inconsistent_with_counts_and_duration_are_refused() {
        let mut r = udp_report(0, 1, 0);
        r.streams[0].sent.packets_per_second *= 2.0;
        assert_refused(
            validate_udp(&r),
            "streams[0].sent.packets_per_second",
            "does not match",
        );
        let mut r = udp_report(0, 1, 0);
        r.received.bits_per_second *= 10.0;
        assert_refused(
            validate_udp(&r),
            "received.bits_per_second",
            "does not match",
        );
        // A paced stream cannot send more than its schedule holds.
        let mut r = udp_report(0, 1, 0);
        r.streams[0].sent = Sent::new(5000, 5_000_000, 2.0);
        r.streams[0].lost = 5000 - r.streams[0].received.packets;
        assert_refused(validate_udp(&r), "streams[0].sent.packets", "send times");
        let mut r = udp_report(0, 1, 0);
        r.runs[0].target = Some(Rate {
            bits_per_second: 1e6,
            packets_per_second: 1000.0,
        });
        assert_refused(
            validate_udp(&r),
            "runs[0].target.bits_per_second",
            "does not match",
        );
        let mut r = udp_report(0, 1, 0);
        r.offered = None;
        assert_refused(validate_udp(&r), "offered", "absent");
        let mut r = udp_report(0, 1, 0);
        r.runs[0].target = None;
        assert_refused(validate_udp(&r), "streams[0].sent", "never late");
    }

    #[test]
    fn impossible_shapes_and_numbers_are_refused() {
        let mut r = udp_report(0, 2, 0);
        r.streams[1].run = 7;
        assert_refused(
            validate_udp(&r),
            "streams[1].run",
            "7 but the report has 1 run(s)",
        );
        let mut r = udp_report(0, 2, 0);
        r.streams.pop();
        assert_refused(validate_udp(&r), "runs[0].streams", "1 stream report(s)");
        let mut r = udp_report(0, 2, 0);
        r.streams[1].id = 0;
        assert_refused(validate_udp(&r), "streams[1].flow", "is not stream 1");
        let mut r = udp_report(0, 1, 0);
        r.runs[0].len = 8;
        assert_refused(validate_udp(&r), "runs[0].len", "allowed 32..=65507");
        let mut r = udp_report(0, 1, 0);
        r.runs[0].cpu.server.user_percent = -1.0;
        assert_refused(
            validate_udp(&r),
            "runs[0].cpu.server.user_percent",
            "outside",
        );
        let mut r = udp_report(0, 1, 0);
        r.streams[0].received.seconds = f64::INFINITY;
        assert_refused(
            validate_udp(&r),
            "streams[0].received.seconds",
            "not a finite number",
        );
        let mut r = udp_report(0, 1, 0);
        r.runs.clear();
        assert_refused(validate_udp(&r), "runs", "0 runs");
        let mut r = udp_report(0, 1, 0);
        r.kind = "tcp".into();
        assert_refused(validate_udp(&r), "version", "\"tcp\" report");
    }
}
