//! The preflight against a Service whose pod was just replaced, in network namespaces this test
//! builds: a virtual address translated (nftables DNAT, as kube-proxy does) first to an address
//! where nothing answers, then, once the first SYN went out, to a live server. The retransmits
//! of that SYN keep its conntrack entry and so the dead address; only a new connection reaches
//! the live one (the e2e sweep's step after a rollout failed this way in CI).
// Needs root (network namespaces): the full tier only, `cargo test --features system-tests`.
#![cfg(feature = "system-tests")]

mod support;

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use loadgen::http::{preflight, HttpConfig, HttpOptions};
use support::*;

const SERVICE_IP: &str = "198.19.0.77";
/// On the vxlan's /24, answered by no one (the old pod's address).
const GONE_POD_IP: &str = "198.19.0.99";
const PORT: u16 = 5202;

#[test]
fn http_preflight_opens_a_new_connection_when_a_stale_translation_is_not_answered() {
    require(&["ip", "nft"], true);
    let topo = Topology::up(false);
    let _server = loadgen_server(Some(&topo.ns_b), PORT);
    add_service_chain(&topo.ns_a);
    translate_to(&topo.ns_a, SERVICE_IP, &format!("{GONE_POD_IP}:{PORT}"));

    let ns_path = format!("/run/netns/{}", topo.ns_a);
    let check = std::thread::spawn(move || {
        // Only this thread enters the namespace (setns of a network namespace is per thread).
        let ns = std::fs::File::open(&ns_path).expect("the namespace's file");
        // SAFETY: a valid descriptor of a network namespace, and the flag that says so.
        let entered = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(entered, 0, "setns: {}", std::io::Error::last_os_error());
        let url = format!("http://{SERVICE_IP}/");
        let cfg = HttpConfig::from_options(&HttpOptions::new(url)).expect("valid options");
        let started = Instant::now();
        (preflight(&cfg, Duration::from_secs(5)), started.elapsed())
    });

    // The first SYN went to the gone pod: its connection's translation is now fixed.
    let deadline = Instant::now() + Duration::from_secs(5);
    while translated(&topo.ns_a) == 0 {
        assert!(Instant::now() < deadline, "the preflight sent no SYN");
        std::thread::sleep(Duration::from_millis(10));
    }
    translate_to(&topo.ns_a, SERVICE_IP, &format!("{VXLAN_IP_B}:{PORT}"));

    let (outcome, took) = check.join().expect("the preflight thread");
    assert_eq!(outcome, Ok(()), "after {took:?}");
    assert!(
        translated(&topo.ns_a) >= 1,
        "the preflight's connection that succeeded was a new one, translated by the new rule"
    );
}
