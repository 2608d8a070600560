//! A route change at a known instant, seen in the recorded answers: in network namespaces this
//! test builds, a virtual address is translated (nftables DNAT, as kube-proxy does for a
//! Service) to the responder `--name web-a`, and at a recorded wall-clock instant T the
//! translation is swapped to the responder `--name web-b`. `netbench-loadgen http
//! --record-answers` loads the virtual address at an open-loop rate throughout; its record must
//! show web-a until about T and web-b from shortly after T, never before.
// Needs root (network namespaces): the full tier only, `cargo test --features system-tests`.
#![cfg(feature = "system-tests")]

mod support;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use protocol::report::answers::Sighting;
use protocol::report::Report;
use support::*;

/// On the vxlan's /24 (so a route leads there before translation), answered by no one itself.
const SERVICE_IP: &str = "198.19.0.78";
const PORT_A: u16 = 5301;
const PORT_B: u16 = 5302;
/// The open-loop rate: a request due every 5 ms.
const RATE: &str = "200";
/// How late after the swap the first web-b answer may be, and how late a web-a answer may
/// still arrive. At 200 req/s a request is due every 5 ms and a new connection on a veth pair
/// is answered in well under 1 ms, so about 6 ms is expected; the rest is room for the
/// scheduler of a loaded 2-core machine (CI builds beside its tests) holding the client's
/// thread, not for the mechanism under test.
const TOLERANCE_US: u64 = 100_000;

fn unix_us(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

/// The one sighting of `name` (status 200), failing if there is none or more than one.
fn only_sighting<'a>(sightings: &'a [Sighting], name: &str) -> &'a Sighting {
    let of: Vec<&Sighting> = sightings
        .iter()
        .filter(|s| s.backend.as_deref() == Some(name))
        .collect();
    assert_eq!(of.len(), 1, "one sighting of {name}: {sightings:?}");
    assert_eq!(of[0].status, 200, "{:?}", of[0]);
    of[0]
}

#[test]
fn a_translation_swapped_at_a_known_instant_shows_in_the_recorded_answers() {
    require(&["ip", "nft"], true);
    let topo = Topology::up(false);
    let _web_a = http_server(&topo.ns_b, PORT_A, "web-a");
    let _web_b = http_server(&topo.ns_b, PORT_B, "web-b");
    add_service_chain(&topo.ns_a);
    translate_to(&topo.ns_a, SERVICE_IP, &format!("{VETH_IP_B}:{PORT_A}"));

    // Every request on a new connection (--no-keepalive): a translation is fixed by a
    // connection's first packet and kept by its conntrack entry, so kept-alive connections
    // would stay with web-a after the swap, and when they moved would depend on nothing the
    // test controls. A new connection is translated by the rule in place at its SYN: the swap
    // decides, alone, where each request goes. (Each has a new source port; a SYN that met an
    // old entry of the same ports in TIME_WAIT would have it replaced, and translated anew.)
    let url = format!("http://{SERVICE_IP}/");
    let ns_a = topo.ns_a.clone();
    let client = std::thread::spawn(move || {
        let args = [
            "http",
            "--record-answers",
            "--no-keepalive",
            "-R",
            RATE,
            "-c",
            "4",
            "-t",
            "1",
            "-d",
            "3s",
            "--output",
            "json",
            &url,
        ];
        loadgen(&ns_a, &args)
    });

    // The load is under way: 100 connections (half a second) went to web-a.
    let deadline = Instant::now() + Duration::from_secs(10);
    while translated(&topo.ns_a) < 100 {
        assert!(Instant::now() < deadline, "the client sent no load");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The swap takes effect at one instant between these two (one nft transaction).
    let swap_from = unix_us(SystemTime::now());
    translate_to(&topo.ns_a, SERVICE_IP, &format!("{VETH_IP_B}:{PORT_B}"));
    let swap_to = unix_us(SystemTime::now());
    eprintln!("swapped within {} us", swap_to - swap_from);

    let (ok, stdout, stderr) = client.join().expect("the client thread");
    assert!(ok, "netbench-loadgen http failed: {stderr}");
    let Report::Http(r) = Report::from_json(&stdout).expect("a JSON report");
    protocol::report::validate_http(&r).expect("the report passes validation");
    assert!(
        translated(&topo.ns_a) > 100,
        "the new rule translated the connections after the swap"
    );
    assert!(
        swap_to + 1_000_000 < r.end_unix_ms * 1000,
        "the swap came a second before the run's end, so web-b had time to answer"
    );
    // One transaction: no connection found the chain without a rule.
    assert_eq!(r.counters.errors.transport(), 0, "{:?}", r.counters);

    let answers = r.answers.expect("answers recorded with the flag");
    assert!(answers.complete);
    assert_eq!(answers.sightings.len(), 2, "{:?}", answers.sightings);
    let a = only_sighting(&answers.sightings, "web-a");
    let b = only_sighting(&answers.sightings, "web-b");
    let at = |us: u64| us as i64 - swap_from as i64;
    eprintln!(
        "relative to the swap: web-a {} .. {} us, web-b {} .. {} us",
        at(a.from_unix_us),
        at(a.to_unix_us),
        at(b.from_unix_us),
        at(b.to_unix_us)
    );
    // web-a until about the swap: its last answer neither long before (the load ran on) nor
    // long after (only connections opened before the swap reach it).
    assert!(
        a.to_unix_us + TOLERANCE_US >= swap_from && a.to_unix_us <= swap_to + TOLERANCE_US,
        "web-a last seen {} us from the swap",
        at(a.to_unix_us)
    );
    // web-b never before the swap (a connection reaches it only after the new rule is in),
    // and within the tolerance after it.
    assert!(
        b.from_unix_us >= swap_from,
        "web-b seen {} us before the swap",
        -at(b.from_unix_us)
    );
    assert!(
        b.from_unix_us <= swap_to + TOLERANCE_US,
        "web-b first seen {} us after the swap (tolerance {TOLERANCE_US} us)",
        at(b.from_unix_us)
    );
    // And web-b until the end of the run.
    assert!(b.to_unix_us + TOLERANCE_US >= r.end_unix_ms * 1000, "{b:?}");
}
