//! The TCP engine on loopback: agreement with iperf3, parallel streams, directions, progress,
//! and a server that keeps serving through busy periods, vanished clients and bad peers.
// Needs real servers (Debian nginx, iperf3) or root (network namespaces): the full tier only,
// `cargo test --features system-tests` (tests/run-all.sh).
#![cfg(feature = "system-tests")]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use loadgen::tcp::client::{self, TcpProgress};
use loadgen::tcp::server::TcpServer;
use loadgen::tcp::{TcpClientConfig, TcpError, TcpServerConfig};
use protocol::tcp::{Direction, Flow, TcpReport};
use support::*;

/// The first line `out` yields within `limit` (None if it ends or stays silent).
fn first_line(out: impl Read + Send + 'static, limit: Duration) -> Option<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(limit).ok().filter(|l| !l.is_empty())
}

fn assert_sane(report: &TcpReport, streams: usize) {
    // What the operator checks of every report holds for the engine's real ones.
    protocol::tcp::validate_tcp(report).expect("the engine's report passes validation");
    assert_eq!(report.version, 1);
    assert_eq!(report.kind, "tcp");
    assert_eq!(report.streams.len(), streams);
    assert!(
        report.receiver.bytes > 0 && report.sender.bytes >= report.receiver.bytes,
        "{report:?}"
    );
    assert!(
        report.cpu.client.total_percent > 0.0 && report.cpu.server.total_percent > 0.0,
        "{:?}",
        report.cpu
    );
    assert!(report.ended_at_unix_ms > report.started_at_unix_ms);
    for s in &report.streams {
        assert!(s.error.is_none(), "stream {} failed: {:?}", s.id, s.error);
        let tcp = s.tcp.expect("TCP_INFO of the sending socket");
        assert!(tcp.rtt_us > 0 && tcp.snd_cwnd_bytes > 0, "{tcp:?}");
    }
}

#[test]
fn loopback_throughput_agrees_with_iperf3() {
    require(&["iperf3", "ss"], false);
    let server = LoopbackServer::start();
    let (_iperf, port) = iperf3_loopback_server();
    assert_agrees_with_iperf3(
        "loopback",
        || iperf3_client(None, "127.0.0.1", port, 2, 1),
        || {
            let report = client::run(&server.tcp_client(2.0), None).expect("tcp test");
            assert_sane(&report, 1);
            report.receiver.bits_per_second
        },
    );
}

#[test]
fn parallel_streams_sum_to_the_total() {
    let _m = measuring();
    let server = LoopbackServer::start();
    let cfg = TcpClientConfig {
        streams: 4,
        ..server.tcp_client(1.5)
    };
    let report = client::run(&cfg, None).expect("four streams");
    assert_sane(&report, 4);
    assert_eq!(
        report.streams.iter().map(|s| s.id).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    let stream_bytes: u64 = report.streams.iter().map(|s| s.receiver.bytes).sum();
    assert_eq!(stream_bytes, report.receiver.bytes);
    let stream_sent: u64 = report.streams.iter().map(|s| s.sender.bytes).sum();
    assert_eq!(stream_sent, report.sender.bytes);
    assert!(
        report
            .streams
            .iter()
            .all(|s| s.receiver.bytes > report.receiver.bytes / 20),
        "one stream starved"
    );
    assert_eq!(
        report.retransmits,
        report
            .streams
            .iter()
            .map(|s| s.tcp.unwrap().retransmits)
            .sum::<u64>()
    );
}

#[test]
fn concurrent_clients_merge_into_exact_sums() {
    let _m = measuring();
    let servers = [LoopbackServer::start(), LoopbackServer::start()];
    let cfgs: Vec<TcpClientConfig> = servers.iter().map(|s| s.tcp_client(1.0)).collect();
    let reports: Vec<TcpReport> = cfgs
        .into_iter()
        .map(|cfg| thread::spawn(move || client::run(&cfg, None)))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap().expect("concurrent client"))
        .collect();
    let merged = protocol::tcp::merge(&reports).expect("merge");
    assert_eq!(
        merged.receiver.bits_per_second,
        reports[0].receiver.bits_per_second + reports[1].receiver.bits_per_second
    );
    assert_eq!(
        merged.sender.bytes,
        reports[0].sender.bytes + reports[1].sender.bytes
    );
    assert_eq!(merged.runs.len(), 2);
    assert_eq!(
        merged.streams.iter().map(|s| s.run).collect::<Vec<_>>(),
        [0, 1]
    );
    assert_ne!(merged.runs[0].server, merged.runs[1].server);
}

#[test]
fn reverse_and_bidirectional_tests() {
    let _m = measuring();
    let server = LoopbackServer::start();
    let reverse = client::run(
        &TcpClientConfig {
            direction: Direction::Receive,
            ..server.tcp_client(1.0)
        },
        None,
    )
    .expect("reverse test");
    assert_sane(&reverse, 1);
    assert_eq!(reverse.streams[0].flow, Flow::ServerToClient);

    let both = client::run(
        &TcpClientConfig {
            direction: Direction::Both,
            streams: 2,
            ..server.tcp_client(1.0)
        },
        None,
    )
    .expect("bidirectional test");
    assert_sane(&both, 4);
    let flows: Vec<Flow> = both.streams.iter().map(|s| s.flow).collect();
    assert_eq!(
        flows,
        [
            Flow::ClientToServer,
            Flow::ClientToServer,
            Flow::ServerToClient,
            Flow::ServerToClient
        ]
    );
}

#[test]
fn progress_arrives_every_second() {
    let _m = measuring();
    let server = LoopbackServer::start();
    let mut seen: Vec<TcpProgress> = Vec::new();
    let mut sink = |p: &TcpProgress| seen.push(*p);
    let report = client::run(&server.tcp_client(3.2), Some(&mut sink)).expect("tcp test");
    assert_eq!(seen.len(), 3, "{seen:?}");
    for (i, p) in seen.iter().enumerate() {
        assert!((p.elapsed_secs - (i + 1) as f64).abs() < 0.3, "{p:?}");
        assert!(p.interval_bits_per_second > 0.0 && p.bits_per_second > 0.0);
    }
    assert!(seen.windows(2).all(|w| w[1].bytes > w[0].bytes));
    assert!(seen[2].bytes < report.sender.bytes);
}

#[test]
fn server_survives_a_client_killed_mid_test_and_serves_the_next() {
    let _m = measuring();
    let server = LoopbackServer::start();
    for extra in [&[][..], &["-R"][..]] {
        let mut victim = std::process::Command::new(LOADGEN)
            .args([
                "tcp-client",
                "-c",
                "127.0.0.1",
                "-p",
                &server.addr.port().to_string(),
                "-t",
                "60",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting a client");
        // Mid-test: the client has printed its first interval, so data is flowing.
        let first = first_line(victim.stdout.take().unwrap(), Duration::from_secs(10));
        assert!(
            first.as_deref().is_some_and(|l| l.starts_with("[SUM]")),
            "the client printed no interval: {first:?}"
        );
        victim.kill().expect("killing the client");
        victim.wait().unwrap();
        // The server notices soon (control connection closed), not after 60 s; until it has
        // cleaned up, it may still answer "busy".
        let started = Instant::now();
        let report = loop {
            match client::run(&server.tcp_client(1.0), None) {
                Err(TcpError::Rejected(msg))
                    if msg.contains("busy") && started.elapsed() < Duration::from_secs(10) =>
                {
                    thread::sleep(Duration::from_millis(200))
                }
                other => break other.expect("the next test after a vanished client"),
            }
        };
        assert_sane(&report, 1);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn a_busy_server_says_so_and_serves_afterwards() {
    let _m = measuring();
    let server = LoopbackServer::start();
    let long = server.tcp_client(2.5);
    let (transferring, first_progress) = mpsc::channel();
    let first = thread::spawn(move || {
        let mut sink = |_: &TcpProgress| {
            let _ = transferring.send(());
        };
        client::run(&long, Some(&mut sink))
    });
    // The first test is under way once it reports its first second.
    first_progress
        .recv_timeout(Duration::from_secs(10))
        .expect("the first test reports progress");
    match client::run(&server.tcp_client(1.0), None) {
        Err(TcpError::Rejected(msg)) => assert!(msg.contains("busy"), "{msg}"),
        other => panic!("expected a busy refusal, got {other:?}"),
    }
    assert_sane(&first.join().unwrap().expect("the first test"), 1);
    assert_sane(
        &client::run(&server.tcp_client(0.5), None).expect("a later test"),
        1,
    );
}

#[test]
fn protocol_version_mismatch_is_a_clear_error() {
    let server = LoopbackServer::start();
    let mut conn = TcpStream::connect(server.addr).unwrap();
    let hello = br#"{"type":"hello","magic":"netbench-tcp","version":99,"cookie":"x","test":{}}"#;
    conn.write_all(&(hello.len() as u32).to_be_bytes()).unwrap();
    conn.write_all(hello).unwrap();
    let mut len = [0u8; 4];
    conn.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    conn.read_exact(&mut body).unwrap();
    let reply: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(reply["type"], "error");
    let msg = reply["message"].as_str().unwrap();
    assert!(
        msg.contains("version 2") && msg.contains("version 99"),
        "{msg}"
    );
    drop(conn);
    // ... and the server is still there.
    assert_sane(
        &client::run(&server.tcp_client(0.5), None).expect("a test after the mismatch"),
        1,
    );
}

#[test]
fn a_foreign_server_is_named_as_such() {
    require(&["iperf3", "ss"], false);
    let (_iperf, port) = iperf3_loopback_server();
    let cfg = TcpClientConfig {
        port,
        duration: Duration::from_secs(1),
        ..TcpClientConfig::new("127.0.0.1")
    };
    match client::run(&cfg, None) {
        Err(e @ TcpError::NotNetbench(_)) => {
            assert!(e.to_string().contains("not a netbench"), "{e}")
        }
        other => panic!("expected NotNetbench against iperf3, got {other:?}"),
    }
}

#[test]
fn invalid_tests_and_unreachable_servers_fail_cleanly() {
    let cfg = TcpClientConfig {
        streams: 0,
        ..TcpClientConfig::new("127.0.0.1")
    };
    assert!(matches!(client::run(&cfg, None), Err(TcpError::Config(_))));
    let refusing = ports::ClosedPort::new();
    let closed = TcpClientConfig {
        port: refusing.port,
        ..TcpClientConfig::new("127.0.0.1")
    };
    let err = client::run(&closed, None).unwrap_err();
    assert!(matches!(err, TcpError::Connect { .. }), "{err:?}");
    assert!(
        err.to_string().contains("cannot connect to 127.0.0.1"),
        "{err}"
    );
    // The CLI says it once, on one line.
    let out = std::process::Command::new(LOADGEN)
        .args([
            "tcp-client",
            "-c",
            "127.0.0.1",
            "-p",
            &closed.port.to_string(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.matches("Connection refused").count(), 1, "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn cli_prints_a_text_summary_and_json() {
    let _m = measuring();
    let server = LoopbackServer::start();
    let port = server.addr.port().to_string();
    let text = run_ok(std::process::Command::new(LOADGEN).args([
        "tcp-client",
        "-c",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "1.2",
    ]));
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("[SUM]")
            && text.contains("receiver")
            && text.contains("Gbit/s")
            && text.contains("CPU: client"),
        "{text}"
    );
    let json = loadgen_client(
        None,
        "127.0.0.1",
        server.addr.port(),
        &["-t", "0.5", "-P", "2"],
    );
    assert_sane(&json, 2);
    let out = std::process::Command::new(LOADGEN)
        .args(["tcp-client", "-c", "127.0.0.1", "-p", &port, "-P", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("streams must be 1..=128"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
}

/// Worker mode's server: exactly one test, a bound on the wait for it, and connections that are
/// not a test (probes, strangers) neither end nor count as the test.
#[test]
fn serve_one_serves_a_single_test_and_gives_up_when_none_arrives() {
    let cfg = TcpServerConfig {
        bind_addr: Some("127.0.0.1".parse().unwrap()),
        port: 0,
        ..TcpServerConfig::default()
    };
    let server = TcpServer::bind(&cfg).unwrap();
    let addr = server.local_addr().unwrap();
    let serving = thread::spawn(move || {
        let result = server.serve_one(Duration::from_secs(30), &AtomicBool::new(false));
        (server, result)
    });
    // A stranger first: refused, the server keeps waiting for a real test.
    let mut stranger = TcpStream::connect(addr).unwrap();
    stranger.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let mut sink = Vec::new();
    let _ = stranger.read_to_end(&mut sink);
    let cfg = TcpClientConfig {
        port: addr.port(),
        duration: Duration::from_millis(500),
        ..TcpClientConfig::new("127.0.0.1")
    };
    assert_sane(&client::run(&cfg, None).expect("the one test"), 1);
    let (server, result) = serving.join().unwrap();
    result.expect("serve_one returns after its test");

    // Nobody comes: a clear error naming the wait and the last refused connection.
    let waiting =
        thread::spawn(move || server.serve_one(Duration::from_secs(2), &AtomicBool::new(false)));
    let mut stranger = TcpStream::connect(addr).unwrap();
    stranger
        .write_all(b"\x16\x03\x01 not a netbench hello")
        .unwrap();
    let started = Instant::now();
    let err = waiting.join().unwrap().expect_err("no test arrived");
    assert!(started.elapsed() < Duration::from_secs(10));
    let text = err.to_string();
    assert!(
        matches!(err, TcpError::NoTest { .. })
            && text.contains("no client started a test within 2 s"),
        "{text}"
    );
    assert!(
        text.contains("last refused connection: 127.0.0.1:"),
        "{text}"
    );
}
