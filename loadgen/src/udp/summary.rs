//! The human summary, laid out like iperf3's UDP end-of-test lines (sender and receiver per
//! stream: time, transfer, bitrate, jitter, lost/total datagrams), plus what iperf3 does not
//! show: reordering, duplicates, invalid datagrams, the socket's drops, late and skipped sends.

use std::fmt::Write;

use ::protocol::udp::{Received, Sent, UdpReport};

use crate::tcp::summary::{bytes, cpu_line, rate, stream_label};

/// The Lost/Total Datagrams column: `lost` of `total` sent, and the percent lost.
fn lost_of_total(lost: u64, total: u64, loss_percent: f64) -> String {
    format!("{lost}/{total} ({})", percent(loss_percent))
}

pub fn render_text(report: &UdpReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "[ ID] Flow  Seconds  Transfer        Bitrate           Jitter      Lost/Total Datagrams"
    );
    for s in &report.streams {
        let (id, flow) = stream_label(report.runs.len(), s.run, s.id, s.flow);
        let lost = lost_of_total(s.lost, s.sent.packets, s.loss_percent);
        let _ = writeln!(
            out,
            "[{id:>3}] {flow:<5} {}  {:>10}  {lost:<20} sender",
            sent(&s.sent),
            ""
        );
        let _ = writeln!(
            out,
            "[{id:>3}] {flow:<5} {}  {:>10}  {lost:<20} receiver",
            received(&s.received),
            jitter(s.jitter_ms)
        );
        let _ = writeln!(out, "{}", details(&s.sent, &s.received, s.rcvbuf_bytes));
        if let Some(e) = &s.error {
            let _ = writeln!(out, "[{id:>3}] ended early: {e}");
        }
    }
    let lost = lost_of_total(report.lost, report.sent.packets, report.loss_percent);
    let _ = writeln!(
        out,
        "[SUM] {:<5} {}  {:>10}  {lost:<20} sender",
        "",
        sent(&report.sent),
        ""
    );
    let _ = writeln!(
        out,
        "[SUM] {:<5} {}  {:>10}  {lost:<20} receiver",
        "",
        received(&report.received),
        jitter(report.jitter_ms)
    );
    let _ = writeln!(out, "{}", details(&report.sent, &report.received, None));
    let offered = report.offered.map_or_else(
        || "as fast as possible".to_string(),
        |o| {
            format!(
                "{} ({:.0} datagrams/s)",
                rate(o.bits_per_second),
                o.packets_per_second
            )
        },
    );
    let _ = writeln!(
        out,
        "Offered {offered}, achieved {} ({:.0} datagrams/s) at {} bytes per datagram",
        rate(report.received.bits_per_second),
        report.received.packets_per_second,
        report.runs.first().map_or(0, |r| r.len)
    );
    let per_gb = report.cpu_seconds_per_gb.map_or_else(String::new, |g| {
        format!(
            "; CPU s per GB received: client {:.2}, server {:.2}",
            g.client, g.server
        )
    });
    cpu_line(&mut out, &report.cpu, &per_gb);
    out
}

fn sent(s: &Sent) -> String {
    line(s.seconds, s.bytes, s.bits_per_second)
}

fn received(r: &Received) -> String {
    line(r.seconds, r.bytes, r.bits_per_second)
}

fn line(seconds: f64, b: u64, bps: f64) -> String {
    format!("{seconds:>7.2}  {:>14}  {:>15}", bytes(b), rate(bps))
}

fn jitter(ms: Option<f64>) -> String {
    ms.map_or_else(|| "-".to_string(), |j| format!("{j:.3} ms"))
}

fn percent(p: f64) -> String {
    if p == 0.0 || p >= 0.01 {
        format!("{p:.2}%")
    } else {
        format!("{p:.1e}%")
    }
}

fn details(s: &Sent, r: &Received, rcvbuf: Option<u64>) -> String {
    let drops = r
        .kernel_drops
        .map_or_else(|| "unknown".to_string(), |d| d.to_string());
    let buffer = rcvbuf.map_or_else(String::new, |b| format!(", receive buffer {}", bytes(b)));
    format!(
        "      out of order {}, duplicates {}, invalid {}, socket drops {drops}{buffer}; sends late {}, skipped {}, failed {}",
        r.out_of_order, r.duplicates, r.invalid, s.late, s.skipped, s.errors
    )
}
