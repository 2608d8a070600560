//! A node-pair matrix by node selectors: each selector is resolved once per run into the names
//! of the nodes it matches that can take a worker (Ready, not cordoned, no NoSchedule or
//! NoExecute taint: workers tolerate none), sorted, kept in a record in the operator's
//! namespace, and the run then sees a matrix of named nodes. So a node that joins or leaves
//! during the run changes nothing, and a restarted operator re-creates exactly the same pairs.
//! The record is keyed by run id: a new run (a new generation, a scheduled round) resolves
//! again. Status is not read: it only reports.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use serde::{Deserialize, Serialize};

use crds::egress::{EgressBenchmark, NodeSet};

use crate::admin::tolerations::WorkerTolerations;
use crate::base::error::{Error, Result};
use crate::base::labels::{is_label_key, is_label_name};
use crate::context::Context;
use crate::store::records::{Owner, Store};

/// Most nodes one selector of a matrix may match (as many as a list of names may hold).
pub const MAX_MATCHED: usize = 64;
/// The record's kind ("netbench-nodes-<uid>").
const RECORD: &str = "nodes";

/// What the selectors of one run matched.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Resolved {
    /// The run the selectors were resolved for.
    pub run: String,
    /// Per selector (as `key=value,...`): the matching nodes, sorted, at most MAX_MATCHED.
    pub matched: BTreeMap<String, Matched>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Matched {
    pub names: Vec<String>,
    /// How many nodes matched in all, Ready or not.
    pub total: usize,
    /// Why the selector cannot be used (an invalid label, too many nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The selectors of the spec's matrices, each once, by their label selector string.
fn selectors(eb: &EgressBenchmark) -> BTreeMap<String, &BTreeMap<String, String>> {
    matrix_sets(eb)
        .filter(|s| s.names.is_empty() && !s.selector.is_empty())
        .map(|s| (selector_string(&s.selector), &s.selector))
        .collect()
}

fn matrix_sets(eb: &EgressBenchmark) -> impl Iterator<Item = &NodeSet> {
    eb.spec
        .cases
        .iter()
        .filter_map(|c| c.topology.as_ref())
        .filter(|t| t.matrix.is_some())
        .flat_map(|t| [&t.client_nodes, &t.server_nodes])
        .flatten()
}

fn selector_string(selector: &BTreeMap<String, String>) -> String {
    selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The run's resolution: from its record, or made now (listing nodes) and recorded. Nothing
/// is read or written for a benchmark without a matrix by selector.
pub async fn load(ctx: &Context, eb: &EgressBenchmark, run: &str) -> Result<Resolved> {
    let wanted = selectors(eb);
    if wanted.is_empty() {
        return Ok(Resolved::default());
    }
    let store = Store::new(&ctx.client, &ctx.config.namespace, RECORD);
    let owner = Owner::of(eb);
    // A record that cannot be used (not ours, unreadable): resolved again and replaced.
    let mut stored = store
        .load_or_default::<Resolved>(&owner, "node selector")
        .await?;
    let covers =
        stored.data.run == run && wanted.keys().all(|s| stored.data.matched.contains_key(s));
    if covers {
        return Ok(stored.data);
    }
    let api: Api<Node> = Api::all(ctx.client.clone());
    let mut matched = BTreeMap::new();
    for (selector, labels) in wanted {
        let found = match label_problem(labels) {
            Some(problem) => Matched {
                problem: Some(problem),
                ..Matched::default()
            },
            None => list(&api, &selector, &ctx.config.worker_tolerations).await?,
        };
        matched.insert(selector, found);
    }
    stored.data = Resolved {
        run: run.to_string(),
        matched,
    };
    store.save(&owner, &mut stored).await?;
    Ok(stored.data)
}

/// The benchmark is deleted: its record goes.
pub async fn forget(ctx: &Context, eb: &EgressBenchmark) -> Result<()> {
    if selectors(eb).is_empty() {
        return Ok(());
    }
    Store::new(&ctx.client, &ctx.config.namespace, RECORD)
        .delete(&Owner::of(eb))
        .await
}

/// The nodes a selector matches that a worker can use.
async fn list(api: &Api<Node>, selector: &str, tolerations: &WorkerTolerations) -> Result<Matched> {
    let nodes = match api.list(&ListParams::default().labels(selector)).await {
        Ok(n) => n,
        // The API server's word on the selector itself is an answer, not an outage.
        Err(kube::Error::Api(e)) if e.code == 400 => {
            return Ok(Matched {
                problem: Some(format!("not a valid label selector: {}", e.message)),
                ..Matched::default()
            })
        }
        Err(e) => return Err(Error::from(e)),
    };
    Ok(usable(&nodes.items, tolerations))
}

/// The names of the nodes a matrix may use, sorted, bounded.
fn usable(nodes: &[Node], tolerations: &WorkerTolerations) -> Matched {
    let mut names: Vec<String> = nodes
        .iter()
        .filter(|n| is_usable(n, tolerations))
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    names.sort();
    let problem = (names.len() > MAX_MATCHED).then(|| {
        format!(
            "matches {} usable nodes; a matrix pairs at most {MAX_MATCHED}: narrow the selector",
            names.len()
        )
    });
    names.truncate(MAX_MATCHED);
    Matched {
        names,
        total: nodes.len(),
        problem,
    }
}

/// Ready, not cordoned, and every NoSchedule or NoExecute taint tolerated by the admin's
/// worker tolerations (a NoExecute one without an eviction after tolerationSeconds).
pub(super) fn is_usable(node: &Node, tolerations: &WorkerTolerations) -> bool {
    let cordoned = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter().any(|t| {
                (t.effect == "NoSchedule" || t.effect == "NoExecute")
                    && !tolerations.tolerate_for_good(t)
            })
        });
    ready && !cordoned && !tainted
}

/// A selector the API server would read as something else (a comma or an operator inside a
/// key or value) or refuse.
fn label_problem(labels: &BTreeMap<String, String>) -> Option<String> {
    let bad = labels
        .iter()
        .find(|(k, v)| !is_label_key(k) || !(v.is_empty() || is_label_name(v)))?;
    Some(format!(
        "{}={} is not a label key and value",
        bad.0.chars().take(64).collect::<String>(),
        bad.1.chars().take(64).collect::<String>()
    ))
}

/// The spec the run sees: each matrix selector replaced by the names it matched. One that
/// matched none or cannot be used stays a selector (a matrix without pairs): `refusal` says
/// why and the run is refused.
pub fn apply(mut eb: EgressBenchmark, resolved: &Resolved) -> EgressBenchmark {
    if resolved.matched.is_empty() {
        return eb;
    }
    for t in eb.spec.cases.iter_mut().filter_map(|c| c.topology.as_mut()) {
        if t.matrix.is_none() {
            continue;
        }
        for set in [&mut t.client_nodes, &mut t.server_nodes]
            .into_iter()
            .flatten()
        {
            if !set.names.is_empty() || set.selector.is_empty() {
                continue;
            }
            let Some(m) = resolved
                .matched
                .get(&selector_string(&set.selector))
                .filter(|m| m.problem.is_none() && !m.names.is_empty())
            else {
                continue;
            };
            *set = NodeSet {
                names: m.names.clone(),
                selector: BTreeMap::new(),
            };
        }
    }
    eb
}

/// Why the run's matrix selectors cannot be used: a selector that is invalid, matches too
/// many nodes, or too few to make a pair (fewer than 2; 1 with sameNode).
pub fn refusal(eb: &EgressBenchmark, resolved: &Resolved) -> Option<String> {
    for case in &eb.spec.cases {
        let Some(t) = case.topology.as_ref().filter(|t| t.matrix.is_some()) else {
            continue;
        };
        let least = if t.same_node { 1 } else { 2 };
        for (field, set) in [
            ("clientNodes", &t.client_nodes),
            ("serverNodes", &t.server_nodes),
        ] {
            let Some(set) = set.as_ref().filter(|s| s.names.is_empty()) else {
                continue;
            };
            let selector = selector_string(&set.selector);
            let Some(m) = resolved.matched.get(&selector) else {
                continue;
            };
            let problem = m.problem.clone().or_else(|| {
                // Two selectors (client and server) may each match one node.
                let need = if t.server_nodes.is_some() { 1 } else { least };
                (m.names.len() < need).then(|| {
                    format!(
                        "matches {} usable node(s) of {} (usable: Ready, not cordoned, no NoSchedule or NoExecute taint){}; the matrix needs {need}",
                        m.names.len(),
                        m.total,
                        if m.names.is_empty() { String::new() } else { format!(": {}", m.names.join(", ")) }
                    )
                })
            });
            if let Some(p) = problem {
                return Some(format!(
                    "case {}: topology.{field}.selector {selector} {p}",
                    case.name
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::topology;

    fn node(name: &str, ready: &str, cordoned: bool) -> Node {
        tainted(name, ready, cordoned, &[])
    }

    fn tainted(name: &str, ready: &str, cordoned: bool, effects: &[&str]) -> Node {
        let taints: Vec<_> = effects
            .iter()
            .map(|e| serde_json::json!({"key": "k", "effect": e}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"unschedulable": cordoned, "taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        }))
        .unwrap()
    }

    fn benchmark(topology: &str) -> EgressBenchmark {
        serde_yaml::from_str(&format!(
            "{{apiVersion: netbench.io/v1alpha1, kind: EgressBenchmark, metadata: {{name: m, namespace: t}}, \
             spec: {{cases: [{{name: c, client: {{}}, server: {{}}, topology: {topology}}}]}}}}"
        ))
        .unwrap()
    }

    fn resolved(selector: &str, names: &[&str]) -> Resolved {
        Resolved {
            run: "r1".into(),
            matched: BTreeMap::from([(
                selector.to_string(),
                Matched {
                    names: names.iter().map(|n| n.to_string()).collect(),
                    total: names.len(),
                    problem: None,
                },
            )]),
        }
    }

    #[test]
    fn only_ready_uncordoned_nodes_in_name_order() {
        let m = usable(
            &[
                node("n3", "True", false),
                node("n1", "True", false),
                node("n2", "False", false),
                node("n4", "True", true),
                tainted("n5", "True", false, &["NoSchedule"]),
                tainted("n6", "True", false, &["NoExecute"]),
                tainted("n7", "True", false, &["PreferNoSchedule"]),
            ],
            &WorkerTolerations::default(),
        );
        assert_eq!(m.names, ["n1", "n3", "n7"]);
        assert_eq!(m.total, 7);
        assert_eq!(m.problem, None);
    }

    #[test]
    fn a_taint_the_admin_s_worker_tolerations_tolerate_leaves_a_node_usable() {
        let nodes = [
            tainted("n1", "True", false, &["NoSchedule"]),
            tainted("n2", "True", false, &["NoExecute"]),
            node("n3", "True", false),
        ];
        let schedule_only: WorkerTolerations =
            r#"[{"key":"k","operator":"Exists","effect":"NoSchedule"}]"#
                .parse()
                .unwrap();
        assert_eq!(usable(&nodes, &schedule_only).names, ["n1", "n3"]);
        let evicted_later: WorkerTolerations = r#"[{"key":"k","operator":"Exists","effect":"NoExecute","tolerationSeconds":60},{"key":"k","operator":"Exists","effect":"NoSchedule"}]"#.parse().unwrap();
        assert_eq!(usable(&nodes, &evicted_later).names, ["n1", "n3"]);
        let other_key: WorkerTolerations =
            r#"[{"key":"other","operator":"Exists"}]"#.parse().unwrap();
        assert_eq!(usable(&nodes, &other_key).names, ["n3"]);
        // Tolerated or not, a cordoned or unready node stays out.
        let all: WorkerTolerations = r#"[{"operator":"Exists"}]"#.parse().unwrap();
        let cordoned = [
            tainted("n4", "True", true, &["NoSchedule"]),
            node("n5", "False", false),
        ];
        assert!(usable(&cordoned, &all).names.is_empty());
    }

    #[test]
    fn more_nodes_than_a_matrix_takes_is_a_problem() {
        let many: Vec<Node> = (0..70)
            .map(|i| node(&format!("n{i:02}"), "True", false))
            .collect();
        let m = usable(&many, &WorkerTolerations::default());
        assert_eq!(m.names.len(), MAX_MATCHED);
        assert!(m.problem.unwrap().contains("matches 70 usable nodes"));
    }

    #[test]
    fn only_matrix_selectors_are_resolved() {
        let eb = benchmark("{pairs: 2, clientNodes: {selector: {zone: a}}}");
        assert!(
            selectors(&eb).is_empty(),
            "pairs place by selector through the scheduler"
        );
        let eb = benchmark("{matrix: {}, clientNodes: {selector: {zone: a, disk: ssd}}}");
        assert_eq!(
            selectors(&eb).into_keys().collect::<Vec<_>>(),
            ["disk=ssd,zone=a"]
        );
    }

    #[test]
    fn a_matrix_by_selector_becomes_a_matrix_of_the_matched_names() {
        let eb = benchmark("{matrix: {}, clientNodes: {selector: {zone: a}}}");
        let run = apply(eb, &resolved("zone=a", &["n1", "n2", "n3"]));
        let case = &run.spec.cases[0];
        let set = case
            .topology
            .as_ref()
            .unwrap()
            .client_nodes
            .as_ref()
            .unwrap();
        assert_eq!(set.names, ["n1", "n2", "n3"]);
        assert!(set.selector.is_empty(), "names or a selector, never both");
        assert_eq!(crds::bounds::egress(&run.spec), Ok(()));
        let pairs = topology::pairs(case).unwrap();
        assert_eq!(pairs.len(), 6, "every ordered pair of 3 nodes");
        assert_eq!(
            topology::named_nodes(case).len(),
            3,
            "the queue sees the nodes"
        );
        assert_eq!(
            refusal(&run, &resolved("zone=a", &["n1", "n2", "n3"])),
            None
        );
    }

    #[test]
    fn too_few_or_unusable_matches_are_refused_with_the_selector_named() {
        let eb = benchmark("{matrix: {}, clientNodes: {selector: {zone: a}}}");
        let one = resolved("zone=a", &["n1"]);
        let why = refusal(&eb, &one).unwrap();
        assert!(
            why.starts_with(
                "case c: topology.clientNodes.selector zone=a matches 1 usable node(s) of 1"
            ),
            "{why}"
        );
        assert!(why.contains("n1") && why.contains("needs 2"), "{why}");
        // With sameNode, one node makes a pair with itself.
        let same = benchmark("{matrix: {}, sameNode: true, clientNodes: {selector: {zone: a}}}");
        assert_eq!(refusal(&same, &one), None);
        // Client and server selectors may each match one node.
        let two = benchmark(
            "{matrix: {}, clientNodes: {selector: {zone: a}}, serverNodes: {selector: {zone: b}}}",
        );
        let mut r = resolved("zone=a", &["n1"]);
        r.matched
            .insert("zone=b".into(), r.matched["zone=a"].clone());
        r.matched.get_mut("zone=b").unwrap().names = vec!["n2".into()];
        assert_eq!(refusal(&two, &r), None);
        let none = resolved("zone=a", &[]);
        assert!(refusal(&eb, &none).unwrap().contains("matches 0 usable"));
        let mut bad = resolved("zone=a", &["n1", "n2"]);
        bad.matched.get_mut("zone=a").unwrap().problem = Some("matches 70 usable nodes".into());
        assert!(refusal(&eb, &bad).unwrap().contains("matches 70"));
        // The run never sees a half-usable set: it stays a selector, which places no pair, and
        // the spec still passes the schema's rules (the refusal is the one above).
        for unusable in [bad, none] {
            let run = apply(eb.clone(), &unusable);
            let t = run.spec.cases[0].topology.clone().unwrap();
            let set = t.client_nodes.unwrap();
            assert!(set.names.is_empty() && set.selector["zone"] == "a");
            assert_eq!(crds::bounds::egress(&run.spec), Ok(()));
            assert!(topology::pairs(&run.spec.cases[0]).is_err());
        }
    }

    #[test]
    fn label_keys_and_values_that_would_change_the_selector_are_problems() {
        let labels = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
        assert_eq!(
            label_problem(&labels("topology.kubernetes.io/zone", "eu-1a")),
            None
        );
        assert_eq!(label_problem(&labels("pool", "")), None);
        for (k, v) in [
            ("a,b", "c"),
            ("a", "b,c=d"),
            ("a!", "b"),
            ("", "b"),
            ("-a", "b"),
            ("Bad_Prefix/a", "b"),
            ("a", &"x".repeat(64)),
            ("a in (b)", "c"),
        ] {
            assert!(label_problem(&labels(k, v)).is_some(), "{k}={v}");
        }
    }
}
