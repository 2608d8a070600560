//! An EgressBenchmark case's topology: one shape, node sets of names or a selector, the pair
//! counts each shape allows.

use super::{at_most, len};
use crate::topology::{NodeSet, Topology};

/// A case's topology: the CEL rules of `crate::topology` and its schema's bounds.
pub(super) fn topology(t: &Topology) -> Result<(), String> {
    let set = [
        t.pairs.is_some(),
        t.fan_in.is_some(),
        t.fan_out.is_some(),
        t.matrix.is_some(),
    ];
    if set.iter().filter(|s| **s).count() != 1 {
        return Err("topology: set exactly one of pairs, fanIn, fanOut and matrix".into());
    }
    for nodes in [&t.client_nodes, &t.server_nodes].into_iter().flatten() {
        if nodes.names.is_empty() == nodes.selector.is_empty() {
            return Err("a node set lists names or a selector, one of the two".into());
        }
        at_most("node names", len(nodes.names.len()), 64)?;
        at_most("selector labels", len(nodes.selector.len()), 16)?;
        let mut sorted: Vec<&String> = nodes.names.iter().collect();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != nodes.names.len() {
            return Err("node names must not repeat".into());
        }
        if nodes.names.iter().any(|n| n.is_empty() || n.len() > 253) {
            return Err("node names are 1 to 253 characters".into());
        }
        if nodes
            .selector
            .iter()
            .any(|(k, v)| k.len() > 317 || v.len() > 63)
        {
            return Err("selector keys are at most 317 and values at most 63 characters".into());
        }
    }
    let one_name = |set: &Option<NodeSet>| set.as_ref().is_some_and(|s| s.names.len() == 1);
    if t.fan_in.is_some() && !one_name(&t.server_nodes) {
        return Err("topology.fanIn runs every server on one node: name it in serverNodes.names (exactly one name)".into());
    }
    if t.fan_out.is_some() && !one_name(&t.client_nodes) {
        return Err("topology.fanOut runs every client on one node: name it in clientNodes.names (exactly one name)".into());
    }
    if t.matrix.is_some() && t.client_nodes.is_none() {
        return Err("topology.matrix pairs the nodes of clientNodes (names or a selector) with those of serverNodes, or with each other when serverNodes is absent: set clientNodes".into());
    }
    let (min, max): (u64, u64) = (
        if t.fan_in.or(t.fan_out).is_some() {
            2
        } else {
            1
        },
        128,
    );
    let count = t.pairs.or(t.fan_in).or(t.fan_out).map(u64::from);
    if count.is_some_and(|n| n < min || n > max) {
        return Err(format!(
            "topology: pairs is 1 to 128, fanIn and fanOut 2 to 128 (got {})",
            count.unwrap_or(0)
        ));
    }
    if let Some(m) = &t.matrix {
        for (field, v) in [("sample", m.sample), ("concurrency", m.concurrency)] {
            if v.is_some_and(|v| v == 0 || v > 128) {
                return Err(format!("topology.matrix.{field} is 1 to 128"));
            }
        }
    }
    Ok(())
}
