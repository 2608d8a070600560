//! `offload get|set` on the vxlan devices of a test topology: the seed's contrast (checksum
//! offload off on the vxlan devices makes TCP over vxlan much slower), restoration, agreement
//! with `ethtool -k`, and clear errors. Never runs on the host's own interfaces.
// Needs real servers (Debian nginx, iperf3) or root (network namespaces): the full tier only,
// `cargo test --features system-tests` (tests/run-all.sh).
#![cfg(feature = "system-tests")]

mod support;

use std::collections::BTreeMap;

use loadgen::offload::{FeatureReport, SetReport, SetSummary};
use support::*;

fn get(ns: &str, interface: &str) -> FeatureReport {
    let (ok, stdout, stderr) = loadgen(ns, &["offload", "get", "--interface", interface]);
    assert!(ok, "offload get failed: {stderr}");
    serde_json::from_str(&stdout).expect("offload get JSON")
}

fn set(ns: &str, interface: &str, feature: &str) -> SetReport {
    let (ok, stdout, stderr) = loadgen(
        ns,
        &[
            "offload",
            "set",
            "--interface",
            interface,
            "--feature",
            feature,
        ],
    );
    assert!(ok, "offload set {feature} failed: {stderr}");
    serde_json::from_str(&stdout).expect("offload set JSON")
}

fn vxlan_throughput(topo: &Topology) -> f64 {
    loadgen_client(Some(&topo.ns_a), VXLAN_IP_B, 5202, &["-t", "2"])
        .receiver
        .bits_per_second
}

#[test]
fn vxlan_checksum_offload_off_lowers_throughput_and_on_restores_it() {
    require(&["ip", "ss", "ethtool"], true);
    let topo = Topology::up(false);
    let ends = [
        (topo.ns_a.clone(), topo.vxlan_a.clone()),
        (topo.ns_b.clone(), topo.vxlan_b.clone()),
    ];
    let initial: Vec<FeatureReport> = ends.iter().map(|(ns, dev)| get(ns, dev)).collect();
    for r in &initial {
        assert_eq!(
            r.features["tx-checksumming"].to_string(),
            "on",
            "vxlan starts with checksum offload"
        );
    }
    let _server = loadgen_server(Some(&topo.ns_b), 5202);
    let _m = measuring();

    let on = vxlan_throughput(&topo);
    for (ns, dev) in &ends {
        let r = set(ns, dev, "tx-checksumming=off");
        assert_eq!(r.before["tx-checksumming"].to_string(), "on");
        assert_eq!(r.after["tx-checksumming"].to_string(), "off");
        assert_eq!(r.restore["tx-checksum-ip-generic"].to_string(), "on");
        assert!(r.not_applied.is_empty());
        assert_eq!(
            ethtool_k(ns, dev)["tx-checksumming"].0,
            "off",
            "ethtool sees the change"
        );
    }
    let off = vxlan_throughput(&topo);
    for (ns, dev) in &ends {
        let r = set(ns, dev, "tx-checksumming=on");
        assert_eq!(r.after["tx-checksumming"].to_string(), "on");
    }
    let restored = vxlan_throughput(&topo);
    eprintln!(
        "vxlan offload on {} off {} restored {}",
        gbit(on),
        gbit(off),
        gbit(restored)
    );
    assert!(
        off < 0.8 * on,
        "offload off ({}) should be well below on ({})",
        gbit(off),
        gbit(on)
    );
    assert!(
        restored > 1.25 * off,
        "restoring the offload should bring throughput back"
    );
    // Every feature is back where it was, TSO included (it follows checksumming).
    for ((ns, dev), before) in ends.iter().zip(&initial) {
        assert_eq!(&get(ns, dev), before, "features of {dev} after restoring");
    }
}

/// `ethtool -k` as name -> (value, fixed).
fn ethtool_k(ns: &str, dev: &str) -> BTreeMap<String, (String, bool)> {
    let out = run_ok(in_ns(Some(ns), "ethtool").args(["-k", dev]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter_map(|line| {
            let (name, rest) = line.trim().split_once(": ")?;
            let value = rest.split_whitespace().next()?.to_string();
            Some((name.to_string(), (value, rest.contains("[fixed]"))))
        })
        .collect()
}

#[test]
fn get_agrees_with_ethtool_k() {
    require(&["ip", "ethtool"], true);
    let topo = Topology::up(false);
    for (ns, dev) in [
        (&topo.ns_a, &topo.vxlan_a),
        (&topo.ns_b, &format!("nvb-{}", topo.name)),
    ] {
        let ours = get(ns, dev);
        let theirs = ethtool_k(ns, dev);
        assert!(theirs.len() > 20, "ethtool -k printed {theirs:?}");
        for (name, (value, fixed)) in &theirs {
            let mine = ours
                .features
                .get(name)
                .unwrap_or_else(|| panic!("{dev}: ethtool shows {name}, offload get does not"));
            assert_eq!(&mine.to_string(), value, "{dev}: {name}");
            assert_eq!(ours.fixed.contains(name), *fixed, "{dev}: is {name} fixed?");
        }
    }
}

#[test]
fn bad_requests_fail_with_one_clear_line_and_change_nothing() {
    require(&["ip"], true);
    let topo = Topology::up(false);
    let (ns, dev) = (&topo.ns_a, &topo.vxlan_a);
    let before = get(ns, dev);
    let cases: [(&[&str], &str); 6] = [
        (
            &["offload", "get", "--interface", "nb-missing0"],
            "no interface named \"nb-missing0\"",
        ),
        (
            &["offload", "get", "--interface", "a-name-much-too-long"],
            "no interface named",
        ),
        (
            &[
                "offload",
                "set",
                "--interface",
                "nb-missing0",
                "--feature",
                "tx=off",
            ],
            "no interface named",
        ),
        (
            &[
                "offload",
                "set",
                "--interface",
                dev,
                "--feature",
                "warp-drive=on",
            ],
            "unknown feature \"warp-drive\"",
        ),
        (
            &[
                "offload",
                "set",
                "--interface",
                dev,
                "--feature",
                "tx-checksum-ipv4=on",
            ],
            "tx-checksum-ipv4 is fixed off",
        ),
        (
            &[
                "offload",
                "set",
                "--interface",
                dev,
                "--feature",
                "tx-checksumming=maybe",
            ],
            "expected NAME=on|off",
        ),
    ];
    for (args, expected) in cases {
        let (ok, stdout, stderr) = loadgen(ns, args);
        assert!(!ok, "{args:?} should fail");
        assert!(stdout.is_empty(), "{args:?} printed {stdout}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim().lines().count(),
            1,
            "{args:?}: one line, got {stderr}"
        );
    }
    // A fixed feature asked for the value it has anyway is not an error.
    let r = set(ns, dev, "tx-checksum-ipv4=off");
    assert!(r.changed.is_empty(), "{:?}", r.changed);
    assert_eq!(get(ns, dev), before);
}

/// A file removed on Drop.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(tag: &str) -> TempFile {
        TempFile(std::env::temp_dir().join(format!("nb-summary-{}-{tag}", std::process::id())))
    }
    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `offload set ... --summary-file`: returns (success, stdout report, summary file text).
fn set_with_summary(
    ns: &str,
    dev: &str,
    features: &[&str],
    file: &TempFile,
) -> (bool, SetReport, String) {
    let mut args = vec![
        "offload",
        "set",
        "--interface",
        dev,
        "--summary-file",
        file.path(),
    ];
    for f in features {
        args.extend(["--feature", f]);
    }
    let (ok, stdout, stderr) = loadgen(ns, &args);
    let report: SetReport = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("offload set JSON ({e}): {stdout} {stderr}"));
    let text = std::fs::read_to_string(&file.0)
        .unwrap_or_else(|e| panic!("the summary file was not written ({e}); stderr: {stderr}"));
    (ok, report, text)
}

/// Parses a summary as the operator does: one compact line that fits a termination message.
fn parse_summary(text: &str) -> SetSummary {
    assert_eq!(text.trim_end().lines().count(), 1, "one line: {text}");
    assert!(text.len() <= 4096, "{} bytes", text.len());
    serde_json::from_str(text).unwrap_or_else(|e| panic!("summary JSON ({e}): {text}"))
}

/// Applies a summary's `restore` map with `offload set`, as the operator's restore Job does.
fn apply_restore(ns: &str, summary: &SetSummary) {
    assert!(
        !summary.restore.is_empty(),
        "nothing to restore in {summary:?}"
    );
    let settings: Vec<String> = summary
        .restore
        .iter()
        .map(|(name, on)| format!("{name}={}", if *on { "on" } else { "off" }))
        .collect();
    let mut args = vec!["offload", "set", "--interface", summary.interface.as_str()];
    for s in &settings {
        args.extend(["--feature", s.as_str()]);
    }
    let (ok, _, stderr) = loadgen(ns, &args);
    assert!(ok, "restoring {settings:?} failed: {stderr}");
}

fn as_bools(map: &BTreeMap<String, loadgen::offload::OnOff>) -> BTreeMap<String, bool> {
    map.iter()
        .map(|(k, v)| (k.clone(), v.to_string() == "on"))
        .collect()
}

#[test]
fn summary_file_records_before_applied_and_a_restore_that_puts_the_device_back() {
    require(&["ip"], true);
    let topo = Topology::up(false);

    // vxlan: checksum offload off (the EgressBenchmark case), by its legacy name.
    let (ns, dev) = (&topo.ns_a, &topo.vxlan_a);
    let initial = get(ns, dev);
    let file = TempFile::new(&format!("{}-vx", topo.name));
    let (ok, report, text) = set_with_summary(ns, dev, &["tx-checksumming=off"], &file);
    assert!(ok, "{report:?}");
    let summary = parse_summary(&text);
    assert_eq!(&summary.interface, dev);
    assert_eq!(
        summary.before,
        BTreeMap::from([("tx-checksumming".to_string(), true)])
    );
    assert_eq!(
        summary.applied,
        BTreeMap::from([("tx-checksumming".to_string(), false)])
    );
    assert_eq!(summary.restore, as_bools(&report.restore));
    assert_eq!(summary.restore.get("tx-checksum-ip-generic"), Some(&true));
    assert_ne!(get(ns, dev), initial, "the change is in effect");
    apply_restore(ns, &summary);
    assert_eq!(get(ns, dev), initial, "restore puts {dev} back");

    // veth: a partial change (TSO cannot stay on with scatter-gather off) exits non-zero but
    // still writes the summary, keyed by the names as written, and its restore undoes it all.
    let (ns, dev) = (&topo.ns_b, &format!("nvb-{}", topo.name));
    let initial = get(ns, dev);
    let file = TempFile::new(&format!("{}-veth", topo.name));
    let (ok, report, text) =
        set_with_summary(ns, dev, &["sg=off", "tx-tcp-segmentation=on"], &file);
    assert!(!ok, "a request the device did not take fails the command");
    assert_eq!(report.not_applied, ["tx-tcp-segmentation=on"]);
    let summary = parse_summary(&text);
    assert_eq!(
        summary.before,
        BTreeMap::from([
            ("sg".to_string(), true),
            ("tx-tcp-segmentation".to_string(), true)
        ])
    );
    assert_eq!(
        summary.applied,
        BTreeMap::from([
            ("sg".to_string(), false),
            ("tx-tcp-segmentation".to_string(), false)
        ])
    );
    assert_eq!(summary.restore, as_bools(&report.restore));
    assert_eq!(summary.restore.get("tx-scatter-gather"), Some(&true));
    assert_eq!(summary.restore.get("tx-tcp-segmentation"), Some(&true));
    apply_restore(ns, &summary);
    assert_eq!(get(ns, dev), initial, "restore puts {dev} back");
}

/// Runs `offload <args> --state` and parses the state line as the operator does (from the
/// output, the line a pod's log ends with).
fn state_of(ns: &str, args: &[&str]) -> (bool, protocol::offload::DeviceState, String) {
    let mut all = vec!["offload"];
    all.extend(args);
    all.push("--state");
    let (ok, stdout, stderr) = loadgen(ns, &all);
    let state = protocol::offload::parse_state_line(&stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}; stdout {stdout}; stderr {stderr}"));
    (ok, state, stderr)
}

/// The operator's protocol on a real device: record the whole state, change several features
/// (the kernel switches dependants too), write back what differs from the read-back, and the
/// final read-back equals the state before; `verify` agrees.
#[test]
fn state_lines_record_before_and_read_back_a_full_restore() {
    require(&["ip"], true);
    let topo = Topology::up(false);
    let (ns, dev) = (&topo.ns_b, &format!("nvb-{}", topo.name));
    let initial = get(ns, dev);
    let (ok, before, _) = state_of(ns, &["get", "--interface", dev]);
    assert!(ok);
    assert_eq!(&before.interface, dev);
    assert!(before.features.len() > 10, "{before:?}");
    assert!(!before.fixed.is_empty(), "{before:?}");

    let (_, after, _) = state_of(
        ns,
        &[
            "set",
            "--interface",
            dev,
            "--feature",
            "sg=off",
            "--feature",
            "gro=off",
        ],
    );
    let wrong = after.differences(&before.changeable());
    assert!(wrong.len() >= 2, "sg, and TSO with it, changed: {wrong:?}");
    let (ok, _, _) = loadgen(ns, &["offload", "verify", "-i", dev, "-f", "sg=on"]);
    assert!(!ok, "verify fails while sg is off");

    // What a restore writes: every changeable feature whose read-back differs from before.
    let restore: Vec<String> = before
        .changeable()
        .into_iter()
        .filter(|(name, on)| after.features.get(name) != Some(on))
        .map(|(name, on)| format!("{name}={}", if on { "on" } else { "off" }))
        .collect();
    let mut args = vec!["set", "--interface", dev.as_str()];
    for r in &restore {
        args.extend(["--feature", r.as_str()]);
    }
    let (ok, read_back, stderr) = state_of(ns, &args);
    assert!(ok, "{stderr}");
    assert_eq!(
        read_back.differences(&before.changeable()),
        Vec::<String>::new()
    );
    assert_eq!(read_back, before, "the read-back equals the state before");
    assert_eq!(get(ns, dev), initial);
    let (ok, _, stderr) = loadgen(
        ns,
        &["offload", "verify", "-i", dev, "-f", "sg=on", "-f", "tx=on"],
    );
    assert!(ok, "{stderr}");
}
