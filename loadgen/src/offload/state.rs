//! A device's whole feature state (kernel names), as the operator records it before a change
//! and compares it with after a restore. Printed as one marked line on stdout by
//! `offload get|set --state`, read by the operator from the Job pod's log: a log has no size
//! limit (a termination message keeps 4 KiB shared by all containers), and a line that does not
//! parse as a whole is refused, so a cut record is never mistaken for a complete one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ethtool::RawFeatures;
use super::features::legacy_pattern;

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
    pub(crate) fn of(interface: &str, raw: &RawFeatures) -> DeviceState {
        let named = |i: usize| raw.names.get(i).filter(|n| !n.is_empty());
        DeviceState {
            interface: interface.to_string(),
            features: (0..raw.names.len())
                .filter_map(|i| Some((named(i)?.clone(), *raw.active.get(i)?)))
                .collect(),
            fixed: (0..raw.names.len())
                .filter(|&i| raw.is_fixed(i))
                .filter_map(|i| named(i).cloned())
                .collect(),
        }
    }

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
        let pattern = legacy_pattern(name)?;
        let bits: Vec<bool> = self
            .features
            .iter()
            .filter(|(n, _)| super::features::glob_match(pattern, n))
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
    use crate::offload::features::tests::vxlan_like;

    #[test]
    fn a_state_lists_kernel_features_and_what_is_fixed() {
        let s = DeviceState::of("vx0", &vxlan_like());
        assert_eq!(s.features.len(), 8);
        assert!(s.features["tx-checksum-ip-generic"]);
        assert!(s.fixed.contains(&"tx-checksum-ipv4".to_string()));
        assert!(!s.changeable().contains_key("tx-checksum-ipv4"));
        assert!(s.changeable().contains_key("tx-checksum-ip-generic"));
        assert_eq!(s.value("tx-checksumming"), Some(true));
        assert_eq!(s.value("tx"), Some(true));
        assert_eq!(s.value("lro"), None);
    }

    #[test]
    fn the_line_round_trips_and_a_cut_line_is_refused() {
        let s = DeviceState::of("vx0", &vxlan_like());
        let log = format!("some warning on stderr\n{}\n", s.line());
        assert_eq!(parse_state_line(&log), Ok(s.clone()));
        let cut = &log[..log.len() - 10];
        assert!(parse_state_line(cut).unwrap_err().contains("incomplete"));
        assert!(parse_state_line("nothing here").is_err());
    }

    #[test]
    fn differences_name_each_mismatch() {
        let s = DeviceState::of("vx0", &vxlan_like());
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
}
