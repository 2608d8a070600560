//! Validation of rr reports (pure): every figure a worker or a stored object sends is checked
//! against the invariants the engines guarantee (see the module documentation of
//! [`crate::rr`]); the first broken one is named.

use hdrhistogram::Histogram;

use super::conntrack::check_conntrack;
use super::report::{RrCounts, RrReport, RrRun, RrSetup};
use super::window::in_flight_window;
use super::{MAX_BURST, MAX_STREAM_RATE, MAX_TIMEOUT_MS, REPORT_VERSION};
use crate::cpu::{check_usage, MAX_CPU_PERCENT};
use crate::report::histogram::{self, MAX_TOTAL_COUNT};
use crate::report::validate::{
    check_latency_at, check_run_ends, check_run_streams, check_run_window, check_runs,
};
use crate::report::{check_close, check_number, check_text, invalid, InvalidReport, MAX_RATE};
use crate::ReportKind;

mod streams;
mod totals;

use streams::check_streams;
use totals::check_totals;

/// Checks an rr report (single run or merged) and returns its decoded histogram.
pub fn validate_rr(r: &RrReport) -> Result<Histogram<u64>, InvalidReport> {
    if r.version != REPORT_VERSION || r.kind != ReportKind::Rr.as_str() {
        return Err(invalid(
            "version",
            format!(
                "a {:.32?} report of version {} (this build reads {ours:?} version {REPORT_VERSION})",
                r.kind, r.version, ours = ReportKind::Rr.as_str()
            ),
        ));
    }
    check_text("tool", &r.tool)?;
    check_setup(&r.setup)?;
    if r.ended_at_unix_ms < r.started_at_unix_ms {
        return Err(invalid("ended_at_unix_ms", "before started_at_unix_ms"));
    }
    check_runs(&r.runs, check_run)?;
    check_counts("counts", &r.counts, &r.setup)?;
    let hist = histogram::decode(&r.histogram).map_err(|e| invalid("histogram", e))?;
    if hist.len() != r.counts.transactions {
        return Err(invalid(
            "counts.transactions",
            format!(
                "{} transactions but the latency histogram holds {} samples",
                r.counts.transactions,
                hist.len()
            ),
        ));
    }
    check_latency_at("latency", &r.latency, &hist)?;
    check_timeout_bound(r)?;
    check_streams(r)?;
    check_totals(r)?;
    Ok(hist)
}

fn check_setup(s: &RrSetup) -> Result<(), InvalidReport> {
    let Some((min, max)) = s.mode.rr_message_sizes() else {
        return Err(invalid(
            "mode",
            format!(
                "{} is not a request/response test (tcp-rr, tcp-crr, udp-rr)",
                s.mode
            ),
        ));
    };
    for (field, v) in [
        ("request_size", s.request_size),
        ("response_size", s.response_size),
    ] {
        if !(min..=max).contains(&v) {
            return Err(invalid(
                field,
                format!("{v} bytes (allowed {min}..={max} for {})", s.mode),
            ));
        }
    }
    if s.burst > MAX_BURST {
        return Err(invalid(
            "burst",
            format!("{} (allowed 0..={MAX_BURST})", s.burst),
        ));
    }
    if !(1..=MAX_TIMEOUT_MS).contains(&s.timeout_ms) {
        return Err(invalid(
            "timeout_ms",
            format!("{} (allowed 1..={MAX_TIMEOUT_MS})", s.timeout_ms),
        ));
    }
    if let Some(rate) = s.rate_per_stream {
        check_number("rate_per_stream", rate, f64::MIN_POSITIVE, MAX_STREAM_RATE)?;
    }
    let window = in_flight_window(s);
    match s.max_in_flight {
        Some(got) if got != window => Err(invalid(
            "max_in_flight",
            format!("{got}, but this setup keeps {window} requests in flight per stream"),
        )),
        _ => Ok(()),
    }
}

/// `attempted = transactions + errors + lost`, late answers only to lost requests, UDP
/// figures only for udp-rr, skipped send times only in open loop, nothing beyond what a
/// histogram may hold.
pub(crate) fn check_counts(
    prefix: &str,
    c: &RrCounts,
    setup: &RrSetup,
) -> Result<(), InvalidReport> {
    let mode = setup.mode;
    let field = |name: &str| format!("{prefix}.{name}");
    let failed = c
        .checked_failed()
        .ok_or_else(|| invalid(field("errors"), "the error classes overflow when summed"))?;
    if c.transactions.checked_add(failed) != Some(c.attempted) {
        return Err(invalid(
            field("attempted"),
            format!(
                "{} but transactions ({}), errors and losses ({failed}) do not add up to it",
                c.attempted, c.transactions
            ),
        ));
    }
    if c.attempted > MAX_TOTAL_COUNT {
        return Err(invalid(
            field("attempted"),
            format!("{} is more than {MAX_TOTAL_COUNT}", c.attempted),
        ));
    }
    if c.late > c.lost {
        return Err(invalid(
            field("late"),
            format!(
                "{} late answers but only {} requests were lost",
                c.late, c.lost
            ),
        ));
    }
    if c.skipped > 0 && setup.rate_per_stream.is_none() {
        return Err(invalid(
            field("skipped"),
            format!(
                "{}, but only an open loop has a schedule to fall behind (this is closed loop)",
                c.skipped
            ),
        ));
    }
    for (name, v) in [
        ("skipped", c.skipped),
        ("duplicate", c.duplicate),
        ("invalid", c.invalid),
    ] {
        if v > MAX_TOTAL_COUNT {
            return Err(invalid(
                field(name),
                format!("{v} is more than {MAX_TOTAL_COUNT}"),
            ));
        }
    }
    if !mode.is_udp() {
        for (name, v) in [
            ("lost", c.lost),
            ("late", c.late),
            ("duplicate", c.duplicate),
            ("invalid", c.invalid),
        ] {
            if v != 0 {
                return Err(invalid(
                    field(name),
                    format!("{v}, but only udp-rr loses requests (this is {mode})"),
                ));
            }
        }
    }
    Ok(())
}

/// udp-rr in closed loop: an answer counts only within the timeout after its send (later ones
/// are late). Open loop counts from the intended send time, which may be earlier; TCP's
/// timeout bounds each read, not a whole transaction.
fn check_timeout_bound(r: &RrReport) -> Result<(), InvalidReport> {
    if !r.setup.mode.is_udp() || r.setup.rate_per_stream.is_some() || r.counts.transactions == 0 {
        return Ok(());
    }
    let limit = r.setup.timeout_ms.saturating_mul(1000);
    // The histogram keeps 3 significant digits: its max may read up to 0.1 % high.
    let slack = limit / 1000 + 1;
    if r.latency.max_us > limit.saturating_add(slack) {
        return Err(invalid(
            "latency.max_us",
            format!(
                "{} us, beyond the {} ms timeout after which no answer counts",
                r.latency.max_us, r.setup.timeout_ms
            ),
        ));
    }
    Ok(())
}

fn check_run(i: usize, run: &RrRun) -> Result<(), InvalidReport> {
    let prefix = format!("runs[{i}]");
    let field = |name: &str| format!("{prefix}.{name}");
    check_run_ends(&prefix, &run.client, &run.server)?;
    check_run_streams(&prefix, run.streams)?;
    check_run_window(
        &prefix,
        run.duration_secs,
        run.started_at_unix_ms,
        run.ended_at_unix_ms,
    )?;
    let tps = field("transactions_per_second");
    check_number(&tps, run.transactions_per_second, 0.0, MAX_RATE)?;
    // Transactions completed in the window the rate is divided by (older builds: all).
    let in_window = run.transactions_in_window.unwrap_or(run.transactions);
    if in_window > run.transactions {
        return Err(invalid(
            field("transactions_in_window"),
            format!(
                "{in_window}, more than the run's {} transactions",
                run.transactions
            ),
        ));
    }
    let want = if run.duration_secs > 0.0 {
        in_window as f64 / run.duration_secs
    } else {
        0.0
    };
    check_close(&tps, run.transactions_per_second, want)?;
    if run.server_answered < run.transactions {
        return Err(invalid(
            field("server_answered"),
            format!(
                "the server answered {} requests, fewer than the {} transactions the client completed",
                run.server_answered, run.transactions
            ),
        ));
    }
    check_usage(&field("cpu.client"), &run.cpu.client, MAX_CPU_PERCENT)?;
    check_usage(&field("cpu.server"), &run.cpu.server, MAX_CPU_PERCENT)?;
    check_conntrack(&prefix, run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::validate::assert_refused;
    use crate::rr::report::fixtures::rr_report;
    use crate::Protocol;

    pub(super) fn udp() -> RrReport {
        rr_report(Protocol::UdpRr, &[100, 200, 300, 5_000], 2)
    }

    #[test]
    fn engine_reports_of_every_mode_are_valid_before_and_after_json() {
        for mode in [Protocol::TcpRr, Protocol::TcpCrr, Protocol::UdpRr] {
            let r = rr_report(mode, &[100, 250, 9_000], 3);
            validate_rr(&r).unwrap();
            let json = serde_json::to_string(&r).unwrap();
            assert!(json.contains(&format!(r#""mode":"{mode}""#)), "{json}");
            assert!(json.contains(r#""kind":"rr""#), "{json}");
            let back: RrReport = serde_json::from_str(&json).unwrap();
            assert_eq!(validate_rr(&back).unwrap().len(), 3);
            assert_eq!(back, r);
        }
        let r = udp();
        assert_eq!(r.loss_percent, Some(2.0 * 100.0 / 6.0));
        assert!(!r.port_exhausted);
    }

    #[test]
    fn counts_that_do_not_add_up_are_refused() {
        let mut r = udp();
        r.counts.attempted += 1;
        assert_refused(validate_rr(&r), "counts.attempted", "do not add up");
        let mut r = udp();
        r.counts.transactions += 1;
        r.counts.attempted += 1;
        assert_refused(
            validate_rr(&r),
            "counts.transactions",
            "histogram holds 4 samples",
        );
        let mut r = udp();
        r.counts.late = 3;
        assert_refused(
            validate_rr(&r),
            "counts.late",
            "3 late answers but only 2 requests were lost",
        );
        let mut r = udp();
        r.counts.errors.refused = u64::MAX;
        assert_refused(validate_rr(&r), "counts.errors", "overflow");
        let mut r = udp();
        r.per_stream[0].transactions += 1;
        r.per_stream[0].attempted += 1;
        assert_refused(validate_rr(&r), "per_stream", "streams add up to");
        let mut r = udp();
        r.per_stream[1].failed += 1;
        assert_refused(validate_rr(&r), "per_stream[1].attempted", "do not add up");
        let mut r = udp();
        r.per_stream.pop();
        assert_refused(validate_rr(&r), "runs[0].streams", "1 stream(s)");
        let mut r = udp();
        r.per_stream[0].run = 4;
        assert_refused(
            validate_rr(&r),
            "per_stream[0].run",
            "4 but the report has 1 run(s)",
        );
        let mut r = udp();
        r.runs[0].server_answered = 1;
        assert_refused(
            validate_rr(&r),
            "runs[0].server_answered",
            "fewer than the 4 transactions",
        );
        let mut r = udp();
        r.streams = 3;
        assert_refused(validate_rr(&r), "streams", "not the sum");
    }

    #[test]
    fn losses_belong_to_udp_only() {
        let mut r = rr_report(Protocol::TcpRr, &[100], 0);
        r.counts.lost = 1;
        r.counts.attempted += 1;
        assert_refused(validate_rr(&r), "counts.lost", "only udp-rr loses");
        let mut r = rr_report(Protocol::TcpCrr, &[100], 0);
        r.loss_percent = Some(0.0);
        assert_refused(
            validate_rr(&r),
            "loss_percent",
            "present exactly for udp-rr",
        );
        let mut r = udp();
        r.loss_percent = Some(1.0);
        assert_refused(validate_rr(&r), "loss_percent", "does not match");
        let mut r = udp();
        r.loss_percent = Some(250.0);
        assert_refused(validate_rr(&r), "loss_percent", "outside");
    }

    #[test]
    fn percentiles_out_of_order_or_not_the_histograms_are_refused() {
        let mut r = udp();
        r.latency.p90_us = r.latency.max_us + 1;
        assert_refused(validate_rr(&r), "latency.p99_us", "out of order");
        let mut r = udp();
        r.latency.p50_us += 1;
        assert_refused(validate_rr(&r), "latency.p50_us", "but the histogram gives");
        let mut r = udp();
        r.latency.mean_us = f64::NAN;
        assert_refused(validate_rr(&r), "latency.mean_us", "not a finite number");
        let mut r = udp();
        r.histogram = "AAAAAA==".into();
        assert_refused(validate_rr(&r), "histogram", "not HDR V2");
        // Closed loop: nothing beyond the timeout counts as answered.
        let r = rr_report(Protocol::UdpRr, &[100, 150_000], 0);
        assert_refused(
            validate_rr(&r),
            "latency.max_us",
            "beyond the 100 ms timeout",
        );
    }

    #[test]
    fn the_rate_counts_only_what_was_answered_in_its_window() {
        // 4 transactions over 2 s, one of them answered in the drain: 1.5/s, not 2/s.
        let mut r = udp();
        r.runs[0].transactions_in_window = Some(3);
        r.runs[0].transactions_per_second = 1.5;
        r.transactions_per_second = 1.5;
        validate_rr(&r).unwrap();
        // A rate that counts the drain, or more in the window than were answered.
        let mut bad = r.clone();
        bad.runs[0].transactions_per_second = 2.0;
        bad.transactions_per_second = 2.0;
        assert_refused(
            validate_rr(&bad),
            "runs[0].transactions_per_second",
            "does not match",
        );
        let mut bad = r.clone();
        bad.runs[0].transactions_in_window = Some(5);
        bad.runs[0].transactions_per_second = 2.5;
        bad.transactions_per_second = 2.5;
        assert_refused(
            validate_rr(&bad),
            "runs[0].transactions_in_window",
            "more than the run's 4",
        );
        // Older builds' reports (no such field): their rate counted every transaction.
        let mut json = serde_json::to_value(udp()).unwrap();
        json["runs"][0]
            .as_object_mut()
            .unwrap()
            .remove("transactions_in_window");
        let old: RrReport = serde_json::from_value(json).unwrap();
        assert_eq!(old.runs[0].transactions_in_window, None);
        validate_rr(&old).unwrap();
    }

    #[test]
    fn a_window_other_than_the_setups_is_refused() {
        // 100/s x 100 ms: an open-loop udp-rr stream keeps 21 in flight, not 1 + burst.
        let r = open_loop(udp(), 100.0);
        assert_eq!(r.setup.max_in_flight, Some(21));
        validate_rr(&r).unwrap();
        for forged in [0, 2, 20, 22, u32::MAX] {
            let mut bad = r.clone();
            bad.setup.max_in_flight = Some(forged);
            assert_refused(
                validate_rr(&bad),
                "max_in_flight",
                "keeps 21 requests in flight",
            );
        }
        let mut closed = udp();
        closed.setup.max_in_flight = Some(21);
        assert_refused(validate_rr(&closed), "max_in_flight", "keeps 2 requests");
        // Rate x timeout beyond the bound: the window saturates and the report says so.
        let fast = open_loop(udp(), 1_000_000.0);
        assert_eq!(
            fast.setup.max_in_flight,
            Some(super::super::MAX_OPEN_LOOP_WINDOW)
        );
        validate_rr(&fast).unwrap();
        let w = fast.warnings();
        assert!(
            w.iter().any(
                |w| w.contains("100000 requests per stream within one 100 ms")
                    && w.contains("at most 32768 in flight")
            ),
            "{w:?}"
        );
        assert!(!r.warnings().iter().any(|w| w.contains("in flight")));
        // Older builds did not say: still read.
        let mut old = r;
        old.setup.max_in_flight = None;
        validate_rr(&old).unwrap();
    }

    #[test]
    fn impossible_setups_and_numbers_are_refused() {
        let mut r = udp();
        r.setup.request_size = 4;
        assert_refused(
            validate_rr(&r),
            "request_size",
            "4 bytes (allowed 8..=65507 for udp-rr)",
        );
        let mut r = rr_report(Protocol::TcpRr, &[100], 0);
        r.setup.response_size = 0;
        assert_refused(validate_rr(&r), "response_size", "allowed 1..=");
        let mut r = udp();
        r.setup.mode = Protocol::TcpStream;
        assert_refused(validate_rr(&r), "mode", "not a request/response test");
        let mut r = udp();
        r.setup.burst = MAX_BURST + 1;
        assert_refused(validate_rr(&r), "burst", "allowed 0..=1024");
        let mut r = udp();
        r.setup.timeout_ms = 0;
        assert_refused(validate_rr(&r), "timeout_ms", "allowed 1..=");
        let mut r = udp();
        r.setup.rate_per_stream = Some(-5.0);
        assert_refused(validate_rr(&r), "rate_per_stream", "outside");
        let mut r = udp();
        r.transactions_per_second = 1e6;
        assert_refused(validate_rr(&r), "transactions_per_second", "does not match");
        let mut r = udp();
        r.runs[0].transactions_per_second = f64::INFINITY;
        assert_refused(
            validate_rr(&r),
            "runs[0].transactions_per_second",
            "not a finite number",
        );
        let mut r = udp();
        r.runs[0].cpu.client.total_percent = -1.0;
        assert_refused(
            validate_rr(&r),
            "runs[0].cpu.client.total_percent",
            "outside",
        );
        let mut r = udp();
        r.cpu_us_per_transaction = None;
        assert_refused(
            validate_rr(&r),
            "cpu_us_per_transaction",
            "absent, but the runs give it",
        );
        let mut r = udp();
        if let Some(c) = r.cpu_us_per_transaction.as_mut() {
            c.server *= 2.0;
        }
        assert_refused(
            validate_rr(&r),
            "cpu_us_per_transaction.server",
            "does not match",
        );
        let mut r = udp();
        r.port_exhausted = true;
        assert_refused(
            validate_rr(&r),
            "port_exhausted",
            "true but 0 connection attempts",
        );
        let mut r = udp();
        r.requested_per_second = Some(10.0);
        assert_refused(
            validate_rr(&r),
            "requested_per_second",
            "present exactly when",
        );
        let mut r = udp();
        r.ended_at_unix_ms = 0;
        assert_refused(validate_rr(&r), "ended_at_unix_ms", "before");
        let mut r = udp();
        r.runs.clear();
        assert_refused(validate_rr(&r), "runs", "0 runs");
        let mut r = udp();
        r.kind = "tcp".into();
        assert_refused(validate_rr(&r), "version", "\"tcp\" report");
        let mut r = udp();
        r.runs[0].client = "x".repeat(10_000);
        assert_refused(validate_rr(&r), "runs[0].client", "more than");
    }

    /// `r` as an open loop of `rate` per stream whose streams fell behind: each stream's
    /// schedule (rate x 2 s) is what it attempted plus what it skipped.
    pub(super) fn open_loop(mut r: RrReport, rate: f64) -> RrReport {
        r.setup.rate_per_stream = Some(rate);
        r.setup.max_in_flight = Some(in_flight_window(&r.setup));
        r.requested_per_second = Some(rate * f64::from(r.streams));
        let window = (rate * r.runs[0].duration_secs) as u64;
        for s in &mut r.per_stream {
            s.skipped = Some(window - s.attempted);
        }
        r.counts.skipped = r.per_stream.iter().filter_map(|s| s.skipped).sum();
        r
    }
}
