//! A UDP report's totals: what [`UdpReport::from_parts`] computes from its runs and streams,
//! counts exactly, rates, loss, jitter and CPU within rounding.

use super::super::report::CpuSeconds;
use super::{UdpReport, MAX_JITTER_MS};
use crate::cpu::{check_derived, check_sum};
use crate::report::{check_close, check_number, invalid, InvalidReport};

/// The totals are what [`UdpReport::from_parts`] computes from the runs and streams.
pub(super) fn check_totals(r: &UdpReport) -> Result<(), InvalidReport> {
    let want = UdpReport::from_parts(r.runs.clone(), r.streams.clone());
    let (s, ws) = (&r.sent, &want.sent);
    let (g, wg) = (&r.received, &want.received);
    // In this order: the first that differs is the one reported.
    for (name, got, w) in [
        (
            "started_at_unix_ms",
            r.started_at_unix_ms,
            want.started_at_unix_ms,
        ),
        (
            "ended_at_unix_ms",
            r.ended_at_unix_ms,
            want.ended_at_unix_ms,
        ),
        ("sent.packets", s.packets, ws.packets),
        ("sent.bytes", s.bytes, ws.bytes),
        ("sent.late", s.late, ws.late),
        ("sent.skipped", s.skipped, ws.skipped),
        ("sent.errors", s.errors, ws.errors),
        ("received.packets", g.packets, wg.packets),
        ("received.bytes", g.bytes, wg.bytes),
        ("received.out_of_order", g.out_of_order, wg.out_of_order),
        ("received.duplicates", g.duplicates, wg.duplicates),
        ("received.invalid", g.invalid, wg.invalid),
        ("lost", r.lost, want.lost),
    ] {
        if got != w {
            return Err(invalid(
                name,
                format!("{got} is not the sum over the streams ({w})"),
            ));
        }
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
