//! The check a worker makes before it joins the barrier, against real sockets on 127.0.0.1: a
//! port where nothing listens (a listener bound to port 0 and dropped), a listener kept open,
//! and an unresolvable name; as a worker, the failure must reach the operator's register
//! endpoint (a real HTTP server in the test records what arrives).

mod support;

use std::io::Read;
use std::net::TcpListener;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use loadgen::http::{preflight, HttpConfig, HttpOptions};
use loadgen::worker::http::{run_http_worker, WorkerRunError};
use loadgen::worker::{WorkerClient, WorkerEnv};
use protocol::worker::RegisterRequest;
use support::operator;

/// A port nothing listens on: bound by us, then released on purpose.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

fn config(url: &str) -> HttpConfig {
    HttpConfig::from_options(&HttpOptions::new(url)).expect("valid options")
}

#[test]
fn http_preflight_names_a_connection_refused_until_its_timeout() {
    let port = closed_port();
    let err = preflight(
        &config(&format!("http://127.0.0.1:{port}/")),
        Duration::from_secs(1),
    )
    .unwrap_err();
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && err.to_lowercase().contains("refused"),
        "the last refusal is named, not a timeout: {err}"
    );
}

#[test]
fn http_preflight_asks_again_when_a_new_target_refuses_at_first() {
    // A Service created a moment ago refuses until the node's proxy has its rules: here the
    // target starts listening 400 ms after the preflight began.
    let port = closed_port();
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let _ = listener.accept();
    });
    let started = Instant::now();
    let ok = preflight(
        &config(&format!("http://127.0.0.1:{port}/")),
        Duration::from_secs(10),
    );
    assert_eq!(ok, Ok(()), "after {:?}", started.elapsed());
    late.join().unwrap();
}

#[test]
fn http_preflight_opens_one_connection_and_sends_no_request() {
    // Kept open on purpose: the preflight must succeed, and send nothing (the target's request
    // count stays the measured one).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut got = Vec::new();
        conn.read_to_end(&mut got).unwrap();
        got.len()
    });
    preflight(
        &config(&format!("http://127.0.0.1:{port}/")),
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(server.join().unwrap(), 0, "the preflight sent bytes");
}

#[test]
fn tcp_preflight_names_the_refused_connection() {
    let port = closed_port();
    let mut cfg = loadgen::tcp::TcpClientConfig::new("127.0.0.1");
    cfg.port = port;
    let err = loadgen::tcp::client::preflight(&cfg)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("cannot connect to 127.0.0.1:{port}")),
        "{err}"
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    cfg.port = listener.local_addr().unwrap().port();
    loadgen::tcp::client::preflight(&cfg).unwrap();
}

/// An operator's register endpoint: answers one request and hands over (path, body).
fn fake_operator() -> (String, JoinHandle<(String, RegisterRequest)>) {
    let (listener, url) = operator::listen();
    let handle = std::thread::spawn(move || {
        let (conn, path, body) = operator::accept_request(&listener);
        operator::respond(conn, "200 OK", operator::REGISTERED).unwrap();
        (path, serde_json::from_slice(&body).unwrap())
    });
    (url, handle)
}

fn worker(operator_url: String) -> WorkerClient {
    WorkerClient::new(WorkerEnv {
        operator_url,
        run: "run-1".into(),
        credential: loadgen::worker::Credential::Token("t".into()),
        worker: "w0".into(),
        node: None,
        step: 0,
    })
}

/// Runs a worker against `url` and returns its error and what the operator received.
fn failing_worker(url: &str) -> (String, String, RegisterRequest) {
    let (operator, received) = fake_operator();
    let (tx, rx) = mpsc::channel();
    let url = url.to_string();
    std::thread::spawn(move || {
        let mut o = HttpOptions::new(url);
        o.duration = "1s".into();
        let _ = tx.send(run_http_worker(&o, &worker(operator)).map(drop));
    });
    let result = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the worker gave up within seconds");
    let why = match result {
        Err(WorkerRunError::Preflight(why)) => why,
        other => panic!("expected a preflight failure, got {other:?}"),
    };
    let (path, req) = received.join().unwrap();
    (why, path, req)
}

#[test]
fn a_worker_reports_an_unreachable_target_before_the_barrier() {
    let port = closed_port();
    let (why, path, req) = failing_worker(&format!("http://127.0.0.1:{port}/"));
    assert_eq!(path, "/v1/runs/run-1/register");
    assert_eq!((req.worker.as_str(), req.step), ("w0", 0));
    let reported = req.preflight_error.expect("the failure is reported");
    assert_eq!(reported, why);
    assert!(
        reported.contains(&format!("127.0.0.1:{port}"))
            && reported.to_lowercase().contains("refused"),
        "{reported}"
    );
}

#[test]
fn a_worker_reports_an_unresolvable_host_before_the_barrier() {
    let (why, _, req) = failing_worker("http://no-such-host.invalid/");
    let reported = req.preflight_error.expect("the failure is reported");
    assert_eq!(reported, why);
    assert!(
        reported.contains("cannot resolve host 'no-such-host.invalid'"),
        "{reported}"
    );
}
