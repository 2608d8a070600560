//! One node pair per run for the cases that leave their placement open, so that cases (and a
//! sweep's values) compared with each other measure the same client node -> server node path,
//! not whatever the scheduler did case by case. The pair is chosen once per run among the
//! nodes that can take a worker (Ready, not cordoned, no NoSchedule or NoExecute taint, as
//! `nodes` filters them), client and server on different nodes when there are two, kept in a
//! record in the operator's namespace keyed by run id (as `nodes` keeps a matrix's), and the
//! run sees those cases pinned to it. So a restarted operator re-creates the same pods; a new
//! run (a new generation, a scheduled round) chooses again. Status is not read.
//!
//! Cases that keep their own placement: a topology, a nodeName on either end, hostNetwork on
//! either end, an external server, an offload profile (its nodes are the admin's to allow).
//! To measure one node against itself, pin both ends to it.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube::runtime::events::EventType;
use serde::{Deserialize, Serialize};

use crds::egress::{EgressBenchmark, EgressCase};

use super::nodes::is_usable;
use crate::base::error::Result;
use crate::context::Context;
use crate::run::Run;
use crate::store::records::{Owner, Store};

/// The record's kind ("netbench-pair-<uid>").
const RECORD: &str = "pair";

/// The pair of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Chosen {
    /// The run the pair was chosen for.
    pub run: String,
    /// None when no node could take a worker (the scheduler then places each case).
    pub client: Option<String>,
    pub server: Option<String>,
    /// How many nodes could take a worker when the pair was chosen.
    pub usable: usize,
}

impl Chosen {
    /// What a user must be told about the pair: one node only, or none.
    pub fn note(&self) -> Option<String> {
        match (&self.client, &self.server) {
            (Some(c), Some(s)) if c == s => Some(format!(
                "only one node can take a worker ({c}): the cases without nodes run client and server on {c} (the same-node path, not across the network)"
            )),
            (None, _) | (_, None) if !self.run.is_empty() => Some(
                "no node can take a worker (Ready, not cordoned, no NoSchedule or NoExecute taint): the scheduler places each case, so their figures may not be comparable".into(),
            ),
            _ => None,
        }
    }
}

/// The run places this case on its pair: nothing in the case places it already.
pub fn placed_by_run(case: &EgressCase) -> bool {
    case.topology.is_none()
        && case.client.node_name.is_none()
        && case.server.node_name.is_none()
        && !case.client.host_network
        && !case.server.host_network
        && case.server.address.is_none()
        && case.offload_profile.is_none()
}

/// The pair from the names of the nodes that can take a worker: the baseline case's own pinned
/// pair when both its nodes can (its cases are then compared on its path), else the first two
/// names in order, client first; one node is a pair with itself; none is no pair.
pub fn choose(
    usable: &[String],
    preferred: Option<(&str, &str)>,
) -> (Option<String>, Option<String>) {
    let known = |n: &str| usable.iter().any(|u| u == n);
    if let Some((c, s)) = preferred.filter(|(c, s)| known(c) && known(s)) {
        return (Some(c.to_string()), Some(s.to_string()));
    }
    let mut names: Vec<&String> = usable.iter().collect();
    names.sort();
    names.dedup();
    match names.as_slice() {
        [] => (None, None),
        [one] => (Some((*one).clone()), Some((*one).clone())),
        [client, server, ..] => (Some((*client).clone()), Some((*server).clone())),
    }
}

/// The baseline case's pins, when it has both (its path then sets the pair).
fn preferred(eb: &EgressBenchmark) -> Option<(&str, &str)> {
    let base = super::plan::baseline(eb);
    let case = eb.spec.cases.iter().find(|c| c.name == base)?;
    if case.topology.is_some() {
        return None;
    }
    Some((
        case.client.node_name.as_deref()?,
        case.server.node_name.as_deref()?,
    ))
}

/// A DNS subdomain, as node names are (a record is re-checked before it places a pod).
fn is_node_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// A stored record that can be used for `run`: its run, and names that are node names.
fn usable_record(c: &Chosen, run: &str) -> bool {
    c.run == run
        && c.client.is_some() == c.server.is_some()
        && [&c.client, &c.server]
            .into_iter()
            .flatten()
            .all(|n| is_node_name(n))
}

/// The run's pair: from its record, or chosen now (listing the nodes) and recorded (then
/// true). Nothing is read or written for a benchmark whose cases all place themselves.
pub async fn load(ctx: &Context, eb: &EgressBenchmark, run: &str) -> Result<(Chosen, bool)> {
    if !eb.spec.cases.iter().any(placed_by_run) {
        return Ok((Chosen::default(), false));
    }
    let store = Store::new(&ctx.client, &ctx.config.namespace, RECORD);
    let owner = Owner::of(eb);
    // A record that cannot be used (not ours, unreadable): chosen again and replaced.
    let mut stored = store.load_or_default::<Chosen>(&owner, "node pair").await?;
    if usable_record(&stored.data, run) {
        return Ok((stored.data, false));
    }
    if stored.data.run == run {
        tracing::warn!(
            "node pair record of {}: not node names, chosen again",
            owner.name
        );
    }
    let api: Api<Node> = Api::all(ctx.client.clone());
    let nodes = api.list(&ListParams::default()).await?;
    let usable: Vec<String> = nodes
        .items
        .iter()
        .filter(|n| is_usable(n, &ctx.config.worker_tolerations))
        .filter_map(|n| n.metadata.name.clone())
        .filter(|n| is_node_name(n))
        .collect();
    let (client, server) = choose(&usable, preferred(eb));
    stored.data = Chosen {
        run: run.to_string(),
        client,
        server,
        usable: usable.len(),
    };
    store.save(&owner, &mut stored).await?;
    Ok((stored.data, true))
}

/// The benchmark is deleted: its record goes (as `nodes`: only when its spec has a case the
/// run places, so deleting any other benchmark writes nothing).
pub async fn forget(ctx: &Context, eb: &EgressBenchmark) -> Result<()> {
    if !eb.spec.cases.iter().any(placed_by_run) {
        return Ok(());
    }
    Store::new(&ctx.client, &ctx.config.namespace, RECORD)
        .delete(&Owner::of(eb))
        .await
}

/// The run's pair, once, when it was chosen: a Normal Event naming it, a Warning when it is
/// one node with itself or none.
pub fn announce(run: &mut Run<'_, EgressBenchmark>, chosen: &Chosen) {
    if let Some(note) = chosen.note() {
        run.event(EventType::Warning, "NodePair", note);
    } else if let (Some(c), Some(s)) = (&chosen.client, &chosen.server) {
        let m = format!(
            "the cases without nodes run client on {c}, server on {s} (chosen for run {} among {} usable nodes)",
            chosen.run, chosen.usable
        );
        run.event(EventType::Normal, "NodePair", m);
    }
}

/// The spec the run sees: every case the run places pinned to the pair (both ends).
pub fn apply(mut eb: EgressBenchmark, chosen: &Chosen) -> EgressBenchmark {
    let (Some(client), Some(server)) = (&chosen.client, &chosen.server) else {
        return eb;
    };
    for case in eb.spec.cases.iter_mut().filter(|c| placed_by_run(c)) {
        case.client.node_name = Some(client.clone());
        case.server.node_name = Some(server.clone());
    }
    eb
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| n.to_string()).collect()
    }

    fn some(c: &str, s: &str) -> (Option<String>, Option<String>) {
        (Some(c.into()), Some(s.into()))
    }

    #[test]
    fn the_pair_is_two_different_nodes_in_name_order_whatever_the_list_order() {
        for list in [
            ["nb-node2", "nb-node0", "nb-node1"],
            ["nb-node0", "nb-node1", "nb-node2"],
            ["nb-node1", "nb-node2", "nb-node0"],
        ] {
            assert_eq!(choose(&names(&list), None), some("nb-node0", "nb-node1"));
        }
        assert_eq!(
            choose(&names(&["b", "b", "a"]), None),
            some("a", "b"),
            "a name listed twice is one node"
        );
    }

    #[test]
    fn one_node_is_a_pair_with_itself_and_says_so_none_is_no_pair() {
        assert_eq!(choose(&names(&["solo"]), None), some("solo", "solo"));
        let one = Chosen {
            run: "r1".into(),
            client: Some("solo".into()),
            server: Some("solo".into()),
            usable: 1,
        };
        let note = one.note().unwrap();
        assert!(
            note.contains("only one node") && note.contains("solo"),
            "{note}"
        );
        assert_eq!(choose(&[], None), (None, None));
        let none = Chosen {
            run: "r1".into(),
            ..Chosen::default()
        };
        assert!(none.note().unwrap().contains("no node can take a worker"));
        let two = Chosen {
            run: "r1".into(),
            client: Some("a".into()),
            server: Some("b".into()),
            usable: 2,
        };
        assert_eq!(two.note(), None);
    }

    #[test]
    fn the_baselines_pinned_pair_is_kept_when_both_its_nodes_are_usable() {
        let usable = names(&["a", "b", "c"]);
        assert_eq!(choose(&usable, Some(("c", "b"))), some("c", "b"));
        assert_eq!(choose(&usable, Some(("c", "c"))), some("c", "c"));
        // A pinned node that cannot take a worker is not chosen for the others.
        assert_eq!(choose(&usable, Some(("x", "b"))), some("a", "b"));
    }

    fn benchmark(cases: &str) -> EgressBenchmark {
        serde_yaml::from_str(&format!(
            "{{apiVersion: netbench.io/v1alpha1, kind: EgressBenchmark, metadata: {{name: m, namespace: t}}, spec: {{cases: {cases}}}}}"
        ))
        .unwrap()
    }

    #[test]
    fn only_cases_that_place_nothing_are_pinned_to_the_pair() {
        let eb = benchmark(
            "[{name: open, client: {}, server: {service: true}}, \
              {name: half, client: {nodeName: x}, server: {}}, \
              {name: host, client: {hostNetwork: true}, server: {hostNetwork: true}}, \
              {name: ext, client: {}, server: {address: 198.18.20.2}}, \
              {name: topo, client: {}, server: {}, topology: {pairs: 2}}, \
              {name: sweep, protocol: tcp-rr, client: {}, server: {}, sweep: {messageSizes: [1, 1024]}}]",
        );
        let chosen = Chosen {
            run: "r1".into(),
            client: Some("n0".into()),
            server: Some("n1".into()),
            usable: 3,
        };
        let run = apply(eb, &chosen);
        let pins: Vec<(Option<&str>, Option<&str>)> = run
            .spec
            .cases
            .iter()
            .map(|c| (c.client.node_name.as_deref(), c.server.node_name.as_deref()))
            .collect();
        assert_eq!(
            pins,
            [
                (Some("n0"), Some("n1")),
                (Some("x"), None),
                (None, None),
                (None, None),
                (None, None),
                (Some("n0"), Some("n1")),
            ]
        );
        assert_eq!(crds::bounds::egress(&run.spec), Ok(()));
        // Every value of the sweep is on the pair.
        for m in run.spec.measured().iter().filter(|m| m.case == "sweep") {
            assert_eq!(m.spec.client.node_name.as_deref(), Some("n0"));
            assert_eq!(m.spec.server.node_name.as_deref(), Some("n1"));
        }
        // No pair (no usable node): nothing is pinned.
        let open = benchmark("[{name: open, client: {}, server: {}}]");
        let none = apply(open.clone(), &Chosen::default());
        assert_eq!(none, open);
    }

    #[test]
    fn a_record_is_used_only_for_its_run_and_with_node_names() {
        let ok = Chosen {
            run: "r1".into(),
            client: Some("nb-node0".into()),
            server: Some("nb-node1".into()),
            usable: 3,
        };
        assert!(usable_record(&ok, "r1"));
        assert!(!usable_record(&ok, "r2"), "another run chooses again");
        for bad in ["", "Node;rm", "a b", "\u{1b}[31mred", &"n".repeat(254)] {
            let forged = Chosen {
                server: Some(bad.to_string()),
                ..ok.clone()
            };
            assert!(!usable_record(&forged, "r1"), "{bad:?}");
        }
        let half = Chosen {
            server: None,
            ..ok.clone()
        };
        assert!(!usable_record(&half, "r1"));
        let nothing = Chosen {
            run: "r1".into(),
            ..Chosen::default()
        };
        assert!(
            usable_record(&nothing, "r1"),
            "no usable node is an answer too"
        );
    }
}
