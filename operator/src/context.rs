//! Handles shared by the controllers and the worker API.

use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::Reporter;
use kube::Client;

use crate::admin::config::Config;
use crate::admin::scope::Scope;
use crate::base::events::PendingEvent;
use crate::base::metrics::Metrics;
use crate::policy::queue::Contender;
use crate::store::registry::Registry;
use crate::store::reports::Store;

pub struct Context {
    pub client: Client,
    pub config: Config,
    pub metrics: Arc<Metrics>,
    pub runs: Arc<Registry>,
    pub reporter: Reporter,
    /// Publishes the reconciles' Events in the background, in order per object.
    pub events: Arc<crate::k8s::events::Publisher>,
    /// Wakes the controller for an object when a worker report arrives.
    pub wake: tokio::sync::mpsc::UnboundedSender<Wake>,
    /// Every kind the operator runs.
    pub kinds: Kinds,
    /// Pods' CPU and memory sampled during measured windows.
    pub usage: Arc<crate::k8s::usage::Windows<Vec<crds::ingress::WorkloadUsage>>>,
    /// The version of each benchmark last read or written (a reconcile's fresh GET is skipped
    /// when the cached copy is that one).
    pub versions: Arc<crate::k8s::versions::Versions>,
    /// The run records last read or written (store::run_record::Known).
    pub run_records: Arc<crate::store::run_record::Known>,
    /// What this process knows does not exist: restore records, HTTPRoutes (base::memo).
    pub absent: Arc<crate::base::memo::Absent>,
    /// The cluster's facts a result records, read at most once a minute.
    pub facts: Arc<crate::base::memo::ClusterFactsMemo>,
    /// Nodes' health, read at most every few seconds (a lost worker's node).
    pub nodes: Arc<crate::k8s::pods::NodeHealth>,
    /// The creation of each step's pods, under way or ended (k8s::creation).
    pub creations: Arc<crate::k8s::creation::Creations>,
    /// The worker pods as the controllers' watches hold them.
    pub pods: Arc<crate::k8s::watched_pods::WatchedPods>,
    /// The report objects as the operator's watch of its namespace holds them.
    pub watched_reports: Arc<crate::store::reports::WatchedReports>,
}

/// Every kind the operator runs (main.rs lists them), for what looks across kinds: the queue
/// (a run waits for runs of any kind that share its target or nodes) and a new leader's pass
/// over every benchmark.
#[derive(Clone, Default)]
pub struct Kinds(pub Vec<KindEntry>);

/// A listing of one kind's benchmarks in the operator's scope.
pub type ListFn<T> = for<'c> fn(&'c Client, &'c Scope) -> BoxFuture<'c, Result<T, kube::Error>>;

/// The queue's view of one kind from its controller's cache: None until the cache has its
/// first complete listing.
pub type CachedFn = Arc<dyn Fn() -> Option<Vec<Contender>> + Send + Sync>;

/// What those passes need of one kind (see `run::kinds::entry`).
#[derive(Clone)]
pub struct KindEntry {
    /// The kind's name ("IngressBenchmark").
    pub kind: String,
    /// Every benchmark of the kind, as the queue sees it, listed from the API server.
    pub contenders: ListFn<Vec<Contender>>,
    /// The same from the kind's controller cache, once its controller runs
    /// (`controller::run` sets it): no list of every benchmark per reconcile.
    pub cached: Arc<OnceLock<CachedFn>>,
    /// Every benchmark of the kind, listed for a new leader.
    pub list: ListFn<Listed>,
}

/// One kind's benchmarks as a new leader lists them.
pub struct Listed {
    /// Their uids (report objects of any other benchmark are orphans).
    pub uids: Vec<String>,
    /// Whether every watched namespace answered (else the uids are not all of them).
    pub complete: bool,
    /// Publishes the results their status holds.
    pub export: Box<dyn FnOnce(&Metrics) + Send>,
}

impl Kinds {
    /// Every benchmark of every kind, as contenders of the queue.
    pub async fn contenders(
        &self,
        client: &Client,
        scope: &Scope,
    ) -> Result<Vec<Contender>, kube::Error> {
        let mut all = vec![];
        for kind in &self.0 {
            match kind.cached.get().and_then(|cached| cached()) {
                Some(cached) => all.extend(cached),
                None => all.extend((kind.contenders)(client, scope).await?),
            }
        }
        Ok(all)
    }

    /// Hands kind `kind`'s controller cache to the queue (once; later calls change nothing).
    pub fn cache(&self, kind: &str, cached: CachedFn) {
        if let Some(entry) = self.0.iter().find(|e| e.kind == kind) {
            let _ = entry.cached.set(cached);
        }
    }
}

impl Context {
    /// A context of `client` for `kinds`, publishing Events as `reporter` and waking
    /// controllers through `wake`: a fresh registry of runs and empty caches.
    pub fn new(
        client: Client,
        config: Config,
        metrics: Arc<Metrics>,
        reporter: Reporter,
        wake: tokio::sync::mpsc::UnboundedSender<Wake>,
        kinds: Kinds,
    ) -> Context {
        Context {
            events: crate::k8s::events::Publisher::new(client.clone(), reporter.clone()),
            client,
            config,
            metrics,
            runs: Arc::new(Registry::default()),
            reporter,
            wake,
            kinds,
            usage: Default::default(),
            versions: Default::default(),
            nodes: Default::default(),
            facts: Default::default(),
            run_records: Default::default(),
            absent: Default::default(),
            pods: Default::default(),
            creations: Default::default(),
            watched_reports: Default::default(),
        }
    }

    /// The worker reports, kept in the operator's namespace.
    pub fn reports(&self) -> Store {
        Store::new(self.client.clone(), self.config.namespace.clone())
            .reading(self.watched_reports.clone())
    }

    /// One benchmark's restore records of kind `what` ("offload", "target"): none is asked for
    /// that this process knows is absent (`absent`).
    pub fn restore_records(&self, what: &'static str) -> crate::store::records::Store {
        crate::store::records::Store::new(&self.client, &self.config.namespace, what)
            .knowing_absent(self.absent.clone())
    }

    /// What wakes benchmark `namespace/name` of `kind` later, from a task of its own: a
    /// reconcile of it at once.
    pub fn waker(&self, kind: &str, namespace: &str, name: &str) -> impl FnOnce() + Send + 'static {
        let sender = self.wake.clone();
        let again = Wake {
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        move || {
            let _ = sender.send(again);
        }
    }

    /// Hands `events` about `reference` over to be published (see `k8s::events`), leaving it
    /// empty; returns at once.
    pub fn publish(&self, reference: &ObjectReference, events: &mut Vec<PendingEvent>) {
        self.events.send(reference, events);
    }
}

/// A request to reconcile one object now.
#[derive(Clone, Debug)]
pub struct Wake {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}
