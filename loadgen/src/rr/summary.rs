//! The human summary of an rr report: what ran, transactions per second, the open loop's
//! schedule, the latency percentiles, failures by class, UDP losses, CPU per transaction, and
//! any warning (port exhaustion, an open loop behind its schedule) in words.

use std::fmt::Write;

use protocol::rr::RrReport;

pub fn render_text(r: &RrReport) -> String {
    let mut out = String::new();
    let s = &r.setup;
    let pacing = match (s.rate_per_stream, r.requested_per_second) {
        (Some(per_stream), Some(total)) => {
            format!("open loop {per_stream:.0}/s per stream ({total:.0}/s in all)")
        }
        _ => "closed loop".into(),
    };
    let in_flight = s
        .max_in_flight
        .map(|n| format!(" (up to {n} in flight per stream)"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{} to {}: {} stream(s), {} B request / {} B response, burst {}{in_flight}, {pacing}, {:.2} s, timeout {} ms",
        s.mode,
        r.runs.first().map_or("?", |run| run.server.as_str()),
        r.streams,
        s.request_size,
        s.response_size,
        s.burst,
        r.duration_secs,
        s.timeout_ms
    );
    let c = &r.counts;
    let e = &c.errors;
    let failed = c.checked_failed().unwrap_or(u64::MAX);
    let _ = writeln!(
        out,
        "transactions  {} ({:.1}/s answered within the window); attempted {}, failed {failed} (refused {}, timeout {}, reset {}, no local port {}, other {})",
        c.transactions, r.transactions_per_second, c.attempted, e.refused, e.timeout, e.reset,
        e.address_not_available, e.other
    );
    if s.rate_per_stream.is_some() {
        let _ = writeln!(
            out,
            "schedule      {} intended sends in the window: {} sent, {} skipped (not sent by its end)",
            c.attempted.saturating_add(c.skipped),
            c.attempted,
            c.skipped
        );
    }
    if let Some(loss) = r.loss_percent {
        let _ = writeln!(
            out,
            "datagrams     lost {} ({loss:.3} %), late {}, duplicate {}, invalid {}",
            c.lost, c.late, c.duplicate, c.invalid
        );
    }
    let l = &r.latency;
    let _ = writeln!(
        out,
        "latency (us)  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  (min {}, mean {:.1}, stdev {:.1})",
        l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us, l.min_us, l.mean_us, l.stdev_us
    );
    let per_tx = |f: fn(&protocol::tcp::CpuCost) -> f64| {
        r.cpu_us_per_transaction
            .as_ref()
            .map(|c| format!(", {:.2} us/transaction", f(c)))
            .unwrap_or_default()
    };
    let _ = writeln!(
        out,
        "CPU           client {:.1}%{}, server {:.1}%{}",
        r.cpu.client.total_percent,
        per_tx(|c| c.client),
        r.cpu.server.total_percent,
        per_tx(|c| c.server)
    );
    for line in r.stream_errors() {
        let _ = writeln!(out, "error: {line}");
    }
    for w in r.warnings() {
        let _ = writeln!(out, "WARNING: {w}");
    }
    out
}
