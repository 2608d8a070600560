//! Validation of UDP reports (pure). Checks each run and stream against what the engine
//! guarantees (bytes are datagrams x length, a receiver counts each sequence number once, a
//! paced sender never sends ahead of its schedule, rates are counts over seconds), then
//! recomputes every total from the streams and compares.

use super::report::REPORT_VERSION;
use super::report::{loss, CpuSeconds, Rate, Sent, UdpRun, UdpStream};
use super::{UdpReport, MAX_LEN, MIN_LEN};
use crate::cpu::{check_derived, check_sum, check_usage, MAX_CPU_PERCENT};
use crate::report::validate::{check_kind, check_runs, check_stream_run};
use crate::report::{
    check_close, check_number, check_text, invalid, InvalidReport, MAX_DURATION_S,
};
use crate::tcp::MAX_BITS_PER_SECOND;
use crate::ReportKind;

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

/// Seconds in range and, with `exact`, rates that are the counts over the seconds.
fn check_counted(
    field: &str,
    (packets, bytes, seconds): (u64, u64, f64),
    rate: Rate,
    exact: bool,
) -> Result<(), InvalidReport> {
    check_number(&format!("{field}.seconds"), seconds, 0.0, MAX_DURATION_S)?;
    check_rate(field, &rate)?;
    if exact {
        let want = Rate::of(packets, bytes, seconds);
        check_close(
            &format!("{field}.bits_per_second"),
            rate.bits_per_second,
            want.bits_per_second,
        )?;
        check_close(
            &format!("{field}.packets_per_second"),
            rate.packets_per_second,
            want.packets_per_second,
        )?;
    }
    Ok(())
}

/// Every stream belongs to a run and is the run's next flow; its figures hold together.
fn check_streams(r: &UdpReport) -> Result<(), InvalidReport> {
    let mut per_run = vec![0u32; r.runs.len()];
    for (i, s) in r.streams.iter().enumerate() {
        let field = |name: &str| format!("streams[{i}].{name}");
        let (run, seen) = usize::try_from(s.run)
            .ok()
            .and_then(|k| Some((r.runs.get(k)?, per_run.get_mut(k)?)))
            .ok_or_else(|| {
                invalid(
                    field("run"),
                    format!("{} but the report has {} run(s)", s.run, r.runs.len()),
                )
            })?;
        let flows = run.direction.flows(run.streams);
        match usize::try_from(*seen).ok().and_then(|k| flows.get(k)) {
            Some(flow) if *flow == s.flow && s.id == *seen => {}
            Some(_) => {
                return Err(invalid(
                    field("flow"),
                    format!(
                        "stream id {} flow {:?} is not stream {seen} of a {:?} run",
                        s.id, s.flow, run.direction
                    ),
                ))
            }
            None => {
                return Err(invalid(
                    field("run"),
                    format!("run {} has only {} stream(s)", s.run, flows.len()),
                ))
            }
        }
        *seen += 1;
        check_stream(&field, s, run)?;
    }
    for (i, (run, n)) in r.runs.iter().zip(per_run).enumerate() {
        let want = run.sending_streams();
        if n != want {
            return Err(invalid(
                format!("runs[{i}].streams"),
                format!("{n} stream report(s), the run's direction and streams make {want}"),
            ));
        }
    }
    Ok(())
}

fn check_stream(
    field: &dyn Fn(&str) -> String,
    s: &UdpStream,
    run: &UdpRun,
) -> Result<(), InvalidReport> {
    let (sent, got) = (&s.sent, &s.received);
    check_counted(
        &field("sent"),
        (sent.packets, sent.bytes, sent.seconds),
        sent.rate(),
        true,
    )?;
    check_counted(
        &field("received"),
        (got.packets, got.bytes, got.seconds),
        got.rate(),
        true,
    )?;
    let len = run.len as u64;
    for (name, packets, bytes) in [
        ("sent", sent.packets, sent.bytes),
        ("received", got.packets, got.bytes),
    ] {
        if packets.checked_mul(len) != Some(bytes) {
            return Err(invalid(
                field(&format!("{name}.bytes")),
                format!("{bytes} is not {packets} datagrams of {len} bytes"),
            ));
        }
    }
    if got.packets > sent.packets {
        return Err(invalid(
            field("received.packets"),
            format!(
                "{} unique datagrams received but only {} sent",
                got.packets, sent.packets
            ),
        ));
    }
    if got.out_of_order > got.packets {
        return Err(invalid(
            field("received.out_of_order"),
            format!(
                "{} out of order among {} received",
                got.out_of_order, got.packets
            ),
        ));
    }
    if let Some(last) = sent.last_send_seconds {
        check_number(
            &field("sent.last_send_seconds"),
            last,
            0.0,
            sent.seconds + 1e-6,
        )?;
    }
    check_schedule(field, sent, run)?;
    let (lost, percent) = loss(sent.packets, got.packets);
    if s.lost != lost {
        return Err(invalid(
            field("lost"),
            format!("{} is not sent - received ({lost})", s.lost),
        ));
    }
    check_number(&field("loss_percent"), s.loss_percent, 0.0, 100.0)?;
    check_close(&field("loss_percent"), s.loss_percent, percent)?;
    match (s.jitter_ms, got.packets) {
        (Some(j), n) if n >= 2 => check_number(&field("jitter_ms"), j, 0.0, MAX_JITTER_MS)?,
        (None, n) if n < 2 => {}
        _ => {
            return Err(invalid(
                field("jitter_ms"),
                "present exactly when two or more datagrams were received",
            ))
        }
    }
    if let Some(e) = &s.error {
        check_text(&field("error"), e)?;
    }
    Ok(())
}

/// A paced sender uses one intended send time per datagram sent or skipped, and has no more of
/// them than the run's duration holds; an unpaced one is never late and skips nothing.
fn check_schedule(
    field: &dyn Fn(&str) -> String,
    sent: &Sent,
    run: &UdpRun,
) -> Result<(), InvalidReport> {
    if sent.late > sent.packets {
        return Err(invalid(
            field("sent.late"),
            format!("{} late among {} sent", sent.late, sent.packets),
        ));
    }
    match &run.target {
        None if sent.late > 0 || sent.skipped > 0 => Err(invalid(
            field("sent"),
            "a stream sending as fast as possible is never late and skips nothing",
        )),
        None => Ok(()),
        Some(t) => {
            let slots = (run.duration_secs * t.packets_per_second).floor() + 2.0;
            let used = sent.packets as f64 + sent.skipped as f64;
            if used > slots {
                return Err(invalid(
                    field("sent.packets"),
                    format!(
                        "{} sent and {} skipped, but {} s at {} datagrams/s have {slots} send times",
                        sent.packets, sent.skipped, run.duration_secs, t.packets_per_second
                    ),
                ));
            }
            Ok(())
        }
    }
}

/// The totals are what [`UdpReport::from_parts`] computes from the runs and streams.
fn check_totals(r: &UdpReport) -> Result<(), InvalidReport> {
    let want = UdpReport::from_parts(r.runs.clone(), r.streams.clone());
    let exact = |name: &str, got: u64, want: u64| {
        if got == want {
            Ok(())
        } else {
            Err(invalid(
                name,
                format!("{got} is not the sum over the streams ({want})"),
            ))
        }
    };
    exact(
        "started_at_unix_ms",
        r.started_at_unix_ms,
        want.started_at_unix_ms,
    )?;
    exact(
        "ended_at_unix_ms",
        r.ended_at_unix_ms,
        want.ended_at_unix_ms,
    )?;
    let (s, ws) = (&r.sent, &want.sent);
    for (name, got, w) in [
        ("sent.packets", s.packets, ws.packets),
        ("sent.bytes", s.bytes, ws.bytes),
        ("sent.late", s.late, ws.late),
        ("sent.skipped", s.skipped, ws.skipped),
        ("sent.errors", s.errors, ws.errors),
    ] {
        exact(name, got, w)?;
    }
    let (g, wg) = (&r.received, &want.received);
    for (name, got, w) in [
        ("received.packets", g.packets, wg.packets),
        ("received.bytes", g.bytes, wg.bytes),
        ("received.out_of_order", g.out_of_order, wg.out_of_order),
        ("received.duplicates", g.duplicates, wg.duplicates),
        ("received.invalid", g.invalid, wg.invalid),
        ("lost", r.lost, want.lost),
    ] {
        exact(name, got, w)?;
    }
    if g.kernel_drops != wg.kernel_drops {
        return Err(invalid(
            "received.kernel_drops",
            format!(
                "{:?} is not the sum over the streams ({:?})",
                g.kernel_drops, wg.kernel_drops
            ),
        ));
    }
    let floats = [
        ("sent.seconds", s.seconds, ws.seconds),
        (
            "sent.bits_per_second",
            s.bits_per_second,
            ws.bits_per_second,
        ),
        (
            "sent.packets_per_second",
            s.packets_per_second,
            ws.packets_per_second,
        ),
        ("received.seconds", g.seconds, wg.seconds),
        (
            "received.bits_per_second",
            g.bits_per_second,
            wg.bits_per_second,
        ),
        (
            "received.packets_per_second",
            g.packets_per_second,
            wg.packets_per_second,
        ),
        ("loss_percent", r.loss_percent, want.loss_percent),
    ];
    for (name, got, w) in floats {
        check_number(name, got, 0.0, f64::MAX)?;
        check_close(name, got, w)?;
    }
    check_option("offered", r.offered, want.offered, |name, a, b| {
        check_close(
            &format!("{name}.bits_per_second"),
            a.bits_per_second,
            b.bits_per_second,
        )?;
        check_close(
            &format!("{name}.packets_per_second"),
            a.packets_per_second,
            b.packets_per_second,
        )
    })?;
    check_option("jitter_ms", r.jitter_ms, want.jitter_ms, |name, a, b| {
        check_number(name, a, 0.0, MAX_JITTER_MS)?;
        check_close(name, a, b)
    })?;
    check_jitter_by_flow(r, &want)?;
    check_cpu_totals(r, &want)
}

/// The per-direction jitter the streams give (an older report without it is read as it is).
fn check_jitter_by_flow(r: &UdpReport, want: &UdpReport) -> Result<(), InvalidReport> {
    if r.jitter_by_flow.is_empty() {
        return Ok(());
    }
    if r.jitter_by_flow.len() != want.jitter_by_flow.len() {
        return Err(invalid(
            "jitter_by_flow",
            format!(
                "{} entries, the streams give {}",
                r.jitter_by_flow.len(),
                want.jitter_by_flow.len()
            ),
        ));
    }
    for (i, (got, w)) in r
        .jitter_by_flow
        .iter()
        .zip(&want.jitter_by_flow)
        .enumerate()
    {
        let field = |name: &str| format!("jitter_by_flow[{i}].{name}");
        if (got.flow, got.streams) != (w.flow, w.streams) {
            return Err(invalid(
                field("streams"),
                format!(
                    "{} streams {:?}, the streams give {} {:?}",
                    got.streams, got.flow, w.streams, w.flow
                ),
            ));
        }
        for (name, a, b) in [
            ("mean_ms", got.mean_ms, w.mean_ms),
            ("max_ms", got.max_ms, w.max_ms),
        ] {
            check_number(&field(name), a, 0.0, MAX_JITTER_MS)?;
            check_close(&field(name), a, b)?;
        }
    }
    Ok(())
}

fn check_cpu_totals(r: &UdpReport, want: &UdpReport) -> Result<(), InvalidReport> {
    check_sum(&r.cpu, r.runs.iter().map(|run| &run.cpu))?;
    check_derived(
        "node_cpu_seconds_per_gb",
        r.node_cpu_seconds_per_gb.as_ref(),
        want.node_cpu_seconds_per_gb,
        true,
    )?;
    let seconds = |name: &str, a: CpuSeconds, b: CpuSeconds| {
        check_number(&format!("{name}.client"), a.client, 0.0, f64::MAX)?;
        check_number(&format!("{name}.server"), a.server, 0.0, f64::MAX)?;
        check_close(&format!("{name}.client"), a.client, b.client)?;
        check_close(&format!("{name}.server"), a.server, b.server)
    };
    seconds("cpu_seconds", r.cpu_seconds, want.cpu_seconds)?;
    check_option(
        "cpu_seconds_per_gb",
        r.cpu_seconds_per_gb,
        want.cpu_seconds_per_gb,
        |name, a, b| seconds(name, a, b),
    )
}

/// Both present and agreeing (`same`), or both absent.
fn check_option<T: Copy>(
    name: &str,
    got: Option<T>,
    want: Option<T>,
    same: impl Fn(&str, T, T) -> Result<(), InvalidReport>,
) -> Result<(), InvalidReport> {
    match (got, want) {
        (Some(a), Some(b)) => same(name, a, b),
        (None, None) => Ok(()),
        (Some(_), None) => Err(invalid(name, "present but the streams give none")),
        (None, Some(_)) => Err(invalid(name, "absent but the streams give one")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::validate::assert_refused;
    use crate::udp::report::tests::udp_report;
    use crate::udp::Received;

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
