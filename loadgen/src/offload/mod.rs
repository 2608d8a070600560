//! Read and change a network device's offload features (what `ethtool -k` / `ethtool -K` do)
//! through the kernel's ethtool generic-netlink interface, in the caller's network namespace.
//!
//! Names are the kernel's (`tx-checksum-ip-generic`) or ethtool's legacy ones
//! (`tx-checksumming` / `tx`, `scatter-gather` / `sg`, `tcp-segmentation-offload` / `tso`, ...).
//! [`set`] returns what it found, what it asked for, what the device ended up with, and a
//! `restore` map that puts every changed kernel feature back. The recorded device state
//! ([`DeviceState`]) and the legacy name table are the `protocol` crate's ([`protocol::offload`]).

pub mod cli;
mod ethtool;
mod features;
mod netlink;

use std::collections::BTreeMap;

use protocol::offload::DeviceState;
use serde::{Deserialize, Serialize};

use ethtool::{Ethtool, RawFeatures};
pub use features::OnOff;
use features::{listed_name, not_applied, plan, PlanError};
use netlink::NetlinkError;

/// Linux interface names are at most 15 bytes (IFNAMSIZ - 1).
const MAX_IFNAME: usize = 15;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OffloadError {
    #[error("no interface named {0:?} in this network namespace")]
    UnknownInterface(String),
    #[error("unknown feature {feature:?} on {interface} (`netbench-loadgen offload get --interface {interface}` lists them)")]
    UnknownFeature { interface: String, feature: String },
    #[error("{feature} is fixed {value} on {interface}: the driver does not allow changing it")]
    Fixed {
        interface: String,
        feature: String,
        value: OnOff,
    },
    #[error("invalid feature setting {0:?}: expected NAME=on|off")]
    BadSetting(String),
    #[error("permission denied: changing offloads needs CAP_NET_ADMIN in the interface's network namespace")]
    PermissionDenied,
    #[error("ethtool netlink {op} on {interface} failed: {message}")]
    Netlink {
        op: &'static str,
        interface: String,
        message: String,
    },
}

/// `offload get`: every feature (kernel and legacy names) on or off, and which are fixed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureReport {
    pub interface: String,
    pub features: BTreeMap<String, OnOff>,
    pub fixed: Vec<String>,
}

/// `offload set`: before and after, as JSON for the privileged Jobs and the operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetReport {
    pub interface: String,
    pub requested: BTreeMap<String, OnOff>,
    pub before: BTreeMap<String, OnOff>,
    pub after: BTreeMap<String, OnOff>,
    /// Names whose value changed, with the new value (includes features the kernel switched as a
    /// consequence, e.g. TSO follows checksumming).
    pub changed: BTreeMap<String, OnOff>,
    /// Kernel features to set to put the device back as it was before this call.
    pub restore: BTreeMap<String, OnOff>,
    pub fixed: Vec<String>,
    /// Requests the device did not end up honouring (a dependency refused them); empty on success.
    pub not_applied: Vec<String>,
    /// The whole state after the change, read back from the kernel (for `--state`).
    #[serde(skip)]
    pub state_after: DeviceState,
}

/// `offload set --summary-file`: what a caller needs to undo the change, in one compact JSON
/// line (it must fit a Kubernetes termination message, at most 4096 bytes). `before` and
/// `applied` are keyed by the requested names as written (`tx-checksumming`, `tx`); `restore` is
/// [`SetReport::restore`] (kernel names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetSummary {
    pub interface: String,
    pub before: BTreeMap<String, bool>,
    pub applied: BTreeMap<String, bool>,
    pub restore: BTreeMap<String, bool>,
}

impl SetReport {
    pub fn summary(&self) -> SetSummary {
        let requested = |map: &BTreeMap<String, OnOff>| {
            self.requested
                .keys()
                .filter_map(|name| {
                    let value = map.get(listed_name(name))?;
                    Some((name.clone(), *value == OnOff::On))
                })
                .collect()
        };
        SetSummary {
            interface: self.interface.clone(),
            before: requested(&self.before),
            applied: requested(&self.after),
            restore: self
                .restore
                .iter()
                .map(|(name, v)| (name.clone(), *v == OnOff::On))
                .collect(),
        }
    }
}

/// Parses `NAME=on|off`.
pub fn parse_setting(s: &str) -> Result<(String, bool), OffloadError> {
    let bad = || OffloadError::BadSetting(s.to_string());
    let (name, value) = s.split_once('=').ok_or_else(bad)?;
    let on = match value {
        "on" => true,
        "off" => false,
        _ => return Err(bad()),
    };
    if name.is_empty() {
        return Err(bad());
    }
    Ok((name.to_string(), on))
}

pub fn get(interface: &str) -> Result<FeatureReport, OffloadError> {
    Ok(get_with_state(interface)?.0)
}

/// [`get`] and the whole kernel-name state from the same read.
pub fn get_with_state(interface: &str) -> Result<(FeatureReport, DeviceState), OffloadError> {
    let features = Session::open(interface)?.features()?;
    let report = FeatureReport {
        interface: interface.to_string(),
        features: features.values(),
        fixed: features.fixed(),
    };
    let state = features.state(interface);
    Ok((report, state))
}

/// Applies `requests` (feature name, on?) and reports before/after. Unknown or fixed features are
/// refused before anything changes.
pub fn set(interface: &str, requests: &[(String, bool)]) -> Result<SetReport, OffloadError> {
    let mut session = Session::open(interface)?;
    let before = session.features()?;
    let wanted = plan(&before, requests).map_err(|e| match e {
        PlanError::Unknown(feature) => OffloadError::UnknownFeature {
            interface: interface.to_string(),
            feature,
        },
        PlanError::Fixed(feature, value) => OffloadError::Fixed {
            interface: interface.to_string(),
            feature,
            value,
        },
    })?;
    if !wanted.is_empty() {
        session
            .ethtool
            .set_features(interface, &wanted)
            .map_err(|e| session.error("FEATURES_SET", e))?;
    }
    let after = session.features()?;
    Ok(set_report(interface, requests, &before, &after))
}

fn set_report(
    interface: &str,
    requests: &[(String, bool)],
    before: &RawFeatures,
    after: &RawFeatures,
) -> SetReport {
    let (before_values, after_values) = (before.values(), after.values());
    let changed = after_values
        .iter()
        .filter(|(name, v)| before_values.get(*name) != Some(v))
        .map(|(name, v)| (name.clone(), *v))
        .collect();
    let restore = (0..before.names.len().min(after.names.len()))
        .filter(|&i| before.active[i] != after.active[i] && !before.is_fixed(i))
        .map(|i| (before.names[i].clone(), before.active[i].into()))
        .collect();
    SetReport {
        interface: interface.to_string(),
        requested: requests
            .iter()
            .map(|(n, on)| (n.clone(), (*on).into()))
            .collect(),
        before: before_values,
        after: after_values,
        changed,
        restore,
        fixed: after.fixed(),
        not_applied: not_applied(after, requests),
        state_after: after.state(interface),
    }
}

/// An ethtool netlink connection bound to one interface name, mapping kernel errors.
struct Session {
    ethtool: Ethtool,
    interface: String,
}

impl Session {
    fn open(interface: &str) -> Result<Self, OffloadError> {
        if interface.is_empty()
            || interface.len() > MAX_IFNAME
            || interface.contains(['/', ' ', '\0'])
        {
            return Err(OffloadError::UnknownInterface(interface.to_string()));
        }
        let ethtool = Ethtool::open().map_err(|e| OffloadError::Netlink {
            op: "family lookup",
            interface: interface.to_string(),
            message: if e.errno == libc::ENOENT {
                "the kernel has no ethtool netlink interface (Linux 5.6 or later is needed)".into()
            } else {
                describe(&e)
            },
        })?;
        Ok(Session {
            ethtool,
            interface: interface.to_string(),
        })
    }

    fn features(&mut self) -> Result<RawFeatures, OffloadError> {
        let interface = self.interface.clone();
        self.ethtool
            .features(&interface)
            .map_err(|e| self.error("FEATURES_GET", e))
    }

    fn error(&self, op: &'static str, e: NetlinkError) -> OffloadError {
        match e.errno {
            libc::ENODEV => OffloadError::UnknownInterface(self.interface.clone()),
            libc::EPERM | libc::EACCES => OffloadError::PermissionDenied,
            _ => OffloadError::Netlink {
                op,
                interface: self.interface.clone(),
                message: describe(&e),
            },
        }
    }
}

fn describe(e: &NetlinkError) -> String {
    let os = std::io::Error::from_raw_os_error(e.errno);
    match &e.message {
        Some(m) => format!("{m} ({os})"),
        None => os.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use features::tests::vxlan_like;

    #[test]
    fn settings_parse_strictly() {
        assert_eq!(
            parse_setting("tx-checksumming=off"),
            Ok(("tx-checksumming".into(), false))
        );
        assert_eq!(parse_setting("tx=on"), Ok(("tx".into(), true)));
        for bad in ["tx", "tx=yes", "=on", "tx=On"] {
            assert_eq!(
                parse_setting(bad),
                Err(OffloadError::BadSetting(bad.into())),
                "{bad}"
            );
        }
    }

    #[test]
    fn set_report_lists_changes_and_how_to_restore() {
        let before = vxlan_like();
        let mut after = before.clone();
        after.active[2] = false; // tx-checksum-ip-generic
        after.active[4] = false; // TSO follows
        let r = set_report("vx0", &[("tx".into(), false)], &before, &after);
        assert_eq!(r.requested["tx"], OnOff::Off);
        assert_eq!(r.before["tx-checksumming"], OnOff::On);
        assert_eq!(r.after["tx-checksumming"], OnOff::Off);
        assert_eq!(r.changed.len(), 3, "{:?}", r.changed);
        assert_eq!(
            r.restore,
            BTreeMap::from([
                ("tx-checksum-ip-generic".to_string(), OnOff::On),
                ("tx-tcp-segmentation".to_string(), OnOff::On)
            ])
        );
        assert!(r.not_applied.is_empty());
        let summary = r.summary();
        assert_eq!(summary.interface, "vx0");
        assert_eq!(summary.before, BTreeMap::from([("tx".to_string(), true)]));
        assert_eq!(summary.applied, BTreeMap::from([("tx".to_string(), false)]));
        assert_eq!(
            summary.restore,
            BTreeMap::from([
                ("tx-checksum-ip-generic".to_string(), true),
                ("tx-tcp-segmentation".to_string(), true)
            ])
        );
        assert_eq!(
            serde_json::to_string(&summary).unwrap(),
            r#"{"interface":"vx0","before":{"tx":true},"applied":{"tx":false},"restore":{"tx-checksum-ip-generic":true,"tx-tcp-segmentation":true}}"#
        );
    }

    #[test]
    fn bad_interface_names_fail_before_any_syscall() {
        for name in ["", "a-name-longer-than-15", "has/slash"] {
            assert_eq!(
                get(name).unwrap_err(),
                OffloadError::UnknownInterface(name.into())
            );
        }
    }
}
