//! The kinds the operator runs, each registered once: main.rs lists one
//! [`registration::<K>()`](registration) per kind, and everything per kind follows from that
//! list: its reconcile series at 0, its entry in the context's list of kinds
//! (`run::kinds::entry`), its controller and the route of its wakes (`controller::wake`).

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;

use super::wake::{Router, WakeMetrics};
use super::ReconcileMetrics;
use crate::base::metrics::Metrics;
use crate::context::{Context, KindEntry, Kinds};
use crate::run::Hooks;

/// One kind as the operator runs it.
#[derive(Clone)]
pub struct Registration {
    /// The kind's name ("IngressBenchmark"), as wakes and metrics name it.
    kind: String,
    /// Its entry in `context::Kinds`.
    entry: fn() -> KindEntry,
    /// Its controller, reconciling also on the wakes `Router` routes to it.
    controller: fn(Arc<Context>, &mut Router) -> BoxFuture<'static, ()>,
}

/// The registration of kind `K`.
pub fn registration<K: Hooks>() -> Registration {
    Registration {
        kind: K::kind(&()).into_owned(),
        entry: crate::run::kinds::entry::<K>,
        controller: controller::<K>,
    }
}

/// Kind `K`'s controller, its wakes routed to it by `router`.
fn controller<K: Hooks>(ctx: Arc<Context>, router: &mut Router) -> BoxFuture<'static, ()> {
    super::run::<K>(ctx, router.add::<K>()).boxed()
}

/// The same kind listed twice.
#[derive(Debug, thiserror::Error)]
#[error("the kind {0} is registered twice")]
pub struct DuplicateKind(pub String);

/// Every kind the operator runs, each once, in the order listed.
#[derive(Clone)]
pub struct Registered(Vec<Registration>);

impl Registered {
    /// `kinds`; an error if one is listed twice.
    pub fn new(kinds: Vec<Registration>) -> Result<Registered, DuplicateKind> {
        let mut seen = HashSet::new();
        if let Some(twice) = kinds.iter().find(|r| !seen.insert(r.kind.as_str())) {
            return Err(DuplicateKind(twice.kind.clone()));
        }
        Ok(Registered(kinds))
    }

    /// The kinds' names, in the order listed.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|r| r.kind.as_str())
    }

    /// The series that exist at 0 from the start: each kind's reconcile errors, and the
    /// dropped wakes.
    pub fn prepare(&self, metrics: &Metrics) {
        let reconcile = metrics.family::<ReconcileMetrics>();
        for kind in self.names() {
            reconcile.prepare(kind);
        }
        metrics.family::<WakeMetrics>();
    }

    /// The context's list of kinds.
    pub fn kinds(&self) -> Kinds {
        Kinds(self.0.iter().map(|r| (r.entry)()).collect())
    }

    /// Each kind's controller (to be run while leading), and the router of their wakes: each
    /// kind's wakes to its controller, any other kind's nowhere (`Router::serve` the wakes).
    pub fn controllers(&self, ctx: &Arc<Context>) -> (Router, Vec<BoxFuture<'static, ()>>) {
        let mut router = Router::new(&ctx.metrics);
        let controllers = self
            .0
            .iter()
            .map(|r| (r.controller)(ctx.clone(), &mut router))
            .collect();
        (router, controllers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Wake;
    use crds::{EgressBenchmark, IngressBenchmark};

    fn both() -> Registered {
        Registered::new(vec![
            registration::<IngressBenchmark>(),
            registration::<EgressBenchmark>(),
        ])
        .unwrap()
    }

    #[test]
    fn a_kind_listed_twice_is_refused() {
        let twice = Registered::new(vec![
            registration::<EgressBenchmark>(),
            registration::<IngressBenchmark>(),
            registration::<EgressBenchmark>(),
        ]);
        assert_eq!(twice.err().map(|e| e.0).as_deref(), Some("EgressBenchmark"));
    }

    /// One registration gives a kind everything: its reconcile series at 0, its entry in the
    /// context's list of kinds, a controller, and its wakes routed.
    #[tokio::test]
    async fn one_registration_prepares_lists_runs_and_routes_each_kind() {
        let kinds = both();
        assert_eq!(
            kinds.names().collect::<Vec<_>>(),
            ["IngressBenchmark", "EgressBenchmark"]
        );

        let metrics = Metrics::new();
        kinds.prepare(&metrics);
        let text = metrics.render();
        for kind in kinds.names() {
            let series =
                format!(r#"netbench_reconcile_errors_total{{error="Internal",kind="{kind}"}} 0"#);
            assert!(text.contains(&series), "{series} missing:\n{text}");
        }
        assert!(text.contains(r#"netbench_wakes_dropped_total{reason="unknown_kind"} 0"#));

        let listed = kinds.kinds();
        let entries: Vec<&str> = listed.0.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(entries, ["IngressBenchmark", "EgressBenchmark"]);

        let client = crate::testing::FakeApi::default().failing();
        let ctx = crate::testing::context(client, crate::admin::config::Config::for_tests());
        // The controllers are not run here: their wake streams are alive, unread.
        let (router, controllers) = kinds.controllers(&Arc::new(ctx));
        assert_eq!(controllers.len(), 2);
        let wake = |kind: &str| Wake {
            kind: kind.into(),
            namespace: "team-a".into(),
            name: "b".into(),
        };
        assert!(router.route(&wake("IngressBenchmark")));
        assert!(router.route(&wake("EgressBenchmark")));
        assert!(!router.route(&wake("OtherBenchmark")));
    }
}
