//! The request/response engines (tcp-rr, tcp-crr, udp-rr) and the stream test's latency probe
//! over real loopback sockets, against the real server (in process) and against peers of the
//! test's own that drop, garble or misnumber what they send back. Counts must add up exactly,
//! every report must validate, histograms must merge exactly, and no peer may make the client
//! stall or panic. No root and no external program: the fast tier.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use loadgen::rr::client;
use loadgen::rr::pace::Pacer;
use loadgen::rr::record::Recorder;
use loadgen::rr::tcp_rr::{self, StreamPlan};
use loadgen::rr::udp::{self, UdpPlan};
use loadgen::rr::RrClientConfig;
use loadgen::tcp::{TcpClientConfig, TcpError};
use protocol::report::histogram::new_latency_histogram;
use protocol::rr::{merge, validate_rr, RrReport};
use protocol::tcp::validate_tcp;
use protocol::Protocol;
use support::{run_ok, LoopbackServer, LOADGEN};

/// A udp-rr answer on loopback takes microseconds, but a test thread starved of CPU on a
/// loaded machine may read it tens of milliseconds late (beyond udp-rr's 100 ms default, now
/// and then): the loopback tests give udp-rr this long, so only a datagram really lost (never
/// answered) counts as lost, and "nothing lost" stays exact.
const LOOPBACK_UDP_TIMEOUT: Duration = Duration::from_secs(5);

fn config(server: &LoopbackServer, protocol: Protocol, secs: f64) -> RrClientConfig {
    let defaults = RrClientConfig::new(protocol, "127.0.0.1");
    RrClientConfig {
        port: server.addr.port(),
        duration: Duration::from_secs_f64(secs),
        timeout: if protocol == Protocol::UdpRr {
            LOOPBACK_UDP_TIMEOUT
        } else {
            defaults.timeout
        },
        ..defaults
    }
}

/// A run of `protocol` for `secs` against a loopback server of its own, configured as `tweak`
/// makes it of [`config`]'s, that keeps [`assert_clean`]'s invariants.
fn clean_run(
    protocol: Protocol,
    secs: f64,
    tweak: impl FnOnce(RrClientConfig) -> RrClientConfig,
) -> RrReport {
    let server = LoopbackServer::start();
    let cfg = tweak(config(&server, protocol, secs));
    let r = client::run(&cfg, None).unwrap();
    assert_clean(&r, cfg.streams);
    r
}

/// The invariants every clean loopback run must keep.
fn assert_clean(r: &RrReport, streams: u32) {
    let h = validate_rr(r).unwrap_or_else(|e| panic!("invalid report: {e}\n{r:#?}"));
    let c = &r.counts;
    assert!(c.transactions > 0, "{c:?}");
    assert_eq!(
        c.attempted, c.transactions,
        "nothing may fail on loopback: {c:?}"
    );
    assert_eq!(h.len(), c.transactions);
    assert_eq!(r.per_stream.len(), streams as usize);
    assert!(
        r.per_stream.iter().all(|s| s.transactions > 0),
        "{:?}",
        r.per_stream
    );
    assert!(r.runs[0].server_answered >= c.transactions);
    assert!(r.latency.p50_us >= 1 && r.latency.p50_us <= r.latency.max_us);
    assert!(
        r.cpu.server.total_percent > 0.0,
        "the server's CPU came back"
    );
    assert!(r.cpu_us_per_transaction.is_some());
    assert!(!r.port_exhausted);
}

#[test]
fn tcp_rr_with_a_burst_counts_every_transaction() {
    let r = clean_run(Protocol::TcpRr, 0.5, |c| RrClientConfig {
        streams: 2,
        burst: 3,
        request_size: 100,
        response_size: 2000,
        ..c
    });
    assert_eq!(r.setup.burst, 3);
    assert_eq!(r.loss_percent, None);
    // Every answer the client counted, the server wrote (the drain settles the ones in flight).
    assert_eq!(r.runs[0].server_answered, r.counts.transactions);
}

#[test]
fn tcp_crr_makes_one_connection_per_transaction() {
    let r = clean_run(Protocol::TcpCrr, 0.5, |c| RrClientConfig {
        streams: 2,
        response_size: 300,
        ..c
    });
    assert_eq!(r.runs[0].server_answered, r.counts.transactions);
}

#[test]
fn udp_rr_loses_nothing_on_loopback_and_numbers_every_datagram() {
    let r = clean_run(Protocol::UdpRr, 0.5, |c| RrClientConfig {
        streams: 2,
        burst: 1,
        request_size: 32,
        response_size: 64,
        ..c
    });
    let c = &r.counts;
    assert_eq!(
        (c.lost, c.late, c.duplicate, c.invalid),
        (0, 0, 0, 0),
        "{c:?}"
    );
    assert_eq!(r.loss_percent, Some(0.0));
}

#[test]
fn open_loop_sends_at_the_asked_rate() {
    let r = clean_run(Protocol::TcpRr, 1.0, |c| RrClientConfig {
        streams: 2,
        rate_per_stream: Some(200.0),
        ..c
    });
    assert_eq!(r.requested_per_second, Some(400.0));
    // 200 intended send times per stream fall in the second (stream 1's shifted by half an
    // interval): each is sent, or counted as skipped if a starved client fell behind, never
    // more and never left out, however the machine is loaded.
    for s in &r.per_stream {
        assert_eq!(s.skipped.map(|k| s.attempted + k), Some(200), "{s:?}");
    }
    let c = &r.counts;
    eprintln!("{} sent, {} skipped", c.attempted, c.skipped);
    assert_eq!(c.attempted + c.skipped, 400, "{c:?}");
    // Falling behind is said in words too.
    assert_eq!(
        r.warnings().is_empty(),
        c.skipped == 0,
        "{:?}",
        r.warnings()
    );
}

#[test]
fn concurrent_clients_merge_into_exact_sums() {
    let (a_server, b_server) = (LoopbackServer::start(), LoopbackServer::start());
    let (a, b) = thread::scope(|s| {
        let a = s.spawn(|| client::run(&config(&a_server, Protocol::UdpRr, 0.4), None));
        let b = s.spawn(|| client::run(&config(&b_server, Protocol::UdpRr, 0.4), None));
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    let m = merge(&[a.clone(), b.clone()]).unwrap();
    validate_rr(&m).unwrap();
    let mut both = new_latency_histogram();
    both.add(a.histogram().unwrap()).unwrap();
    both.add(b.histogram().unwrap()).unwrap();
    assert_eq!(m.histogram().unwrap(), both, "merged exactly");
    assert_eq!(
        m.counts.transactions,
        a.counts.transactions + b.counts.transactions
    );
    assert_eq!(
        m.transactions_per_second,
        a.transactions_per_second + b.transactions_per_second
    );
    assert_eq!((m.runs.len(), m.streams), (2, 2));
}

/// A udp-rr peer of the test's own that answers every request but drops every `nth` it
/// receives; returns the socket and, at the end, (requests seen, requests dropped). Once
/// `stop` is set it still serves what is already queued (the client has ended by then, and
/// loopback delivers at send time), so it has seen every request the client sent.
fn dropping_echo(nth: u64, stop: Arc<AtomicBool>) -> (UdpSocket, thread::JoinHandle<(u64, u64)>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let server = sock.try_clone().unwrap();
    let handle = thread::spawn(move || {
        let (mut seen, mut dropped) = (0u64, 0u64);
        let mut buf = [0u8; 2048];
        loop {
            let Ok((n, from)) = server.recv_from(&mut buf) else {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                continue;
            };
            seen += 1;
            if seen % nth == 0 {
                dropped += 1;
                continue;
            }
            server.send_to(&buf[..n], from).unwrap();
        }
        (seen, dropped)
    });
    (sock, handle)
}

/// Datagrams waiting in `sock` (read and counted, without waiting for more).
fn unread(sock: &UdpSocket) -> u64 {
    sock.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 65_536];
    let mut n = 0;
    while sock.recv(&mut buf).is_ok() {
        n += 1;
    }
    n
}

fn udp_plan(window: usize, secs: f64, timeout_ms: u64) -> UdpPlan {
    UdpPlan {
        request_size: 16,
        response_size: 16,
        window,
        deadline: Instant::now() + Duration::from_secs_f64(secs),
        timeout: Duration::from_millis(timeout_ms),
        pacer: Pacer::closed(),
    }
}

fn connected_to(peer: &UdpSocket) -> UdpSocket {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(peer.local_addr().unwrap()).unwrap();
    sock
}

/// A tcp-rr stream's plan of 1-byte requests and answers, each given 2 s.
fn one_byte_plan(window: usize, deadline: Instant, pacer: Pacer) -> StreamPlan {
    StreamPlan {
        request_size: 1,
        response_size: 1,
        window,
        deadline,
        timeout: Duration::from_secs(2),
        pacer,
    }
}

/// A peer of the test's own on 127.0.0.1: `serve` gets its first connection; returns the
/// peer's address and, at the end, what `serve` returned.
fn tcp_peer<T: Send + 'static>(
    serve: impl FnOnce(TcpStream) -> T + Send + 'static,
) -> (std::net::SocketAddr, thread::JoinHandle<T>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = thread::spawn(move || serve(listener.accept().unwrap().0));
    (addr, peer)
}

fn recorder() -> Recorder {
    Recorder::new(Arc::new(AtomicU64::new(0)))
}

#[test]
fn udp_rr_counts_exactly_the_datagrams_a_peer_drops_and_goes_on() {
    for window in [1, 4] {
        let stop = Arc::new(AtomicBool::new(false));
        let (peer, handle) = dropping_echo(10, stop.clone());
        let client = connected_to(&peer);
        let started = Instant::now();
        let out = udp::run_client(&client, udp_plan(window, 1.0, 20), recorder());
        let took = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        let (seen, dropped) = handle.join().unwrap();
        // Answers that came after the client stopped reading (its thread, or the peer's, was
        // kept from a CPU beyond the 20 ms timeout at the very end): in its socket still.
        let unread = unread(&client);
        let c = out.counts;
        eprintln!("window {window}: {c:?}, dropped {dropped}, unread {unread}, took {took:?}");
        assert_eq!(seen, c.attempted, "the peer saw every request: {c:?}");
        assert_eq!(dropped, seen / 10, "the peer drops every 10th");
        // A request is lost exactly when the peer dropped it, or answered it so late (the
        // peer or the client waited for a CPU; only a loaded machine does that) that its
        // time was up: that answer is counted late if it came while the client listened, and
        // is still unread if it came after. However the machine is loaded, these add up.
        assert_eq!(
            c.lost,
            dropped + c.late + unread,
            "window {window}: lost = dropped + late + unread ({unread}): {c:?}"
        );
        assert_eq!(c.transactions + c.lost, c.attempted, "{c:?}");
        assert_eq!((c.duplicate, c.invalid), (0, 0), "{c:?}");
        // netperf's UDP_RR would stop at the first loss; this goes on: each loss costs its
        // slot one timeout. A client whose slots stalled at their first loss would lose at
        // most one request per slot.
        assert!(
            dropped > 2 * window as u64,
            "window {window}: stalled after a loss? {c:?}"
        );
        // It ends at the deadline plus one timeout for what is in flight (a client stalled
        // by a loss would not end at all; the bound leaves room for a loaded machine).
        assert!(took < Duration::from_secs(10), "took {took:?}");
        assert_eq!(out.hist.len(), c.transactions);
    }
}

#[test]
fn a_udp_peer_answering_wrong_numbers_and_sizes_is_counted_not_trusted() {
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    // Returns how many datagrams it sent back.
    let garbler = {
        let peer = peer.try_clone().unwrap();
        thread::spawn(move || {
            let mut buf = [0u8; 64];
            let mut i = 0u64;
            let mut sent = 0u64;
            while !flag.load(Ordering::Relaxed) {
                let Ok((n, from)) = peer.recv_from(&mut buf) else {
                    continue;
                };
                i += 1;
                let mut answer = buf[..n].to_vec();
                match i % 3 {
                    // A sequence number never sent.
                    0 => answer[..8].copy_from_slice(&(u64::MAX - i).to_be_bytes()),
                    // Garbage of the wrong size.
                    1 => answer = vec![0xff; 3],
                    // A huge datagram.
                    _ => answer = vec![7; 9000],
                }
                if peer.send_to(&answer, from).is_ok() {
                    sent += 1;
                }
            }
            sent
        })
    };
    let client = connected_to(&peer);
    let started = Instant::now();
    let out = udp::run_client(&client, udp_plan(2, 0.3, 10), recorder());
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let garbage = garbler.join().unwrap();
    // What the garbler sent after the client stopped reading (it may lag behind on a loaded
    // machine) is still in the client's socket: loopback delivers at send time.
    let unread = unread(&client);
    let c = out.counts;
    assert_eq!(c.transactions, 0, "{c:?}");
    assert_eq!(c.lost, c.attempted, "{c:?}");
    assert_eq!(
        c.invalid + unread,
        garbage,
        "every garbage datagram read is invalid: {c:?}"
    );
    assert!(c.invalid > 0, "{c:?}");
    // Every request is lost (its answers are garbage), and each slot goes on after each
    // loss: a client whose two slots stalled at their first loss would attempt 2.
    assert!(c.attempted > 4, "went on after each loss: {c:?}");
    // 0.3 s and one 10 ms timeout (the bound leaves room for a loaded machine).
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_tcp_peer_sending_more_than_asked_ends_the_stream_with_a_reason() {
    let (addr, peer) = tcp_peer(|mut conn| {
        let mut buf = [0u8; 1];
        // Answers the first request with three responses' worth of bytes.
        conn.read_exact(&mut buf).unwrap();
        conn.write_all(b"rrr").unwrap();
        let mut rest = Vec::new();
        let _ = conn.read_to_end(&mut rest);
    });
    let plan = one_byte_plan(1, Instant::now() + Duration::from_secs(2), Pacer::closed());
    let out = tcp_rr::run_client(TcpStream::connect(addr).unwrap(), plan, recorder());
    peer.join().unwrap();
    let e = out.error.expect("a reason");
    assert!(e.contains("nobody asked for"), "{e}");
    assert_eq!(
        out.counts.transactions + out.counts.checked_failed().unwrap(),
        out.counts.attempted
    );
}

#[test]
fn open_loop_latency_counts_from_the_intended_send_time() {
    // A peer that stalls 60 ms once, at its 5th request: in open loop at 500/s (one every
    // 2 ms) the requests due during the stall wait too, and their latency says so; a closed
    // loop would have measured one slow request only.
    let (addr, peer) = tcp_peer(|mut conn| {
        conn.set_nodelay(true).unwrap();
        let mut buf = [0u8; 1];
        let mut n = 0;
        while conn.read_exact(&mut buf).is_ok() {
            n += 1;
            if n == 5 {
                thread::sleep(Duration::from_millis(60));
            }
            if conn.write_all(b"r").is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    let plan = one_byte_plan(
        1,
        start + Duration::from_millis(300),
        Pacer::open(start, 500.0, 0.0),
    );
    let out = tcp_rr::run_client(TcpStream::connect(addr).unwrap(), plan, recorder());
    peer.join().unwrap();
    // 150 intended send times in the 300 ms: each answered, or skipped if the stream (whose
    // one slot waits out the stall, and which a loaded machine may starve) had not caught up
    // by the end.
    let c = out.counts;
    let slow = out.hist.count_between(20_000, 1_000_000);
    eprintln!("{c:?}, {slow} saw the stall");
    assert_eq!(c.transactions, c.attempted, "{c:?}");
    assert_eq!(c.attempted + c.skipped, 150, "{c:?}");
    assert!(slow >= 10, "only {slow} transactions saw the stall: {c:?}");
}

#[test]
fn an_open_loop_never_sends_ahead_of_its_schedule() {
    // A peer that notes when each 1-byte request arrives. At 500/s from `start`, request k is
    // intended at start + k x 2 ms: a loaded machine may send it late, nothing may send it
    // earlier (a closed loop, or a pacer running fast, would); and what was not sent by the
    // end of the 200 ms is counted as skipped, so sent + skipped is the schedule.
    let (addr, peer) = tcp_peer(|mut conn| {
        conn.set_nodelay(true).unwrap();
        let mut arrivals = Vec::new();
        let mut buf = [0u8; 1];
        while conn.read_exact(&mut buf).is_ok() {
            arrivals.push(Instant::now());
            if conn.write_all(b"r").is_err() {
                break;
            }
        }
        arrivals
    });
    let conn = TcpStream::connect(addr).unwrap();
    let start = Instant::now();
    let plan = one_byte_plan(
        4,
        start + Duration::from_millis(200),
        Pacer::open(start, 500.0, 0.0),
    );
    let out = tcp_rr::run_client(conn, plan, recorder());
    let arrivals = peer.join().unwrap();
    let c = out.counts;
    eprintln!("{c:?}");
    assert_eq!(c.attempted + c.skipped, 100, "{c:?}");
    assert_eq!(arrivals.len() as u64, c.attempted, "{c:?}");
    assert_eq!(c.transactions, c.attempted, "{c:?}");
    for (k, at) in (0u64..).zip(&arrivals) {
        let intended = start + Duration::from_millis(2 * k);
        assert!(
            *at >= intended,
            "request {k} arrived {:?} before its intended time",
            intended - *at
        );
    }
}

#[test]
fn an_open_loop_behind_its_schedule_at_the_end_counts_what_it_skipped() {
    // A peer that holds its first answer until 100 ms after the end of a 200 ms window at
    // 1000/s: the stream's one slot waits, so the other 199 intended sends never go out. They
    // are skipped, not silently left out: sent + skipped is the schedule, exactly.
    let start = Instant::now();
    let deadline = start + Duration::from_millis(200);
    let (addr, peer) = tcp_peer(move |mut conn| {
        conn.set_nodelay(true).unwrap();
        let mut buf = [0u8; 1];
        let mut first = true;
        while conn.read_exact(&mut buf).is_ok() {
            if first {
                let until = deadline + Duration::from_millis(100);
                thread::sleep(until.saturating_duration_since(Instant::now()));
                first = false;
            }
            if conn.write_all(b"r").is_err() {
                break;
            }
        }
    });
    let plan = one_byte_plan(1, deadline, Pacer::open(start, 1000.0, 0.5));
    let out = tcp_rr::run_client(TcpStream::connect(addr).unwrap(), plan, recorder());
    peer.join().unwrap();
    let c = out.counts;
    assert_eq!(c.attempted + c.skipped, 200, "{c:?}");
    // (None at all only if the client got no CPU for the whole window.)
    assert!(
        c.attempted <= 1,
        "the first request waited out the window: {c:?}"
    );
    assert_eq!(
        c.transactions, c.attempted,
        "answered within the timeout: {c:?}"
    );
    assert!(c.skipped >= 199, "{c:?}");
}

#[test]
fn a_crr_test_tells_another_client_the_server_is_busy() {
    let server = LoopbackServer::start();
    let cfg = config(&server, Protocol::TcpCrr, 1.0);
    let crr = thread::spawn(move || client::run(&cfg, None));
    // While the tcp-crr test runs, every connection to the port is a transaction unless it
    // starts with a control frame: a second client's test request is told "busy".
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut told = None;
    while Instant::now() < deadline && told.is_none() {
        thread::sleep(Duration::from_millis(100));
        let mut other = RrClientConfig::new(Protocol::TcpRr, "127.0.0.1");
        other.port = server.addr.port();
        other.duration = Duration::from_millis(100);
        match client::run(&other, None) {
            Err(TcpError::Rejected(m)) if m.contains("busy") => told = Some(m),
            // The crr test had not started yet: this one ran first.
            _ => {}
        }
    }
    let r = crr.join().unwrap().unwrap();
    assert!(told.is_some(), "no busy answer while the crr test ran");
    assert_clean(&r, 1);
}

#[test]
fn a_stream_test_carries_its_latency_probe() {
    let server = LoopbackServer::start();
    let cfg = TcpClientConfig {
        port: server.addr.port(),
        duration: Duration::from_secs(1),
        len: 16 * 1024,
        latency_probe: Some(50.0),
        ..TcpClientConfig::new("127.0.0.1")
    };
    let r = loadgen::tcp::client::run(&cfg, None).unwrap();
    validate_tcp(&r).unwrap();
    let p = r.latency_probe.as_ref().expect("a probe");
    assert_eq!((p.rate, p.request_size, p.response_size), (50.0, 1, 1));
    // 50/s for 1 s, half an interval in: 50 intended requests, each sent or (if a loaded
    // machine starved the probe's thread until the end) skipped.
    eprintln!("probe: {} sent, {} skipped", p.attempted, p.skipped);
    assert_eq!(p.attempted + p.skipped, 50, "{p:?}");
    assert_eq!(p.transactions, p.attempted, "{p:?}");
    assert!(p.latency.p50_us > 0);
    assert!(r.cpu_seconds_per_gb.is_some());
    // Without the flag, no probe and no field.
    let plain = loadgen::tcp::client::run(
        &TcpClientConfig {
            latency_probe: None,
            duration: Duration::from_millis(300),
            ..cfg
        },
        None,
    )
    .unwrap();
    assert!(plain.latency_probe.is_none());
}

#[test]
fn hostile_control_frames_are_refused_quickly() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let peer = thread::spawn(move || {
        for answer in [&[0u8, 0xff, 0xff, 0xff][..], b"\x00\x00\x00\x05hello"] {
            let (mut conn, _) = listener.accept().unwrap();
            let mut hello = [0u8; 4];
            let _ = conn.read_exact(&mut hello);
            let _ = conn.write_all(answer);
        }
    });
    for needle in ["limit", "not JSON"] {
        let mut cfg = RrClientConfig::new(Protocol::UdpRr, "127.0.0.1");
        cfg.port = port;
        let started = Instant::now();
        let e = client::run(&cfg, None).unwrap_err().to_string();
        assert!(e.contains(needle), "{needle:?} not in {e}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    peer.join().unwrap();
}

#[test]
fn the_command_line_prints_text_and_json() {
    let server = LoopbackServer::start();
    let port = server.addr.port().to_string();
    // netbench-loadgen client of this server, with `extra` arguments.
    let client = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(LOADGEN);
        cmd.args(["client", "-c", "127.0.0.1", "-p", &port])
            .args(extra);
        cmd
    };
    let run = |extra: &[&str]| {
        let out = run_ok(client(&["--duration", "300ms"]).args(extra));
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run(&["--protocol", "tcp-rr", "--streams", "2", "--burst", "2"]);
    for needle in [
        "transactions",
        "/s",
        "p50",
        "p90",
        "p99 ",
        "p99.9",
        "max",
        "us/transaction",
    ] {
        assert!(text.contains(needle), "{needle:?} not in {text}");
    }
    // Open loop: the schedule is accounted for in words (100/s for 0.3 s: 30 send times, each
    // sent or skipped, whatever the load).
    let text = run(&["--protocol", "tcp-rr", "--rate", "100"]);
    assert!(
        text.contains("schedule      30 intended sends in the window: "),
        "{text}"
    );
    let json = run(&["--protocol", "udp-rr", "--request-size", "64", "--json"]);
    let r: RrReport = serde_json::from_str(&json).unwrap();
    validate_rr(&r).unwrap();
    assert_eq!(
        (r.setup.mode, r.setup.request_size, r.setup.response_size),
        (Protocol::UdpRr, 64, 64)
    );
    // A flag of another protocol is refused before anything runs.
    let out = client(&["--protocol", "tcp-crr", "--bidir"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--bidir applies to tcp-stream and udp-stream only"),
        "{stderr}"
    );
}

#[test]
fn a_udp_port_taken_by_someone_else_is_a_refusal_not_a_failed_test() {
    let server = LoopbackServer::start();
    // Someone else holds the server's port number over UDP.
    let squatter = UdpSocket::bind(server.addr).unwrap();
    let cfg = config(&server, Protocol::UdpRr, 0.3);
    let started = Instant::now();
    match client::run(&cfg, None) {
        Err(TcpError::Rejected(m)) => assert!(m.contains("binding UDP port"), "{m}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(squatter);
    // The server carries on and serves the next test.
    assert_clean(&client::run(&cfg, None).unwrap(), 1);
}
