//! The human summary, laid out like iperf3's end-of-test table.

use std::fmt::Write;

use ::protocol::tcp::{CpuReport, CpuUsage, Flow, TcpReport, Throughput};

/// A stream's id in the table (run.id in a report of several runs) and its flow.
pub(crate) fn stream_label(runs: usize, run: u32, id: u32, flow: Flow) -> (String, &'static str) {
    let flow = match flow {
        Flow::ClientToServer => "c->s",
        Flow::ServerToClient => "s->c",
    };
    let id = if runs > 1 {
        format!("{run}.{id}")
    } else {
        id.to_string()
    };
    (id, flow)
}

pub fn render_text(report: &TcpReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "[ ID] Flow  Seconds  Transfer        Bitrate           Retr  RTT"
    );
    for s in &report.streams {
        let (id, flow) = stream_label(report.runs.len(), s.run, s.id, s.flow);
        let (retr, rtt) = match &s.tcp {
            Some(t) => (t.retransmits.to_string(), format!("{} us", t.rtt_us)),
            None => (String::new(), String::new()),
        };
        let _ = writeln!(
            out,
            "[{id:>3}] {flow:<5} {}  {retr:>4}  {rtt:<9} sender",
            line(&s.sender)
        );
        let _ = writeln!(
            out,
            "[{id:>3}] {flow:<5} {}  {:>4}  {:<9} receiver",
            line(&s.receiver),
            "",
            ""
        );
        if let Some(e) = &s.error {
            let _ = writeln!(out, "[{id:>3}] ended early: {e}");
        }
    }
    let rtt = report
        .mean_rtt_us
        .map(|r| format!("{r:.0} us"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "[SUM] {:<5} {}  {:>4}  {rtt:<9} sender",
        "",
        line(&report.sender),
        report.retransmits
    );
    let _ = writeln!(
        out,
        "[SUM] {:<5} {}  {:>4}  {:<9} receiver",
        "",
        line(&report.receiver),
        "",
        ""
    );
    cpu_line(&mut out, &report.cpu, "");
    out
}

/// The line of both ends' CPU use, then `more`.
pub(crate) fn cpu_line(out: &mut String, report: &CpuReport, more: &str) {
    let _ = writeln!(
        out,
        "CPU: client {}, server {}{more}",
        cpu(&report.client),
        cpu(&report.server)
    );
}

fn line(t: &Throughput) -> String {
    format!(
        "{:>7.2}  {:>14}  {:>15}",
        t.seconds,
        bytes(t.bytes),
        rate(t.bits_per_second)
    )
}

pub(crate) fn cpu(c: &CpuUsage) -> String {
    format!(
        "{:.1}% ({:.1}% user, {:.1}% system)",
        c.total_percent, c.user_percent, c.system_percent
    )
}

/// Binary units for amounts, as iperf3 prints them.
pub(crate) fn bytes(b: u64) -> String {
    scaled(b as f64, 1024.0, &["Bytes", "KBytes", "MBytes", "GBytes"])
}

/// Decimal units for rates, as iperf3 prints them.
pub(crate) fn rate(bps: f64) -> String {
    scaled(bps, 1000.0, &["bit/s", "Kbit/s", "Mbit/s", "Gbit/s"])
}

fn scaled(mut v: f64, step: f64, units: &[&str]) -> String {
    let mut unit = 0;
    while v >= step && unit < units.len() - 1 {
        v /= step;
        unit += 1;
    }
    format!("{v:.2} {}", units[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_follow_iperf3() {
        assert_eq!(bytes(512), "512.00 Bytes");
        assert_eq!(bytes(3 * 1024 * 1024 * 1024), "3.00 GBytes");
        assert_eq!(rate(20_800_000_000.0), "20.80 Gbit/s");
        assert_eq!(rate(950.0), "950.00 bit/s");
    }
}
