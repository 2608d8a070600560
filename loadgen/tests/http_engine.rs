//! The HTTP engine against real servers on 127.0.0.1: Debian nginx (its access log is the
//! referee) and a tiny in-test server for stalls, silence, garbage and chunked bodies.
// Needs real servers (Debian nginx, iperf3) or root (network namespaces): the full tier only,
// `cargo test --features system-tests` (tests/run-all.sh).
#![cfg(feature = "system-tests")]

mod http_common;

use std::collections::HashSet;
use std::process::Command;
use std::time::Duration;

use std::sync::{Arc, Mutex};

use http_common::{load, Behaviour, TinyServer};
use loadgen::http::{run, HttpConfig, HttpOptions, Progress};
use test_support::nginx::Nginx;
use test_support::ports;

fn opts(url: String, connections: u64, threads: u64, duration: &str) -> HttpOptions {
    let mut o = HttpOptions::new(url);
    o.connections = connections;
    o.threads = threads;
    o.duration = duration.into();
    o.timeout = "5s".into();
    o
}

#[test]
fn keepalive_request_count_matches_nginx_access_log() {
    let nginx = Nginx::start();
    let mut o = opts(nginx.url("/"), 4, 2, "1s");
    o.warmup = "300ms".into();
    let r = load(&o);
    let c = &r.counters;
    assert!(c.requests > 100, "too few requests: {c:?}");
    assert!(
        c.warmup_requests > 0,
        "warm-up requests were not sent: {c:?}"
    );
    assert_eq!(c.errors.total(), 0, "{c:?}");
    assert_eq!(c.status.s2xx, c.requests);
    assert_eq!(
        r.latency.count, c.requests,
        "warm-up must not enter the histogram"
    );

    let log = nginx.log_lines();
    assert_eq!(
        log.len() as u64,
        c.requests + c.warmup_requests,
        "nginx count differs"
    );
    let conns: HashSet<u64> = log.iter().map(|l| l.connection).collect();
    assert_eq!(
        conns.len(),
        4,
        "keep-alive must reuse exactly -c connections"
    );
    assert!(log.iter().all(|l| l.status == 200 && l.method == "GET"));
    assert_eq!(r.per_thread.len(), 2);
    assert_eq!(
        r.per_thread.iter().map(|t| t.requests).sum::<u64>(),
        c.requests
    );
}

#[test]
fn no_keepalive_opens_one_connection_per_request() {
    let nginx = Nginx::start();
    let mut o = opts(nginx.url("/"), 4, 1, "1s");
    o.no_keepalive = true;
    let r = load(&o);
    let c = &r.counters;
    assert!(c.requests > 50, "too few requests: {c:?}");
    assert_eq!(c.errors.total(), 0, "{c:?}");

    let log = nginx.log_lines();
    assert_eq!(log.len() as u64, c.requests, "nginx count differs");
    assert!(
        log.iter().all(|l| l.connection_requests == 1),
        "a connection carried more than one request"
    );
    let conns: HashSet<u64> = log.iter().map(|l| l.connection).collect();
    assert_eq!(conns.len(), log.len(), "connections were reused");

    // The server closed first: TIME_WAIT sockets sit on nginx's side (local port = its port),
    // not on ours (remote port = its port), so a long run cannot exhaust our ephemeral ports.
    let (ours, theirs) = time_wait_counts(nginx.port);
    assert!(
        ours <= c.requests / 100,
        "{ours} client-side TIME_WAIT sockets of {}",
        c.requests
    );
    assert!(
        theirs >= c.requests / 2,
        "only {theirs} server-side TIME_WAIT sockets"
    );
}

/// TIME_WAIT sockets on 127.0.0.1 whose (remote, local) port is `port`.
fn time_wait_counts(port: u16) -> (u64, u64) {
    let (mut client, mut server) = (0, 0);
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 4 || f[3] != "06" {
                continue;
            }
            let port_of = |addr: &str| {
                u16::from_str_radix(addr.rsplit(':').next().unwrap_or(""), 16).unwrap_or(0)
            };
            if port_of(f[2]) == port {
                client += 1;
            }
            if port_of(f[1]) == port {
                server += 1;
            }
        }
    }
    (client, server)
}

#[test]
fn progress_sink_gets_a_snapshot_every_second() {
    let nginx = Nginx::start();
    let (seen, r) = run_with_progress(&opts(nginx.url("/"), 2, 1, "2500ms"));
    assert!((2..=3).contains(&seen.len()), "{} snapshots", seen.len());
    assert!(seen.windows(2).all(|w| w[1].requests > w[0].requests));
    assert!(seen
        .iter()
        .all(|p| p.rps > 0.0 && p.errors == 0 && !p.warming_up));
    assert!(seen.last().unwrap().requests <= r.counters.requests);
}

/// Runs `opts` and returns every progress snapshot with the report.
fn run_with_progress(o: &HttpOptions) -> (Vec<Progress>, protocol::report::HttpReport) {
    let cfg = HttpConfig::from_options(o).unwrap();
    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let sink = seen.clone();
    let r = run(
        &cfg,
        Some(Box::new(move |p: &Progress| sink.lock().unwrap().push(*p))),
    )
    .unwrap();
    let seen = seen.lock().unwrap().clone();
    (seen, r)
}

#[test]
fn progress_carries_the_latency_of_each_interval_from_nginx() {
    let nginx = Nginx::start();
    // Two threads: the interval histograms are merged across them.
    let (seen, r) = run_with_progress(&opts(nginx.url("/"), 4, 2, "3500ms"));
    assert!(seen.len() >= 3, "{} snapshots", seen.len());
    assert_eq!(r.counters.errors.total(), 0, "{:?}", r.counters);
    let run_max_ms = r.latency.max_us as f64 / 1000.0;
    for p in &seen {
        let l = p.latency.expect("nginx answered in every second");
        assert!(
            0.0 < l.p50_ms && l.p50_ms <= l.p99_ms && l.p99_ms <= l.max_ms,
            "{l:?}"
        );
        // Milliseconds of the same responses the report holds (1 % for the coarser histogram).
        assert!(
            l.max_ms <= run_max_ms * 1.01 + 0.001,
            "interval max {} ms > run max {run_max_ms} ms",
            l.max_ms
        );
        assert!(l.responses > 0 && l.responses <= p.requests, "{p:?}");
        assert_eq!(p.errors_per_second, 0.0, "{p:?}");
    }
    // Each response is in one interval only: the intervals add up to (at most) the requests
    // counted at the last snapshot, less what a thread had not handed over yet.
    let handed: u64 = seen.iter().map(|p| p.latency.unwrap().responses).sum();
    let last = seen.last().unwrap().requests;
    assert!(
        handed <= last && handed >= last / 2,
        "{handed} responses in the intervals, {last} requests counted"
    );
    assert!(
        seen.iter()
            .any(|p| p.latency.unwrap().max_ms * 1000.0 >= r.latency.p50_us as f64),
        "no interval reached the run's median: {seen:?}"
    );
}

#[test]
fn progress_latency_is_per_interval_not_cumulative() {
    // Every response due between 1.2 s and 1.8 s waits until 1.8 s: one interval sees the
    // stall, the ones before and after it do not.
    let server = TinyServer::start(Behaviour::Stall {
        from: Duration::from_millis(1200),
        until: Duration::from_millis(1800),
    });
    let (seen, _) = run_with_progress(&opts(server.url(), 4, 1, "4500ms"));
    let max: Vec<f64> = seen
        .iter()
        .map(|p| p.latency.map_or(0.0, |l| l.max_ms))
        .collect();
    assert!(max.len() >= 4, "{max:?}");
    assert!(
        max[0] < 300.0,
        "the first second is before the stall: {max:?}"
    );
    let stalled = max.iter().position(|&m| m >= 400.0);
    assert!(
        matches!(stalled, Some(1 | 2)),
        "the stall belongs to the 2nd (or, handed over late, the 3rd) interval: {max:?}"
    );
    assert!(
        *max.last().unwrap() < 300.0,
        "the stall must not stay in later intervals: {max:?}"
    );
}

#[test]
fn progress_counts_status_errors_per_second() {
    let nginx = Nginx::start();
    let (seen, r) = run_with_progress(&opts(nginx.url("/fail"), 2, 1, "2500ms"));
    assert_eq!(r.counters.errors.status_5xx, r.counters.requests);
    assert!(seen.len() >= 2, "{} snapshots", seen.len());
    for p in &seen {
        // Every response is a 500: errors per second match responses per second.
        assert!(p.errors_per_second > 0.0, "{p:?}");
        assert!(
            (p.errors_per_second - p.rps).abs() <= 0.02 * p.rps + 5.0,
            "{p:?}"
        );
        assert!(p.latency.is_some(), "5xx are responses with a latency");
    }
}

#[test]
fn open_loop_reaches_the_requested_rate() {
    let nginx = Nginx::start();
    let mut o = opts(nginx.url("/"), 10, 2, "2s");
    o.rate = Some(1000.0);
    let r = load(&o);
    let rate = r.rate.expect("open loop reports its rate");
    assert_eq!(rate.requested_rps, 1000.0);
    assert!(
        (rate.achieved_rps - 1000.0).abs() < 20.0,
        "achieved {} req/s of 1000",
        rate.achieved_rps
    );
    // Exactly the scheduled requests: 2 s x 1000/s.
    assert!(r.counters.requests.abs_diff(2000) <= 2, "{:?}", r.counters);
    let log = nginx.log_lines();
    assert_eq!(log.len() as u64, r.counters.requests);
}

#[test]
fn open_loop_latency_is_corrected_for_coordinated_omission() {
    // The server holds every response for 600 ms. A tool that measures from the actual send
    // time would see ~10 slow requests (one per connection); measured from the intended send
    // time, every request due during the stall is late, i.e. ~30% of them.
    let server = TinyServer::start(Behaviour::Stall {
        from: Duration::from_millis(700),
        until: Duration::from_millis(1300),
    });
    let mut o = opts(server.url(), 10, 1, "2s");
    o.rate = Some(1000.0);
    let r = load(&o);
    let l = r.latency;
    assert_eq!(r.counters.errors.total(), 0, "{:?}", r.counters);
    assert!(l.max_us >= 500_000, "max {} us misses the stall", l.max_us);
    assert!(l.p90_us >= 150_000, "p90 {} us: not CO-corrected", l.p90_us);
    assert!(
        l.p50_us < 100_000,
        "p50 {} us: the unstalled part is too slow",
        l.p50_us
    );
    // It catches up after the stall: the achieved rate still matches the requested one.
    let rate = r.rate.unwrap();
    assert!(rate.achieved_rps > 950.0, "achieved {}", rate.achieved_rps);
}

#[test]
fn status_errors_are_classified() {
    let nginx = Nginx::start();
    let r = load(&opts(nginx.url("/fail"), 2, 1, "500ms"));
    let c = &r.counters;
    assert!(c.requests > 0);
    assert_eq!(c.errors.status_5xx, c.requests);
    assert_eq!(c.status.s5xx, c.requests);
    assert_eq!(c.errors.transport(), 0);
    let log = nginx.log_lines();
    assert!(log.iter().all(|l| l.status == 500));

    let r = load(&opts(nginx.url("/missing"), 2, 1, "300ms"));
    assert!(r.counters.errors.status_4xx > 0);
    assert_eq!(r.counters.errors.status_4xx, r.counters.requests);
}

#[test]
fn server_down_gives_connect_errors_not_latency() {
    let down = ports::ClosedPort::new();
    let r = load(&opts(
        format!("http://127.0.0.1:{}/", down.port),
        2,
        1,
        "300ms",
    ));
    assert!(r.counters.errors.connect > 0, "{:?}", r.counters);
    assert_eq!(r.counters.requests, 0);
    assert_eq!(r.latency.count, 0);
}

#[test]
fn timeouts_truncation_and_garbage_are_classified() {
    let silent = TinyServer::start(Behaviour::Silent);
    let mut o = opts(silent.url(), 2, 1, "500ms");
    o.timeout = "200ms".into();
    let r = load(&o);
    assert!(r.counters.errors.timeout >= 2, "{:?}", r.counters);
    assert_eq!(r.counters.requests, 0);

    let truncated = TinyServer::start(Behaviour::Truncated);
    let r = load(&opts(truncated.url(), 2, 1, "300ms"));
    assert!(r.counters.errors.read > 0, "{:?}", r.counters);
    assert_eq!(r.counters.requests, 0);

    let garbage = TinyServer::start(Behaviour::Garbage);
    let r = load(&opts(garbage.url(), 2, 1, "300ms"));
    assert!(r.counters.errors.parse > 0, "{:?}", r.counters);
    assert_eq!(r.counters.requests, 0);
}

#[test]
fn chunked_responses_are_read_completely() {
    let server = TinyServer::start(Behaviour::Chunked(5));
    let r = load(&opts(server.url(), 2, 1, "300ms"));
    assert!(r.counters.requests > 10, "{:?}", r.counters);
    assert_eq!(r.counters.errors.total(), 0, "{:?}", r.counters);
    // Every response carried 5 chunks of 800 bytes: we must have read them all.
    assert!(r.counters.bytes_read / r.counters.requests > 4_000);
}

#[test]
fn method_body_headers_and_host_override_reach_nginx() {
    let nginx = Nginx::start();
    let mut o = opts(nginx.url("/post"), 1, 1, "200ms");
    o.method = "POST".into();
    o.body = Some("x".repeat(1000));
    o.headers = vec!["X-Test: marker-1".into()];
    o.host = Some("bench.example".into());
    let r = load(&o);
    assert!(r.counters.requests > 0);
    let log = nginx.log_lines();
    assert_eq!(log.len() as u64, r.counters.requests);
    for l in &log {
        assert_eq!(l.method, "POST");
        assert_eq!(l.host, "bench.example");
        assert_eq!(l.x_test, "marker-1");
        assert_eq!(l.content_length, "1000");
    }
    // nginx discards the 1000-byte body before the next request on the connection: a body
    // shorter or longer than announced would break the next request (timeout / 400).
    assert!(log.iter().any(|l| l.connection_requests > 1));
    assert_eq!(r.counters.errors.total(), 0, "{:?}", r.counters);
}

/// Requests were served, and none failed.
fn assert_served(r: &protocol::report::HttpReport) {
    assert!(
        r.counters.requests > 0 && r.counters.errors.total() == 0,
        "{:?}",
        r.counters
    );
}

#[test]
fn tls_with_insecure_skip_verify_and_http2() {
    let nginx = Nginx::start_with("http2", true);
    // Self-signed certificate: verification must fail unless explicitly skipped.
    let r = load(&opts(nginx.url("/"), 1, 1, "200ms"));
    assert!(
        r.counters.errors.connect > 0 && r.counters.requests == 0,
        "{:?}",
        r.counters
    );

    let mut o = opts(nginx.url("/"), 2, 1, "300ms");
    o.insecure = true;
    let r = load(&o);
    assert_served(&r);
    o.http2 = true;
    let r2 = load(&o);
    assert_served(&r2);
    let log = nginx.log_lines();
    assert_eq!(log.len() as u64, r.counters.requests + r2.counters.requests);
    let h2 = log.iter().filter(|l| l.protocol == "HTTP/2.0").count() as u64;
    assert_eq!(h2, r2.counters.requests, "HTTP/2 requests in nginx's log");
}

#[test]
fn cleartext_http2_prior_knowledge() {
    let nginx = Nginx::start_with("http2", false);
    let mut o = opts(nginx.url("/"), 2, 1, "300ms");
    o.http2 = true;
    let r = load(&o);
    assert_served(&r);
    let log = nginx.log_lines();
    assert_eq!(log.len() as u64, r.counters.requests);
    assert!(log.iter().all(|l| l.protocol == "HTTP/2.0"));
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_netbench-loadgen"))
        .args(args)
        .output()
        .expect("run netbench-loadgen");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_rejects_bad_input_with_one_line() {
    for args in [
        vec!["http", "not-a-url"],
        vec!["http", "-d", "1s", "http://no-such-host.invalid/"],
        vec!["http", "-c", "0", "http://127.0.0.1/"],
        vec!["http", "-R", "-5", "http://127.0.0.1/"],
        vec!["http", "-d", "soon", "http://127.0.0.1/"],
        vec!["merge", "/nonexistent/report.json"],
    ] {
        let (code, _, err) = cli(&args);
        assert_ne!(code, 0, "{args:?} succeeded");
        assert_ne!(code, 101, "{args:?} panicked: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("netbench-loadgen: "), "{args:?}: {err}");
    }
}

#[test]
fn cli_json_reports_merge_exactly() {
    let nginx = Nginx::start();
    let url = nginx.url("/");
    let (merged, parts) = merge_two("netbench-merge", || {
        let (code, out, err) = cli(&[
            "http", "-c", "2", "-t", "1", "-d", "300ms", "--output", "json", &url,
        ]);
        assert_eq!(code, 0, "{err}");
        out
    });
    let sum = |k: &str| {
        parts
            .iter()
            .map(|p| p["counters"][k].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(merged["kind"], "http");
    assert_eq!(merged["version"], 1);
    assert_eq!(merged["workers"], 2);
    assert_eq!(
        merged["counters"]["requests"].as_u64().unwrap(),
        sum("requests")
    );
    assert_eq!(
        merged["latency"]["count"].as_u64().unwrap(),
        sum("requests")
    );
}

/// Two JSON reports made by `report`, each written to a file of a fresh temporary folder
/// (`name` and the process id), and what `netbench-loadgen merge` makes of the two files:
/// (the merged report, the two reports).
fn merge_two(
    name: &str,
    report: impl Fn() -> String,
) -> (serde_json::Value, Vec<serde_json::Value>) {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for i in 0..2 {
        let f = dir.join(format!("r{i}.json"));
        std::fs::write(&f, report()).unwrap();
        files.push(f);
    }
    let (code, out, err) = cli(&[
        "merge",
        files[0].to_str().unwrap(),
        files[1].to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let merged = serde_json::from_str(&out).unwrap();
    let parts = files
        .iter()
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    (merged, parts)
}

/// The port in tcp-server's "tcp-server listening addr=HOST:PORT" log line on `log`, which it
/// writes once its socket listens; the rest of the log is drained (the server never blocks on
/// a full pipe).
fn listening_port(log: impl std::io::Read + Send + 'static, limit: Duration) -> u16 {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(log).lines().map_while(Result::ok) {
            if line.contains("tcp-server listening") {
                let _ = tx.send(line);
            }
        }
    });
    let line = rx
        .recv_timeout(limit)
        .expect("tcp-server logs its listening address");
    line.rsplit_once("addr=")
        .and_then(|(_, a)| a.trim().parse::<std::net::SocketAddr>().ok())
        .unwrap_or_else(|| panic!("no addr=HOST:PORT in {line:?}"))
        .port()
}

/// Kills the child process on drop.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn cli_merge_dispatches_tcp_reports_to_the_tcp_merge() {
    // Port 0: the server binds a free port itself and names it in its first log line.
    let mut server = Command::new(env!("CARGO_BIN_EXE_netbench-loadgen"))
        .args(["tcp-server", "-B", "127.0.0.1", "-p", "0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start tcp-server");
    let log = server.stderr.take().unwrap();
    let _server = ChildGuard(server);
    let port = listening_port(log, Duration::from_secs(10)).to_string();
    let (merged, _) = merge_two("netbench-tcpmerge", || {
        // It listens already: the first attempt is served.
        let out = cli(&[
            "tcp-client",
            "-c",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "0.3",
            "-J",
        ]);
        assert_eq!(out.0, 0, "tcp-client failed: {}", out.2);
        out.1
    });
    assert_eq!(merged["kind"], "tcp");
    assert_eq!(merged["version"], 1);
}
