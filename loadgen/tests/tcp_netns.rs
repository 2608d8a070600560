//! The TCP engine on the paths of the egress experiment, in network namespaces this test builds:
//! node -> node (veth), vxlan -> vxlan, and node -> egress gateway -> target. Each figure is
//! compared with iperf3 on the same path, run right before it.
// Needs real servers (Debian nginx, iperf3) or root (network namespaces): the full tier only,
// `cargo test --features system-tests` (tests/run-all.sh).
#![cfg(feature = "system-tests")]

mod support;

use support::*;

const SECS: u32 = 2;

/// On a fresh topology (with the egress gateway when `gateway`): iperf3 and netbench-loadgen
/// servers in the namespace `server_ns` picks, clients in `ns_a`, same path to `host`.
fn compare(label: &str, gateway: bool, server_ns: fn(&Topology) -> &str, host: &str) {
    require(&["ip", "ss", "iperf3"], true);
    let topo = Topology::up(gateway);
    let (client_ns, server_ns) = (&topo.ns_a, server_ns(&topo));
    let _iperf = iperf3_server(Some(server_ns), 5201);
    let _ours = loadgen_server(Some(server_ns), 5202);
    assert_agrees_with_iperf3(
        label,
        || iperf3_client(Some(client_ns), host, 5201, SECS, 1),
        || {
            let report = loadgen_client(Some(client_ns), host, 5202, &["-t", &SECS.to_string()]);
            assert_eq!(report.streams.len(), 1);
            assert!(
                report.streams[0].error.is_none(),
                "{:?}",
                report.streams[0].error
            );
            report.receiver.bits_per_second
        },
    );
}

#[test]
fn veth_node_to_node_agrees_with_iperf3() {
    compare("veth", false, |t| &t.ns_b, VETH_IP_B);
}

#[test]
fn vxlan_to_vxlan_agrees_with_iperf3() {
    compare("vxlan", false, |t| &t.ns_b, VXLAN_IP_B);
}

#[test]
fn egress_through_a_gateway_agrees_with_iperf3() {
    compare("egress", true, |t| &t.ns_t, TARGET_IP);
}

#[test]
fn source_address_and_interface_binding_take_effect() {
    let served = served(5202);
    let topo = &served.topo;
    // Source address: the connection comes from it.
    let report = loadgen_client(
        Some(&topo.ns_a),
        VETH_IP_B,
        5202,
        &["-t", "0.5", "-B", VXLAN_IP_A],
    );
    assert!(report.receiver.bytes > 0);
    assert!(
        report.runs[0].client.starts_with(&format!("{VXLAN_IP_A}:")),
        "{:?}",
        report.runs[0]
    );
    // Interface: to B's vxlan address, normally routed over the overlay (source 198.19.0.1), ...
    let report = loadgen_client(Some(&topo.ns_a), VXLAN_IP_B, 5202, &["-t", "0.5"]);
    assert!(
        report.runs[0].client.starts_with(&format!("{VXLAN_IP_A}:")),
        "{:?}",
        report.runs[0]
    );
    // ... but bound to the veth device it leaves through the veth with the veth's address.
    let veth_a = format!("nva-{}", topo.name);
    let report = loadgen_client(
        Some(&topo.ns_a),
        VXLAN_IP_B,
        5202,
        &["-t", "0.5", "--bind-dev", &veth_a],
    );
    assert!(
        report.runs[0].client.starts_with(&format!("{VETH_IP_A}:")),
        "{:?}",
        report.runs[0]
    );
    // An address this node does not have is refused with a clear message.
    let (ok, _, stderr) = loadgen(
        &topo.ns_a,
        &[
            "tcp-client",
            "-c",
            VETH_IP_B,
            "-p",
            "5202",
            "-t",
            "0.5",
            "-B",
            "198.18.7.7",
        ],
    );
    assert!(
        !ok && stderr.contains("binding to source address 198.18.7.7"),
        "{stderr}"
    );
}

#[test]
fn the_topology_is_torn_down_when_a_test_panics() {
    require(&["ip"], true);
    let names = std::thread::spawn(|| {
        let topo = Topology::up(true);
        let names = [topo.ns_a.clone(), topo.ns_b.clone(), topo.ns_t.clone()];
        assert!(
            namespaces().contains(&names[2]),
            "the target namespace exists"
        );
        std::panic::panic_any(names)
    })
    .join()
    .expect_err("the thread panics")
    .downcast::<[String; 3]>()
    .expect("the panic carries the namespace names");
    let left = namespaces();
    for ns in names.iter() {
        assert!(!left.contains(ns), "{ns} survived the panic: {left:?}");
    }
}

/// Names of the network namespaces (`ip netns list` prints "NAME (id: N)").
fn namespaces() -> Vec<String> {
    let out = run_ok(std::process::Command::new("ip").args(["netns", "list"]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}
