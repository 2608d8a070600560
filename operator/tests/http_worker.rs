//! The HTTP engine's worker mode end to end against the operator's REAL worker API on
//! 127.0.0.1 (see worker_api): the real `netbench-loadgen` binary loads a real Debian nginx as
//! an IngressBenchmark worker does, and while it runs the operator's /metrics carries its live
//! series (requests/s, latency quantiles, errors/s), which the report then removes.
// Needs real servers (Debian nginx, iperf3) or root (network namespaces): the full tier only,
// `cargo test --features system-tests` (tests/run-all.sh).
#![cfg(feature = "system-tests")]

mod worker_api;

use std::time::Duration;

use protocol::report::HttpReport;
use protocol::worker::Role;
use test_support::nginx::Nginx;
use worker_api::Api;

/// The value of the sample `metric{...labels...}` (labels in Prometheus' sorted order).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn live(metric: &str, extra: &str) -> String {
    format!(r#"{metric}{{name="web",namespace="ns",{extra}worker="client-0"}}"#)
}

/// Scrapes the operator's /metrics every 100 ms until the worker exits; returns every
/// scrape that had live latency series.
fn scrape_while_running(api: &Api, worker: &mut worker_api::Worker) -> Vec<String> {
    let mut seen = Vec::new();
    while worker.running() {
        let text = ureq::get(&format!("{}/metrics", api.url))
            .call()
            .expect("GET /metrics")
            .into_body()
            .read_to_string()
            .expect("metrics text");
        if text.contains("netbench_ingress_live_latency_seconds{") {
            seen.push(text);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    seen
}

/// Runs the HTTP worker client-0 of IngressBenchmark ns/web against `path` of a real nginx,
/// with `flags` after the URL; returns the worker API, every scrape that had live latency
/// series while it ran, and its exit (a success).
fn run_http_worker(path: &str, flags: &[&str]) -> (Api, Vec<String>, worker_api::Exit) {
    let nginx = Nginx::start();
    let api = Api::start("IngressBenchmark", "web", &[("client-0", Role::Client)]);
    let url = format!("http://127.0.0.1:{}{path}", nginx.port);
    let args: Vec<&str> = ["http", url.as_str()]
        .into_iter()
        .chain(flags.iter().copied())
        .collect();
    let mut worker = api.worker("client-0", &args);
    let scrapes = scrape_while_running(&api, &mut worker);
    let exit = worker.wait(Duration::from_secs(30));
    assert!(exit.success, "worker failed: {}", exit.stderr);
    (api, scrapes, exit)
}

#[test]
fn an_http_worker_run_exports_live_latency_and_errors() {
    let flags = ["-c", "4", "-t", "2", "-d", "4s", "--output", "json"];
    let (api, scrapes, exit) = run_http_worker("/", &flags);
    let report: HttpReport = match protocol::report::Report::from_json(&exit.stdout) {
        Ok(protocol::report::Report::Http(r)) => r,
        other => panic!("not an http report on stdout: {other:?}"),
    };
    assert!(report.counters.requests > 100, "{:?}", report.counters);

    // A 4 s run pushes a progress update every second, each with the last second's latency.
    assert!(
        scrapes.len() >= 5,
        "only {} scrapes had live latency ({} progress updates); worker stderr: {}",
        scrapes.len(),
        api.progress_updates(),
        exit.stderr
    );
    let run_max_s = report.latency.max_us as f64 / 1e6;
    for text in &scrapes {
        let q = |quantile: &str| {
            sample(
                text,
                &live(
                    "netbench_ingress_live_latency_seconds",
                    &format!(r#"quantile="{quantile}","#),
                ),
            )
            .unwrap_or_else(|| panic!("quantile {quantile} missing:\n{text}"))
        };
        let (p50, p99, max) = (q("0.5"), q("0.99"), q("1"));
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{p50} {p99} {max}");
        // Seconds, of responses the report also holds (1 % for the coarser live histogram).
        assert!(
            max <= run_max_s * 1.01 + 1e-6,
            "live max {max} s > run max {run_max_s} s"
        );
        assert_eq!(
            sample(text, &live("netbench_ingress_live_errors_per_second", "")),
            Some(0.0),
            "nginx answers 200: no errors per second"
        );
        assert!(sample(text, &live("netbench_live_rps", "")).unwrap() > 0.0);
    }

    // The stored report ends the live series.
    assert_eq!(api.sink.0.lock().unwrap().len(), 1);
    let after = api.metrics.render();
    assert!(
        !after.contains(r#"worker="client-0""#),
        "live series left after the report:\n{after}"
    );
    assert!(api.progress_updates() >= 3);
    assert!(api
        .barrier("client-0")
        .is_ok_and(|b| b.start_at_unix_ms.is_some()));
}

#[test]
fn server_errors_show_as_live_errors_per_second() {
    let (api, scrapes, exit) = run_http_worker("/fail", &["-c", "2", "-t", "1", "-d", "3s"]);
    assert!(
        !scrapes.is_empty(),
        "no scrape had live series ({} progress updates); worker stderr: {}",
        api.progress_updates(),
        exit.stderr
    );
    for text in &scrapes {
        let errors = sample(text, &live("netbench_ingress_live_errors_per_second", ""))
            .expect("errors per second");
        let rps = sample(text, &live("netbench_live_rps", "")).expect("rps");
        // Every response is a 500.
        assert!(
            errors > 0.0 && (errors - rps).abs() <= 0.02 * rps + 5.0,
            "{errors} vs {rps}"
        );
    }
}
