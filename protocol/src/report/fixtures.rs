//! Test fixtures: real reports built by the engine's own constructors.

use super::histogram::new_latency_histogram;
use super::http::{Counters, HttpReport, HttpRunConfig, StatusCounts, ThreadSummary};

/// A single-run report of `latencies` (µs), all 200 but `errors_5xx` of them 500, on two threads.
pub(crate) fn http_report(latencies: &[u64], errors_5xx: u64) -> HttpReport {
    let mut h = new_latency_histogram();
    for &v in latencies {
        h.record(v).unwrap();
    }
    let n = latencies.len() as u64;
    let mut counters = Counters {
        requests: n,
        bytes_read: n * 100,
        bytes_written: n * 40,
        status: StatusCounts {
            s2xx: n - errors_5xx,
            s5xx: errors_5xx,
            ..StatusCounts::default()
        },
        ..Counters::default()
    };
    counters.errors.status_5xx = errors_5xx;
    counters.errors.timeout = 2;
    let config = HttpRunConfig {
        url: "http://127.0.0.1/".into(),
        method: "GET".into(),
        connections: 4,
        threads: 2,
        duration_s: 10.0,
        warmup_s: 1.0,
        rate: None,
        keepalive: true,
        http2: false,
        timeout_s: 2.0,
    };
    let thread = |t: u32, requests: u64, errors: u64| ThreadSummary {
        worker: 0,
        thread: t,
        connections: 2,
        requests,
        errors,
        bytes_read: requests * 100,
        rps: requests as f64 / 10.0,
    };
    let first = n / 2;
    let threads = vec![
        thread(0, first, counters.errors.total()),
        thread(1, n - first, 0),
    ];
    HttpReport::from_run(config, 1_000, 12_000, 10.0, counters, &h, threads).unwrap()
}
