//! Where each pair of a case runs: a case is a list of client/server pairs (one pair without a
//! topology), pair i being workers -w{2i} (client) and -w{2i+1} (server). Named nodes are used
//! in order, round-robin; a selector or no nodes leaves the choice to the scheduler, told to
//! keep a client off its server's node. Pure: the same spec gives the same pairs, so an
//! operator restart re-creates exactly the pods that are missing.

use std::collections::BTreeMap;
use std::time::Duration;

use crds::egress::{EgressCase, NodeSet, Topology};
use crds::topology::MAX_PAIRS;

/// Where one worker goes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Place {
    /// Pinned to this node.
    pub node: Option<String>,
    /// Or any node with these labels.
    pub selector: BTreeMap<String, String>,
    /// Never this node (its peer's, when that one is pinned).
    pub avoid: Option<String>,
    /// Never the node of the other worker of its pair (told to the scheduler).
    pub apart_from_peer: bool,
}

/// One client/server pair of a case.
#[derive(Clone, Debug, PartialEq)]
pub struct PairPlan {
    pub index: u32,
    pub client: Place,
    pub server: Place,
    /// Pairs of wave w start w case durations (plus a gap) after the first wave.
    pub wave: u32,
}

/// Between two waves of a matrix: the last answers and the reports of one wave are not
/// measured by the next.
pub const WAVE_GAP: Duration = Duration::from_secs(2);

/// The pairs of a case, or why it cannot be placed.
pub fn pairs(case: &EgressCase) -> Result<Vec<PairPlan>, String> {
    let Some(t) = &case.topology else {
        let pin = |node: &Option<String>| Place {
            node: node.clone(),
            ..Place::default()
        };
        return Ok(vec![PairPlan {
            index: 0,
            client: pin(&case.client.node_name),
            server: pin(&case.server.node_name),
            wave: 0,
        }]);
    };
    let plans = if let Some(n) = t.pairs {
        (0..n).map(|i| pair(t, i)).collect::<Result<Vec<_>, _>>()?
    } else if let Some(n) = t.fan_in {
        let server = only_name(&t.server_nodes, "fanIn", "serverNodes")?;
        (0..n)
            .map(|i| fan(t, i, &t.client_nodes, &server, true))
            .collect()
    } else if let Some(n) = t.fan_out {
        let client = only_name(&t.client_nodes, "fanOut", "clientNodes")?;
        (0..n)
            .map(|i| fan(t, i, &t.server_nodes, &client, false))
            .collect()
    } else {
        matrix(t)?
    };
    Ok(plans)
}

/// How many pairs a case runs (1 without a topology).
pub fn count(case: &EgressCase) -> u64 {
    // A case that cannot be placed counts as too many (the caps fail closed).
    pairs(case).map_or(u64::MAX, |p| u64::try_from(p.len()).unwrap_or(u64::MAX))
}

/// The nodes a case's topology names (for the queue, offload settings and the existence check).
pub fn named_nodes(case: &EgressCase) -> Vec<String> {
    let Some(t) = &case.topology else {
        return vec![];
    };
    [&t.client_nodes, &t.server_nodes]
        .into_iter()
        .flatten()
        .flat_map(|s| s.names.iter().cloned())
        .collect()
}

/// A matrix by node selector, not resolved yet (see egress::nodes): its nodes are known only
/// once its run begins.
pub fn selects_nodes_at_start(case: &EgressCase) -> bool {
    case.topology.as_ref().is_some_and(|t| {
        t.matrix.is_some()
            && [&t.client_nodes, &t.server_nodes]
                .into_iter()
                .flatten()
                .any(|s| s.names.is_empty())
    })
}

/// How many waves the pairs run in (1 unless a matrix sets concurrency).
pub fn waves(case: &EgressCase) -> u32 {
    pairs(case)
        .ok()
        .and_then(|p| p.iter().map(|p| p.wave).max())
        .map_or(1, |w| w.saturating_add(1))
}

/// Pair i of `pairs: N`: named nodes round-robin, a server never on its client's node unless
/// sameNode.
fn pair(t: &Topology, i: u32) -> Result<PairPlan, String> {
    let client = place(&t.client_nodes, i, None);
    let same_list = t.client_nodes == t.server_nodes;
    let server = match t.server_nodes.as_ref().filter(|s| !s.names.is_empty()) {
        Some(set) => {
            // One list for both: pair i's server is the next node after its client.
            let start = if same_list { i.saturating_add(1) } else { i };
            let avoid = client.node.as_deref().filter(|_| !t.same_node);
            let node = rotate(&set.names, start)
                .find(|n| Some(n.as_str()) != avoid)
                .ok_or_else(|| {
                    format!(
                        "pair {i}: no server node other than its client's node {}: list more serverNodes or set sameNode",
                        avoid.unwrap_or_default()
                    )
                })?;
            Place {
                node: Some(node.clone()),
                ..Place::default()
            }
        }
        None => place(&t.server_nodes, i, None),
    };
    Ok(finish(t, i, client, server, 0))
}

/// Pair i of a fan: `fixed` is the node every server (fan-in) or every client (fan-out) runs
/// on; the many side uses `many` round-robin, skipping `fixed` unless sameNode.
fn fan(t: &Topology, i: u32, many: &Option<NodeSet>, fixed: &str, fan_in: bool) -> PairPlan {
    let avoid = (!t.same_node).then_some(fixed);
    let spread = place(many, i, avoid);
    let one = Place {
        node: Some(fixed.to_string()),
        ..Place::default()
    };
    let (client, server) = if fan_in { (spread, one) } else { (one, spread) };
    finish(t, i, client, server, 0)
}

/// Every ordered pair of the matrix's nodes (a sample of them), in waves of `concurrency`.
fn matrix(t: &Topology) -> Result<Vec<PairPlan>, String> {
    let names = |set: &Option<NodeSet>| set.as_ref().map(|s| s.names.clone()).unwrap_or_default();
    let clients = names(&t.client_nodes);
    let servers = match &t.server_nodes {
        Some(s) => s.names.clone(),
        None => clients.clone(),
    };
    let all: Vec<(String, String)> = if t.server_nodes.is_none() {
        rotations(&clients, t.same_node)
    } else {
        clients
            .iter()
            .flat_map(|c| servers.iter().map(move |s| (c.clone(), s.clone())))
            .filter(|(c, s)| t.same_node || c != s)
            .collect()
    };
    let options = t.matrix.clone().unwrap_or_default();
    let chosen = match options.sample {
        Some(k) => sample(&all, usize::try_from(k).unwrap_or(usize::MAX)),
        None => all.clone(),
    };
    if chosen.is_empty() {
        return Err("topology.matrix has no pair of different nodes: list at least two nodes, or set sameNode".into());
    }
    let max = usize::try_from(MAX_PAIRS).unwrap_or(usize::MAX);
    if chosen.len() > max {
        return Err(format!(
            "topology.matrix has {} pairs; a case runs at most {MAX_PAIRS}: set matrix.sample",
            chosen.len()
        ));
    }
    let concurrency = options.concurrency.unwrap_or(MAX_PAIRS).max(1);
    Ok(chosen
        .into_iter()
        .zip(0u32..)
        .map(|((c, s), i)| {
            let pin = |n: String| Place {
                node: Some(n),
                ..Place::default()
            };
            PairPlan {
                index: i,
                client: pin(c),
                server: pin(s),
                wave: i / concurrency,
            }
        })
        .collect())
}

/// Every ordered pair of `nodes`, by rotation: first each node to the next one, then to the one
/// after, ... so that any `nodes.len()` consecutive pairs use every node once as a client and
/// once as a server (a wave of that many contends on no node's NIC from one side twice).
fn rotations(nodes: &[String], same_node: bool) -> Vec<(String, String)> {
    let n = nodes.len();
    let first = if same_node { 0 } else { 1 };
    (first..n)
        .flat_map(|d| {
            nodes.iter().enumerate().filter_map(move |(i, c)| {
                let s = nodes.get(i.saturating_add(d).checked_rem(n)?)?;
                Some((c.clone(), s.clone()))
            })
        })
        .collect()
}

/// `k` of `all`, spread evenly (the first, then every len/k-th).
fn sample<T: Clone>(all: &[T], k: usize) -> Vec<T> {
    if k >= all.len() {
        return all.to_vec();
    }
    (0..k)
        .filter_map(|j| all.get(j.saturating_mul(all.len()) / k).cloned())
        .collect()
}

/// A pair whose sides are not both pinned keeps them apart through the scheduler.
fn finish(t: &Topology, i: u32, mut client: Place, mut server: Place, wave: u32) -> PairPlan {
    let both_pinned = client.node.is_some() && server.node.is_some();
    if !t.same_node && !both_pinned {
        client.apart_from_peer = true;
        server.apart_from_peer = true;
    }
    PairPlan {
        index: i,
        client,
        server,
        wave,
    }
}

/// The i-th worker's place in a node set: a name round-robin (skipping `avoid`), the
/// selector, or anywhere.
fn place(set: &Option<NodeSet>, i: u32, avoid: Option<&str>) -> Place {
    let Some(set) = set else {
        return Place {
            avoid: avoid.map(str::to_string),
            ..Place::default()
        };
    };
    if set.names.is_empty() {
        return Place {
            selector: set.selector.clone(),
            avoid: avoid.map(str::to_string),
            ..Place::default()
        };
    }
    let usable: Vec<&String> = set
        .names
        .iter()
        .filter(|n| Some(n.as_str()) != avoid)
        .collect();
    let index = usize::try_from(i).unwrap_or(0);
    match usable.get(index.checked_rem(usable.len()).unwrap_or(0)) {
        Some(n) => Place {
            node: Some((*n).clone()),
            ..Place::default()
        },
        // Every named node is the one to avoid: the scheduler cannot help either.
        None => Place {
            node: avoid.map(str::to_string),
            avoid: avoid.map(str::to_string),
            ..Place::default()
        },
    }
}

/// `names` starting at `start` (mod len), each once.
fn rotate(names: &[String], start: u32) -> impl Iterator<Item = &String> {
    let len = names.len();
    let first = usize::try_from(start)
        .unwrap_or(0)
        .checked_rem(len)
        .unwrap_or(0);
    names.iter().cycle().skip(first).take(len)
}

fn only_name(set: &Option<NodeSet>, kind: &str, field: &str) -> Result<String, String> {
    set.as_ref()
        .and_then(|s| match s.names.as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        })
        .ok_or_else(|| format!("topology.{kind} needs exactly one node in {field}.names"))
}

/// Why a pair's placement cannot work, checked before any pod exists: a worker pinned to the
/// node it must avoid.
pub fn unplaceable(pairs: &[PairPlan]) -> Option<String> {
    pairs.iter().find_map(|p| {
        [("client", &p.client), ("server", &p.server)]
            .into_iter()
            .find(|(_, place)| place.node.is_some() && place.node == place.avoid)
            .map(|(side, place)| {
                format!(
                    "pair {}: its {side} has no node but {}, where its peer runs: list more nodes or set sameNode",
                    p.index,
                    place.node.as_deref().unwrap_or_default()
                )
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(topology: &str) -> EgressCase {
        serde_yaml::from_str(&format!(
            "{{name: c, client: {{}}, server: {{}}, topology: {topology}}}"
        ))
        .unwrap()
    }

    fn nodes(p: &[PairPlan]) -> Vec<(String, String)> {
        p.iter()
            .map(|p| {
                let n = |pl: &Place| pl.node.clone().unwrap_or_else(|| "*".into());
                (n(&p.client), n(&p.server))
            })
            .collect()
    }

    fn pairs_of(topology: &str) -> Vec<(String, String)> {
        nodes(&pairs(&case(topology)).unwrap())
    }

    fn v(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn pairs_on_one_list_put_each_server_on_the_next_node() {
        let t = "{pairs: 4, clientNodes: {names: [a, b, c]}, serverNodes: {names: [a, b, c]}}";
        assert_eq!(
            pairs_of(t),
            v(&[("a", "b"), ("b", "c"), ("c", "a"), ("a", "b")])
        );
    }

    #[test]
    fn pairs_on_two_lists_never_share_a_node_unless_asked() {
        let t = "{pairs: 2, clientNodes: {names: [a, b]}, serverNodes: {names: [a, c]}}";
        assert_eq!(pairs_of(t), v(&[("a", "c"), ("b", "c")]));
        let same = "{pairs: 2, sameNode: true, clientNodes: {names: [a, b]}, serverNodes: {names: [a, c]}}";
        assert_eq!(pairs_of(same), v(&[("a", "a"), ("b", "c")]));
        let err = pairs(&case(
            "{pairs: 1, clientNodes: {names: [a]}, serverNodes: {names: [a]}}",
        ))
        .unwrap_err();
        assert!(
            err.contains("no server node other than its client's node a"),
            "{err}"
        );
    }

    #[test]
    fn unpinned_pairs_are_kept_apart_by_the_scheduler() {
        let p = pairs(&case("{pairs: 2, clientNodes: {selector: {zone: a}}}")).unwrap();
        assert_eq!(p.len(), 2);
        assert!(p
            .iter()
            .all(|p| p.client.apart_from_peer && p.server.apart_from_peer));
        assert_eq!(p[0].client.selector["zone"], "a");
        let same = pairs(&case("{pairs: 2, sameNode: true}")).unwrap();
        assert!(!same[0].client.apart_from_peer);
    }

    #[test]
    fn fan_in_puts_every_server_on_its_node_and_no_client_there() {
        let t = "{fanIn: 3, serverNodes: {names: [s]}, clientNodes: {names: [a, s, b]}}";
        assert_eq!(pairs_of(t), v(&[("a", "s"), ("b", "s"), ("a", "s")]));
        let p = pairs(&case("{fanIn: 2, serverNodes: {names: [s]}}")).unwrap();
        assert_eq!(p[1].client.avoid.as_deref(), Some("s"));
        assert_eq!(unplaceable(&p), None);
        let stuck = pairs(&case(
            "{fanIn: 2, serverNodes: {names: [s]}, clientNodes: {names: [s]}}",
        ))
        .unwrap();
        let why = unplaceable(&stuck).unwrap();
        assert!(why.contains("its client has no node but s"), "{why}");
    }

    #[test]
    fn fan_out_is_the_mirror() {
        let t = "{fanOut: 2, clientNodes: {names: [c]}, serverNodes: {names: [c, x, y]}}";
        assert_eq!(pairs_of(t), v(&[("c", "x"), ("c", "y")]));
    }

    #[test]
    fn a_matrix_has_every_ordered_pair_in_waves() {
        let t = "{matrix: {concurrency: 2}, clientNodes: {names: [a, b, c]}}";
        let p = pairs(&case(t)).unwrap();
        // By rotation: a->b, b->c, c->a, then a->c, b->a, c->b.
        let rotated = [
            ("a", "b"),
            ("b", "c"),
            ("c", "a"),
            ("a", "c"),
            ("b", "a"),
            ("c", "b"),
        ];
        assert_eq!(nodes(&p), v(&rotated));
        let waves_of = |p: &[PairPlan]| p.iter().map(|p| p.wave).collect::<Vec<_>>();
        assert_eq!(waves_of(&p), [0, 0, 1, 1, 2, 2]);
        assert_eq!(waves(&case(t)), 3);
        // Waves of 3: every node once a client and once a server in each.
        let t3 = "{matrix: {concurrency: 3}, clientNodes: {names: [a, b, c]}}";
        let p3 = pairs(&case(t3)).unwrap();
        for wave in 0..2 {
            let w: Vec<&PairPlan> = p3.iter().filter(|p| p.wave == wave).collect();
            let side = |f: fn(&PairPlan) -> Option<String>| {
                w.iter()
                    .map(|p| f(p))
                    .collect::<std::collections::BTreeSet<_>>()
                    .len()
            };
            assert_eq!(side(|p| p.client.node.clone()), 3, "wave {wave}");
            assert_eq!(side(|p| p.server.node.clone()), 3, "wave {wave}");
        }
        let sampled = "{matrix: {sample: 3}, clientNodes: {names: [a, b, c]}}";
        assert_eq!(pairs_of(sampled), v(&[("a", "b"), ("c", "a"), ("b", "a")]));
        let across = "{matrix: {}, clientNodes: {names: [a, b]}, serverNodes: {names: [b, x]}}";
        assert_eq!(pairs_of(across), v(&[("a", "b"), ("a", "x"), ("b", "x")]));
    }

    #[test]
    fn a_matrix_too_large_or_empty_is_refused_with_the_way_out() {
        let names: Vec<String> = (0..12).map(|i| format!("n{i}")).collect();
        let t = format!(
            "{{matrix: {{}}, clientNodes: {{names: [{}]}}}}",
            names.join(", ")
        );
        let err = pairs(&case(&t)).unwrap_err();
        assert!(
            err.contains("has 132 pairs") && err.contains("set matrix.sample"),
            "{err}"
        );
        let t = format!(
            "{{matrix: {{sample: 128}}, clientNodes: {{names: [{}]}}}}",
            names.join(", ")
        );
        assert_eq!(pairs(&case(&t)).unwrap().len(), 128);
        let err = pairs(&case("{matrix: {}, clientNodes: {names: [a]}}")).unwrap_err();
        assert!(err.contains("no pair of different nodes"), "{err}");
    }

    #[test]
    fn no_topology_is_one_pair_as_before() {
        let c: EgressCase =
            serde_yaml::from_str("{name: c, client: {nodeName: a}, server: {nodeName: b}}")
                .unwrap();
        assert_eq!(nodes(&pairs(&c).unwrap()), v(&[("a", "b")]));
        assert_eq!(waves(&c), 1);
    }
}
