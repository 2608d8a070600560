//! Runs that share a target or nodes would skew each other's numbers, so one waits for the
//! other; and a namespace runs at most the admin's cap at once. Works across kinds (an
//! IngressBenchmark and an EgressBenchmark on one node queue too: each kind says what it
//! claims, see `Plan::contender`). Pure: decides from the list of contenders.
//!
//! The queue is fair across namespaces: waiting runs go in rounds, first every namespace's
//! oldest waiting run, then every namespace's second, and so on; within a round the namespace
//! whose last run started longest ago (or never) goes first, then the older run. So one
//! team's ten queued runs take turns with another team's one instead of all going first, and
//! a namespace that just had a run start lets the others go next.

use std::collections::HashMap;

use crds::{BenchmarkRef, Phase, QueueStatus};
use jiff::Timestamp;
use kube::ResourceExt;

/// A benchmark as the queue sees it.
#[derive(Clone, Debug)]
pub struct Contender {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub phase: Option<Phase>,
    /// Creation time: within a namespace, older runs go first.
    pub created: Option<Timestamp>,
    /// When the run left the queue (`status.startTime`): its namespace's last turn.
    pub started: Option<Timestamp>,
    /// What the run competes for, most telling first, e.g. "target svc:80", "node n1".
    pub claims: Vec<String>,
}

/// Why a run waits: for its status (`queue`), its Queued condition and its message.
#[derive(Clone, Debug, PartialEq)]
pub struct Wait {
    pub status: QueueStatus,
    /// The Queued condition's reason: `SharedClaim` or `NamespaceCap`.
    pub reason: &'static str,
    pub message: String,
}

fn active(p: Option<Phase>) -> bool {
    matches!(
        p,
        Some(Phase::Preparing | Phase::Running | Phase::Collecting)
    )
}

fn waiting(p: Option<Phase>) -> bool {
    matches!(p, None | Some(Phase::Pending | Phase::Queued))
}

/// A waiting run's place in the queue; smaller goes first.
#[derive(PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Place<'a> {
    /// How many waiting runs of its namespace go before it (its round).
    round: usize,
    /// When its namespace's last run started (None: never, which goes first).
    last_turn: Option<Timestamp>,
    created: Option<Timestamp>,
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
}

/// The places of every waiting run (`me` included, listed or not).
struct Queue<'a> {
    places: HashMap<&'a str, Place<'a>>,
}

impl<'a> Queue<'a> {
    fn of(me: &'a Contender, all: &'a [Contender]) -> Queue<'a> {
        let listed = all.iter().any(|c| c.uid == me.uid);
        let everyone: Vec<&'a Contender> = all
            .iter()
            .chain((!listed).then_some(me))
            .map(|c| if c.uid == me.uid { me } else { c })
            .collect();
        let mut last_turn: HashMap<&str, Option<Timestamp>> = HashMap::new();
        let mut waiting_by_ns: HashMap<&str, Vec<&'a Contender>> = HashMap::new();
        for c in &everyone {
            let last = last_turn.entry(c.namespace.as_str()).or_default();
            *last = (*last).max(c.started);
            if waiting(c.phase) {
                waiting_by_ns
                    .entry(c.namespace.as_str())
                    .or_default()
                    .push(c);
            }
        }
        let mut places = HashMap::new();
        for (ns, mut runs) in waiting_by_ns {
            runs.sort_by(|a, b| (a.created, &a.name, &a.uid).cmp(&(b.created, &b.name, &b.uid)));
            for (round, c) in runs.into_iter().enumerate() {
                let place = Place {
                    round,
                    last_turn: last_turn.get(ns).copied().flatten(),
                    created: c.created,
                    namespace: &c.namespace,
                    name: &c.name,
                    uid: &c.uid,
                };
                places.insert(c.uid.as_str(), place);
            }
        }
        Queue { places }
    }

    /// Whether `other` goes before `me`: it is active, or it waits and its place comes first.
    fn ahead(&self, other: &Contender, me: &Contender) -> bool {
        if other.uid == me.uid {
            return false;
        }
        if active(other.phase) {
            return true;
        }
        waiting(other.phase)
            && match (
                self.places.get(other.uid.as_str()),
                self.places.get(me.uid.as_str()),
            ) {
                (Some(o), Some(m)) => o < m,
                _ => false,
            }
    }
}

/// A claim on every node: a run whose nodes are not known before it begins (a matrix by node
/// selector) shares a node with every run that claims one.
pub const ANY_NODE: &str = "any node (a matrix by node selector)";

fn shared<'c>(me: &'c Contender, other: &Contender) -> Option<&'c String> {
    let any = |claims: &[String]| claims.iter().any(|c| c == ANY_NODE);
    let node = |c: &String| c.starts_with("node ");
    me.claims.iter().find(|c| {
        other.claims.contains(c)
            || (node(c) && any(&other.claims))
            || (c.as_str() == ANY_NODE && other.claims.iter().any(node))
    })
}

/// Whether `me` must wait, for what, and where it stands; None when it may start now.
/// `cap` is the admin's cap on concurrent runs per namespace: older waiting runs of the
/// namespace count, so two runs admitted at once never both take the last slot.
pub fn wait(me: &Contender, all: &[Contender], cap: u32) -> Option<Wait> {
    let queue = Queue::of(me, all);
    let others = || all.iter().filter(|o| o.uid != me.uid);
    let ahead = || others().filter(|o| queue.ahead(o, me));
    let ns_ahead = ahead().filter(|o| o.namespace == me.namespace).count();
    let capped = ns_ahead >= usize::try_from(cap).unwrap_or(usize::MAX);
    // Who holds what `me` needs: a running one if any, else the first queued ahead.
    let mut holders: Vec<(&Contender, &String)> = ahead()
        .filter_map(|o| shared(me, o).map(|what| (o, what)))
        .collect();
    holders.sort_by_key(|(o, _)| (!active(o.phase), queue.places.get(o.uid.as_str())));
    if holders.is_empty() && !capped {
        return None;
    }
    let position = 1 + others()
        .filter(|o| waiting(o.phase) && queue.ahead(o, me))
        .filter(|o| shared(me, o).is_some() || (capped && o.namespace == me.namespace))
        .count();
    let position = u32::try_from(position).unwrap_or(u32::MAX);
    Some(match holders.first() {
        Some((holder, what)) => {
            let state = if active(holder.phase) {
                "running"
            } else {
                "queued ahead"
            };
            Wait {
                message: format!(
                    "waiting for {} {}/{} ({state}; shares {what}); position {position} in the queue",
                    holder.kind, holder.namespace, holder.name
                ),
                reason: "SharedClaim",
                status: QueueStatus {
                    position,
                    waits_for: (*what).clone(),
                    blocked_by: Some(BenchmarkRef {
                        kind: holder.kind.to_string(),
                        namespace: holder.namespace.clone(),
                        name: holder.name.clone(),
                    }),
                },
            }
        }
        None => Wait {
            message: format!(
                "waiting: namespace {} already has {ns_ahead} benchmark(s) running or queued ahead, and the cluster admin allows {cap} concurrent run(s) per namespace (Helm value caps.maxRunsPerNamespace); position {position} in the queue",
                me.namespace
            ),
            reason: "NamespaceCap",
            status: QueueStatus {
                position,
                waits_for: "namespace run slots".into(),
                blocked_by: None,
            },
        },
    })
}

impl Contender {
    /// A benchmark with `claims`, its run as `run` says.
    pub fn of(
        kind: &'static str,
        meta: &impl ResourceExt,
        run: Option<&crds::RunStatus>,
        claims: Vec<String>,
    ) -> Contender {
        let phase = run.and_then(|r| r.phase);
        let started = run.and_then(|r| r.start_time.as_ref()).map(|t| t.0);
        Contender {
            kind,
            namespace: meta.namespace().unwrap_or_default(),
            name: meta.name_any(),
            uid: meta.uid().unwrap_or_default(),
            phase,
            created: meta.meta().creation_timestamp.as_ref().map(|t| t.0),
            started,
            claims,
        }
    }
}

/// The waiting runs `done` (a run that just ended) may have held up: those of its namespace
/// (the cap) and those sharing one of its claims. They are woken at once instead of at their
/// next look at the queue.
pub fn held_up_by<'a>(done: &Contender, all: &'a [Contender]) -> Vec<&'a Contender> {
    all.iter()
        .filter(|o| o.uid != done.uid && waiting(o.phase))
        .filter(|o| o.namespace == done.namespace || shared(o, done).is_some())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::plan::contender as egress;
    use crate::ingress::plan::contender as ingress;
    use crds::{EgressBenchmark, IngressBenchmark};
    use proptest::prelude::*;

    /// An IngressBenchmark created `second` seconds into 2026 (0 to 9).
    fn ib(name: &str, uid: &str, second: u32, url: &str, phase: Option<Phase>) -> IngressBenchmark {
        let created = format!("2026-01-01T00:00:0{second}Z");
        let mut b: IngressBenchmark = serde_yaml::from_str(&format!(
            "apiVersion: netbench.io/v1alpha1\nkind: IngressBenchmark\nmetadata: {{name: {name}, namespace: ns, uid: {uid}, creationTimestamp: '{created}'}}\nspec: {{target: {{url: '{url}'}}, workers: {{nodeNames: [n1]}}}}\n"
        ))
        .unwrap();
        if let Some(p) = phase {
            b.status = Some(crds::IngressBenchmarkStatus {
                run: crds::RunStatus {
                    phase: Some(p),
                    ..Default::default()
                },
                ..Default::default()
            });
        }
        b
    }

    fn message(me: &Contender, all: &[Contender]) -> Option<String> {
        wait(me, all, u32::MAX).map(|w| w.message)
    }

    #[test]
    fn younger_run_on_the_same_target_waits() {
        let a = ingress(&ib("a", "1", 0, "http://svc:8080/x", Some(Phase::Running)));
        let b = ingress(&ib("b", "2", 1, "http://svc:8080/y", None));
        let mut c_ib = ib("c", "3", 2, "http://other/", None);
        c_ib.spec.workers.node_names = vec!["n2".into()];
        let c = ingress(&c_ib);
        let all = vec![a.clone(), b.clone(), c.clone()];
        let w = wait(&b, &all, u32::MAX).unwrap();
        assert_eq!(
            w.message,
            "waiting for IngressBenchmark ns/a (running; shares target svc:8080); position 1 in the queue"
        );
        assert_eq!(w.reason, "SharedClaim");
        assert_eq!(
            w.status,
            QueueStatus {
                position: 1,
                waits_for: "target svc:8080".into(),
                blocked_by: Some(BenchmarkRef {
                    kind: "IngressBenchmark".into(),
                    namespace: "ns".into(),
                    name: "a".into(),
                }),
            }
        );
        assert!(message(&c, &all).is_none());
        // two waiting runs: the older goes first
        let mut d_ib = ib("d", "4", 3, "http://other/", None);
        d_ib.spec.workers.node_names = vec!["n2".into()];
        let d = ingress(&d_ib);
        let all = vec![c.clone(), d.clone()];
        assert!(message(&c, &all).is_none());
        assert_eq!(
            message(&d, &all).unwrap(),
            "waiting for IngressBenchmark ns/c (queued ahead; shares target other:80); position 2 in the queue"
        );
        // finished runs block nobody
        let done = ingress(&ib("e", "5", 0, "http://other/", Some(Phase::Succeeded)));
        assert!(message(&d, &[done]).is_none());
    }

    #[test]
    fn a_namespace_runs_at_most_its_cap_at_once() {
        let url = |i: u32| format!("http://svc-{i}/");
        let run = |name: &str, uid: &str, second: u32, phase| {
            let mut b = ib(name, uid, second, &url(second), phase);
            b.spec.workers.node_names = vec![];
            ingress(&b)
        };
        let a = run("a", "1", 0, Some(Phase::Running));
        let b = run("b", "2", 1, None);
        let c = run("c", "3", 2, None);
        let all = vec![a.clone(), b.clone(), c.clone()];
        // No shared target or node: only the cap holds them back.
        assert!(wait(&c, &all, u32::MAX).is_none());
        assert!(wait(&b, &all, 2).is_none());
        let w = wait(&c, &all, 2).unwrap();
        assert_eq!(
            w.message,
            "waiting: namespace ns already has 2 benchmark(s) running or queued ahead, and the cluster admin allows 2 concurrent run(s) per namespace (Helm value caps.maxRunsPerNamespace); position 2 in the queue"
        );
        assert_eq!(w.reason, "NamespaceCap");
        assert_eq!(w.status.blocked_by, None);
        assert_eq!(w.status.waits_for, "namespace run slots");
        assert_eq!(wait(&b, &all, 1).unwrap().status.position, 1);
        assert!(wait(&c, &all, 3).is_none());
        // Finished runs and other namespaces do not count.
        let mut done = run("d", "4", 0, Some(Phase::Succeeded));
        let mut elsewhere = run("e", "5", 0, Some(Phase::Running));
        elsewhere.namespace = "other".into();
        assert!(wait(&c, &[done.clone(), elsewhere.clone(), c.clone()], 1).is_none());
        done.phase = Some(Phase::Collecting);
        assert!(wait(&c, &[done, elsewhere, c.clone()], 1).is_some());
    }

    #[test]
    fn kinds_queue_on_a_shared_node() {
        let running = ingress(&ib("a", "1", 0, "http://svc/", Some(Phase::Running)));
        let eb: EgressBenchmark = serde_yaml::from_str(
            "apiVersion: netbench.io/v1alpha1\nkind: EgressBenchmark\nmetadata: {name: e, namespace: ns, uid: '9'}\nspec: {cases: [{name: c, client: {nodeName: n1}, server: {address: 198.18.20.2}}]}\n",
        )
        .unwrap();
        assert_eq!(
            message(&egress(&eb), &[running]).unwrap(),
            "waiting for IngressBenchmark ns/a (running; shares node n1); position 1 in the queue"
        );
    }

    fn at(second: i64) -> Option<Timestamp> {
        Some(Timestamp::from_second(1_800_000_000 + second).unwrap())
    }

    fn contender(ns: &str, name: &str, created: i64, claims: &[&str]) -> Contender {
        Contender {
            kind: "IngressBenchmark",
            namespace: ns.into(),
            name: name.into(),
            uid: format!("{ns}/{name}"),
            phase: None,
            created: at(created),
            started: None,
            claims: claims.iter().map(|c| c.to_string()).collect(),
        }
    }

    #[test]
    fn a_run_that_ends_frees_the_waiting_runs_of_its_namespace_and_its_claims() {
        let mut done = contender("a", "done", 0, &["target t:80", "node n1"]);
        done.phase = Some(Phase::Succeeded);
        let queued = |ns: &str, name: &str, claims: &[&str]| {
            let mut c = contender(ns, name, 1, claims);
            c.phase = Some(Phase::Queued);
            c
        };
        let same_ns = queued("a", "q1", &["target u:80"]);
        let same_target = queued("b", "q2", &["target t:80"]);
        let any_node = queued("c", "q3", &[ANY_NODE]);
        let unrelated = queued("d", "q4", &["target v:80"]);
        let mut running = contender("a", "r", 1, &["target t:80"]);
        running.phase = Some(Phase::Running);
        let all = [
            done.clone(),
            same_ns,
            same_target,
            any_node,
            unrelated,
            running,
        ];
        let woken: Vec<&str> = held_up_by(&done, &all)
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(woken, ["q1", "q2", "q3"]);
    }

    /// A matrix by node selector claims every node: it waits for (and holds up) every run
    /// that claims a node, not one that claims only a target.
    #[test]
    fn a_claim_on_any_node_shares_every_node_and_nothing_else() {
        let mut matrix = contender("a", "m", 0, &[ANY_NODE]);
        matrix.phase = Some(Phase::Running);
        let pinned = contender("b", "p", 1, &["node n7"]);
        let target = contender("c", "t", 2, &["target t:80"]);
        let all = [matrix.clone(), pinned.clone(), target.clone()];
        let w = wait(&pinned, &all, u32::MAX).expect("waits for the matrix");
        assert_eq!(
            w.status.blocked_by.as_ref().map(|r| r.name.as_str()),
            Some("m")
        );
        assert!(wait(&target, &all, u32::MAX).is_none());
        let other = contender("d", "m2", 3, &[ANY_NODE]);
        assert!(wait(&other, &[matrix.clone(), other.clone()], u32::MAX).is_some());
        assert_eq!(shared(&matrix, &pinned).map(String::as_str), Some(ANY_NODE));
        assert_eq!(
            shared(&pinned, &matrix).map(String::as_str),
            Some("node n7")
        );
        assert_eq!(shared(&matrix, &target), None);
    }

    /// The issue's case: team a queued ten runs on a target before team b queued one; b's run
    /// starts second (right after a's first), not eleventh, and says so while it waits.
    #[test]
    fn one_teams_queued_runs_do_not_starve_another_teams_one() {
        let mut all: Vec<Contender> = (0..10)
            .map(|i| contender("a", &format!("a{i}"), i, &["target t:80"]))
            .collect();
        all.push(contender("b", "b0", 100, &["target t:80"]));
        let b = all[10].clone();
        let w = wait(&b, &all, u32::MAX).unwrap();
        assert_eq!(w.status.position, 2, "behind a0 only: {w:?}");
        assert_eq!(
            w.status.blocked_by.as_ref().map(|r| r.name.as_str()),
            Some("a0")
        );
        let order = admission_order(all, u32::MAX);
        assert_eq!(order[..3], ["a/a0", "b/b0", "a/a1"]);
    }

    /// Admits runs one at a time as a controller would: at each step every waiting run asks
    /// `wait`; the admissible one starts (and, in this model, finishes before the next step).
    /// Checks on the way that exactly one run is admissible, and that it is the one that was
    /// at position 1 while the previous run ran. Returns the uids in admission order.
    fn admission_order(mut all: Vec<Contender>, cap: u32) -> Vec<String> {
        let mut order = vec![];
        let mut clock = 1_000;
        let mut expected_next: Option<String> = None;
        while all.iter().any(|c| waiting(c.phase)) {
            let admissible: Vec<usize> = (0..all.len())
                .filter(|&i| waiting(all[i].phase) && wait(&all[i], &all, cap).is_none())
                .collect();
            assert_eq!(
                admissible.len(),
                1,
                "one shared claim: exactly one admissible run, got {admissible:?}"
            );
            let i = admissible[0];
            if let Some(next) = expected_next.take() {
                assert_eq!(all[i].uid, next, "the run at position 1 goes next");
            }
            clock += 1;
            all[i].phase = Some(Phase::Running);
            all[i].started = at(clock);
            order.push(all[i].uid.clone());
            // While it runs, every other waiting run is queued, with distinct positions 1..n.
            let mut positions: Vec<(u32, String)> = all
                .iter()
                .filter(|c| waiting(c.phase))
                .map(|c| {
                    let w = wait(c, &all, cap).expect("queued behind the running run");
                    (w.status.position, c.uid.clone())
                })
                .collect();
            positions.sort();
            for (n, (position, _)) in positions.iter().enumerate() {
                assert_eq!(*position as usize, n + 1, "{positions:?}");
            }
            expected_next = positions.first().map(|(_, uid)| uid.clone());
            all[i].phase = Some(Phase::Succeeded);
        }
        order
    }

    /// Waiting runs on one shared target: namespace index and creation second of each.
    fn one_target_queue() -> impl Strategy<Value = Vec<Contender>> {
        prop::collection::vec((0usize..4, 0i64..50), 1..16).prop_map(|runs| {
            runs.into_iter()
                .enumerate()
                .map(|(i, (ns, created))| {
                    contender(
                        &format!("ns{ns}"),
                        &format!("r{i}"),
                        created,
                        &["target t:80"],
                    )
                })
                .collect()
        })
    }

    proptest! {
        /// Fairness: a namespace with one queued run is admitted before any namespace's second
        /// run, even one queued earlier; and no namespace gets a second turn while another
        /// that waited all along got none in between (round robin).
        #[test]
        fn queued_runs_take_turns_across_namespaces(runs in one_target_queue()) {
            let ns_of: HashMap<String, String> =
                runs.iter().map(|c| (c.uid.clone(), c.namespace.clone())).collect();
            let order = admission_order(runs.clone(), u32::MAX);
            prop_assert_eq!(order.len(), runs.len(), "every run starts once");
            let index = |uid: &str| order.iter().position(|u| u == uid).unwrap();
            // Within a namespace: creation order.
            let mut by_ns: HashMap<&str, Vec<&Contender>> = HashMap::new();
            for c in &runs {
                by_ns.entry(c.namespace.as_str()).or_default().push(c);
            }
            for list in by_ns.values_mut() {
                list.sort_by_key(|c| (c.created, c.name.clone()));
                for w in list.windows(2) {
                    prop_assert!(index(&w[0].uid) < index(&w[1].uid), "{:?}", order);
                }
            }
            let singles: Vec<&str> = by_ns
                .values()
                .filter(|l| l.len() == 1)
                .map(|l| l[0].uid.as_str())
                .collect();
            let seconds: Vec<&str> = by_ns
                .values()
                .filter(|l| l.len() >= 2)
                .map(|l| l[1].uid.as_str())
                .collect();
            for single in &singles {
                for second in &seconds {
                    prop_assert!(
                        index(single) < index(second),
                        "{} (alone in its namespace) after {} (a second run): {:?}",
                        single, second, order
                    );
                }
            }
            // Round robin: between two turns of one namespace, every namespace still waiting
            // throughout had a turn.
            let namespaces: Vec<&String> = order.iter().map(|u| &ns_of[u]).collect();
            let last_turn_of = |ns: &str| order.iter().rposition(|u| ns_of[u] == ns).unwrap();
            for (i, ns) in namespaces.iter().enumerate() {
                let Some(j) = (i + 1..order.len()).find(|&j| namespaces[j] == *ns) else {
                    continue;
                };
                for other in by_ns.keys().filter(|o| **o != ns.as_str()) {
                    let waited_throughout = last_turn_of(other) > j;
                    let had_turn = namespaces[i + 1..j].iter().any(|n| n.as_str() == *other);
                    prop_assert!(
                        !waited_throughout || had_turn,
                        "{} went twice ({} and {}) while {} waited: {:?}",
                        ns, i, j, other, order
                    );
                }
            }
        }

        /// Safety and progress with mixed claims and the namespace cap: runs that share a
        /// claim never run together, no namespace runs more than its cap, and something
        /// always starts while runs wait and none runs.
        #[test]
        fn admitted_runs_never_share_a_claim_nor_exceed_the_cap(
            runs in prop::collection::vec(
                (0usize..3, 0i64..20, prop::collection::vec(0usize..4, 0..3), 1u32..4),
                1..14,
            ),
            cap in 1u32..3,
        ) {
            let mut all: Vec<Contender> = runs
                .iter()
                .enumerate()
                .map(|(i, (ns, created, claims, _))| {
                    let claims: Vec<String> = claims.iter().map(|c| format!("node n{c}")).collect();
                    let refs: Vec<&str> = claims.iter().map(String::as_str).collect();
                    contender(&format!("ns{ns}"), &format!("r{i}"), *created, &refs)
                })
                .collect();
            let mut left: Vec<u32> = runs.iter().map(|r| r.3).collect();
            let mut clock = 1_000;
            for _ in 0..200 {
                if !all.iter().any(|c| waiting(c.phase)) {
                    break;
                }
                // Every waiting run reconciles against the same snapshot, one after another.
                for i in 0..all.len() {
                    if waiting(all[i].phase) && wait(&all[i], &all, cap).is_none() {
                        clock += 1;
                        all[i].phase = Some(Phase::Running);
                        all[i].started = at(clock);
                    }
                }
                let running: Vec<&Contender> = all.iter().filter(|c| active(c.phase)).collect();
                prop_assert!(
                    !running.is_empty() || !all.iter().any(|c| waiting(c.phase)),
                    "runs wait but none runs"
                );
                for (x, a) in running.iter().enumerate() {
                    for b in &running[x + 1..] {
                        prop_assert!(shared(a, b).is_none(), "{} and {} share a claim", a.uid, b.uid);
                    }
                    let same_ns = running.iter().filter(|b| b.namespace == a.namespace).count();
                    prop_assert!(same_ns <= cap as usize, "{} runs in {}", same_ns, a.namespace);
                }
                // Time passes: runs end after their length in steps.
                for i in 0..all.len() {
                    if active(all[i].phase) {
                        left[i] -= 1;
                        if left[i] == 0 {
                            all[i].phase = Some(Phase::Succeeded);
                        }
                    }
                }
            }
            prop_assert!(!all.iter().any(|c| waiting(c.phase)), "every run started");
        }
    }
}
