//! Short human-readable summary of an HTTP report (wrk-like).

use std::fmt::Write as _;

use protocol::report::HttpReport;

fn us(v: f64) -> String {
    if v >= 1_000_000.0 {
        format!("{:.2}s", v / 1_000_000.0)
    } else if v >= 1_000.0 {
        format!("{:.2}ms", v / 1_000.0)
    } else {
        format!("{v:.0}us")
    }
}

fn bytes(v: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = v;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.2}{}", UNITS[i])
}

/// The summary; `detailed` adds the full percentile table (wrk's `--latency`).
pub fn http_summary(r: &HttpReport, detailed: bool) -> String {
    let c = &r.config;
    let mut s = String::new();
    let mode = match c.rate {
        Some(rate) => format!("open loop at {rate:.0} req/s"),
        None => "closed loop".into(),
    };
    let _ = writeln!(s, "Running {:.0}s test @ {}", c.duration_s, c.url);
    let _ = writeln!(
        s,
        "  {} threads and {} connections, {mode}, keep-alive {}{}{}",
        c.threads,
        c.connections,
        if c.keepalive { "on" } else { "off" },
        if c.http2 { ", HTTP/2" } else { "" },
        if r.workers > 1 {
            format!(", {} workers merged", r.workers)
        } else {
            String::new()
        },
    );
    let l = &r.latency;
    let _ = writeln!(
        s,
        "  Latency   mean {}  stdev {}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        us(l.mean_us),
        us(l.stdev_us),
        us(l.p50_us as f64),
        us(l.p90_us as f64),
        us(l.p99_us as f64),
        us(l.p999_us as f64),
        us(l.max_us as f64)
    );
    if detailed {
        let _ = writeln!(s, "  Latency Distribution");
        for (q, v) in [
            ("50%", l.p50_us),
            ("90%", l.p90_us),
            ("99%", l.p99_us),
            ("99.9%", l.p999_us),
        ] {
            let _ = writeln!(s, "   {q:>6}  {}", us(v as f64));
        }
    }
    let k = &r.counters;
    let _ = writeln!(
        s,
        "  {} requests in {:.2}s, {} read (warm-up: {} requests)",
        k.requests,
        r.duration_s,
        bytes(k.bytes_read as f64),
        k.warmup_requests
    );
    let e = &k.errors;
    if e.total() > 0 {
        let _ = writeln!(
            s,
            "  Errors: connect {}, timeout {}, read {}, write {}, parse {}, status 4xx {}, 5xx {}",
            e.connect, e.timeout, e.read, e.write, e.parse, e.status_4xx, e.status_5xx
        );
    }
    if let Some(rate) = r.rate {
        let _ = writeln!(
            s,
            "Requested rate: {:.2} req/s, achieved: {:.2} req/s",
            rate.requested_rps, rate.achieved_rps
        );
    }
    let _ = writeln!(s, "Requests/sec: {:.2}", r.rps);
    let _ = writeln!(s, "Transfer/sec: {}", bytes(r.bytes_per_sec));
    s
}
