//! Routes the wake requests of the worker API (`context::Wake`: a report arrived, a worker
//! cannot start) to the controller of their kind, by kind name. Each registered kind has its
//! own stream (`controller::kinds` adds one per kind); a wake naming a kind no controller runs
//! is an error: logged, counted in `netbench_wakes_dropped_total{reason="unknown_kind"}`, and
//! sent nowhere.

use std::collections::HashMap;
use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;
use kube::Resource;
use prometheus::{IntCounterVec, Registry};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::base::metrics::{counter, Family, Metrics};
use crate::context::Wake;

/// The wake requests of kind `K`, as its controller reconciles on them.
pub type WakeStream<K> = UnboundedReceiverStream<ObjectRef<K>>;

/// Sends one wake to its kind's stream.
type Route = Box<dyn Fn(&Wake) + Send + Sync>;

/// The route of each registered kind, by kind name.
pub struct Router {
    routes: HashMap<String, Route>,
    metrics: Arc<WakeMetrics>,
}

impl Router {
    /// No kind yet; dropped wakes counted in `metrics`.
    pub fn new(metrics: &Metrics) -> Router {
        Router {
            routes: HashMap::new(),
            metrics: metrics.family::<WakeMetrics>(),
        }
    }

    /// Routes the wakes of kind `K` (by `K::kind`) to the stream returned. A kind added twice
    /// keeps only its last stream (`controller::kinds` refuses a kind listed twice).
    pub fn add<K>(&mut self) -> WakeStream<K>
    where
        K: Resource<DynamicType = ()> + 'static,
    {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let route = move |w: &Wake| {
            // A stopped controller no longer reads its wakes; nothing to do then.
            let _ = tx.send(ObjectRef::<K>::new(&w.name).within(&w.namespace));
        };
        self.routes
            .insert(K::kind(&()).into_owned(), Box::new(route));
        UnboundedReceiverStream::new(rx)
    }

    /// Sends `wake` to its kind's stream; false, with an error logged and counted, when no
    /// kind of that name is registered (the wake goes to no controller).
    pub fn route(&self, wake: &Wake) -> bool {
        match self.routes.get(&wake.kind) {
            Some(route) => {
                route(wake);
                true
            }
            None => {
                tracing::error!(
                    kind = %wake.kind,
                    namespace = %wake.namespace,
                    name = %wake.name,
                    "a wake request for a kind the operator does not run; dropped"
                );
                self.metrics
                    .dropped
                    .with_label_values(&[UNKNOWN_KIND])
                    .inc();
                false
            }
        }
    }

    /// Routes every wake of `rx` until every sender is gone.
    pub async fn serve(self, mut rx: UnboundedReceiver<Wake>) {
        while let Some(wake) = rx.recv().await {
            self.route(&wake);
        }
    }
}

/// The `reason` of a wake whose kind is not registered.
const UNKNOWN_KIND: &str = "unknown_kind";

/// `netbench_wakes_dropped_total{reason}`: wake requests no controller received, by reason
/// (each reason's series exists at 0 once the family is registered).
pub struct WakeMetrics {
    dropped: IntCounterVec,
}

impl Family for WakeMetrics {
    fn register(registry: &Registry) -> Self {
        let dropped = counter(
            registry,
            "netbench_wakes_dropped_total",
            "Wake requests no controller received, by reason",
            &["reason"],
        );
        dropped.with_label_values(&[UNKNOWN_KIND]);
        WakeMetrics { dropped }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::{EgressBenchmark, IngressBenchmark};
    use tokio::sync::mpsc::error::TryRecvError;

    fn wake(kind: &str, namespace: &str, name: &str) -> Wake {
        Wake {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// What `stream` holds now, as namespace/name.
    fn drain<K: Resource<DynamicType = ()>>(stream: WakeStream<K>) -> Vec<String> {
        let mut rx = stream.into_inner();
        let mut got = vec![];
        loop {
            match rx.try_recv() {
                Ok(r) => got.push(format!("{}/{}", r.namespace.unwrap_or_default(), r.name)),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return got,
            }
        }
    }

    /// A router of both kinds, and their streams.
    fn both(
        metrics: &Metrics,
    ) -> (
        Router,
        WakeStream<IngressBenchmark>,
        WakeStream<EgressBenchmark>,
    ) {
        let mut router = Router::new(metrics);
        let ingress = router.add::<IngressBenchmark>();
        let egress = router.add::<EgressBenchmark>();
        (router, ingress, egress)
    }

    fn dropped(metrics: &Metrics) -> String {
        metrics
            .render()
            .lines()
            .find(|l| l.starts_with("netbench_wakes_dropped_total{"))
            .unwrap_or_default()
            .to_string()
    }

    /// Through the task main.rs spawns: each kind's wakes reach its own stream, in order, and
    /// no other kind's.
    #[tokio::test]
    async fn each_registered_kinds_wakes_reach_its_stream_only() {
        let metrics = Metrics::new();
        let (router, ingress, egress) = both(&metrics);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        for w in [
            wake("EgressBenchmark", "team-a", "e1"),
            wake("IngressBenchmark", "team-b", "i1"),
            wake("EgressBenchmark", "team-b", "e2"),
        ] {
            tx.send(w).unwrap();
        }
        drop(tx);
        router.serve(rx).await;
        assert_eq!(drain(ingress), ["team-b/i1"]);
        assert_eq!(drain(egress), ["team-a/e1", "team-b/e2"]);
        assert_eq!(
            dropped(&metrics),
            r#"netbench_wakes_dropped_total{reason="unknown_kind"} 0"#
        );
    }

    /// A kind no controller runs reaches no stream (before, any kind but EgressBenchmark went
    /// to the ingress controller), is counted, and is logged as an error naming the object.
    #[tokio::test]
    async fn an_unknown_kinds_wake_goes_nowhere_and_is_counted_and_logged() {
        let metrics = Metrics::new();
        let (router, ingress, egress) = both(&metrics);
        let (routed, lines) = crate::testing::log_capture::capture(false, async {
            router.route(&wake("UdpBenchmark", "team-c", "u"))
        })
        .await;
        assert!(!routed);
        assert!(drain(ingress).is_empty());
        assert!(drain(egress).is_empty());
        assert_eq!(
            dropped(&metrics),
            r#"netbench_wakes_dropped_total{reason="unknown_kind"} 1"#
        );
        let line = lines
            .iter()
            .find(|l| l.contains("ERROR") && l.contains("does not run"))
            .unwrap_or_else(|| panic!("no error in {lines:#?}"));
        for field in ["kind=UdpBenchmark", "namespace=team-c", "name=u"] {
            assert!(line.contains(field), "{field} missing: {line}");
        }
    }

    /// The kind name is matched exactly: the lower-case label form is not a kind.
    #[tokio::test]
    async fn a_kind_is_matched_by_its_exact_name() {
        let metrics = Metrics::new();
        let mut router = Router::new(&metrics);
        let ingress = router.add::<IngressBenchmark>();
        assert!(!router.route(&wake("ingressbenchmark", "team-a", "i")));
        assert!(router.route(&wake("IngressBenchmark", "team-a", "i")));
        assert_eq!(drain(ingress), ["team-a/i"]);
        assert_eq!(
            dropped(&metrics),
            r#"netbench_wakes_dropped_total{reason="unknown_kind"} 1"#
        );
    }
}
