//! What the cluster was when a run finished: the API server's version and the nodes its
//! workers ran on, as the nodes report themselves. Best effort: a fact that cannot be read is
//! left out rather than failing the result.

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::Client;

use crds::result::{ClusterFacts, InterfaceFacts, NodeFacts};
use protocol::worker::host::HostFacts;

/// Most nodes described in one result.
const MAX_NODES: usize = 128;

/// Node names from the run's reports, with the host facts a worker there reported.
pub type Seen = std::collections::BTreeMap<String, Option<HostFacts>>;

pub async fn gather(client: &Client, nodes: &Seen) -> ClusterFacts {
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
    ClusterFacts {
        kubernetes_version: version,
        nodes: facts,
    }
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

    #[test]
    fn only_node_names_are_looked_up() {
        assert!(is_node_name("nb-node-1"));
        assert!(!is_node_name("../etc"));
        assert!(!is_node_name(""));
        assert!(!is_node_name(&"a".repeat(254)));
    }
}
