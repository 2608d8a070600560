//! Short human-readable summary of an HTTP report (wrk-like).

use std::fmt::Write as _;

use protocol::report::answers::{Answers, Sighting};
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
    if let Some(a) = &r.answers {
        answers(&mut s, a, r.start_unix_ms);
    }
    s
}

/// Most sightings listed in the text summary (the JSON report has them all).
const LISTED_SIGHTINGS: usize = 20;

/// The answers seen, in order of their first sighting, at seconds from the measured start.
fn answers(s: &mut String, a: &Answers, start_unix_ms: u64) {
    let _ = writeln!(
        s,
        "Answers: {} sightings{}",
        a.sightings.len(),
        if a.complete { "" } else { " (incomplete)" }
    );
    let mut seen: Vec<&Sighting> = a.sightings.iter().collect();
    seen.sort_by_key(|x| x.from_unix_us);
    let at = |us: u64| (us as f64 - start_unix_ms as f64 * 1000.0) / 1e6;
    for x in seen.iter().take(LISTED_SIGHTINGS) {
        let _ = writeln!(
            s,
            "  {} {:<20} {:+.3}s .. {:+.3}s",
            x.status,
            x.backend.as_deref().unwrap_or("-"),
            at(x.from_unix_us),
            at(x.to_unix_us)
        );
    }
    if seen.len() > LISTED_SIGHTINGS {
        let _ = writeln!(s, "  ... {} more", seen.len() - LISTED_SIGHTINGS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_listed_by_first_sighting_from_the_measured_start() {
        let mut a = Answers::new();
        let seen = |backend: &str, from_ms: u64, to_ms: u64| Sighting {
            status: 200,
            backend: Some(backend.into()),
            from_unix_us: from_ms * 1000,
            to_unix_us: to_ms * 1000,
        };
        a.add(seen("web-b", 11_500, 12_000));
        a.add(seen("web-a", 9_500, 11_400));
        let mut s = String::new();
        answers(&mut s, &a, 10_000);
        assert_eq!(
            s,
            "Answers: 2 sightings\n  200 web-a                -0.500s .. +1.400s\n  \
             200 web-b                +1.500s .. +2.000s\n"
        );
    }
}
