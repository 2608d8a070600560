//! The request/response engines on the veth and vxlan paths of namespaces this test builds
//! (tests/netns/topology.sh), with delay and loss added to one device inside them: netem when
//! the kernel has it, else the nfqueue stand-in of support/impair.rs (same packets, same
//! effect; the run says which). tcp-rr's median must move by exactly the added delay, udp-rr
//! must report the configured loss and never stall, and tcp-crr must say when it ran out of
//! local ports instead of quietly slowing down.
// Needs root (network namespaces, iptables/tc inside them): the full tier only,
// `cargo test --features system-tests`.
#![cfg(feature = "system-tests")]

mod support;

use std::time::Duration;

use protocol::rr::{validate_rr, RrReport};
use protocol::Protocol;
use support::impair::{Impairment, Spec};
use support::*;

const PORT: &str = "5211";

/// The server in namespace B.
fn server(topo: &Topology) -> Server {
    loadgen_server(Some(&topo.ns_b), PORT.parse().unwrap())
}

/// Runs `client --protocol ...` in namespace A against `host`; the report must validate.
fn rr(topo: &Topology, host: &str, protocol: Protocol, extra: &[&str]) -> RrReport {
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
    let (ok, stdout, stderr) = loadgen(&topo.ns_a, &args);
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
    for host in [VETH_IP_B, VXLAN_IP_B] {
        for protocol in [Protocol::TcpRr, Protocol::TcpCrr, Protocol::UdpRr] {
            let r = rr(&topo, host, protocol, &["-t", "0.5", "--streams", "2"]);
            let c = &r.counts;
            assert!(c.transactions > 100, "{host} {protocol}: {c:?}");
            assert_eq!(c.attempted, c.transactions, "{host} {protocol}: {c:?}");
            assert_eq!(r.runs[0].server, format!("{host}:{PORT}"));
        }
    }
}

#[test]
fn an_added_delay_moves_tcp_rr_p50_by_exactly_that_delay() {
    require(&["ip", "ss", "tc", "iptables"], true);
    let topo = Topology::up(false);
    let _server = server(&topo);
    let veth_b = format!("nvb-{}", topo.name);
    let _m = measuring();
    let run = |topo: &Topology| rr(topo, VETH_IP_B, Protocol::TcpRr, &["-t", "2"]);
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
    // 1 ms, then 3 ms, one way (B's answers): 2 ms more per round trip. Both runs go through
    // the same mechanism holding every answer, at similar (low) packet rates, so its own cost
    // (and, for the stand-in, that of a packet taken out of the queue late) is the same in
    // both and only the added delay differs. Three pairs, in alternating order, and the median
    // shift: the load of this shared machine drifts between runs.
    let mut shifts = Vec::new();
    let mut mechanism = "";
    for pair in 0..3 {
        let mut p50 = [0u64; 2];
        let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let impairment = one_way(if which == 0 { 1 } else { 3 });
            mechanism = impairment.mechanism();
            let report = run(&topo);
            assert_eq!(report.counts.attempted, report.counts.transactions);
            p50[which] = report.latency.p50_us;
        }
        let shift = p50[1] as f64 - p50[0] as f64;
        eprintln!(
            "{mechanism}: p50 {} us (1 ms one way), {} us (3 ms): shift {shift} us",
            p50[0], p50[1]
        );
        shifts.push(shift);
    }
    shifts.sort_by(f64::total_cmp);
    let shift = shifts[1];
    eprintln!("{mechanism}: median shift {shift} us (expected 2000 +- 5 %)");
    assert!(
        (shift - 2000.0).abs() <= 100.0,
        "{mechanism}: the median moved by {shift} us for an added 2 ms ({shifts:?})"
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
    // 4 streams of 16 in flight, each loss costing its slot 50 ms: >= 100k transactions in
    // a few seconds even on a shared 2-core machine.
    let r = rr(
        &topo,
        VETH_IP_B,
        Protocol::UdpRr,
        &[
            "-t",
            "8",
            "--streams",
            "4",
            "--burst",
            "15",
            "--timeout",
            "50ms",
        ],
    );
    let c = &r.counts;
    let loss = r.loss_percent.expect("udp-rr reports its loss");
    eprintln!(
        "{}: {} answered, {} lost ({loss:.3} %), {} late, {:.0}/s; the stand-in dropped {:?}",
        lossy.mechanism(),
        c.transactions,
        c.lost,
        c.late,
        r.transactions_per_second,
        lossy.dropped()
    );
    assert!(
        c.transactions + c.lost >= 100_000,
        "too few transactions for the accuracy asked: {c:?}"
    );
    assert!((loss - 1.0).abs() <= 0.3, "reported {loss} % for 1 %");
    // The stand-in counts what it dropped: the requests never answered are exactly those
    // (give or take a dropped packet of the idle control connection or an answer that came
    // after the client stopped listening). Late answers (a loaded machine can take longer
    // than the timeout) are lost requests answered later, never silently counted as answered.
    if let Some(dropped) = lossy.dropped() {
        let unanswered = c.lost - c.late;
        assert!(
            unanswered.abs_diff(dropped) <= 5,
            "{unanswered} never answered, {dropped} dropped: {c:?}"
        );
    }
    // No stall: every stream kept going to the end.
    for s in &r.per_stream {
        assert!(s.transactions > 10_000, "{s:?}");
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
