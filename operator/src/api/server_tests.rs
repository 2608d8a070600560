//! The server's bounds, over real TCP on 127.0.0.1: time limits, the connection cap, and
//! refusals answered before the client has sent its body.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::tests::{register_body, rejected, setup_with_runs};
use super::*;

/// Longest any step of these tests may take before it counts as hanging.
const DEADLINE: Duration = Duration::from_secs(10);

/// Limits whose timeouts lie well beyond `DEADLINE`: only the bound under test acts in time.
fn limits() -> ServerLimits {
    ServerLimits {
        header_timeout: DEADLINE * 3,
        request_timeout: DEADLINE * 3,
        max_connections: 16,
        max_connections_per_peer: 16,
    }
}

/// A timeout short enough to act within a test.
const SHORT: Duration = Duration::from_millis(300);

/// [`start`] with [`limits`] changed by `set`.
async fn start_with(set: impl FnOnce(&mut ServerLimits)) -> (SocketAddr, Arc<Metrics>) {
    let mut limits = limits();
    set(&mut limits);
    start(limits).await
}

async fn start(limits: ServerLimits) -> (SocketAddr, Arc<Metrics>) {
    let (app, _, metrics, _) = setup_with_runs();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, app, limits, metrics.clone()));
    (addr, metrics)
}

/// Reads a response head (up to the blank line), failing after `DEADLINE`.
async fn read_head(conn: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    let read = async {
        while !head.ends_with(b"\r\n\r\n") {
            match conn.read(&mut byte).await {
                Ok(1) => head.push(byte[0]),
                _ => break,
            }
        }
    };
    tokio::time::timeout(DEADLINE, read)
        .await
        .expect("no answer in time");
    String::from_utf8_lossy(&head).into_owned()
}

/// Waits until the server closes `conn` (EOF or reset); returns how long that took.
async fn closed_after(conn: &mut TcpStream) -> Duration {
    let started = Instant::now();
    let mut sink = Vec::new();
    let read = tokio::time::timeout(DEADLINE, conn.read_to_end(&mut sink)).await;
    assert!(read.is_ok(), "the server kept the connection open");
    started.elapsed()
}

/// A connection to `addr` that has sent `bytes`.
async fn sent(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(bytes).await.unwrap();
    conn
}

/// A POST head claiming a 100 MiB body, and the first bytes of it.
fn huge_post(path: &str, auth: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: t\r\n{auth}content-type: application/json\r\n\
         content-length: 104857600\r\n\r\n{{\"version\""
    )
    .into_bytes()
}

#[tokio::test]
async fn an_unauthenticated_huge_body_is_refused_before_it_is_sent() {
    let (addr, metrics) = start(limits()).await;
    for (auth, reason) in [
        ("", "unauthenticated"),
        ("authorization: Bearer wrong\r\n", "bad_token"),
    ] {
        let mut conn = sent(addr, &huge_post("/v1/runs/run1/report", auth)).await;
        let head = read_head(&mut conn).await;
        assert!(head.starts_with("HTTP/1.1 401"), "{head}");
        assert_eq!(rejected(&metrics, reason), 1, "{reason}");
        closed_after(&mut conn).await;
    }
}

#[tokio::test]
async fn an_authenticated_body_over_the_limit_is_refused_before_it_is_sent() {
    let (addr, metrics) = start(limits()).await;
    let head = huge_post("/v1/runs/run1/report", "authorization: Bearer tok\r\n");
    let mut conn = sent(addr, &head).await;
    let head = read_head(&mut conn).await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert_eq!(rejected(&metrics, "too_large"), 1);
}

#[tokio::test]
async fn a_client_that_never_finishes_its_head_is_cut_off() {
    let header_timeout = SHORT;
    let (addr, metrics) = start_with(|l| l.header_timeout = header_timeout).await;
    let mut conn = sent(addr, b"POST /v1/runs/run1/report HTTP/1.1\r\nhost: t\r\n").await;
    let took = closed_after(&mut conn).await;
    assert!(took >= header_timeout / 2, "closed too early: {took:?}");
    wait_for(|| rejected(&metrics, "header_timeout") == 1).await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let (addr, _) = start_with(|l| l.header_timeout = SHORT).await;
    let mut conn = sent(addr, b"GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n").await;
    assert!(read_head(&mut conn).await.starts_with("HTTP/1.1 200"));
    closed_after(&mut conn).await;
}

#[tokio::test]
async fn a_body_that_never_arrives_times_out() {
    let request_timeout = SHORT;
    let (addr, metrics) = start_with(|l| l.request_timeout = request_timeout).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let body = register_body("w0");
    let head = format!(
        "POST /v1/runs/run1/register HTTP/1.1\r\nhost: t\r\nauthorization: Bearer tok\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&body[..body.len() / 2]).await.unwrap();
    let started = Instant::now();
    let head = read_head(&mut conn).await;
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    assert!(started.elapsed() >= request_timeout / 2);
    assert_eq!(rejected(&metrics, "timeout"), 1);
}

#[tokio::test]
async fn connections_above_the_cap_are_closed_until_one_frees() {
    for limits in [
        ServerLimits {
            max_connections: 2,
            ..limits()
        },
        ServerLimits {
            max_connections_per_peer: 2,
            ..limits()
        },
    ] {
        connections_are_capped_at_two(limits).await;
    }
}

async fn connections_are_capped_at_two(limits: ServerLimits) {
    let (addr, metrics) = start(limits).await;
    // Two kept-alive connections, each proven served, hold both slots.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut conn = sent(addr, b"GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n").await;
        assert!(read_head(&mut conn).await.starts_with("HTTP/1.1 200"));
        held.push(conn);
    }
    let mut third = TcpStream::connect(addr).await.unwrap();
    let _ = third
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n")
        .await;
    closed_after(&mut third).await;
    assert_eq!(rejected(&metrics, "too_many_connections"), 1);

    drop(held.pop());
    // The server notices the close asynchronously: retry until a slot is free again.
    let served = async {
        loop {
            let mut conn = TcpStream::connect(addr).await.unwrap();
            let _ = conn
                .write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n")
                .await;
            if read_head(&mut conn).await.starts_with("HTTP/1.1 200") {
                break;
            }
        }
    };
    tokio::time::timeout(DEADLINE, served)
        .await
        .expect("a freed slot serves a new connection");
}

/// Polls `condition` (a counter the server bumps after closing) until it holds or `DEADLINE`.
async fn wait_for(condition: impl Fn() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < DEADLINE, "condition not met in time");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
