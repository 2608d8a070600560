//! The check before every Job: the records against the spec and the admin's lists, and the
//! node against the admin's node selector.

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::Client;

use crds::egress::EgressBenchmark;

use super::record::{self, DeviceRecord};
use crate::admin::config::Config;
use crate::base::error::Result;

/// What the node check found.
pub(super) enum NodeCheck {
    Allowed,
    Gone,
    NotAllowed(String),
}

pub(super) async fn check_node(client: &Client, config: &Config, node: &str) -> Result<NodeCheck> {
    let Some(n) = Api::<Node>::all(client.clone()).get_opt(node).await? else {
        return Ok(NodeCheck::Gone);
    };
    let labels = n.metadata.labels.unwrap_or_default();
    Ok(if config.offload_node_selector.matches(&labels) {
        NodeCheck::Allowed
    } else {
        NodeCheck::NotAllowed(format!(
            "node {node} is not selected by the offload node selector (Helm value security.offloadNodeSelector); nothing run there"
        ))
    })
}

/// The check before every Job: the records' spec and lists, and the node. Err = refusal.
pub(super) async fn recheck(
    client: &Client,
    config: &Config,
    eb: &EgressBenchmark,
    current_run: &str,
    records: &[&DeviceRecord],
) -> Result<Result<(), String>> {
    for r in records {
        if let Err(m) = record::permitted(r, eb, current_run, config) {
            return Ok(Err(m));
        }
    }
    let nodes: std::collections::BTreeSet<&str> = records.iter().map(|r| r.node.as_str()).collect();
    for node in nodes {
        match check_node(client, config, node).await? {
            NodeCheck::Allowed => {}
            NodeCheck::Gone => return Ok(Err(format!("node {node} does not exist"))),
            NodeCheck::NotAllowed(m) => return Ok(Err(m)),
        }
    }
    Ok(Ok(()))
}
