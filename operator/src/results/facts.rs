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

use crate::base::memo::ClusterFactsMemo;

/// Most nodes described in one result.
const MAX_NODES: usize = 128;
/// Most nodes read at once.
const NODE_READS: usize = 16;
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
/// workers' nodes in every namespace, which a namespace-scoped install may not. What the API
/// server answered is used again for a minute (`memo`): at hundreds of runs an hour, the
/// version, the nodes and the CNI pods are read once a minute rather than once per result.
pub async fn gather(
    client: &Client,
    memo: &ClusterFactsMemo,
    nodes: &Seen,
    cluster_wide: bool,
) -> ClusterFacts {
    // The version beside the nodes, and the nodes NODE_READS at a time: a finishing
    // reconcile waits for them.
    let described = async {
        let named: Vec<(&String, &Option<HostFacts>)> = nodes
            .iter()
            .filter(|(n, _)| is_node_name(n))
            .take(MAX_NODES)
            .collect();
        let mut facts: Vec<NodeFacts> = vec![];
        for chunk in named.chunks(NODE_READS) {
            let reads: Vec<_> = chunk
                .iter()
                .map(|(name, host)| async move {
                    // A name no node has (a worker may claim anything) is left out.
                    node(client, memo, name)
                        .await
                        .map(|node| with_host(node, host.as_ref()))
                })
                .collect();
            facts.extend(futures::future::join_all(reads).await.into_iter().flatten());
        }
        // The CNI only on nodes that exist.
        let names: Vec<&str> = facts.iter().map(|n| n.name.as_str()).collect();
        let cni = match cluster_wide {
            true => cni(client, memo, &names).await,
            false => None,
        };
        (facts, cni)
    };
    let (kubernetes_version, (facts, cni)) = futures::join!(version(client, memo), described);
    ClusterFacts {
        kubernetes_version,
        cni,
        ingress_controller: None,
        nodes: facts,
    }
}

/// The API server's version.
async fn version(client: &Client, memo: &ClusterFactsMemo) -> Option<String> {
    if let Some(known) = memo.version.get("") {
        return Some(known);
    }
    match client.apiserver_version().await {
        Ok(v) => {
            let version = clip(&v.git_version, 64);
            memo.version.keep("", version.clone());
            Some(version)
        }
        Err(e) => {
            tracing::debug!("reading the API server's version: {e}");
            None
        }
    }
}

/// Node `name` as it describes itself (None: no such node, or it could not be read).
async fn node(client: &Client, memo: &ClusterFactsMemo, name: &str) -> Option<NodeFacts> {
    if let Some(known) = memo.nodes.get(name) {
        return known;
    }
    match Api::<Node>::all(client.clone()).get_opt(name).await {
        Ok(found) => {
            let described = found.map(|node| describe(name, &node));
            memo.nodes.keep(name, described.clone());
            described
        }
        Err(e) => {
            tracing::debug!("reading node {name}: {e}");
            None
        }
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
async fn cni(client: &Client, memo: &ClusterFactsMemo, nodes: &[&str]) -> Option<String> {
    let api: Api<Pod> = Api::all(client.clone());
    // One list per node, all at once (at most MAX_CNI_NODES).
    let per_node: Vec<_> = nodes
        .iter()
        .filter(|n| is_node_name(n))
        .take(MAX_CNI_NODES)
        .map(|name| {
            let api = api.clone();
            async move {
                if let Some(known) = memo.cni.get(name) {
                    return known;
                }
                let lp = ListParams::default()
                    .fields(&format!("spec.nodeName={name}"))
                    .limit(500);
                match api.list(&lp).await {
                    Ok(pods) => {
                        let here: Vec<String> = pods.items.iter().filter_map(cni_of).collect();
                        memo.cni.keep(name, here.clone());
                        here
                    }
                    Err(e) => {
                        tracing::debug!("listing the pods on node {name}: {e}");
                        vec![]
                    }
                }
            }
        })
        .collect();
    let found: BTreeSet<String> = futures::future::join_all(per_node)
        .await
        .into_iter()
        .flatten()
        .collect();
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

/// What a node says of itself.
fn describe(name: &str, node: &Node) -> NodeFacts {
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
        cpu_model: None,
        interfaces: vec![],
    }
}

/// `node` with what a worker there reported of its host (validated when the report arrived
/// and again when it was loaded).
fn with_host(node: NodeFacts, host: Option<&HostFacts>) -> NodeFacts {
    let Some(host) = host else { return node };
    NodeFacts {
        cpu_model: host.cpu_model.clone(),
        interfaces: host
            .interfaces
            .iter()
            .map(|i| InterfaceFacts {
                name: i.name.clone(),
                mtu: i.mtu,
            })
            .collect(),
        ..node
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

    #[tokio::test]
    async fn the_cluster_is_read_once_a_minute_not_once_per_result() {
        let api = crate::testing::FakeApi::default();
        let client = api.client(|seen| match seen.path.as_str() {
            "/version" => (
                200,
                serde_json::json!({"gitVersion": "v1.36.1", "major": "1",
                "minor": "36", "gitCommit": "", "gitTreeState": "", "buildDate": "",
                "goVersion": "", "compiler": "", "platform": ""}),
            ),
            "/api/v1/nodes/node-a" => (
                200,
                serde_json::json!({"metadata": {"name": "node-a"},
                "status": {"nodeInfo": {"kernelVersion": "6.1", "osImage": "", "architecture":
                "amd64", "kubeletVersion": "v1.36.1", "bootID": "", "containerRuntimeVersion": "",
                "kubeProxyVersion": "", "machineID": "", "operatingSystem": "linux",
                "systemUUID": ""}}}),
            ),
            "/api/v1/pods" => (200, crate::testing::fake_api::empty_list()),
            _ => (404, crate::testing::fake_api::status(404, "NotFound")),
        });
        let memo = ClusterFactsMemo::default();
        let host = HostFacts {
            cpu_model: Some("EPYC".into()),
            interfaces: vec![],
        };
        let seen: Seen = [
            ("node-a".to_string(), Some(host)),
            ("ghost".to_string(), None),
        ]
        .into();
        let first = gather(&client, &memo, &seen, true).await;
        let asked = api.requests().len();
        // The version, both nodes, the CNI pods of the one that exists.
        assert_eq!(asked, 4, "{:?}", api.requests());
        let second = gather(&client, &memo, &seen, true).await;
        assert_eq!(api.requests().len(), asked, "nothing read again");
        assert_eq!(first, second);
        assert_eq!(second.kubernetes_version.as_deref(), Some("v1.36.1"));
        let names: Vec<_> = second.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["node-a"], "the missing node remembered as missing");
        // The host facts are this run's, not the memo's.
        assert_eq!(second.nodes[0].cpu_model.as_deref(), Some("EPYC"));
        let other: Seen = [("node-a".to_string(), None)].into();
        let third = gather(&client, &memo, &other, true).await;
        assert_eq!(third.nodes[0].cpu_model, None);
        assert_eq!(third.nodes[0].kernel_version.as_deref(), Some("6.1"));
    }
}
