//! The udp-stream engine between network namespaces this test builds (tests/netns/topology.sh):
//! loss and reordering measured through an impaired veth (netem, or where the kernel has no
//! netem nftables drops counted by a referee and an HTB class that holds some datagrams back),
//! a paced rate kept on a clean path,
//! and the reverse direction over the vxlan overlay with a datagram length that fits its MTU.
// Needs root (network namespaces, tc): the full tier only, `cargo test --features system-tests`.
#![cfg(feature = "system-tests")]

mod support;

use protocol::tcp::Flow;
use protocol::udp::{validate_udp, UdpReport};
use support::*;

/// netbench-loadgen client -u in `ns` against `host:port`; its JSON report, checked in full.
fn udp_client(ns: &str, host: &str, port: u16, extra: &[&str]) -> UdpReport {
    let out = run_ok(
        in_ns(Some(ns), LOADGEN)
            .args(["client", "-u", "-c", host, "-p", &port.to_string(), "-J"])
            .args(extra),
    );
    let report: UdpReport =
        serde_json::from_slice(&out.stdout).expect("netbench-loadgen udp JSON report");
    validate_udp(&report).expect("the report passes the operator's checks");
    for s in &report.streams {
        assert!(s.error.is_none(), "stream {} failed: {:?}", s.id, s.error);
    }
    report
}

/// `nft` in namespace `ns` with `args` (each one argument, no shell).
fn nft(ns: &str, args: &[&str]) {
    run_ok(in_ns(Some(ns), "nft").args(args));
}

/// What the path does to the datagrams, and the referee's count of the ones it dropped.
enum Impairment {
    /// netem on A's veth: `loss 1% delay 1ms reorder 5%`.
    Netem,
    /// Kernels without netem (CONFIG_NET_SCH_NETEM unset, as on the machine this was written
    /// on): B's nftables input hook drops 1 in 100 data datagrams at random (`numgen random`)
    /// and counts them, and on A's veth 50 datagrams out of every 1000 (`numgen inc`) go
    /// through an HTB class of 8 Mbit/s, where they queue while the others overtake them.
    Nftables,
}

impl Impairment {
    /// Impairs udp `port` from A to B.
    fn apply(topo: &Topology, port: u16) -> Impairment {
        let veth_a = format!("nva-{}", topo.name);
        let netem = in_ns(Some(&topo.ns_a), "tc")
            .args(["qdisc", "add", "dev", &veth_a, "root", "netem"])
            .args(["loss", "1%", "delay", "1ms", "reorder", "5%"])
            .output()
            .expect("running tc");
        if netem.status.success() {
            return Impairment::Netem;
        }
        let why = String::from_utf8_lossy(&netem.stderr);
        assert!(
            why.contains("qdisc kind is unknown"),
            "tc netem failed for another reason: {why}"
        );
        let tc = |args: &str| {
            run_ok(in_ns(Some(&topo.ns_a), "tc").args(args.split_whitespace()));
        };
        tc(&format!(
            "qdisc add dev {veth_a} root handle 1: htb default 10"
        ));
        tc(&format!(
            "class add dev {veth_a} parent 1: classid 1:10 htb rate 20gbit"
        ));
        tc(&format!(
            "class add dev {veth_a} parent 1: classid 1:20 htb rate 8mbit ceil 8mbit"
        ));
        let port = port.to_string();
        let chain = |ns: &str, hook: &str| {
            nft(ns, &["add", "table", "inet", "nbimpair"]);
            let spec = format!("{{ type filter hook {hook} priority 0; policy accept; }}");
            nft(ns, &["add", "chain", "inet", "nbimpair", hook, &spec]);
        };
        chain(&topo.ns_a, "output");
        nft(
            &topo.ns_a,
            &[
                "add", "rule", "inet", "nbimpair", "output", "udp", "dport", &port, "numgen",
                "inc", "mod", "1000", "<", "50", "meta", "priority", "set", "1:20",
            ],
        );
        // Data datagrams only (kind byte 0, 13 bytes into the UDP header): the referee's count
        // is then exactly the datagrams the report must call lost.
        chain(&topo.ns_b, "input");
        nft(
            &topo.ns_b,
            &[
                "add",
                "rule",
                "inet",
                "nbimpair",
                "input",
                "udp",
                "dport",
                &port,
                "@th,104,8",
                "0",
                "numgen",
                "random",
                "mod",
                "1000",
                "<",
                "10",
                "counter",
                "drop",
            ],
        );
        Impairment::Nftables
    }

    /// Datagrams the impairment dropped, where a referee counted them.
    fn dropped(&self, topo: &Topology) -> Option<u64> {
        match self {
            Impairment::Netem => None,
            Impairment::Nftables => {
                let out = run_ok(
                    in_ns(Some(&topo.ns_b), "nft")
                        .args(["-j", "list", "table", "inet", "nbimpair"]),
                );
                nft_counter_packets(&out.stdout)
            }
        }
    }
}

#[test]
fn loss_and_reordering_are_measured_through_an_impaired_path() {
    require(&["ip", "ss", "tc", "nft"], true);
    let topo = Topology::up(false);
    let impairment = Impairment::apply(&topo, 5301);
    let _server = loadgen_server(Some(&topo.ns_b), 5301);
    let _m = measuring();
    // 40 000 datagrams/s for 4 s: 160 000 intended, small ones so the receiver keeps up. A
    // sender starved of CPU on a loaded machine skips some; runs are repeated until 100 000
    // datagrams were sent, the accuracy asked of the loss figure (one run on an idle machine,
    // two or three when the client is starved), for 2 minutes at most.
    const SAMPLES: u64 = 100_000;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let (mut sent, mut path_lost, mut runs) = (0u64, 0u64, 0u32);
    let mut referee_before = impairment.dropped(&topo);
    while sent < SAMPLES {
        assert!(
            std::time::Instant::now() < deadline,
            "only {sent} of {SAMPLES} datagrams sent in 2 minutes ({runs} runs)"
        );
        let r = udp_client(
            &topo.ns_a,
            VETH_IP_B,
            5301,
            &["--pps", "40000", "-l", "256", "-t", "4"],
        );
        let referee = impairment.dropped(&topo);
        eprintln!(
            "sent {} (skipped {}, late {}), lost {} ({:.3}%; the path dropped {:?}), out of \
             order {}, duplicates {}, socket drops {:?}, jitter {:?} ms",
            r.sent.packets,
            r.sent.skipped,
            r.sent.late,
            r.lost,
            r.loss_percent,
            referee
                .zip(referee_before)
                .map(|(now, before)| now - before),
            r.received.out_of_order,
            r.received.duplicates,
            r.received.kernel_drops,
            r.jitter_ms,
        );
        assert_eq!(r.sent.packets + r.sent.skipped, 160_000, "{:?}", r.sent);
        // A receiver starved of CPU may overflow its socket: those drops are counted apart
        // (and are part of the loss), so the path's share is still known exactly.
        let socket_drops = r.received.kernel_drops.expect("SO_MEMINFO is readable");
        let run_path_lost = r.lost - socket_drops;
        if let (Some(now), Some(before)) = (referee, referee_before) {
            assert_eq!(
                run_path_lost,
                now - before,
                "every datagram the path dropped, and no other"
            );
        }
        referee_before = referee;
        assert!(r.received.out_of_order > 0, "{:?}", r.received);
        assert_eq!(r.received.duplicates, 0);
        // No assertion on jitter: RFC 3550's is a moving average that ends with the last few
        // datagrams, which the impairment may or may not have held back (tests of the tally
        // check it against values computed by hand).
        assert!(r.jitter_ms.is_some());
        sent += r.sent.packets;
        path_lost += run_path_lost;
        runs += 1;
    }
    let path_loss = path_lost as f64 / sent as f64 * 100.0;
    eprintln!("{runs} run(s): {path_lost} of {sent} lost on the path ({path_loss:.3} %)");
    assert!(
        (path_loss - 1.0).abs() <= 0.3,
        "the path drops 1 %, measured {path_loss:.3} % over {sent} datagrams"
    );
}

#[test]
fn a_paced_rate_is_kept_on_a_clean_path() {
    let served = served(5302);
    let topo = &served.topo;
    // A modest rate: a sender starved of CPU for up to 64 send intervals (75 ms here) catches
    // up within its burst bound, so the rate holds on a shared machine too.
    let r = udp_client(&topo.ns_a, VETH_IP_B, 5302, &["-b", "10M", "-t", "3"]);
    let got = r.received.bits_per_second;
    eprintln!(
        "10 Mbit/s offered: sent {:.3}, received {:.3} Mbit/s, loss {:.4}%, late {}, skipped {}",
        r.sent.bits_per_second / 1e6,
        got / 1e6,
        r.loss_percent,
        r.sent.late,
        r.sent.skipped
    );
    assert_eq!(r.offered.map(|o| o.bits_per_second), Some(10e6));
    // 10e6 / (1472 x 8) = 849.2 datagrams/s for 3 s: 2548 intended send times, each used or
    // skipped (by a sender starved of CPU for longer than its catch-up burst, 75 ms here).
    assert_eq!(r.sent.packets + r.sent.skipped, 2548, "{:?}", r.sent);
    // Never ahead of the schedule: datagram k goes out no earlier than k / 849.2 s after the
    // start, so the last one sent no earlier than (packets - 1) / 849.2 s (late is possible
    // on a loaded machine, early is not).
    let earliest_last = (r.sent.packets - 1) as f64 / (10e6 / (1472.0 * 8.0));
    assert!(
        r.sent.seconds >= earliest_last - 1e-6,
        "the last datagram went out at {} s, before its intended {earliest_last} s",
        r.sent.seconds
    );
    // The path carried what was sent, at the rate it was sent.
    let sent = r.sent.bits_per_second;
    assert!(
        (got / sent - 1.0).abs() < 0.03,
        "received {got} bit/s of {sent} bit/s sent"
    );
    // And a sender that kept its schedule (skipped nothing: never starved of CPU for longer
    // than its catch-up burst) sent the rate asked.
    if r.sent.skipped == 0 {
        assert!(
            (got / 10e6 - 1.0).abs() < 0.03,
            "received {got} bit/s for 10 Mbit/s offered, nothing skipped"
        );
    }
    assert!(r.loss_percent < 0.1, "{:.4} % lost", r.loss_percent);
    assert_eq!(
        r.runs[0].len, 1472,
        "the largest datagram of the veth's 1500-byte MTU"
    );
}

#[test]
fn reverse_over_vxlan_fits_the_overlay_mtu() {
    let served = served(5303);
    let topo = &served.topo;
    let r = udp_client(
        &topo.ns_a,
        VXLAN_IP_B,
        5303,
        &["-R", "-P", "2", "-b", "20M", "-t", "1"],
    );
    // vxlan MTU 1450 - 20 (IPv4) - 8 (UDP): no fragments.
    assert_eq!(r.runs[0].len, 1422);
    assert_eq!(
        r.streams.iter().map(|s| s.flow).collect::<Vec<_>>(),
        [Flow::ServerToClient, Flow::ServerToClient]
    );
    // 20e6 / (1422 x 8) = 1758.1 datagrams/s for 1 s: 1759 intended sends per stream (the
    // server's sender, starved of CPU on a shared machine, may skip some).
    for s in &r.streams {
        assert_eq!(s.sent.packets + s.sent.skipped, 1759, "{:?}", s.sent);
        assert!(s.received.packets > 500, "{:?} {:?}", s.received, s.sent);
        assert!(s.loss_percent < 0.5, "{s:?}");
        assert!(s.rcvbuf_bytes.is_some_and(|b| b > 1 << 20), "{s:?}");
    }
    assert!(r.runs[0].client.starts_with(VXLAN_IP_A), "{:?}", r.runs[0]);
}
