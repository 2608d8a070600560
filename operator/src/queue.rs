//! Runs that share a target or nodes would skew each other's numbers, so the younger one waits.
//! Works across both kinds (an IngressBenchmark and an EgressBenchmark on one node queue too).
//! Pure: decides from the list of contenders.

use crds::{EgressBenchmark, IngressBenchmark, Phase};
use kube::ResourceExt;

/// A benchmark as the queue sees it.
#[derive(Clone, Debug)]
pub struct Contender {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub phase: Option<Phase>,
    /// Creation time (RFC 3339): older runs go first.
    pub created: String,
    /// What the run competes for, most telling first, e.g. "target svc:80", "node n1".
    pub claims: Vec<String>,
}

impl Contender {
    fn age_key(&self) -> (&str, &str, &str) {
        (&self.created, &self.namespace, &self.name)
    }
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

/// Whether `other` goes before `me`: it runs, or it waits and is older.
fn ahead_of(other: &Contender, me: &Contender) -> bool {
    other.uid != me.uid
        && (active(other.phase) || (waiting(other.phase) && other.age_key() < me.age_key()))
}

/// The benchmark `me` must wait for, and why; None when it may start.
pub fn blocker(me: &Contender, all: &[Contender]) -> Option<String> {
    for other in all {
        if !ahead_of(other, me) {
            continue;
        }
        if let Some(shared) = me.claims.iter().find(|c| other.claims.contains(c)) {
            return Some(format!(
                "waiting for {} {}/{} (shares {shared})",
                other.kind, other.namespace, other.name
            ));
        }
    }
    None
}

/// Why `me` waits when its namespace already has `cap` runs active or ahead of it in the queue
/// (the admin's cap on concurrent runs per namespace); None when there is room. Older waiting
/// runs count, so two runs admitted at once never both take the last slot.
pub fn namespace_full(me: &Contender, all: &[Contender], cap: u32) -> Option<String> {
    let ahead = all
        .iter()
        .filter(|o| o.namespace == me.namespace && ahead_of(o, me))
        .count();
    let cap_n = usize::try_from(cap).unwrap_or(usize::MAX);
    (ahead >= cap_n).then(|| {
        format!(
            "waiting: namespace {} already has {ahead} benchmark(s) running or queued ahead, and the cluster admin allows {cap} concurrent run(s) per namespace (Helm value caps.maxRunsPerNamespace)",
            me.namespace
        )
    })
}

fn base(
    kind: &'static str,
    meta: &impl ResourceExt,
    phase: Option<Phase>,
    claims: Vec<String>,
) -> Contender {
    Contender {
        kind,
        namespace: meta.namespace().unwrap_or_default(),
        name: meta.name_any(),
        uid: meta.uid().unwrap_or_default(),
        phase,
        created: meta
            .meta()
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        claims,
    }
}

pub fn ingress(ib: &IngressBenchmark) -> Contender {
    let ns = ib.namespace().unwrap_or_default();
    let mut claims = vec![];
    if let Some(s) = &ib.spec.sweep {
        let target_ns = s.target_ref.namespace.as_deref().unwrap_or(&ns);
        claims.push(format!("sweep target {target_ns}/{}", s.target_ref.name));
    }
    if let Ok(u) = url::Url::parse(&ib.spec.target.url) {
        claims.push(format!(
            "target {}:{}",
            u.host_str().unwrap_or(""),
            u.port_or_known_default().unwrap_or(0)
        ));
    }
    claims.extend(
        ib.spec
            .workers
            .node_names
            .iter()
            .map(|n| format!("node {n}")),
    );
    let phase = ib.status.as_ref().and_then(|s| s.run.phase);
    base("IngressBenchmark", ib, phase, claims)
}

pub fn egress(eb: &EgressBenchmark) -> Contender {
    let mut claims = vec![];
    for case in &eb.spec.cases {
        if let Some(a) = &case.server.address {
            claims.push(format!("target {a}:{}", case.server.port));
        }
        for n in [&case.client.node_name, &case.server.node_name]
            .into_iter()
            .flatten()
        {
            claims.push(format!("node {n}"));
        }
    }
    for p in eb.spec.offload.iter().flat_map(|o| &o.profiles) {
        for s in &p.settings {
            claims.extend(s.node_names.iter().map(|n| format!("node {n}")));
        }
    }
    claims.dedup();
    let phase = eb.status.as_ref().and_then(|s| s.run.phase);
    base("EgressBenchmark", eb, phase, claims)
}

/// Every benchmark of both kinds, as contenders.
pub async fn all(client: &kube::Client) -> Result<Vec<Contender>, kube::Error> {
    let lp = kube::api::ListParams::default();
    let ib = kube::Api::<IngressBenchmark>::all(client.clone())
        .list(&lp)
        .await?;
    let eb = kube::Api::<EgressBenchmark>::all(client.clone())
        .list(&lp)
        .await?;
    Ok(ib
        .items
        .iter()
        .map(ingress)
        .chain(eb.items.iter().map(egress))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ib(
        name: &str,
        uid: &str,
        created: &str,
        url: &str,
        phase: Option<Phase>,
    ) -> IngressBenchmark {
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

    #[test]
    fn younger_run_on_the_same_target_waits() {
        let a = ingress(&ib(
            "a",
            "1",
            "2026-01-01T00:00:00Z",
            "http://svc:8080/x",
            Some(Phase::Running),
        ));
        let b = ingress(&ib(
            "b",
            "2",
            "2026-01-01T00:00:01Z",
            "http://svc:8080/y",
            None,
        ));
        let mut c_ib = ib("c", "3", "2026-01-01T00:00:02Z", "http://other/", None);
        c_ib.spec.workers.node_names = vec!["n2".into()];
        let c = ingress(&c_ib);
        let all = vec![a.clone(), b.clone(), c.clone()];
        assert_eq!(
            blocker(&b, &all).unwrap(),
            "waiting for IngressBenchmark ns/a (shares target svc:8080)"
        );
        assert!(blocker(&c, &all).is_none());
        // two waiting runs: the older goes first
        let mut d_ib = ib("d", "4", "2026-01-01T00:00:03Z", "http://other/", None);
        d_ib.spec.workers.node_names = vec!["n2".into()];
        let d = ingress(&d_ib);
        let all = vec![c.clone(), d.clone()];
        assert!(blocker(&c, &all).is_none());
        assert!(blocker(&d, &all).is_some());
        // finished runs block nobody
        let done = ingress(&ib(
            "e",
            "5",
            "2026-01-01T00:00:00Z",
            "http://other/",
            Some(Phase::Succeeded),
        ));
        assert!(blocker(&d, &[done]).is_none());
    }

    #[test]
    fn a_namespace_runs_at_most_its_cap_at_once() {
        let url = |i: u32| format!("http://svc-{i}/");
        let run = |name: &str, uid: &str, second: u32, phase| {
            let mut b = ib(
                name,
                uid,
                &format!("2026-01-01T00:00:0{second}Z"),
                &url(second),
                phase,
            );
            b.spec.workers.node_names = vec![];
            ingress(&b)
        };
        let a = run("a", "1", 0, Some(Phase::Running));
        let b = run("b", "2", 1, None);
        let c = run("c", "3", 2, None);
        let all = vec![a.clone(), b.clone(), c.clone()];
        // No shared target or node: only the cap holds them back.
        assert!(blocker(&c, &all).is_none());
        assert!(namespace_full(&b, &all, 2).is_none());
        assert_eq!(
            namespace_full(&c, &all, 2).unwrap(),
            "waiting: namespace ns already has 2 benchmark(s) running or queued ahead, and the cluster admin allows 2 concurrent run(s) per namespace (Helm value caps.maxRunsPerNamespace)"
        );
        assert!(namespace_full(&b, &all, 1).is_some());
        assert!(namespace_full(&c, &all, 3).is_none());
        // Finished runs and other namespaces do not count.
        let mut done = run("d", "4", 0, Some(Phase::Succeeded));
        let mut elsewhere = run("e", "5", 0, Some(Phase::Running));
        elsewhere.namespace = "other".into();
        assert!(namespace_full(&c, &[done.clone(), elsewhere.clone(), c.clone()], 1).is_none());
        done.phase = Some(Phase::Collecting);
        assert!(namespace_full(&c, &[done, elsewhere, c.clone()], 1).is_some());
    }

    #[test]
    fn kinds_queue_on_a_shared_node() {
        let running = ingress(&ib(
            "a",
            "1",
            "2026-01-01T00:00:00Z",
            "http://svc/",
            Some(Phase::Running),
        ));
        let eb: EgressBenchmark = serde_yaml::from_str(
            "apiVersion: netbench.io/v1alpha1\nkind: EgressBenchmark\nmetadata: {name: e, namespace: ns, uid: '9'}\nspec: {cases: [{name: c, client: {nodeName: n1}, server: {address: 198.18.20.2}}]}\n",
        )
        .unwrap();
        assert_eq!(
            blocker(&egress(&eb), &[running]).unwrap(),
            "waiting for IngressBenchmark ns/a (shares node n1)"
        );
    }
}
