//! Feature names, ethtool(8)-style: the kernel's own names (`tx-checksum-ip-generic`) and the
//! legacy aggregate names (`tx-checksumming` / `tx`) that stand for a group of kernel bits.
//! Pure functions over a [`RawFeatures`] snapshot.

use std::collections::BTreeMap;

use protocol::offload::{glob_match, legacy_name, DeviceState, LEGACY_NAMES};
use serde::{Deserialize, Serialize};

use super::ethtool::RawFeatures;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnOff {
    On,
    Off,
}

impl From<bool> for OnOff {
    fn from(on: bool) -> Self {
        if on {
            OnOff::On
        } else {
            OnOff::Off
        }
    }
}

impl std::fmt::Display for OnOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if *self == OnOff::On { "on" } else { "off" })
    }
}

/// The name a feature appears under in [`RawFeatures::values`]: the long legacy name for a
/// short one (`tx` -> `tx-checksumming`), any other name unchanged.
pub(crate) fn listed_name(name: &str) -> &str {
    legacy_name(name).map_or(name, |(long, _)| long)
}

impl RawFeatures {
    /// The whole state in kernel names, as the operator records it.
    pub(crate) fn state(&self, interface: &str) -> DeviceState {
        let named = |i: usize| self.names.get(i).filter(|n| !n.is_empty());
        DeviceState {
            interface: interface.to_string(),
            features: (0..self.names.len())
                .filter_map(|i| Some((named(i)?.clone(), *self.active.get(i)?)))
                .collect(),
            fixed: (0..self.names.len())
                .filter(|&i| self.is_fixed(i))
                .filter_map(|i| named(i).cloned())
                .collect(),
        }
    }

    /// A bit the driver does not let anyone change (or one this snapshot does not know).
    pub(crate) fn is_fixed(&self, bit: usize) -> bool {
        !self.hw.get(bit).copied().unwrap_or(false)
            || self.nochange.get(bit).copied().unwrap_or(true)
    }

    /// The kernel bits a name stands for; `None` if the device has no such feature.
    pub(crate) fn resolve(&self, name: &str) -> Option<Vec<usize>> {
        if let Some(i) = self.names.iter().position(|n| n == name && !n.is_empty()) {
            return Some(vec![i]);
        }
        let (_, pattern) = legacy_name(name)?;
        let bits: Vec<usize> = self
            .names
            .iter()
            .enumerate()
            .filter(|(_, n)| glob_match(pattern, n))
            .map(|(i, _)| i)
            .collect();
        (!bits.is_empty()).then_some(bits)
    }

    /// A group is on when any of its bits is active (as ethtool -k shows it).
    pub(crate) fn is_on(&self, bits: &[usize]) -> bool {
        bits.iter().any(|&i| self.active.get(i) == Some(&true))
    }

    /// Every kernel feature and every legacy name the device has, on or off.
    pub(crate) fn values(&self) -> BTreeMap<String, OnOff> {
        let kernel = self
            .names
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.is_empty())
            .map(|(i, n)| (n.clone(), self.is_on(&[i]).into()));
        let legacy = LEGACY_NAMES.iter().filter_map(|(long, _, _)| {
            self.resolve(long)
                .map(|bits| ((*long).to_string(), self.is_on(&bits).into()))
        });
        kernel.chain(legacy).collect()
    }

    /// Names (kernel and legacy) the driver does not let anyone change.
    pub(crate) fn fixed(&self) -> Vec<String> {
        let kernel = self
            .names
            .iter()
            .enumerate()
            .filter(|(i, n)| self.is_fixed(*i) && !n.is_empty())
            .map(|(_, n)| n.clone());
        let legacy = LEGACY_NAMES.iter().filter_map(|(long, _, _)| {
            let bits = self.resolve(long)?;
            bits.iter()
                .all(|&i| self.is_fixed(i))
                .then(|| (*long).to_string())
        });
        let mut all: Vec<String> = kernel.chain(legacy).collect();
        all.sort();
        all
    }
}

/// Why a request cannot be turned into kernel bits.
#[derive(Debug, PartialEq)]
pub(crate) enum PlanError {
    Unknown(String),
    Fixed(String, OnOff),
}

/// Turns (name, on) requests into the kernel bits to set, as ethtool -K does: a legacy name sets
/// every changeable bit of its group. A fixed feature already in the requested state is fine;
/// one that would have to change is an error.
pub(crate) fn plan(
    features: &RawFeatures,
    requests: &[(String, bool)],
) -> Result<Vec<(String, bool)>, PlanError> {
    let mut wanted = Vec::new();
    for (name, on) in requests {
        let bits = features
            .resolve(name)
            .ok_or_else(|| PlanError::Unknown(name.clone()))?;
        let changeable: Vec<usize> = bits
            .iter()
            .copied()
            .filter(|&i| !features.is_fixed(i))
            .collect();
        if changeable.is_empty() {
            if features.is_on(&bits) != *on {
                return Err(PlanError::Fixed(name.clone(), features.is_on(&bits).into()));
            }
            continue;
        }
        wanted.extend(
            changeable
                .into_iter()
                .filter_map(|i| features.names.get(i))
                .map(|n| (n.clone(), *on)),
        );
    }
    Ok(wanted)
}

/// The requests whose feature is not in the requested state in `after`.
pub(crate) fn not_applied(after: &RawFeatures, requests: &[(String, bool)]) -> Vec<String> {
    requests
        .iter()
        .filter(|(name, on)| {
            after
                .resolve(name)
                .is_none_or(|bits| after.is_on(&bits) != *on)
        })
        .map(|(name, on)| format!("{name}={}", OnOff::from(*on)))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// What a vxlan device reports (kernel 6.x): only the generic checksum bit is changeable.
    pub(crate) fn vxlan_like() -> RawFeatures {
        let names = [
            "tx-scatter-gather",
            "tx-checksum-ipv4",
            "tx-checksum-ip-generic",
            "tx-checksum-ipv6",
            "tx-tcp-segmentation",
            "tx-tcp6-segmentation",
            "netns-local",
            "rx-checksum",
        ];
        RawFeatures {
            names: names.iter().map(|s| s.to_string()).collect(),
            hw: vec![true, false, true, false, true, true, false, true],
            active: vec![true, false, true, false, true, true, false, true],
            nochange: vec![false, false, false, false, false, false, true, false],
        }
    }

    fn req(name: &str, on: bool) -> (String, bool) {
        (name.to_string(), on)
    }

    #[test]
    fn a_state_lists_kernel_features_and_what_is_fixed() {
        let s = vxlan_like().state("vx0");
        assert_eq!(s.interface, "vx0");
        assert_eq!(s.features.len(), 8);
        assert!(s.features["tx-checksum-ip-generic"]);
        assert!(!s.features["tx-checksum-ipv4"]);
        assert_eq!(
            s.fixed,
            ["tx-checksum-ipv4", "tx-checksum-ipv6", "netns-local"]
        );
        assert_eq!(s.value("tx-checksumming"), Some(true));
    }

    #[test]
    fn legacy_names_set_the_changeable_bits_of_their_group() {
        let f = vxlan_like();
        assert_eq!(
            plan(&f, &[req("tx-checksumming", false)]),
            Ok(vec![req("tx-checksum-ip-generic", false)])
        );
        assert_eq!(
            plan(&f, &[req("tx", true)]),
            Ok(vec![req("tx-checksum-ip-generic", true)])
        );
        assert_eq!(
            plan(&f, &[req("tso", false)]),
            Ok(vec![
                req("tx-tcp-segmentation", false),
                req("tx-tcp6-segmentation", false)
            ])
        );
        assert_eq!(
            plan(&f, &[req("rx-checksum", false)]),
            Ok(vec![req("rx-checksum", false)])
        );
    }

    #[test]
    fn unknown_and_fixed_features_are_refused() {
        let f = vxlan_like();
        assert_eq!(
            plan(&f, &[req("warp-drive", true)]),
            Err(PlanError::Unknown("warp-drive".into()))
        );
        // The device has no bits of this group at all: unknown, not silently ignored.
        assert_eq!(
            plan(&f, &[req("lro", false)]),
            Err(PlanError::Unknown("lro".into()))
        );
        assert_eq!(
            plan(&f, &[req("tx-checksum-ipv4", true)]),
            Err(PlanError::Fixed("tx-checksum-ipv4".into(), OnOff::Off))
        );
        // Asking a fixed feature for the state it is in anyway is harmless.
        assert_eq!(plan(&f, &[req("tx-checksum-ipv4", false)]), Ok(vec![]));
    }

    #[test]
    fn values_include_legacy_aggregates_and_fixed_lists_both() {
        let mut f = vxlan_like();
        assert_eq!(f.values()["tx-checksumming"], OnOff::On);
        f.active[2] = false;
        assert_eq!(f.values()["tx-checksumming"], OnOff::Off);
        assert!(!f.values().contains_key("large-receive-offload"));
        let fixed = f.fixed();
        assert!(fixed.contains(&"tx-checksum-ipv4".to_string()));
        assert!(fixed.contains(&"netns-local".to_string()));
        assert!(!fixed.contains(&"tx-checksumming".to_string()));
        assert_eq!(
            not_applied(&f, &[req("tx", false), req("sg", false)]),
            vec!["sg=off".to_string()]
        );
    }
}

/// Property tests: ethtool's legacy-name rules hold for any snapshot and any request.
#[cfg(test)]
mod props {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    fn features() -> impl Strategy<Value = RawFeatures> {
        vec(
            ("(tx|rx)-[a-z0-9-]{0,16}", any::<(bool, bool, bool)>()),
            0..48,
        )
        .prop_map(|bits| RawFeatures {
            names: bits.iter().map(|(n, _)| n.clone()).collect(),
            hw: bits.iter().map(|(_, b)| b.0).collect(),
            active: bits.iter().map(|(_, b)| b.1).collect(),
            nochange: bits.iter().map(|(_, b)| b.2).collect(),
        })
    }

    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::sample::select(LEGACY_NAMES.iter().map(|l| l.0).collect::<Vec<_>>())
                .prop_map(str::to_string),
            proptest::sample::select(LEGACY_NAMES.iter().map(|l| l.1).collect::<Vec<_>>())
                .prop_map(str::to_string),
            "(tx|rx)-[a-z0-9-]{0,16}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn plans_only_change_changeable_bits(
            f in features(),
            requests in vec((name(), any::<bool>()), 0..6),
        ) {
            let _ = (f.values(), f.fixed(), not_applied(&f, &requests));
            match plan(&f, &requests) {
                Ok(wanted) => {
                    for (n, on) in &wanted {
                        let i = f.names.iter().position(|x| x == n).unwrap();
                        prop_assert!(requests.iter().any(|(_, o)| o == on));
                        // The bit itself, or a same-named one, is changeable.
                        prop_assert!(
                            !f.is_fixed(i) || f.names.iter().enumerate().any(|(j, x)| x == n && !f.is_fixed(j))
                        );
                    }
                }
                Err(PlanError::Unknown(n)) => prop_assert!(f.resolve(&n).is_none()),
                Err(PlanError::Fixed(n, state)) => {
                    let bits = f.resolve(&n).unwrap();
                    prop_assert!(bits.iter().all(|&i| f.is_fixed(i)));
                    prop_assert_eq!(OnOff::from(f.is_on(&bits)), state);
                }
            }
        }
    }
}
