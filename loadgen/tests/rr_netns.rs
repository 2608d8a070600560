//! The request/response engines on the veth and vxlan paths of namespaces this test builds
//! (tests/netns/topology.sh), with delay and loss added to one device inside them: netem when
//! the kernel has it, else the nfqueue stand-in of test-support's impair.rs (same packets, same
//! effect; the run says which). tcp-rr's median must move by exactly the added delay, udp-rr
//! must report the configured loss and never stall, and tcp-crr must say when it ran out of
//! local ports instead of quietly slowing down.
// Needs root (network namespaces, iptables/tc inside them): the full tier only,
// `cargo test --features system-tests`.
#![cfg(feature = "system-tests")]

mod support;

use std::time::{Duration, Instant};

use protocol::rr::{validate_rr, RrCounts, RrReport};
use protocol::Protocol;
use support::*;
use test_support::impair::{Impairment, Spec};

const PORT: &str = "5211";

/// The server in namespace B.
fn server(topo: &Topology) -> Server {
    loadgen_server(Some(&topo.ns_b), PORT.parse().unwrap())
}

/// Runs `client --protocol ...` in namespace A against `host`; the report must validate.
fn rr(topo: &Topology, host: &str, protocol: Protocol, extra: &[&str]) -> RrReport {
    rr_by(loadgen, topo, host, protocol, extra)
}

/// [`rr`] with `run` starting the client (at normal or real-time priority).
fn rr_by(
    run: fn(&str, &[&str]) -> (bool, String, String),
    topo: &Topology,
    host: &str,
    protocol: Protocol,
    extra: &[&str],
) -> RrReport {
    let mut args = vec![
        "client",
        "-c",
        host,
        "-p",
        PORT,
        "--protocol",
        protocol.as_str(),
        "--json",
    ];
    args.extend_from_slice(extra);
    let (ok, stdout, stderr) = run(&topo.ns_a, &args);
    assert!(ok, "{args:?} failed: {stderr}\n{stdout}");
    let report: RrReport = serde_json::from_str(&stdout).expect("an rr report on stdout");
    validate_rr(&report).unwrap_or_else(|e| panic!("invalid report: {e}"));
    report
}

#[test]
fn every_request_response_test_runs_over_veth_and_vxlan() {
    require(&["ip", "ss"], true);
    let topo = Topology::up(false);
    let _server = server(&topo);
    let _m = measuring();
    // udp-rr: an answer the client reads late because it waited for a CPU (a loaded machine)
    // would count as lost at the 100 ms default; 5 s leaves "nothing lost" exact.
    let udp_timeout = ["--timeout", "5s"];
    for host in [VETH_IP_B, VXLAN_IP_B] {
        for protocol in [Protocol::TcpRr, Protocol::TcpCrr, Protocol::UdpRr] {
            let mut args = vec!["-t", "0.5", "--streams", "2"];
            if protocol == Protocol::UdpRr {
                args.extend(udp_timeout);
            }
            let r = rr(&topo, host, protocol, &args);
            let c = &r.counts;
            assert!(c.transactions > 100, "{host} {protocol}: {c:?}");
            assert_eq!(c.attempted, c.transactions, "{host} {protocol}: {c:?}");
            assert_eq!(r.runs[0].server, format!("{host}:{PORT}"));
        }
    }
}

#[test]
fn an_added_delay_moves_tcp_rr_p50_by_exactly_that_delay() {
    require(&["ip", "ss", "tc", "iptables", "chrt"], true);
    let topo = Topology::up(false);
    // Both ends (and the stand-in, if there is no netem) at real-time priority: on a loaded
    // machine a process of normal priority waits milliseconds for a CPU now and then, and
    // that wait would be measured as latency, more of it in one run than in the next. One
    // stream, closed loop, a few hundred transactions a second: they sleep between packets.
    let _server = loadgen_server_realtime(&topo.ns_b, PORT.parse().unwrap());
    let veth_b = format!("nvb-{}", topo.name);
    let _m = measuring();
    let run = |topo: &Topology| {
        rr_by(
            loadgen_realtime,
            topo,
            VETH_IP_B,
            Protocol::TcpRr,
            &["-t", "2"],
        )
    };
    let one_way = |delay_ms: u64| {
        Impairment::apply(
            &topo.ns_b,
            &veth_b,
            Spec {
                delay: Duration::from_millis(delay_ms),
                loss_percent: 0.0,
            },
        )
    };
    // 1 ms, then 11 ms, one way (B's answers): 10 ms more per round trip. Both runs go
    // through the same mechanism holding every answer, at low packet rates, so its own cost
    // (and, for the stand-in, that of a packet taken out of the queue late) is the same in
    // both and only the added delay differs. What does not cancel is this machine's: a thread
    // that slept longer takes longer to wake (measured with two real-time C threads handing a
    // byte to each other here, under two busy loops: 0-60 us more after 3 ms than after 1 ms,
    // 60-120 us more after 11 ms), and a transaction has four such wake-ups. With real-time
    // ends and 2 ms added (this test's former 1 ms / 3 ms), the median shift was 2021-2141 us
    // in 20 runs under load, outside 5 % in half of them; with 10 ms added it was 10167-10265
    // us, 1.7-2.7 %. The bound is still 5 %: a delay not measured (0), measured twice
    // (20 ms) or from the wrong instant is far outside it. Three pairs, in alternating
    // order, and the median shift: the load of this shared machine drifts between runs.
    const ADDED_US: f64 = 10_000.0;
    let mut shifts = Vec::new();
    let mut mechanism = "";
    for pair in 0..3 {
        let mut p50 = [0u64; 2];
        let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let impairment = one_way(if which == 0 { 1 } else { 11 });
            mechanism = impairment.mechanism();
            let report = run(&topo);
            assert_eq!(report.counts.attempted, report.counts.transactions);
            p50[which] = report.latency.p50_us;
        }
        let shift = p50[1] as f64 - p50[0] as f64;
        eprintln!(
            "{mechanism}: p50 {} us (1 ms one way), {} us (11 ms): shift {shift} us",
            p50[0], p50[1]
        );
        shifts.push(shift);
    }
    shifts.sort_by(f64::total_cmp);
    let shift = shifts[1];
    eprintln!("{mechanism}: median shift {shift} us (expected {ADDED_US} +- 5 %)");
    assert!(
        (shift - ADDED_US).abs() <= ADDED_US * 0.05,
        "{mechanism}: the median moved by {shift} us for an added 10 ms ({shifts:?})"
    );
}

#[test]
fn udp_rr_reports_one_percent_loss_within_a_third_of_a_point_without_stalling() {
    require(&["ip", "ss", "tc", "iptables"], true);
    let topo = Topology::up(false);
    let _server = server(&topo);
    let veth_b = format!("nvb-{}", topo.name);
    let _m = measuring();
    let lossy = Impairment::apply(
        &topo.ns_b,
        &veth_b,
        Spec {
            delay: Duration::ZERO,
            loss_percent: 1.0,
        },
    );
    // 4 streams of 16 in flight. An answer takes microseconds, but on a loaded machine the
    // client or the server may wait for a CPU now and then; 250 ms is far beyond any such
    // wait, so (almost) nothing the path delivered is counted lost, and each real loss costs
    // its slot a quarter of a second. Runs of 4 s until 100 000 requests have a known fate
    // (answered or lost), the accuracy asked: one or two runs on an idle machine, a few more
    // when the client is starved of CPU; never more than 2 minutes.
    const SAMPLES: u64 = 100_000;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut total = RrCounts::default();
    let mut runs = 0u64;
    while total.transactions + total.lost < SAMPLES {
        assert!(
            Instant::now() < deadline,
            "only {} of {SAMPLES} requests measured in 2 minutes ({runs} runs): {total:?}",
            total.transactions + total.lost
        );
        let r = rr(
            &topo,
            VETH_IP_B,
            Protocol::UdpRr,
            &[
                "-t",
                "4",
                "--streams",
                "4",
                "--burst",
                "15",
                "--timeout",
                "250ms",
            ],
        );
        eprintln!(
            "run {runs}: {} answered, {} lost ({:.3} %), {} late, {:.0}/s",
            r.counts.transactions,
            r.counts.lost,
            r.loss_percent.expect("udp-rr reports its loss"),
            r.counts.late,
            r.transactions_per_second,
        );
        // No stall: every stream went on after its losses (a stream that stopped at the first
        // loss of each of its 16 slots would lose 16 at most).
        for s in &r.per_stream {
            assert!(s.failed > 16, "stalled after a loss? {s:?}");
            assert_eq!(s.transactions + s.failed, s.attempted, "{s:?}");
        }
        total = total.checked_add(&r.counts).expect("no overflow");
        runs += 1;
    }
    let loss = total.loss_percent();
    eprintln!(
        "{}: {} answered, {} lost ({loss:.3} %), {} late in {runs} run(s); the stand-in dropped {:?}",
        lossy.mechanism(),
        total.transactions,
        total.lost,
        total.late,
        lossy.dropped()
    );
    assert!((loss - 1.0).abs() <= 0.3, "reported {loss} % for 1 %");
    // The stand-in counts what it dropped: the requests never answered are exactly those
    // (give or take, per run, a dropped packet of the idle control connection or an answer
    // that came after the client stopped listening). Late answers are lost requests answered
    // later, never silently counted as answered.
    if let Some(dropped) = lossy.dropped() {
        let unanswered = total.lost - total.late;
        assert!(
            unanswered.abs_diff(dropped) <= 5 * runs,
            "{unanswered} never answered, {dropped} dropped: {total:?}"
        );
    }
}

#[test]
fn tcp_crr_says_when_it_runs_out_of_local_ports() {
    require(&["ip", "ss", "sysctl"], true);
    let topo = Topology::up(false);
    let _server = server(&topo);
    // Inside namespace A only: 4 local ports for every connection it opens.
    run_ok(std::process::Command::new("ip").args([
        "netns",
        "exec",
        &topo.ns_a,
        "sysctl",
        "-qw",
        "net.ipv4.ip_local_port_range=40000 40003",
    ]));
    let _m = measuring();
    let r = rr(
        &topo,
        VETH_IP_B,
        Protocol::TcpCrr,
        &["-t", "1", "--streams", "8"],
    );
    let c = &r.counts;
    assert!(r.port_exhausted, "{c:?}");
    assert!(c.errors.address_not_available > 0, "{c:?}");
    assert!(
        c.transactions > 0,
        "the free ports still carry transactions: {c:?}"
    );
    assert!(r.warnings()[0].contains("ephemeral ports exhausted"));
    // The text report says it in words.
    let (ok, text, _) = loadgen(
        &topo.ns_a,
        &[
            "client",
            "-c",
            VETH_IP_B,
            "-p",
            PORT,
            "--protocol",
            "tcp-crr",
            "-t",
            "0.5",
            "--streams",
            "8",
        ],
    );
    assert!(ok, "{text}");
    assert!(
        text.contains("WARNING: ephemeral ports exhausted"),
        "{text}"
    );
}

/// `nft` in namespace `ns` with `args` (each one argument, no shell).
fn nft(ns: &str, args: &[&str]) -> std::process::Output {
    run_ok(in_ns(Some(ns), "nft").args(args))
}

/// Drops `per_mille` of the UDP datagrams to `port` arriving in `ns` (the requests), at random
/// (`numgen random`: this kernel has no netem), and counts them; returns the rule's count.
fn drop_udp_requests<'a>(ns: &'a str, port: &str, per_mille: u32) -> impl Fn() -> u64 + 'a {
    nft(ns, &["add", "table", "inet", "nbrrdrop"]);
    let chain = "{ type filter hook input priority 0; policy accept; }";
    nft(ns, &["add", "chain", "inet", "nbrrdrop", "input", chain]);
    let share = per_mille.to_string();
    nft(
        ns,
        &[
            "add", "rule", "inet", "nbrrdrop", "input", "udp", "dport", port, "numgen", "random",
            "mod", "1000", "<", &share, "counter", "drop",
        ],
    );
    move || {
        let out = nft(ns, &["-j", "list", "table", "inet", "nbrrdrop"]);
        nft_counter_packets(&out.stdout).expect("the drop rule's counter")
    }
}

#[test]
fn udp_rr_at_a_rate_keeps_its_schedule_through_two_percent_loss() {
    require(&["ip", "ss", "nft"], true);
    let topo = Topology::up(false);
    let _server = server(&topo);
    let _m = measuring();
    // The user's command, default flags (no --burst, the default timeout): 2000 requests a
    // second for 5 s, 10 000 scheduled. With one request in flight, each of the ~200 losses
    // held the stream for a whole timeout: half the schedule was skipped and the p50 was the
    // backlog (1.26 s); with the open loop's window the schedule goes out whatever is lost.
    let args = ["--rate", "2000", "-t", "5"];
    let clean = rr(&topo, VETH_IP_B, Protocol::UdpRr, &args);
    let dropped = drop_udp_requests(&topo.ns_b, PORT, 20);
    let lossy = rr(&topo, VETH_IP_B, Protocol::UdpRr, &args);
    let dropped = dropped();
    for (name, r) in [("clean", &clean), ("2 % dropped", &lossy)] {
        let c = &r.counts;
        eprintln!(
            "{name}: {} of {} scheduled sent ({} skipped), {} answered, {} lost ({:.3} %), {} late, \
             {:.0}/s, p50 {} us, p99 {} us, up to {:?} in flight",
            c.attempted,
            c.attempted + c.skipped,
            c.skipped,
            c.transactions,
            c.lost,
            r.loss_percent.unwrap_or(f64::NAN),
            c.late,
            r.transactions_per_second,
            r.latency.p50_us,
            r.latency.p99_us,
            r.setup.max_in_flight,
        );
        let scheduled = c.attempted + c.skipped;
        assert!((9_999..=10_001).contains(&scheduled), "{name}: {c:?}");
        assert!(
            c.skipped * 20 <= scheduled,
            "{name}: {} of {scheduled} skipped: the stream stalled on losses? {c:?}",
            c.skipped
        );
        assert_eq!(r.setup.max_in_flight, Some(401), "2000/s x 2 x 100 ms + 1");
    }
    eprintln!("the rule dropped {dropped} requests");
    let loss = lossy.loss_percent.expect("udp-rr reports its loss");
    assert!((loss - 2.0).abs() <= 0.6, "reported {loss} % for 2 %");
    // Every request the rule dropped was lost (and never answered late); a few more may be
    // lost to this machine's load (an answer read after the timeout), never fewer.
    let unanswered = lossy.counts.lost - lossy.counts.late;
    assert!(
        unanswered >= dropped && unanswered <= dropped + 20,
        "{unanswered} never answered, {dropped} dropped"
    );
    let (p50_clean, p50_lossy) = (clean.latency.p50_us, lossy.latency.p50_us);
    assert!(
        p50_lossy <= 2 * p50_clean.max(1),
        "p50 {p50_lossy} us with 2 % dropped, {p50_clean} us without: losses hold the stream"
    );
}

#[test]
fn tcp_crr_reports_the_conntrack_table_of_its_namespace() {
    require(&["ip", "ss", "nft"], true);
    let topo = Topology::up(false);
    let _server = server(&topo);
    let read = |file: &str| {
        let out = in_ns(Some(&topo.ns_a), "cat")
            .arg(format!("/proc/sys/net/netfilter/{file}"))
            .output()
            .expect("running cat");
        out.status
            .success()
            .then(|| {
                String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .flatten()
    };
    let Some(max) = read("nf_conntrack_max") else {
        // Not a pass: nothing was checked.
        eprintln!(
            "SKIPPED: nf_conntrack is not loaded here (no /proc/sys/net/netfilter/nf_conntrack_max \
             in a network namespace): no conntrack table to read"
        );
        return;
    };
    // A rule that looks at connection state makes the kernel track namespace A's connections
    // (conntrack hooks are registered only when something uses them).
    nft(&topo.ns_a, &["add", "table", "inet", "nbct"]);
    let chain = "{ type filter hook output priority 0; policy accept; }";
    nft(&topo.ns_a, &["add", "chain", "inet", "nbct", "out", chain]);
    nft(
        &topo.ns_a,
        &[
            "add", "rule", "inet", "nbct", "out", "ct", "state", "new", "counter",
        ],
    );
    let before = read("nf_conntrack_count").expect("the count is readable where the limit is");
    let _m = measuring();
    let r = rr(&topo, VETH_IP_B, Protocol::TcpCrr, &["-t", "1"]);
    let after = read("nf_conntrack_count").expect("the count");
    let run = &r.runs[0];
    eprintln!(
        "{} connections; conntrack {:?} (read outside: {before} before, {after} after, max {max})",
        r.counts.attempted, run.conntrack
    );
    assert_eq!(run.conntrack_note, None);
    let c = run
        .conntrack
        .expect("conntrack figures from the client's namespace");
    assert_eq!(c.max, max, "the namespace's nf_conntrack_max");
    assert!(c.at_start >= before && c.at_end <= after, "{c:?}");
    // The connections of the test left entries (closed ones stay for seconds to minutes;
    // a local port used again reuses its entry, so fewer entries than connections: 7 809 after
    // 10 084 connections here).
    assert!(
        c.at_end > c.at_start + r.counts.transactions / 10 && c.highest >= c.at_end,
        "{c:?} after {} connections",
        r.counts.transactions
    );
    assert!(r.counts.transactions > 10, "{:?}", r.counts);
}
