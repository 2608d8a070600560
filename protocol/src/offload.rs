//! A device's whole offload feature state (kernel names), as the operator records it before a
//! change and compares it with after a restore, and ethtool(8)'s legacy names for groups of
//! kernel features (`tx-checksumming` / `tx` for `tx-checksum-*`).
//!
//! The state is printed as one marked line on stdout by
//! `offload get|set --state`, read by the operator from the Job pod's log: a log has no size
//! limit (a termination message keeps 4 KiB shared by all containers), and a line that does not
//! parse as a whole is refused, so a cut record is never mistaken for a complete one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// ethtool(8)'s legacy names: (long name, short name, kernel-name pattern with `*`).
pub const LEGACY_NAMES: &[(&str, &str, &str)] = &[
    ("rx-checksumming", "rx", "rx-checksum"),
    ("tx-checksumming", "tx", "tx-checksum-*"),
    ("scatter-gather", "sg", "tx-scatter-gather*"),
    ("tcp-segmentation-offload", "tso", "tx-tcp*-segmentation"),
    ("udp-fragmentation-offload", "ufo", "tx-udp-fragmentation"),
    (
        "generic-segmentation-offload",
        "gso",
        "tx-generic-segmentation",
    ),
    ("generic-receive-offload", "gro", "rx-gro"),
    ("large-receive-offload", "lro", "rx-lro"),
    ("rx-vlan-offload", "rxvlan", "rx-vlan-hw-parse"),
    ("tx-vlan-offload", "txvlan", "tx-vlan-hw-insert"),
    ("ntuple-filters", "ntuple", "rx-ntuple-filter"),
    ("receive-hashing", "rxhash", "rx-hashing"),
];

/// `*` matches any run of characters, as in ethtool's legacy flag table.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, rest)) => {
            let Some(tail) = name.strip_prefix(prefix) else {
                return false;
            };
            (0..=tail.len())
                .filter(|&i| tail.is_char_boundary(i))
                .any(|i| glob_match(rest, &tail[i..]))
        }
    }
}

/// The long legacy name a (long or short) name refers to, with its kernel-name pattern.
pub fn legacy_name(name: &str) -> Option<(&'static str, &'static str)> {
    LEGACY_NAMES
        .iter()
        .find(|(long, short, _)| *long == name || *short == name)
        .map(|(long, _, pattern)| (*long, *pattern))
}

/// Starts the state line; the JSON object follows after one space.
pub const STATE_PREFIX: &str = "netbench-offload-state";

/// Every kernel feature of a device, on or off, and which of them are fixed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceState {
    pub interface: String,
    /// Kernel feature name -> active.
    pub features: BTreeMap<String, bool>,
    /// Kernel features the driver does not let anyone change.
    #[serde(default)]
    pub fixed: Vec<String>,
}

impl DeviceState {
    /// The features a restore writes back: every one that is not fixed.
    pub fn changeable(&self) -> BTreeMap<String, bool> {
        self.features
            .iter()
            .filter(|(name, _)| !self.fixed.contains(name))
            .map(|(name, on)| (name.clone(), *on))
            .collect()
    }

    /// A kernel or legacy name's value, as `ethtool -k` shows it (a group is on when any of
    /// its bits is); None when the device has no such feature.
    pub fn value(&self, name: &str) -> Option<bool> {
        if let Some(on) = self.features.get(name) {
            return Some(*on);
        }
        let (_, pattern) = legacy_name(name)?;
        let bits: Vec<bool> = self
            .features
            .iter()
            .filter(|(n, _)| glob_match(pattern, n))
            .map(|(_, on)| *on)
            .collect();
        (!bits.is_empty()).then(|| bits.contains(&true))
    }

    /// Names whose value in `self` differs from `wanted` (missing ones included), as
    /// "name=on|off (is on|off|missing)".
    pub fn differences(&self, wanted: &BTreeMap<String, bool>) -> Vec<String> {
        let word = |on: bool| if on { "on" } else { "off" };
        wanted
            .iter()
            .filter(|(name, on)| self.features.get(*name) != Some(on))
            .map(|(name, on)| {
                let is = self.features.get(name).map_or("missing", |v| word(*v));
                format!("{name}={} (is {is})", word(*on))
            })
            .collect()
    }

    /// The state line: the prefix, one space, compact JSON.
    pub fn line(&self) -> String {
        // A BTreeMap of strings and bools always serializes.
        let json = serde_json::to_string(self).unwrap_or_default();
        format!("{STATE_PREFIX} {json}")
    }
}

/// The last state line in `log` (a pod's output), or why there is none.
pub fn parse_state_line(log: &str) -> Result<DeviceState, String> {
    let line = log
        .lines()
        .rev()
        .find_map(|l| l.trim_end().strip_prefix(STATE_PREFIX))
        .ok_or_else(|| "the log holds no state line".to_string())?;
    serde_json::from_str(line.trim()).map_err(|e| format!("incomplete or unreadable state: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a vxlan device reports (kernel 6.x): only the generic checksum bit is changeable
    /// (what loadgen's `RawFeatures::state` makes of such a device's ethtool snapshot).
    fn vxlan_like() -> DeviceState {
        let features = [
            ("tx-scatter-gather", true),
            ("tx-checksum-ipv4", false),
            ("tx-checksum-ip-generic", true),
            ("tx-checksum-ipv6", false),
            ("tx-tcp-segmentation", true),
            ("tx-tcp6-segmentation", true),
            ("netns-local", false),
            ("rx-checksum", true),
        ];
        DeviceState {
            interface: "vx0".into(),
            features: features
                .iter()
                .map(|(n, on)| (n.to_string(), *on))
                .collect(),
            fixed: ["tx-checksum-ipv4", "tx-checksum-ipv6", "netns-local"]
                .map(String::from)
                .to_vec(),
        }
    }

    #[test]
    fn a_state_knows_what_is_changeable_and_legacy_values() {
        let s = vxlan_like();
        assert!(!s.changeable().contains_key("tx-checksum-ipv4"));
        assert!(s.changeable().contains_key("tx-checksum-ip-generic"));
        assert_eq!(s.value("tx-checksumming"), Some(true));
        assert_eq!(s.value("tx"), Some(true));
        assert_eq!(s.value("lro"), None);
    }

    #[test]
    fn the_line_round_trips_and_a_cut_line_is_refused() {
        let s = vxlan_like();
        let log = format!("some warning on stderr\n{}\n", s.line());
        assert_eq!(parse_state_line(&log), Ok(s.clone()));
        let cut = &log[..log.len() - 10];
        assert!(parse_state_line(cut).unwrap_err().contains("incomplete"));
        assert!(parse_state_line("nothing here").is_err());
    }

    #[test]
    fn differences_name_each_mismatch() {
        let s = vxlan_like();
        let mut want = s.changeable();
        assert!(s.differences(&want).is_empty());
        want.insert("tx-checksum-ip-generic".into(), false);
        want.insert("rx-gro".into(), true);
        assert_eq!(
            s.differences(&want),
            [
                "rx-gro=on (is missing)",
                "tx-checksum-ip-generic=off (is on)"
            ]
        );
    }

    #[test]
    fn patterns_match_like_ethtool() {
        assert!(glob_match("tx-checksum-*", "tx-checksum-ip-generic"));
        assert!(glob_match("tx-tcp*-segmentation", "tx-tcp6-segmentation"));
        assert!(glob_match(
            "tx-tcp*-segmentation",
            "tx-tcp-mangleid-segmentation"
        ));
        assert!(!glob_match("tx-tcp*-segmentation", "tx-udp-segmentation"));
        assert!(glob_match("tx-scatter-gather*", "tx-scatter-gather"));
        assert!(!glob_match("rx-checksum", "rx-checksumming"));
    }
}

/// Property tests of the name matching (ethtool's legacy-name patterns).
#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn glob_matching_never_panics(pattern in "[a-z*-]{0,12}", name in "\\PC{0,24}") {
            let _ = glob_match(&pattern, &name);
            prop_assert!(glob_match("*", &name));
            prop_assert!(glob_match(&name, &name));
        }
    }
}
