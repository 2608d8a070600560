//! A result's environment fingerprint: seven named facts about where a run measured, each a
//! short text compared exactly. A baseline uses only results whose fingerprint matches this
//! run's, except in the fields `baseline.ignoreEnvironment` leaves out, so a new kernel or
//! another node type never passes for a regression (or hides one). Pure: the operator records
//! it in every result, the CLI shows and compares it.
//!
//! A result without a fingerprint (written before fingerprints existed) is unknown in every
//! field: it matches only when every field is ignored (`ignoreEnvironment: [all]`).

use std::collections::{BTreeMap, BTreeSet};

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::result::{ClusterFacts, NodeFacts};

/// Longest value of a field; a longer one keeps its start and a hash of the whole (so two
/// long values that differ still differ).
pub const MAX_FIELD: usize = 512;

/// Where a run measured, as a handful of exactly compared texts. A field the operator could not
/// see is absent; absent equals only absent.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Environment {
    /// The API server's version, e.g. "v1.31.2".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub kubernetes: Option<String>,
    /// The kernel versions of the workers' nodes, distinct and sorted, e.g. "6.1.0-21-amd64".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub kernel: Option<String>,
    /// CPU count and model of the workers' nodes, distinct and sorted, e.g.
    /// "8 CPUs AMD EPYC 7B13".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub cpu: Option<String>,
    /// The MTUs of the interfaces the workers saw, distinct and sorted, e.g. "mtu 1450, 1500"
    /// (names are left out: a hostNetwork worker sees every pod's veth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub network: Option<String>,
    /// The CNI's DaemonSet and image on the workers' nodes, e.g.
    /// "calico-node docker.io/calico/node:v3.28.0" (known CNIs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub cni: Option<String>,
    /// The image of an IngressBenchmark's sweep target (the ingress controller), e.g.
    /// "registry.k8s.io/ingress-nginx/controller:v1.11.2".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub ingress_controller: Option<String>,
    /// The nodes the workers ran on, per role, e.g. "client: node-a, node-b; server: node-c".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub placement: Option<String>,
}

/// A field of the fingerprint, as `baseline.ignoreEnvironment` names it; `all` is every field
/// (and admits results without a fingerprint).
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum EnvironmentField {
    Kubernetes,
    Kernel,
    Cpu,
    Network,
    Cni,
    IngressController,
    Placement,
    All,
}

impl EnvironmentField {
    /// Every real field, in the fingerprint's order.
    pub const FIELDS: [EnvironmentField; 7] = [
        EnvironmentField::Kubernetes,
        EnvironmentField::Kernel,
        EnvironmentField::Cpu,
        EnvironmentField::Network,
        EnvironmentField::Cni,
        EnvironmentField::IngressController,
        EnvironmentField::Placement,
    ];

    /// Its name as the spec spells it.
    pub fn name(self) -> &'static str {
        match self {
            EnvironmentField::Kubernetes => "kubernetes",
            EnvironmentField::Kernel => "kernel",
            EnvironmentField::Cpu => "cpu",
            EnvironmentField::Network => "network",
            EnvironmentField::Cni => "cni",
            EnvironmentField::IngressController => "ingressController",
            EnvironmentField::Placement => "placement",
            EnvironmentField::All => "all",
        }
    }
}

/// The nodes workers of each role ran on ("client" -> {node-a}).
pub type Placement = BTreeMap<String, BTreeSet<String>>;

impl Environment {
    /// The fingerprint of what a run found: its cluster facts and its workers' placement.
    pub fn of(facts: &ClusterFacts, placement: &Placement) -> Environment {
        let nodes = &facts.nodes;
        let mtus: BTreeSet<u32> = nodes
            .iter()
            .flat_map(|n| n.interfaces.iter().map(|i| i.mtu))
            .collect();
        let roles: Vec<String> = placement
            .iter()
            .filter(|(_, nodes)| !nodes.is_empty())
            .map(|(role, nodes)| format!("{role}: {}", join(nodes.iter(), ", ")))
            .collect();
        Environment {
            kubernetes: facts.kubernetes_version.as_deref().map(bounded),
            kernel: distinct(nodes.iter().filter_map(|n| n.kernel_version.clone())),
            cpu: distinct(nodes.iter().filter_map(cpu)),
            network: (!mtus.is_empty())
                .then(|| bounded(&format!("mtu {}", join(mtus.iter(), ", ")))),
            cni: facts.cni.as_deref().map(bounded),
            ingress_controller: facts.ingress_controller.as_deref().map(bounded),
            placement: (!roles.is_empty()).then(|| bounded(&roles.join("; "))),
        }
    }

    /// A field's value.
    pub fn get(&self, field: EnvironmentField) -> Option<&str> {
        match field {
            EnvironmentField::Kubernetes => self.kubernetes.as_deref(),
            EnvironmentField::Kernel => self.kernel.as_deref(),
            EnvironmentField::Cpu => self.cpu.as_deref(),
            EnvironmentField::Network => self.network.as_deref(),
            EnvironmentField::Cni => self.cni.as_deref(),
            EnvironmentField::IngressController => self.ingress_controller.as_deref(),
            EnvironmentField::Placement => self.placement.as_deref(),
            EnvironmentField::All => None,
        }
    }
}

/// One field that differs between two fingerprints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    pub field: EnvironmentField,
    /// This run's value (or A's).
    pub this: Option<String>,
    /// The other result's value (or B's).
    pub other: Option<String>,
}

impl Difference {
    /// "kernel 6.1.0-18-amd64 (this run: 6.1.0-21-amd64)".
    pub fn describe(&self) -> String {
        format!(
            "{} {} (this run: {})",
            self.field.name(),
            shown(self.other.as_deref()),
            shown(self.this.as_deref())
        )
    }
}

/// A value as messages show it.
pub fn shown(value: Option<&str>) -> &str {
    value.unwrap_or("unknown")
}

/// How another result's environment compares with this run's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Match {
    /// Differences in the fields compared: the result is of another environment.
    pub differs: Vec<Difference>,
    /// Differences in the fields left out of the comparison.
    pub ignored: Vec<Difference>,
    /// One side has no fingerprint (a result from before fingerprints): every field is unknown
    /// there and counts as different unless ignored.
    pub unrecorded: bool,
}

impl Match {
    /// The result may be part of the baseline.
    pub fn matches(&self) -> bool {
        self.differs.is_empty()
    }
}

/// Compares `other` with `this`, leaving out the fields in `ignore`.
pub fn compare(
    this: Option<&Environment>,
    other: Option<&Environment>,
    ignore: &[EnvironmentField],
) -> Match {
    let ignored =
        |f: EnvironmentField| ignore.contains(&f) || ignore.contains(&EnvironmentField::All);
    let mut out = Match {
        unrecorded: this.is_none() || other.is_none(),
        ..Default::default()
    };
    for field in EnvironmentField::FIELDS {
        let (a, b) = (
            this.and_then(|e| e.get(field)),
            other.and_then(|e| e.get(field)),
        );
        if !out.unrecorded && a == b {
            continue;
        }
        let d = Difference {
            field,
            this: a.map(str::to_string),
            other: b.map(str::to_string),
        };
        if ignored(field) {
            if !out.unrecorded {
                out.ignored.push(d);
            }
        } else {
            out.differs.push(d);
        }
    }
    out
}

fn cpu(n: &NodeFacts) -> Option<String> {
    match (n.cpus.as_deref(), n.cpu_model.as_deref()) {
        (Some(count), Some(model)) => Some(format!("{count} CPUs {model}")),
        (Some(count), None) => Some(format!("{count} CPUs")),
        (None, Some(model)) => Some(model.to_string()),
        (None, None) => None,
    }
}

/// The distinct values, sorted and joined; None without any.
fn distinct(values: impl Iterator<Item = String>) -> Option<String> {
    let set: BTreeSet<String> = values.collect();
    (!set.is_empty()).then(|| bounded(&join(set.iter(), "; ")))
}

fn join<T: std::fmt::Display>(items: impl Iterator<Item = T>, sep: &str) -> String {
    items.map(|i| i.to_string()).collect::<Vec<_>>().join(sep)
}

/// `text` when it fits MAX_FIELD, else its start and the FNV-1a hash of the whole.
fn bounded(text: &str) -> String {
    if text.len() <= MAX_FIELD {
        return text.to_string();
    }
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let tail = format!("… #{hash:016x}");
    let room = MAX_FIELD.saturating_sub(tail.len());
    let mut head: String = String::new();
    for c in text.chars() {
        if head.len() + c.len_utf8() > room {
            break;
        }
        head.push(c);
    }
    head + &tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::InterfaceFacts;

    fn node(name: &str, kernel: &str) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            kernel_version: Some(kernel.into()),
            cpus: Some("8".into()),
            cpu_model: Some("AMD EPYC 7B13".into()),
            interfaces: vec![
                InterfaceFacts {
                    name: "eth0".into(),
                    mtu: 1450,
                },
                InterfaceFacts {
                    name: "veth1".into(),
                    mtu: 1500,
                },
            ],
            ..Default::default()
        }
    }

    fn facts(kernels: &[&str]) -> ClusterFacts {
        ClusterFacts {
            kubernetes_version: Some("v1.31.2".into()),
            nodes: kernels
                .iter()
                .enumerate()
                .map(|(i, k)| node(&format!("node-{i}"), k))
                .collect(),
            cni: Some("calico-node docker.io/calico/node:v3.28.0".into()),
            ingress_controller: None,
        }
    }

    fn placement(pairs: &[(&str, &str)]) -> Placement {
        let mut p = Placement::new();
        for (role, node) in pairs {
            p.entry(role.to_string())
                .or_default()
                .insert(node.to_string());
        }
        p
    }

    #[test]
    fn the_fingerprint_names_each_fact_once_sorted() {
        let e = Environment::of(
            &facts(&["6.1.0-21-amd64", "6.1.0-18-amd64", "6.1.0-21-amd64"]),
            &placement(&[
                ("server", "node-2"),
                ("client", "node-1"),
                ("client", "node-0"),
            ]),
        );
        assert_eq!(e.kubernetes.as_deref(), Some("v1.31.2"));
        assert_eq!(e.kernel.as_deref(), Some("6.1.0-18-amd64; 6.1.0-21-amd64"));
        assert_eq!(e.cpu.as_deref(), Some("8 CPUs AMD EPYC 7B13"));
        assert_eq!(e.network.as_deref(), Some("mtu 1450, 1500"));
        assert_eq!(
            e.cni.as_deref(),
            Some("calico-node docker.io/calico/node:v3.28.0")
        );
        assert_eq!(e.ingress_controller, None);
        assert_eq!(
            e.placement.as_deref(),
            Some("client: node-0, node-1; server: node-2")
        );
        let none = Environment::of(&ClusterFacts::default(), &Placement::new());
        assert_eq!(none, Environment::default());
    }

    #[test]
    fn a_different_kernel_differs_and_can_be_ignored() {
        let p = placement(&[("client", "node-0")]);
        let now = Environment::of(&facts(&["6.1.0-21-amd64"]), &p);
        let then = Environment::of(&facts(&["6.1.0-18-amd64"]), &p);
        let m = compare(Some(&now), Some(&then), &[]);
        assert!(!m.matches());
        assert_eq!(m.differs.len(), 1);
        assert_eq!(
            m.differs[0].describe(),
            "kernel 6.1.0-18-amd64 (this run: 6.1.0-21-amd64)"
        );
        let m = compare(Some(&now), Some(&then), &[EnvironmentField::Kernel]);
        assert!(m.matches());
        assert_eq!(m.ignored.len(), 1);
        assert_eq!(m.ignored[0].field, EnvironmentField::Kernel);
        let same = compare(Some(&now), Some(&now.clone()), &[]);
        assert_eq!(same, Match::default());
    }

    #[test]
    fn an_unrecorded_environment_matches_only_when_every_field_is_ignored() {
        let now = Environment::of(&facts(&["6.1.0-21-amd64"]), &Placement::new());
        let m = compare(Some(&now), None, &[EnvironmentField::Placement]);
        assert!(m.unrecorded && !m.matches());
        assert_eq!(m.differs.len(), 6, "every field but the ignored one");
        let m = compare(Some(&now), None, &[EnvironmentField::All]);
        assert!(m.unrecorded && m.matches());
        assert!(m.ignored.is_empty());
        let m = compare(Some(&now), None, &EnvironmentField::FIELDS);
        assert!(m.matches());
    }

    #[test]
    fn an_absent_fact_equals_only_an_absent_fact() {
        let now = Environment::default();
        let then = Environment {
            cni: Some("cilium quay.io/cilium/cilium:v1.16.1".into()),
            ..Default::default()
        };
        let m = compare(Some(&now), Some(&then), &[]);
        assert_eq!(m.differs.len(), 1);
        assert_eq!(
            m.differs[0].describe(),
            "cni cilium quay.io/cilium/cilium:v1.16.1 (this run: unknown)"
        );
    }

    #[test]
    fn long_values_stay_bounded_and_distinct() {
        let many = |last: &str| {
            let mut nodes: Vec<(&str, String)> = (0..100)
                .map(|i| ("client", format!("node-with-a-long-name-{i:03}")))
                .collect();
            nodes.push(("client", last.to_string()));
            let pairs: Vec<(&str, &str)> = nodes.iter().map(|(r, n)| (*r, n.as_str())).collect();
            Environment::of(&ClusterFacts::default(), &placement(&pairs))
        };
        let (a, b) = (many("zz-a"), many("zz-b"));
        let (pa, pb) = (a.placement.unwrap(), b.placement.unwrap());
        assert!(pa.len() <= MAX_FIELD && pb.len() <= MAX_FIELD);
        assert_ne!(pa, pb);
        let cjk = "节".repeat(400);
        assert!(bounded(&cjk).len() <= MAX_FIELD);
    }
}
