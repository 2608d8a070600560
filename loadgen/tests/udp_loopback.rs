//! The udp-stream engine over real loopback sockets against the common server (in process):
//! reports whose counts add up and that pass the operator's validation, both directions,
//! progress, worker mode against a recording operator, and a server fed hand-crafted datagrams
//! (gaps, swaps, repeats, garbage, truncated and foreign datagrams) that must count them
//! exactly. No root, no external programs: part of the fast tier.

mod support;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use loadgen::tcp::PROTOCOL_VERSION;
use loadgen::udp::client::{self, UdpProgress};
use loadgen::udp::{Pace, UdpClientConfig};
use protocol::tcp::{Direction, Flow};
use protocol::udp::{validate_udp, UdpReport};
use support::{connect_reading_for, operator, run_ok, LoopbackServer};

/// What every real report must satisfy: the operator's checks, and loss-free on loopback.
fn assert_sane(r: &UdpReport, flows: &[Flow]) {
    validate_udp(r).expect("the engine's report passes validation");
    assert_eq!(r.kind, "udp");
    assert_eq!(
        r.streams.iter().map(|s| s.flow).collect::<Vec<_>>(),
        flows,
        "one stream per flow, in order"
    );
    for s in &r.streams {
        assert!(s.error.is_none(), "stream {} failed: {:?}", s.id, s.error);
        assert!(s.sent.packets > 0, "{s:?}");
        assert_eq!(
            s.received.packets, s.sent.packets,
            "loopback loses nothing: {s:?}"
        );
        assert_eq!(
            (s.lost, s.received.duplicates, s.received.invalid),
            (0, 0, 0)
        );
        assert!(s.jitter_ms.is_some_and(|j| j >= 0.0), "{s:?}");
        assert_eq!(s.received.kernel_drops, Some(0), "{s:?}");
        assert!(
            s.rcvbuf_bytes.is_some_and(|b| b >= 200_000),
            "a large receive buffer: {:?}",
            s.rcvbuf_bytes
        );
    }
    assert!(r.cpu.client.total_percent > 0.0 && r.cpu.server.total_percent > 0.0);
    assert!(r.cpu_seconds_per_gb.is_some());
}

#[test]
fn a_paced_test_sends_its_schedule_and_every_count_adds_up() {
    let server = LoopbackServer::start();
    let cfg = UdpClientConfig {
        streams: 2,
        len: Some(1000),
        pace: Pace::PacketsPerSecond(2000.0),
        ..server.udp_client(1.0)
    };
    let report = client::run(&cfg, None).expect("udp test");
    assert_sane(&report, &[Flow::ClientToServer, Flow::ClientToServer]);
    for s in &report.streams {
        // 2000/s for 1 s: intended times 0, 0.5 ms, ... 999.5 ms, each used or (by a sender
        // that a loaded machine starved of CPU for more than its catch-up burst) skipped.
        assert_eq!(s.sent.packets + s.sent.skipped, 2000, "{:?}", s.sent);
        // Paced, never ahead of the schedule: datagram k goes out no earlier than k x 0.5 ms,
        // so the last one sent no earlier than (packets - 1) x 0.5 ms after the start (a
        // sender that ignored its schedule would be done in a few milliseconds). Late is
        // possible, early is not, whatever the load.
        let earliest_last = (s.sent.packets - 1) as f64 / 2000.0;
        let last = s.sent.last_send_seconds.expect("the last send's time");
        assert!(
            last >= earliest_last - 1e-6,
            "the last datagram went out at {last} s, before its intended {earliest_last} s: {:?}",
            s.sent
        );
        assert_eq!(s.received.bytes, s.received.packets * 1000);
        // Rates over the test's window (1 s, or up to a late last send), not up to the last
        // send or arrival (which would make 2000 datagrams sent by 0.9995 s read as more than
        // 2000/s); both ends over the same window.
        assert_eq!(s.sent.seconds, last.max(1.0), "{:?}", s.sent);
        assert_eq!(s.received.seconds, s.sent.seconds);
        assert_eq!(
            s.sent.packets_per_second,
            s.sent.packets as f64 / s.sent.seconds
        );
        assert!(s.sent.packets_per_second <= 2000.0 + 1e-9, "{:?}", s.sent);
    }
    let offered = report.offered.expect("paced");
    assert_eq!(offered.packets_per_second, 4000.0);
    assert_eq!(offered.bits_per_second, 4000.0 * 1000.0 * 8.0);
    assert_eq!(report.runs[0].len, 1000);
}

#[test]
fn reverse_and_both_directions_with_progress() {
    let server = LoopbackServer::start();
    let mut updates: Vec<UdpProgress> = Vec::new();
    let cfg = UdpClientConfig {
        direction: Direction::Receive,
        pace: Pace::Bitrate(20e6),
        ..server.udp_client(2.5)
    };
    let report = client::run(&cfg, Some(&mut |p: &UdpProgress| updates.push(*p))).unwrap();
    assert_sane(&report, &[Flow::ServerToClient]);
    // Two full seconds inside a 2.5 s test, with the receiver's loss.
    assert_eq!(updates.len(), 2, "{updates:?}");
    let skipped: u64 = report.streams.iter().map(|s| s.sent.skipped).sum();
    let mut before = (0.0, 0u64);
    for u in &updates {
        // Each interval's rate is the bytes received since the last snapshot over the time
        // since it, exactly (whenever a loaded machine let the snapshot be taken).
        let want = (u.bytes - before.1) as f64 * 8.0 / (u.elapsed_secs - before.0);
        assert!(
            (u.interval_bits_per_second / want - 1.0).abs() < 1e-3,
            "{u:?}: {want} bit/s"
        );
        before = (u.elapsed_secs, u.bytes);
        assert!(
            u.interval_loss_percent.is_some(),
            "the client receives: {u:?}"
        );
        // Paced at 20 Mbit/s: never much more (a catch-up burst, or a backlog the receiving
        // thread read late, is a few hundred kbit). About that much when the sender kept its
        // schedule; a sender starved of CPU skips send times (counted in the report), and
        // then an interval carries less.
        assert!(u.interval_bits_per_second < 25e6, "{u:?}");
        if skipped == 0 && u.interval_loss_percent == Some(0.0) {
            assert!(u.interval_bits_per_second > 15e6, "{u:?}");
        }
    }
    // The default length: the largest datagram of a 1500-byte MTU (loopback's is larger).
    assert_eq!(report.runs[0].len, 1472);

    // Both ways, with the receive buffer asked for (iperf3 -w): granted on both ends.
    let both = UdpClientConfig {
        direction: Direction::Both,
        streams: 2,
        pace: Pace::Bitrate(5e6),
        rcvbuf: Some(300_000),
        ..server.udp_client(0.5)
    };
    let report = client::run(&both, None).unwrap();
    for s in &report.streams {
        assert_eq!(
            s.rcvbuf_bytes,
            Some(600_000),
            "the kernel doubles it: {s:?}"
        );
    }
    assert_sane(
        &report,
        &[
            Flow::ClientToServer,
            Flow::ClientToServer,
            Flow::ServerToClient,
            Flow::ServerToClient,
        ],
    );
}

#[test]
fn as_fast_as_possible_skips_and_delays_nothing() {
    let server = LoopbackServer::start();
    let cfg = UdpClientConfig {
        pace: Pace::Unlimited,
        len: Some(8000),
        ..server.udp_client(0.5)
    };
    let report = client::run(&cfg, None).unwrap();
    validate_udp(&report).unwrap();
    assert_eq!(report.offered, None);
    assert_eq!((report.sent.late, report.sent.skipped), (0, 0));
    assert!(report.sent.packets > 1000, "{:?}", report.sent);
    // Loopback can lose datagrams here (the sender outruns the receiver); they are counted.
    assert_eq!(report.lost, report.sent.packets - report.received.packets);
    if let Some(drops) = report.received.kernel_drops {
        // Drops are part of the loss (but for the sender's 3 end markers, which may be dropped).
        assert!(
            drops <= report.lost + 3,
            "{drops} drops, {} lost",
            report.lost
        );
    }
}

// ---------------------------------------------------------------------------------------------
// A hand-made client: the control frames and datagrams written from the format's description,
// so the server's accounting is checked against an independent encoder.

fn frame(conn: &mut TcpStream, body: &serde_json::Value) {
    let body = body.to_string();
    conn.write_all(&u32::try_from(body.len()).unwrap().to_be_bytes())
        .unwrap();
    conn.write_all(body.as_bytes()).unwrap();
}

fn read_frame(conn: &mut TcpStream) -> serde_json::Value {
    let mut len = [0u8; 4];
    conn.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    conn.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}

/// magic "NBUD", version 1, kind, stream, tag, sequence number, send time; zero padding.
fn datagram(kind: u8, stream: u16, tag: u64, seq: u64, sent_ns: u64, len: usize) -> Vec<u8> {
    let mut d = b"NBUD".to_vec();
    d.push(1);
    d.push(kind);
    d.extend_from_slice(&stream.to_be_bytes());
    d.extend_from_slice(&tag.to_be_bytes());
    d.extend_from_slice(&seq.to_be_bytes());
    d.extend_from_slice(&sent_ns.to_be_bytes());
    d.resize(len.max(32), 0);
    d
}

fn hello(test: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "type": "hello", "magic": "netbench-tcp", "version": PROTOCOL_VERSION, "cookie": "c0ffee",
        "test": test,
    })
}

fn udp_test(len: usize, pps: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "protocol": "udp-stream", "streams": 1, "duration_ms": 300, "len": len,
        "direction": "send", "udp": {"packets_per_second": pps},
    })
}

#[test]
fn the_server_counts_crafted_datagrams_exactly() {
    let server = LoopbackServer::start();
    let mut control = connect_reading_for(server.addr, 10);
    const LEN: usize = 100;
    frame(&mut control, &hello(udp_test(LEN, serde_json::Value::Null)));
    assert_eq!(read_frame(&mut control)["type"], "accept");
    let tag = fnv1a("c0ffee");
    // Strangers on the port before the streams open: garbage, another test's open, a stream
    // this test does not have. Ignored; the test opens as usual.
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    stranger.connect(server.addr).unwrap();
    stranger.send(b"\x00\x01garbage").unwrap();
    stranger
        .send(&datagram(1, 0, tag ^ 0xff, 0, 0, 32))
        .unwrap();
    stranger.send(&datagram(1, 7, tag, 0, 0, 32)).unwrap();
    // A valid open of stream 0 (the tag can be seen on the wire) from another host than the
    // control connection's: queued before the client's own, it must not point the stream at
    // that host (the data below would then never be counted).
    let spoofer = UdpSocket::bind("127.0.0.2:0").unwrap();
    spoofer.connect(server.addr).unwrap();
    spoofer.send(&datagram(1, 0, tag, 0, 0, 32)).unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(server.addr).unwrap();
    // The open datagram may be lost: send it until the server starts the test.
    control
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let start = loop {
        sock.send(&datagram(1, 0, tag, 0, 0, 32)).unwrap();
        let mut len = [0u8; 4];
        if control.read_exact(&mut len).is_ok() {
            let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
            control.read_exact(&mut body).unwrap();
            break serde_json::from_slice::<serde_json::Value>(&body).unwrap();
        }
        assert!(Instant::now() < deadline, "no start");
    };
    assert_eq!(start["type"], "start");
    control
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();

    let ms = 1_000_000u64;
    let data = |seq: u64| datagram(0, 0, tag, seq, seq * ms, LEN);
    // Sent 0..=9 (as far as the server can tell): 4 and 8 lost, 2/3 and 6/7 swapped, 5 and 1
    // repeated; among them every kind of datagram that is not this stream's data.
    let mut wrong_magic = data(3);
    wrong_magic[0] = b'X';
    let sequence: Vec<Vec<u8>> = vec![
        data(0),
        data(1),
        data(3),
        b"garbage".to_vec(),
        data(2),
        data(5),
        data(5),
        wrong_magic,
        data(9)[..LEN - 1].to_vec(),        // truncated
        data(9)[..20].to_vec(),             // shorter than a header
        datagram(0, 0, tag ^ 1, 9, 0, LEN), // another test's
        datagram(0, 1, tag, 9, 0, LEN),     // a stream this test does not have
        datagram(1, 0, tag, 0, 0, 32),      // a late open: harmless, not counted
        data(7),
        data(6),
        data(9),
        data(1),
    ];
    for d in &sequence {
        sock.send(d).unwrap();
        // Keep the arrival order on loopback (and the receiver is never overrun).
        thread::sleep(Duration::from_millis(2));
    }
    sock.send(&datagram(2, 0, tag, 10, 10 * ms, 32)).unwrap();
    let results = read_frame(&mut control);
    assert_eq!(results["type"], "udp_results", "{results}");
    let received = &results["streams"][0]["received"];
    assert_eq!(received["packets"], 8, "{results}");
    assert_eq!(received["bytes"], 8 * LEN as u64);
    assert_eq!(received["out_of_order"], 2);
    assert_eq!(received["duplicates"], 2);
    assert_eq!(received["invalid"], 6, "{results}");
    assert_eq!(received["kernel_drops"], 0);
    assert!(results["streams"][0]["jitter_ms"].as_f64().is_some());
    assert!(results["cpu_seconds"].as_f64().is_some_and(|s| s >= 0.0));
    // The server carries on with the next test.
    drop(control);
    let report = client::run(&server.udp_client(0.3), None).unwrap();
    assert_sane(&report, &[Flow::ClientToServer]);
}

#[test]
fn impossible_requests_and_oversized_frames_are_refused_and_the_server_carries_on() {
    let server = LoopbackServer::start();
    let refused = |test: serde_json::Value, needle: &str| {
        let mut conn = connect_reading_for(server.addr, 10);
        frame(&mut conn, &hello(test));
        let reply = read_frame(&mut conn);
        assert_eq!(reply["type"], "error", "{reply}");
        let msg = reply["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{needle:?} not in {msg}");
    };
    refused(udp_test(65_508, serde_json::Value::Null), "32..=65507");
    refused(udp_test(8, serde_json::Value::Null), "got 8");
    refused(udp_test(1000, serde_json::json!(1e12)), "datagrams/s");
    refused(udp_test(1000, serde_json::json!(-5.0)), "0.001..=");
    let mut no_params = udp_test(1000, serde_json::Value::Null);
    no_params.as_object_mut().unwrap().remove("udp");
    refused(no_params, "no udp parameters");
    let mut tiny_buffer = udp_test(1000, serde_json::Value::Null);
    tiny_buffer["udp"]["rcvbuf"] = 1.into();
    refused(tiny_buffer, "receive buffer");
    // A frame announcing 16 MiB - 1 of body: refused by its length, nothing allocated for it.
    let mut conn = connect_reading_for(server.addr, 10);
    conn.write_all(&[0x00, 0xff, 0xff, 0xff]).unwrap();
    conn.write_all(b"{\"type\":").unwrap();
    let reply = read_frame(&mut conn);
    assert_eq!(reply["type"], "error", "{reply}");
    assert!(
        reply["message"]
            .as_str()
            .unwrap()
            .contains("16777215 bytes"),
        "{reply}"
    );
    let report = client::run(&server.udp_client(0.3), None).unwrap();
    assert_sane(&report, &[Flow::ClientToServer]);
}

#[test]
fn a_client_that_never_opens_its_streams_is_told_why() {
    let server = LoopbackServer::start();
    let mut control = connect_reading_for(server.addr, 30);
    frame(&mut control, &hello(udp_test(100, serde_json::json!(10.0))));
    assert_eq!(read_frame(&mut control)["type"], "accept");
    // No open datagram: after the server's wait, an error naming the udp port.
    let reply = read_frame(&mut control);
    assert_eq!(reply["type"], "error", "{reply}");
    let msg = reply["message"].as_str().unwrap();
    assert!(
        msg.contains("0 of 1 udp streams") && msg.contains(&server.addr.port().to_string()),
        "{msg}"
    );
}

// ---------------------------------------------------------------------------------------------
// Worker mode against a recording operator.

#[derive(Default)]
struct Recorded {
    paths: Vec<String>,
    progress: Vec<serde_json::Value>,
    report: Option<serde_json::Value>,
}

/// An operator that answers every worker request (released barrier naming `server`) and
/// records what arrives, until the final report.
fn recording_operator(server: String) -> (String, Arc<Mutex<Recorded>>, JoinHandle<()>) {
    let (listener, url) = operator::listen();
    let recorded = Arc::new(Mutex::new(Recorded::default()));
    let rec = recorded.clone();
    let handle = thread::spawn(move || loop {
        let (conn, path, body) = operator::accept_request(&listener);
        let (status, answer) = operator::run_answer(&path, &server);
        let _ = operator::respond(conn, status, &answer);
        let mut r = rec.lock().unwrap();
        r.paths.push(path.clone());
        let body: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
        if path.ends_with("/progress") {
            r.progress.extend(body);
        } else if path.ends_with("/report") {
            r.report = body;
            return;
        }
    });
    (url, recorded, handle)
}

#[test]
fn a_worker_pushes_progress_with_loss_and_delivers_a_valid_report() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        client: loadgen::tcp::cli::ClientArgs,
    }
    let server = LoopbackServer::start();
    let (url, recorded, operator) = recording_operator(server.addr.to_string());
    let worker = loadgen::worker::WorkerClient::new(loadgen::worker::WorkerEnv {
        operator_url: url,
        run: "run-1".into(),
        credential: loadgen::worker::Credential::Token("t".into()),
        worker: "w0".into(),
        node: Some("node-1".into()),
        step: 0,
    });
    // No -c: the server comes from the barrier.
    let args = Cli::try_parse_from(["x", "-u", "-R", "-b", "10M", "-t", "2.5", "-J"])
        .unwrap()
        .client;
    let report =
        loadgen::worker::tcp::run_client_worker(&args, &worker, &loadgen::udp::cli::CLIENT)
            .expect("worker run");
    operator.join().unwrap();
    let recorded = recorded.lock().unwrap();
    assert_eq!(
        recorded.paths.first().map(String::as_str),
        Some("/v1/runs/run-1/register")
    );
    assert_eq!(recorded.progress.len(), 2, "{:?}", recorded.progress);
    for p in &recorded.progress {
        assert!(p["bitsPerSecond"].as_f64().unwrap() > 5e6, "{p}");
        assert!(
            p["lossPercent"].as_f64().is_some(),
            "the worker receives: {p}"
        );
    }
    let delivered = recorded.report.clone().expect("the final report");
    let final_report: protocol::worker::FinalReport = serde_json::from_value(delivered).unwrap();
    match protocol::worker::validate_final(&final_report, protocol::ReportKind::Udp) {
        Ok(protocol::worker::CheckedReport::Udp(r)) => {
            assert_eq!(
                (r.sent.packets, r.received.packets, r.lost),
                (report.sent.packets, report.received.packets, report.lost)
            );
        }
        other => panic!("the operator's checks refuse it: {other:?}"),
    }
    assert_eq!(report.runs[0].server, server.addr.to_string());
}

// ---------------------------------------------------------------------------------------------
// The command line.

#[test]
fn the_command_line_runs_tests_prints_iperf3_style_lines_and_merges_reports() {
    let server = LoopbackServer::start();
    let port = server.addr.port().to_string();
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_netbench-loadgen"))
            .args(["client", "-u", "-c", "127.0.0.1", "-p", &port, "-t", "0.5"])
            .args(extra)
            .output()
            .expect("running netbench-loadgen");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run(&["-b", "2M", "-l", "500"]);
    for needle in [
        "Lost/Total Datagrams",
        " sender",
        " receiver",
        "Offered 2.00 Mbit/s",
    ] {
        assert!(text.contains(needle), "{needle:?} not in\n{text}");
    }
    let dir = std::env::temp_dir().join(format!("nb-udp-merge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files: Vec<_> = [["--pps", "200"], ["-b", "1M"]]
        .iter()
        .enumerate()
        .map(|(i, rate)| {
            let json = run(&[rate[0], rate[1], "-J"]);
            let report: UdpReport = serde_json::from_str(&json).unwrap();
            validate_udp(&report).unwrap();
            let path = dir.join(format!("{i}.json"));
            std::fs::write(&path, json).unwrap();
            (path, report)
        })
        .collect();
    let out = run_ok(
        std::process::Command::new(env!("CARGO_BIN_EXE_netbench-loadgen"))
            .arg("merge")
            .args(files.iter().map(|(p, _)| p)),
    );
    let merged: UdpReport = serde_json::from_slice(&out.stdout).unwrap();
    validate_udp(&merged).unwrap();
    assert_eq!(merged.runs.len(), 2);
    assert_eq!(
        merged.sent.packets,
        files[0].1.sent.packets + files[1].1.sent.packets
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // The udp flags mean nothing to another protocol: refused, not ignored.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_netbench-loadgen"))
        .args(["client", "-c", "127.0.0.1", "-p", &port, "-b", "1M"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("udp-stream (-u) only"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
