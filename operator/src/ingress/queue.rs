//! Runs that share a target or worker nodes would skew each other's numbers, so the younger one
//! waits. Pure: decides from the list of benchmarks.

use crds::{IngressBenchmark, Phase};
use kube::ResourceExt;

/// What a run competes for.
fn claims(ib: &IngressBenchmark) -> (Option<String>, Option<String>, Vec<String>) {
    let authority = url::Url::parse(&ib.spec.target.url).ok().map(|u| {
        format!(
            "{}:{}",
            u.host_str().unwrap_or(""),
            u.port_or_known_default().unwrap_or(0)
        )
    });
    let ns = ib.namespace().unwrap_or_default();
    let sweep = ib.spec.sweep.as_ref().map(|s| {
        format!(
            "{}/{}",
            s.target_ref.namespace.as_deref().unwrap_or(&ns),
            s.target_ref.name
        )
    });
    (authority, sweep, ib.spec.workers.node_names.clone())
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

/// Key ordering runs: older first, then by namespace/name.
fn age_key(ib: &IngressBenchmark) -> (String, String, String) {
    let ts = ib
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    (ts, ib.namespace().unwrap_or_default(), ib.name_any())
}

/// The benchmark `me` must wait for, and why; None when it may start.
pub fn blocker(me: &IngressBenchmark, all: &[IngressBenchmark]) -> Option<String> {
    let (my_auth, my_sweep, my_nodes) = claims(me);
    for other in all {
        if other.uid() == me.uid() {
            continue;
        }
        let phase = other.status.as_ref().and_then(|s| s.run.phase);
        let ahead = active(phase) || (waiting(phase) && age_key(other) < age_key(me));
        if !ahead {
            continue;
        }
        let (auth, sweep, nodes) = claims(other);
        let why = if my_sweep.is_some() && sweep.is_some() && my_sweep == sweep {
            format!("sweep target {}", my_sweep.clone().unwrap_or_default())
        } else if my_auth.is_some() && my_auth == auth {
            format!("target {}", my_auth.clone().unwrap_or_default())
        } else if let Some(n) = my_nodes.iter().find(|n| nodes.contains(n)) {
            format!("worker node {n}")
        } else {
            continue;
        };
        return Some(format!(
            "waiting for IngressBenchmark {}/{} (shares {why})",
            other.namespace().unwrap_or_default(),
            other.name_any()
        ));
    }
    None
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
            "apiVersion: netbench.io/v1alpha1\nkind: IngressBenchmark\nmetadata: {{name: {name}, namespace: ns, uid: {uid}, creationTimestamp: '{created}'}}\nspec: {{target: {{url: '{url}'}}}}\n"
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
        let a = ib(
            "a",
            "1",
            "2026-01-01T00:00:00Z",
            "http://svc:8080/x",
            Some(Phase::Running),
        );
        let b = ib("b", "2", "2026-01-01T00:00:01Z", "http://svc:8080/y", None);
        let c = ib("c", "3", "2026-01-01T00:00:02Z", "http://other/", None);
        let all = vec![a.clone(), b.clone(), c.clone()];
        assert_eq!(
            blocker(&b, &all).unwrap(),
            "waiting for IngressBenchmark ns/a (shares target svc:8080)"
        );
        assert!(blocker(&c, &all).is_none());
        // two waiting runs: the older goes first
        let d = ib("d", "4", "2026-01-01T00:00:03Z", "http://other/", None);
        let all = vec![c.clone(), d.clone()];
        assert!(blocker(&c, &all).is_none());
        assert!(blocker(&d, &all).is_some());
        // finished runs block nobody
        let done = ib(
            "e",
            "5",
            "2026-01-01T00:00:00Z",
            "http://other/",
            Some(Phase::Succeeded),
        );
        assert!(blocker(&d, &[done]).is_none());
    }
}
