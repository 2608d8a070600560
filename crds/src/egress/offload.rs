//! An EgressBenchmark's offload profiles (`spec.offload`) and the bookkeeping of each change
//! (`status.offload`): what was found, applied and is to be restored, per node and interface.

use std::collections::BTreeMap;

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// Offload profiles.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct OffloadSpec {
    #[schemars(length(min = 1, max = 8))]
    #[x_kube(validation = Rule::new("self.all(p, self.exists_one(q, q.name == p.name))").message("offload profile names must be unique"))]
    pub profiles: Vec<OffloadProfile>,
}

/// A named set of offload settings, e.g. "vxlan-csum-off".
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OffloadProfile {
    #[schemars(
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
        length(min = 1, max = 63)
    )]
    pub name: String,
    #[schemars(length(min = 1, max = 16))]
    pub settings: Vec<OffloadSetting>,
}

/// Features to set on one interface of some nodes.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OffloadSetting {
    /// Nodes to change; empty means the client and server nodes of the cases using the profile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub node_names: Vec<String>,
    /// Interface name on those nodes, e.g. vxlan.calico, flannel.1, eth0.
    #[schemars(length(min = 1, max = 15))]
    pub interface: String,
    /// ethtool feature -> true (on) / false (off), e.g. tx-checksumming: false. Legacy ethtool
    /// names (tx-checksumming, rx-checksumming, ...) and kernel names (tx-checksum-ip-generic)
    /// are both accepted.
    #[schemars(extend("minProperties" = 1, "maxProperties" = 32))]
    pub features: BTreeMap<String, bool>,
}

/// Offload bookkeeping for one interface on one node.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OffloadRecord {
    /// The case the profile was applied for.
    pub case: String,
    pub node: String,
    pub interface: String,
    pub profile: String,
    /// The requested features as found before any change.
    #[serde(default)]
    pub before: BTreeMap<String, bool>,
    /// The requested features as the device reported them after the change.
    #[serde(default)]
    pub applied: BTreeMap<String, bool>,
    /// Every kernel feature that changed (including ones the kernel switched as a consequence,
    /// e.g. TSO follows checksumming), with its value before: what a restore writes back.
    #[serde(default)]
    pub restore: BTreeMap<String, bool>,
    /// The apply Job has finished and before/applied/restore are known.
    #[serde(default)]
    pub recorded: bool,
    /// True once the features before have been written back.
    #[serde(default)]
    pub restored: bool,
    /// Last restore failure, retried until it succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_error: Option<String>,
}
