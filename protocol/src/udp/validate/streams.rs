//! A UDP report's streams: each belongs to a run and is its next flow, and its figures hold
//! together (bytes are datagrams x length, a sequence number counts once, loss and jitter are
//! what the counts give, a paced sender keeps to its schedule).

use super::super::report::UdpRun;
use super::super::stream::{loss, Rate, Sent, UdpStream};
use super::{check_rate, UdpReport, MAX_JITTER_MS};
use crate::report::{
    check_close, check_number, check_text, invalid, InvalidReport, MAX_DURATION_S,
};

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
pub(super) fn check_streams(r: &UdpReport) -> Result<(), InvalidReport> {
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
