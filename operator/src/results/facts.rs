//! What the cluster was when a run finished: the API server's version, the nodes its
//! workers ran on, as the nodes report themselves, and the CNI running there. Best effort: a
//! fact that cannot be read is left out rather than failing the result.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::Client;

use crds::environment::Placement;
use crds::result::{ClusterFacts, InterfaceFacts, NodeFacts};
use protocol::worker::host::HostFacts;

/// Most nodes described in one result.
const MAX_NODES: usize = 128;
/// Most nodes whose pods are listed to find the CNI.
const MAX_CNI_NODES: usize = 8;
/// The DaemonSets of the CNIs the operator recognises on a node (their default names).
const KNOWN_CNIS: [&str; 14] = [
    "antrea-agent",
    "aws-node",
    "azure-cns",
    "calico-node",
    "canal",
    "cilium",
    "flannel",
    "kindnet",
    "kube-flannel-ds",
    "kube-multus-ds",
    "kube-ovn-cni",
    "kube-router",
    "ovnkube-node",
    "weave-net",
];

/// Node names from the run's reports, with the host facts a worker there reported.
pub type Seen = std::collections::BTreeMap<String, Option<HostFacts>>;

/// The facts (the ingress controller is the kind's to add: `Hooks::complete_result`). The CNI
/// is looked for only by a cluster-wide operator (`cluster_wide`): it lists the pods on the
/// workers' nodes in every namespace, which a namespace-scoped install may not.
pub async fn gather(client: &Client, nodes: &Seen, cluster_wide: bool) -> ClusterFacts {
    let version = match client.apiserver_version().await {
        Ok(v) => Some(clip(&v.git_version, 64)),
        Err(e) => {
            tracing::debug!("reading the API server's version: {e}");
            None
        }
    };
    let api: Api<Node> = Api::all(client.clone());
    let mut facts = vec![];
    for (name, host) in nodes
        .iter()
        .filter(|(n, _)| is_node_name(n))
        .take(MAX_NODES)
    {
        match api.get_opt(name).await {
            Ok(Some(node)) => facts.push(describe(name, &node, host.as_ref())),
            // A name no node has (a worker may claim anything) is left out.
            Ok(None) => {}
            Err(e) => tracing::debug!("reading node {name}: {e}"),
        }
    }
    let names: Vec<&str> = facts.iter().map(|n| n.name.as_str()).collect();
    ClusterFacts {
        kubernetes_version: version,
        cni: match cluster_wide {
            true => cni(client, &names).await,
            false => None,
        },
        ingress_controller: None,
        nodes: facts,
    }
}

/// Bounds what a kind added to the facts (an image name of any length).
pub fn bound(facts: &mut ClusterFacts) {
    if let Some(i) = &mut facts.ingress_controller {
        *i = clip(i, 512);
    }
}

/// The known CNI DaemonSets with pods on these nodes, each with its first container's image
/// ("calico-node docker.io/calico/node:v3.28.0"), distinct and sorted.
async fn cni(client: &Client, nodes: &[&str]) -> Option<String> {
    let api: Api<Pod> = Api::all(client.clone());
    let mut found = BTreeSet::new();
    for name in nodes.iter().filter(|n| is_node_name(n)).take(MAX_CNI_NODES) {
        let lp = ListParams::default()
            .fields(&format!("spec.nodeName={name}"))
            .limit(500);
        match api.list(&lp).await {
            Ok(pods) => found.extend(pods.items.iter().filter_map(cni_of)),
            Err(e) => tracing::debug!("listing the pods on node {name}: {e}"),
        }
    }
    (!found.is_empty()).then(|| clip(&found.into_iter().collect::<Vec<_>>().join("; "), 512))
}

/// "DAEMONSET IMAGE" when the pod belongs to a known CNI's DaemonSet.
fn cni_of(pod: &Pod) -> Option<String> {
    let owner = pod
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.kind == "DaemonSet" && KNOWN_CNIS.contains(&o.name.as_str()))?;
    let image = pod.spec.as_ref()?.containers.first()?.image.as_deref()?;
    Some(format!("{} {}", owner.name, clip(image, 256)))
}

fn describe(name: &str, node: &Node, host: Option<&HostFacts>) -> NodeFacts {
    let info = node.status.as_ref().and_then(|s| s.node_info.as_ref());
    let cpus = node
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("cpu"))
        .map(|q| clip(&q.0, 32));
    NodeFacts {
        name: name.to_string(),
        kernel_version: info.map(|i| clip(&i.kernel_version, 128)),
        os_image: info.map(|i| clip(&i.os_image, 128)),
        architecture: info.map(|i| clip(&i.architecture, 32)),
        kubelet_version: info.map(|i| clip(&i.kubelet_version, 64)),
        cpus,
        // Validated when the report arrived and again when it was loaded.
        cpu_model: host.and_then(|h| h.cpu_model.clone()),
        interfaces: host
            .map(|h| {
                h.interfaces
                    .iter()
                    .map(|i| InterfaceFacts {
                        name: i.name.clone(),
                        mtu: i.mtu,
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The placement's nodes that the facts describe (a worker may claim any node; only a node
/// that exists counts).
pub fn known(placement: &Placement, facts: &ClusterFacts) -> Placement {
    placement
        .iter()
        .map(|(role, nodes)| {
            let real = nodes
                .iter()
                .filter(|n| facts.nodes.iter().any(|f| &f.name == *n))
                .cloned()
                .collect();
            (role.clone(), real)
        })
        .collect()
}

/// A DNS subdomain, as node names are.
fn is_node_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
}

fn clip(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(owner_kind: &str, owner: &str, image: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": owner_kind, "name": owner, "uid": "u"
            }]},
            "spec": {"containers": [{"name": "c", "image": image}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_known_cnis_daemonset_pod_names_the_cni() {
        let calico = pod("DaemonSet", "calico-node", "docker.io/calico/node:v3.28.0");
        assert_eq!(
            cni_of(&calico).as_deref(),
            Some("calico-node docker.io/calico/node:v3.28.0")
        );
        assert_eq!(
            cni_of(&pod("DaemonSet", "kube-proxy", "k8s/kube-proxy:v1")),
            None
        );
        assert_eq!(cni_of(&pod("ReplicaSet", "cilium", "cilium:v1")), None);
        let long = pod("DaemonSet", "cilium", &"x".repeat(5000));
        assert!(cni_of(&long).unwrap().len() < 300);
    }

    #[test]
    fn only_node_names_are_looked_up() {
        assert!(is_node_name("nb-node-1"));
        assert!(!is_node_name("../etc"));
        assert!(!is_node_name(""));
        assert!(!is_node_name(&"a".repeat(254)));
    }
}
