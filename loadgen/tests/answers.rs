//! Recording answers (`http --record-answers`) against real servers on 127.0.0.1: the
//! http-server responder naming itself (`--name web-a`), loaded by the library and by the
//! command line, and a small HTTP/2 server for the HTTP/2 path. What is recorded is one
//! sighting per answer spanning the run (warm-up included), the status whatever it is, and
//! nothing at all without the flag.

mod support;

use std::net::SocketAddr;

use loadgen::http::{run, HttpConfig, HttpOptions};
use loadgen::responder::ServerArgs;
use protocol::report::answers::{Answers, Sighting};
use protocol::report::{HttpReport, Report};

/// A responder answering `status` as backend `name`; its URL.
fn named_responder(name: &str, status: u16) -> String {
    support::responder(ServerArgs {
        port: 0,
        bind: "127.0.0.1".parse().unwrap(),
        body_size: 6,
        delay: "0s".into(),
        status,
        threads: Some(1),
        name: Some(name.into()),
        count_port: None,
    })
}

fn options(url: String, record: bool) -> HttpOptions {
    let mut o = HttpOptions::new(url);
    o.connections = 4;
    o.threads = 2;
    o.duration = "1s".into();
    o.warmup = "500ms".into();
    o.record_answers = record;
    o
}

/// Runs the library engine; the report passes the operator's own check.
fn load(o: &HttpOptions) -> HttpReport {
    let report = run(&HttpConfig::from_options(o).unwrap(), None).unwrap();
    protocol::report::validate_http(&report).expect("the report passes validation");
    report
}

/// The record's (status, backend) answers, in order.
fn answers_of(a: &Answers) -> Vec<(u16, Option<&str>)> {
    a.sightings
        .iter()
        .map(|s| (s.status, s.backend.as_deref()))
        .collect()
}

/// The one sighting lies within the run: from its start (the measured window's start less the
/// warm-up, as the responses of the warm-up are answers too) to its end. Both ends of the
/// report are wall-clock milliseconds cut down, so the end is allowed up to 1 ms beyond; the
/// sightings' instants are the monotonic clock from one wall-clock reading at the start (both
/// clocks are slewed alike by NTP, so they do not drift apart within a run).
fn assert_within_the_run(s: &Sighting, r: &HttpReport) {
    let warmup_us = (r.config.warmup_s * 1e6) as u64;
    let run_start_us = r.start_unix_ms * 1000 - warmup_us;
    let end_us = r.end_unix_ms * 1000 + 999;
    assert!(
        run_start_us <= s.from_unix_us && s.to_unix_us <= end_us,
        "{s:?} outside the run {run_start_us}..={end_us}"
    );
    // Seen from the warm-up on (a 500 ms warm-up: its first response is long before the
    // measured start), and until the end (the last response is within 100 ms of it).
    assert!(
        s.from_unix_us < r.start_unix_ms * 1000,
        "the warm-up's answers are recorded: {s:?}, measured from {} ms",
        r.start_unix_ms
    );
    assert!(
        s.to_unix_us + 100_000 >= r.end_unix_ms * 1000,
        "seen until the end: {s:?}, ended {} ms",
        r.end_unix_ms
    );
}

#[test]
fn a_named_backend_is_one_sighting_spanning_the_run() {
    let url = named_responder("web-a", 200);
    let r = load(&options(url, true));
    assert!(r.counters.requests > 100, "{:?}", r.counters);
    assert_eq!(r.counters.errors.total(), 0);
    let answers = r.answers.as_ref().expect("answers recorded with the flag");
    assert!(answers.complete);
    assert_eq!(answers_of(answers), vec![(200, Some("web-a"))]);
    assert_within_the_run(&answers.sightings[0], &r);
}

#[test]
fn without_the_flag_nothing_is_recorded() {
    let url = named_responder("web-a", 200);
    let mut o = options(url, false);
    o.warmup = "0s".into();
    let r = load(&o);
    assert!(r.counters.requests > 100, "{:?}", r.counters);
    assert_eq!(r.answers, None);
    assert!(!r.to_json().contains("answers"));
}

/// `netbench-loadgen http --record-answers` from the command line (the form the operator
/// passes to a worker), its JSON report parsed as the operator does.
fn cli_report(args: &[&str]) -> HttpReport {
    let mut cmd = support::in_ns(None, support::LOADGEN);
    cmd.arg("http").args(args).args(["--output", "json"]);
    let out = support::run_ok(cmd.env_remove("NETBENCH_OPERATOR_URL"));
    match Report::from_json(&String::from_utf8_lossy(&out.stdout)).expect("a JSON report") {
        Report::Http(r) => r,
    }
}

#[test]
fn an_error_status_is_an_answer_like_any_other() {
    let url = named_responder("web-a", 503);
    let args = [
        "--record-answers",
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "500ms",
        "--warmup",
        "200ms",
        &url,
    ];
    let r = cli_report(&args);
    assert!(r.counters.errors.status_5xx > 10, "{:?}", r.counters);
    assert_eq!(r.counters.errors.transport(), 0);
    let answers = r.answers.as_ref().expect("answers recorded with the flag");
    assert_eq!(answers_of(answers), vec![(503, Some("web-a"))]);
    assert_within_the_run(&answers.sightings[0], &r);
    // The same without the flag: no record.
    let args = ["-c", "1", "-t", "1", "-d", "200ms", url.as_str()];
    assert_eq!(cli_report(&args).answers, None);
}

/// A server on 127.0.0.1 on a thread of its own: `serve` takes each accepted connection (in a
/// task of a current-thread runtime). Its address.
fn serve_on_a_thread<F, Fut>(serve: F) -> SocketAddr
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                tokio::task::spawn_local(serve(socket));
            }
        });
    });
    addr
}

/// A cleartext HTTP/2 server (prior knowledge, as `--http2` speaks to http:// URLs) answering
/// 200 with `X-NetBench-Backend: NAME` (mixed case: HTTP/2 lowercases names on the wire).
fn h2_server(name: &'static str) -> SocketAddr {
    serve_on_a_thread(move |socket| async move {
        let Ok(mut conn) = h2::server::handshake(socket).await else {
            return;
        };
        while let Some(Ok((_request, mut respond))) = conn.accept().await {
            let response = http::Response::builder()
                .status(200)
                .header("X-NetBench-Backend", name)
                .body(())
                .unwrap();
            let _ = respond.send_response(response, true);
        }
    })
}

#[test]
fn the_http2_path_records_the_backend_too() {
    let addr = h2_server("web-h2");
    let mut o = options(format!("http://{addr}/"), true);
    o.http2 = true;
    o.warmup = "200ms".into();
    let r = load(&o);
    assert!(r.counters.requests > 100, "{:?}", r.counters);
    assert_eq!(r.counters.errors.total(), 0);
    let answers = r.answers.as_ref().expect("answers recorded with the flag");
    assert_eq!(answers_of(answers), vec![(200, Some("web-h2"))]);
    assert_within_the_run(&answers.sightings[0], &r);
}

/// A server that sends each answer's head (naming backend `slow`) at once and its body
/// `hold` later; its address.
fn slow_body_server(hold: std::time::Duration) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    serve_on_a_thread(move |mut s| async move {
        let mut buf = vec![0u8; 4096];
        // One request per read is enough here: the client sends one and waits.
        while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {
            let head = "HTTP/1.1 200 OK\r\nx-netbench-backend: slow\r\ncontent-length: 6\r\n\r\n";
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            tokio::time::sleep(hold).await;
            if s.write_all(b"hello\n").await.is_err() {
                return;
            }
        }
    })
}

/// An answer is seen when its head arrives, not when its body has: a backend that takes 400 ms
/// to send a body answered at once.
#[test]
fn an_answer_is_seen_when_its_head_arrives() {
    let hold = std::time::Duration::from_millis(400);
    let addr = slow_body_server(hold);
    let mut o = options(format!("http://{addr}/"), true);
    o.connections = 1;
    o.threads = 1;
    o.warmup = "0s".into();
    let r = load(&o);
    let a = r.answers.as_ref().expect("answers recorded");
    assert_eq!(answers_of(a), vec![(200, Some("slow"))]);
    let first = &a.sightings[0];
    // The first request went out at the start; its head came back at once, its body 400 ms
    // later (the latency says so): seen well before the body.
    assert!(r.latency.p50_us >= 390_000, "{:?}", r.latency);
    let seen_after_start_ms = (first.from_unix_us / 1000).saturating_sub(r.start_unix_ms);
    assert!(
        seen_after_start_ms < 200,
        "first seen {seen_after_start_ms} ms after the start: at the body, not the head"
    );
}

/// `--host-count`: the first instant each hostname answered a 2xx naming a backend, within the
/// run and no later than the last answer.
fn assert_each_host_answered(r: &HttpReport, hosts: usize) {
    let answers = r.answers.as_ref().expect("answers recorded");
    let firsts = &answers.first_ok_by_host;
    assert_eq!(firsts.len(), hosts, "{firsts:?}");
    let warmup_us = (r.config.warmup_s * 1e6) as u64;
    let run_start_us = r.start_unix_ms * 1000 - warmup_us;
    let end_us = r.end_unix_ms * 1000 + 999;
    for (i, at) in firsts.iter().enumerate() {
        let at = at.unwrap_or_else(|| panic!("hostname {i} never answered: {firsts:?}"));
        assert!(
            (run_start_us..=end_us).contains(&at),
            "hostname {i} at {at}"
        );
        // The first answers of the run come within its first 100 ms.
        assert!(
            at < run_start_us + 100_000,
            "hostname {i} first at {at}, run from {run_start_us}"
        );
    }
}

#[test]
fn a_host_count_dates_each_hostnames_first_named_2xx() {
    let url = named_responder("web-a", 200);
    let mut o = options(url.clone(), true);
    o.connections = 6;
    o.host = Some("bench.test".into());
    o.host_count = 3;
    let r = load(&o);
    assert_eq!(r.counters.errors.total(), 0);
    assert_each_host_answered(&r, 3);
    // The command line the operator gives a worker does the same.
    let args = [
        "--record-answers",
        "--host",
        "bench.test",
        "--host-count",
        "4",
        "-c",
        "4",
        "-t",
        "1",
        "-d",
        "300ms",
        &url,
    ];
    assert_each_host_answered(&cli_report(&args), 4);
    // With --host-backend, only that backend's 2xx dates a hostname (not another route's).
    let mut o = options(url.clone(), true);
    o.connections = 2;
    o.host = Some("bench.test".into());
    o.host_count = 2;
    o.host_backend = Some("web-a".into());
    assert_each_host_answered(&load(&o), 2);
    o.host_backend = Some("web-b".into());
    assert!(load(&o).answers.unwrap().first_ok_by_host.is_empty());
    // An error status is not the route working.
    let failing = named_responder("web-a", 503);
    let mut o = options(failing, true);
    o.host = Some("bench.test".into());
    o.host_count = 2;
    o.connections = 2;
    let r = load(&o);
    assert!(r.answers.unwrap().first_ok_by_host.is_empty());
}

#[test]
fn a_host_count_asks_each_hostname_from_its_own_connections() {
    // nginx logs the Host of every request, and names no backend: the hostnames are spread
    // over the connections, and an unnamed 2xx dates no hostname.
    let nginx = test_support::nginx::Nginx::start();
    let mut o = options(nginx.url("/"), true);
    o.connections = 6;
    o.threads = 2;
    o.host = Some("bench.test".into());
    o.host_count = 3;
    let r = load(&o);
    assert_eq!(r.counters.errors.total(), 0);
    assert!(r.answers.unwrap().first_ok_by_host.is_empty());
    let lines = nginx.log_lines();
    let mut per_host = std::collections::BTreeMap::<String, std::collections::BTreeSet<u64>>::new();
    for l in &lines {
        per_host
            .entry(l.host.clone())
            .or_default()
            .insert(l.connection);
    }
    let hosts: Vec<&str> = per_host.keys().map(String::as_str).collect();
    assert_eq!(hosts, ["r0.bench.test", "r1.bench.test", "r2.bench.test"]);
    // Two connections each (6 over 3), none shared.
    for (host, conns) in &per_host {
        assert_eq!(conns.len(), 2, "{host}: {conns:?}");
    }
    let all: std::collections::BTreeSet<u64> = per_host.values().flatten().copied().collect();
    assert_eq!(all.len(), 6);
}

#[test]
fn the_http2_path_spreads_over_hostnames_too() {
    let addr = h2_server("web-h2");
    let mut o = options(format!("http://{addr}/"), true);
    o.http2 = true;
    o.warmup = "200ms".into();
    o.host = Some("bench.test".into());
    o.host_count = 2;
    let r = load(&o);
    assert_eq!(r.counters.errors.total(), 0);
    assert_each_host_answered(&r, 2);
}

#[test]
fn a_host_count_is_refused_without_a_host_or_the_connections_for_it() {
    let refused = |count: u64, connections: u64, host: Option<&str>| {
        let mut o = HttpOptions::new("http://127.0.0.1:1/");
        o.connections = connections;
        o.threads = 1;
        o.host = host.map(String::from);
        o.host_count = count;
        HttpConfig::from_options(&o).unwrap_err().to_string()
    };
    assert!(refused(3, 2, Some("h")).contains("at least as many connections"));
    assert!(refused(2, 2, None).contains("needs --host"));
    assert!(refused(0, 2, Some("h")).contains("between 1 and 1000"));
    assert!(refused(1001, 2000, Some("h")).contains("between 1 and 1000"));
    let mut o = HttpOptions::new("http://127.0.0.1:1/");
    o.host = Some("h".into());
    o.host_count = 2;
    o.host_backend = Some("not a name".into());
    let e = HttpConfig::from_options(&o).unwrap_err().to_string();
    assert!(e.contains("is not a backend name"), "{e}");
}
