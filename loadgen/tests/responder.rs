//! The http-server responder on 127.0.0.1, loaded by netbench-loadgen's own HTTP engine and
//! read by a plain socket: the answer it was asked for, keep-alive, the delay, and a request
//! that never finishes its head costing only its own connection.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use loadgen::http::{HttpConfig, HttpOptions};
use loadgen::responder::ServerArgs;

/// A responder on a free port of 127.0.0.1 (its own runtime thread); returns its URL.
fn responder(body_size: usize, delay: &str, status: u16) -> String {
    support::responder(ServerArgs {
        port: 0,
        bind: "127.0.0.1".parse().unwrap(),
        body_size,
        delay: delay.into(),
        status,
        threads: Some(1),
        name: None,
        count_port: None,
    })
}

/// A connection to the responder at `url`, reads timing out after 10 s.
fn connect(url: &str) -> TcpStream {
    support::connect_reading_for(url.trim_start_matches("http://").trim_end_matches('/'), 10)
}

/// One raw HTTP/1.1 exchange on `conn`: the status line and the body.
fn get(conn: &mut TcpStream, path: &str) -> (String, Vec<u8>) {
    write!(conn, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        conn.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .expect("content-length");
    let mut body = vec![0; length];
    conn.read_exact(&mut body).unwrap();
    (head.lines().next().unwrap().to_string(), body)
}

#[test]
fn every_request_gets_the_asked_answer_on_one_kept_alive_connection() {
    let mut conn = connect(&responder(8, "0s", 200));
    for path in ["/", "/any/path?x=1", "/"] {
        let (status, body) = get(&mut conn, path);
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert_eq!(body, b"hello\nhe");
    }
}

#[test]
fn the_status_and_the_delay_are_kept() {
    let mut conn = connect(&responder(6, "150ms", 503));
    let started = Instant::now();
    let (status, _) = get(&mut conn, "/");
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
}

#[test]
fn the_load_engine_measures_it_without_errors() {
    let url = responder(6, "0s", 200);
    let mut o = HttpOptions::new(url);
    o.duration = "1s".into();
    o.connections = 4;
    let report = loadgen::http::run(&HttpConfig::from_options(&o).unwrap(), None).unwrap();
    assert!(
        report.counters.requests > 100,
        "{}",
        report.counters.requests
    );
    assert_eq!(report.counters.errors.total(), 0);
    assert!(report.bytes_per_sec > 0.0);
}

#[test]
fn a_client_that_never_finishes_its_request_holds_only_its_own_connection() {
    let url = responder(6, "0s", 200);
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stuck = TcpStream::connect(addr).unwrap();
    stuck.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n").unwrap();
    let mut other = connect(&url);
    assert_eq!(get(&mut other, "/").1, b"hello\n");
}

#[test]
fn the_count_port_says_how_many_answers_were_given() {
    let answer = ServerArgs {
        port: 0,
        bind: "127.0.0.1".parse().unwrap(),
        body_size: 6,
        delay: "0s".into(),
        status: 503,
        threads: Some(1),
        name: None,
        count_port: None,
    }
    .answer()
    .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let answers = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let counts = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send((answers.local_addr().unwrap(), counts.local_addr().unwrap()))
                .unwrap();
            let answered = std::sync::Arc::<std::sync::atomic::AtomicU64>::default();
            tokio::spawn(loadgen::responder::serve_count(counts, answered.clone()));
            loadgen::responder::serve_counted(answers, answer, answered)
                .await
                .unwrap();
        });
    });
    let (answers, counts) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let count = || get(&mut support::connect_reading_for(counts, 10), "/");
    assert_eq!(
        count(),
        ("HTTP/1.1 200 OK".to_string(), b"answered 0\n".to_vec())
    );
    let mut conn = support::connect_reading_for(answers, 10);
    for _ in 0..5 {
        assert_eq!(get(&mut conn, "/").0, "HTTP/1.1 503 Service Unavailable");
    }
    let mut other = support::connect_reading_for(answers, 10);
    get(&mut other, "/x");
    assert_eq!(
        count().1,
        b"answered 6\n",
        "reading the count is not an answer"
    );
    assert_eq!(count().1, b"answered 6\n");
}
