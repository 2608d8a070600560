//! The kube-runtime Controller, the same for every kind: watch the kind and the operator's pods,
//! wake at once when a worker report arrives, wrap every reconcile in the finalizer (Apply /
//! Cleanup), and log, count and back off on errors. `kinds` registers each kind once (main.rs
//! lists them), `wake` routes worker reports' wake requests to their kind's controller.
//!
//! Objects are read through `DeserializeGuard`, so one object that does not parse (a stored
//! object from an older schema, a hand-edited one) is reported on its own and cannot stop the
//! watch for every other benchmark.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{self, finalizer, Event};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{watcher, Controller, WatchStreamExt};
use kube::{Resource, ResourceExt};
use tracing::Instrument;

use crate::base::error::{Error, Result, Retry};
use crate::policy::backoff;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Registry};

use crate::admin::scope::Scope;
use crate::base::metrics::{counter, Family};
use crate::base::outcome::Step;
use crate::base::own_task::in_own_task;
use crate::base::own_thread::on_own_thread;
use crate::context::Context;
use crate::driver;
use crate::k8s::watched_pods::Place;
use crate::run::Hooks;
use tokio_stream::wrappers::UnboundedReceiverStream;

pub mod add_finalizer;
pub mod behind;
pub mod kinds;
pub mod wake;

/// Held by every benchmark until its cleanup (restores, children) is done.
pub const FINALIZER: &str = "netbench.io/cleanup";

/// What every reconcile of one kind shares: the operator's context and the retry state.
struct Reconciler {
    ctx: Arc<Context>,
    backoff: Backoff,
    behind: behind::Behind,
}

/// Watch events decoded ahead of the controller at most (`base::own_task`).
const WATCH_AHEAD: usize = 256;

/// How long the works still under way when the controllers stop may take to end.
const FINISH_WITHIN: Duration = Duration::from_secs(10);

/// Stops the works gone on behind the reconciles when the controllers are dropped (the leader's
/// work ended another way): none goes on once another replica may lead.
struct StopWorks(Arc<Reconciler>);

impl Drop for StopWorks {
    fn drop(&mut self) {
        self.0.behind.stop_all();
    }
}

type Guarded<K> = DeserializeGuard<K>;

pub async fn run<K: Hooks>(
    ctx: Arc<Context>,
    wake: impl Stream<Item = ObjectRef<K>> + Send + 'static,
) {
    // One controller per place the operator watches: the whole cluster, or each namespace of a
    // namespace-scoped install (no watch or list across the cluster, which its Roles forbid).
    let scope = ctx.config.watch_namespaces.clone();
    let benchmarks = scope.apis::<Guarded<K>>(&ctx.client);
    // The kind's worker pods: each watch keeps a store the Running ticks read
    // (k8s::watched_pods), and wakes the pod's benchmark when the pod changes.
    let owned = watcher::Config::default().labels(&format!(
        "{}={},{}={}",
        crate::base::labels::MANAGED_BY,
        crate::base::labels::OPERATOR,
        crate::base::labels::KIND,
        K::kind(&()).to_lowercase()
    ));
    let pods: Vec<_> = scope
        .apis::<Pod>(&ctx.client)
        .into_iter()
        .zip(places(&scope))
        .map(|(api, place)| {
            let (store, writer) = reflector::store();
            ctx.pods.add(place, store);
            let kind = K::kind(&()).into_owned();
            let pods = watcher(api, owned.clone())
                .default_backoff()
                .modify(move |pod| crate::k8s::watched_pods::keep_what_is_read(pod, &kind))
                .reflect(writer)
                .touched_objects();
            decoded_beside(pods, "worker pods")
        })
        .collect();
    let wakes = wake_by_namespace(wake, &scope);
    let reconciler = Arc::new(Reconciler {
        ctx,
        backoff: Backoff::default(),
        // The works on this (the shared) runtime; the reconciles on the controller's thread.
        behind: behind::Behind::working_on(tokio::runtime::Handle::current()),
    });
    let _stop = StopWorks(reconciler.clone());
    // What `Controller::new` watches, the watch decoded beside the controller.
    let controllers: Vec<_> = benchmarks
        .into_iter()
        .map(|api| {
            let (reader, writer) = reflector::store();
            let watch = watcher(api, watcher::Config::default())
                .default_backoff()
                .reflect(writer)
                .applied_objects();
            Controller::for_stream(decoded_beside(watch, "benchmarks"), reader)
        })
        .collect();
    // The queue reads every benchmark of this kind from the controllers' caches from now on.
    let stores = controllers.iter().map(Controller::store).collect();
    let kinds = &reconciler.ctx.kinds;
    kinds.cache(&K::kind(&()), crate::run::kinds::cached::<K>(stores));
    let runs = controllers
        .into_iter()
        .zip(pods)
        .zip(wakes)
        .map(|((controller, pods), wake)| {
            controller
                .owns_stream(pods)
                .reconcile_on(wake)
                .shutdown_on_signal()
                .run(reconcile, error_policy, reconciler.clone())
                .boxed()
        });
    let controllers = futures::stream::select_all(runs).for_each(|res| async move {
        if let Err(e) = res {
            tracing::debug!(kind = %K::kind(&()), "reconcile: {e}");
        }
    });
    // The controllers, and so every reconcile they spawn, on a thread of their own: a
    // reconcile whose grace ended returns then, not once a shared thread has worked through
    // the works and watches queued before it (the reconcile p99 at 1000 benchmarks).
    let thread = format!("{}-controller", K::kind(&()).to_lowercase());
    if let Err(e) = on_own_thread(&thread, controllers).await {
        tracing::error!("{e}; exiting so a fresh replica can follow");
        std::process::exit(1);
    }
    // The controllers let their reconciles finish; so are the works gone on behind them.
    reconciler.behind.finish(FINISH_WITHIN).await;
}

/// `watch` polled in a task of its own on the shared runtime (`base::own_task`), its errors
/// logged there and dropped: its backoff paces the retries, and no error waits in the channel
/// ahead of the events that follow.
fn decoded_beside<T: Send + 'static>(
    watch: impl Stream<Item = std::result::Result<T, watcher::Error>> + Send + 'static,
    what: &'static str,
) -> impl Stream<Item = std::result::Result<T, watcher::Error>> + Send + 'static {
    let events = watch.filter_map(move |event| {
        std::future::ready(match event {
            Ok(object) => Some(object),
            Err(e) => {
                tracing::warn!("the watch of {what}: {e}");
                None
            }
        })
    });
    in_own_task(events, WATCH_AHEAD).map(Ok)
}

/// Where each of `scope`'s watches looks, in the order of `Scope::apis`.
fn places(scope: &Scope) -> Vec<Place> {
    match scope {
        Scope::Cluster => vec![Place::Cluster],
        Scope::Namespaces(names) => names.iter().cloned().map(Place::Namespace).collect(),
    }
}

type WakeStream<K> = futures::stream::BoxStream<'static, ObjectRef<Guarded<K>>>;

/// The wake requests of kind `K`, one stream per controller of `scope` (in the order of
/// `Scope::apis`); a request for a namespace outside the scope is dropped.
fn wake_by_namespace<K: Hooks>(
    wake: impl Stream<Item = ObjectRef<K>> + Send + 'static,
    scope: &Scope,
) -> Vec<WakeStream<K>> {
    let guarded = |r: ObjectRef<K>| {
        let g = ObjectRef::<Guarded<K>>::new(&r.name);
        match r.namespace {
            Some(ns) => g.within(&ns),
            None => g,
        }
    };
    let Scope::Namespaces(names) = scope else {
        return vec![wake.map(guarded).boxed()];
    };
    let (senders, receivers): (HashMap<_, _>, Vec<_>) = names
        .iter()
        .map(|ns| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            ((ns.clone(), tx), UnboundedReceiverStream::new(rx).boxed())
        })
        .unzip();
    tokio::spawn(wake.for_each(move |r| {
        if let Some(tx) = r.namespace.as_ref().and_then(|ns| senders.get(ns)) {
            let _ = tx.send(guarded(r));
        }
        futures::future::ready(())
    }));
    receivers
}

/// Every log line of one reconcile carries the object and its run: `kind`, `namespace`,
/// `benchmark` (its name; a field `name` would collide with the span's own name in JSON logs)
/// and `run` (the run id of the generation the controller saw; should `apply` read a newer one,
/// the change wakes another reconcile, whose span names the new run).
#[tracing::instrument(
    skip_all,
    fields(
        kind = %K::kind(&()),
        namespace = obj.namespace(),
        benchmark = obj.name_any(),
        run = %run_of(&*obj),
    )
)]
async fn reconcile<K: Hooks>(obj: Arc<Guarded<K>>, r: Arc<Reconciler>) -> Result<Action> {
    let ctx = &r.ctx;
    let kind = K::kind(&());
    let timer = ReconcileTimer::start(&ctx.metrics.family::<ReconcileMetrics>(), &kind);
    let benchmark = match &obj.0 {
        Ok(b) => Arc::new(b.clone()),
        Err(invalid) => return unreadable::<K>(ctx, &obj, &invalid.error).await,
    };
    // The work goes on behind the reconcile past a grace (`behind`): the reconcile holds its
    // object for that long at most. Reconciles that only find the work under way or hand its
    // outcome over do no work: not observed as reconciles.
    let key = obj_key(&obj);
    let uid = benchmark.uid().unwrap_or_default();
    let ns = benchmark.namespace().unwrap_or_default();
    let woken = ctx.waker(&kind, &ns, &benchmark.name_any());
    match r.behind.before(&key, &uid) {
        behind::Before::Going(action) => {
            timer.discard();
            return Ok(action);
        }
        // Reconciled again while the work failed: backed off as the error asks, and looked at
        // again at once for what came meanwhile (as the controller runs a trigger that came
        // during a reconcile right after it).
        behind::Before::Ended {
            outcome: Err(e),
            poked,
        } => {
            timer.discard();
            if poked {
                woken();
            }
            return Err(e);
        }
        // Nothing came meanwhile, and the copy is the one the work left (not changed since
        // by anyone else): its action stands.
        behind::Before::Ended {
            outcome: Ok(action),
            poked: false,
        } if benchmark
            .resource_version()
            .is_some_and(|v| ctx.versions.is_current(&uid, &v)) =>
        {
            timer.discard();
            return Ok(action);
        }
        behind::Before::Ended { .. } | behind::Before::Begin => {}
    }
    let work = work::<K>(benchmark, key.clone(), r.clone()).instrument(tracing::Span::current());
    r.behind.run((&key, &uid), behind::GRACE, work, woken).await
}

/// One reconcile's work: the finalizer (Apply or Cleanup) and the driver, timed as
/// `netbench_reconcile_work_duration_seconds`.
async fn work<K: Hooks>(benchmark: Arc<K>, key: String, r: Arc<Reconciler>) -> Result<Action> {
    let ctx = &r.ctx;
    let kind = K::kind(&());
    let began = std::time::Instant::now();
    let done = work_done::<K>(benchmark, &key, &r).await;
    // Observed once it ended (a work stopped midway is not).
    let metrics = ctx.metrics.family::<ReconcileMetrics>();
    metrics
        .work
        .with_label_values(&[&kind])
        .observe(began.elapsed().as_secs_f64());
    done
}

/// The work of the reconcile of `key` (`obj_key`: its backoff's key too).
async fn work_done<K: Hooks>(benchmark: Arc<K>, key: &str, r: &Reconciler) -> Result<Action> {
    let ctx = &r.ctx;
    let api: Api<K> = Api::namespaced(
        ctx.client.clone(),
        &benchmark.namespace().unwrap_or_default(),
    );
    // A new benchmark gets the finalizer here and goes on (the helper below would add it and
    // end the reconcile).
    let benchmark =
        match add_finalizer::with_finalizer(&api, FINALIZER, benchmark, &ctx.versions).await {
            Ok(Some(b)) => b,
            // Behind this process's own writes: the watch's next event wakes it again.
            Ok(None) => return Ok(Action::requeue(driver::BEHIND_RETRY)),
            Err(e) => return settle(finalizer::Error::AddFinalizer(e)),
        };
    let done = finalizer(&api, FINALIZER, benchmark, |event| async {
        match event {
            Event::Apply(b) => driver::apply(b.as_ref(), ctx, &api)
                .await
                .map_err(Halt::Error),
            Event::Cleanup(b) => match driver::cleanup_timed(b.as_ref(), ctx, &api).await {
                Ok(Step::Done) => Ok(Action::await_change()),
                Ok(Step::Wait { message, after }) => Err(Halt::Wait { message, after }),
                // Deletion fails nothing: shown like a wait, and tried again.
                Ok(Step::Fail(f)) => Err(Halt::Wait {
                    message: Some(format!("{}: {}", f.reason, f.message)),
                    after: CLEANUP_RETRY,
                }),
                Err(e) => Err(Halt::Error(e)),
            },
        }
    })
    .await;
    match done {
        Ok(action) => {
            r.backoff.reset(key);
            Ok(action)
        }
        Err(e) => settle(e),
    }
}

/// What the finalizer's Apply and Cleanup end with besides an action: an error, or a wait
/// that keeps the finalizer (a deletion waiting for the kind to write back what its runs
/// changed).
#[derive(Debug, thiserror::Error)]
enum Halt {
    #[error(transparent)]
    Error(Error),
    #[error("{}", message.as_deref().unwrap_or("waiting"))]
    Wait {
        message: Option<String>,
        after: Duration,
    },
}

/// How soon a deletion whose cleanup said it failed is tried again.
const CLEANUP_RETRY: Duration = Duration::from_secs(5);

/// A wait is not an error: logged at debug, not counted, the backoff left as it is, tried
/// again after its time. Anything else is the reconcile's error.
fn settle(e: finalizer::Error<Halt>) -> Result<Action> {
    let error = |e: finalizer::Error<Error>| Err(Error::Finalizer(Box::new(e)));
    match e {
        finalizer::Error::ApplyFailed(Halt::Wait { message, after })
        | finalizer::Error::CleanupFailed(Halt::Wait { message, after }) => {
            tracing::debug!("waiting: {}", message.as_deref().unwrap_or("deletion"));
            Ok(Action::requeue(after))
        }
        finalizer::Error::ApplyFailed(Halt::Error(e)) => error(finalizer::Error::ApplyFailed(e)),
        finalizer::Error::CleanupFailed(Halt::Error(e)) => {
            error(finalizer::Error::CleanupFailed(e))
        }
        finalizer::Error::AddFinalizer(e) => error(finalizer::Error::AddFinalizer(e)),
        finalizer::Error::RemoveFinalizer(e) => error(finalizer::Error::RemoveFinalizer(e)),
        finalizer::Error::UnnamedObject => error(finalizer::Error::UnnamedObject),
        finalizer::Error::InvalidFinalizer => error(finalizer::Error::InvalidFinalizer),
    }
}

/// An object that does not parse as its kind: said once per change (Warning Event, log, metric),
/// then left alone until it changes. Nothing of it is acted on.
async fn unreadable<K: Hooks>(ctx: &Context, obj: &Guarded<K>, error: &str) -> Result<Action> {
    let kind = K::kind(&());
    // kind, namespace, benchmark and run come with the reconcile's span.
    tracing::warn!("unreadable object: {error}");
    ctx.metrics
        .family::<ReconcileMetrics>()
        .error(&kind, "Unreadable");
    let reference = obj.object_ref(&());
    let mut events = vec![(
        EventType::Warning,
        "Unreadable".to_string(),
        format!("the operator cannot read this object ({error}); fix or recreate it"),
    )];
    ctx.publish(&reference, &mut events);
    Ok(Action::await_change())
}

/// The run id of `obj`'s current generation (see `labels::run_id`).
fn run_of<K: Resource>(obj: &K) -> String {
    crate::base::labels::run_id(
        &obj.uid().unwrap_or_default(),
        obj.meta().generation.unwrap_or(1),
    )
}

fn obj_key<K: Hooks>(obj: &Guarded<K>) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

fn error_policy<K: Hooks>(obj: Arc<Guarded<K>>, error: &Error, r: Arc<Reconciler>) -> Action {
    let kind = K::kind(&());
    let key = obj_key(&obj);
    let category = error.category();
    tracing::warn!(%kind, benchmark = %key, error = category, "reconcile failed: {error}");
    r.ctx
        .metrics
        .family::<ReconcileMetrics>()
        .error(&kind, category);
    let delay = r.backoff.next(&key, error.retry());
    Action::requeue(delay)
}

/// `netbench_reconcile_total`, `netbench_reconcile_errors_total` (each kind's error series
/// exist at 0 once [`ReconcileMetrics::prepare`]d), `netbench_reconcile_duration_seconds` and
/// `netbench_reconcile_work_duration_seconds`.
pub struct ReconcileMetrics {
    total: IntCounterVec,
    errors: IntCounterVec,
    duration: HistogramVec,
    work: HistogramVec,
}

impl Family for ReconcileMetrics {
    fn register(registry: &Registry) -> Self {
        // Fine enough that a p99 interpolated in them means something (a few slow reconciles
        // in a 1-2.5 s bucket read as a p99 of 2.2 s; reconciles held for the 50 ms grace,
        // in a 50-100 ms bucket, as 98 ms).
        let buckets = vec![
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.06, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5,
            2.5, 5.0, 10.0,
        ];
        let histogram = |name: &str, help: &str| {
            let opts = HistogramOpts::new(name, help).buckets(buckets.clone());
            let h = HistogramVec::new(opts, &["kind"]).expect("valid metric");
            registry
                .register(Box::new(h.clone()))
                .expect("unique metric");
            h
        };
        let duration = histogram(
            "netbench_reconcile_duration_seconds",
            "Duration of one reconcile: how long it held its object (its work goes on behind it past a grace of 50 ms)",
        );
        let work = histogram(
            "netbench_reconcile_work_duration_seconds",
            "Duration of one reconcile's work, including what went on behind the reconcile past its grace",
        );
        ReconcileMetrics {
            total: counter(
                registry,
                "netbench_reconcile_total",
                "Reconciles",
                &["kind"],
            ),
            errors: counter(
                registry,
                "netbench_reconcile_errors_total",
                "Failed reconciles by error",
                &["kind", "error"],
            ),
            duration,
            work,
        }
    }
}

impl ReconcileMetrics {
    /// Every known error series of `kind` at 0, so "no errors" reads as a rate of 0 rather
    /// than as no data.
    pub fn prepare(&self, kind: &str) {
        for error in Error::CATEGORIES {
            self.errors.with_label_values(&[kind, error]);
        }
    }

    fn error(&self, kind: &str, category: &str) {
        self.errors.with_label_values(&[kind, category]).inc();
    }
}

/// Observes a reconcile's duration when dropped.
pub struct ReconcileTimer {
    timer: Option<prometheus::HistogramTimer>,
}

impl ReconcileTimer {
    pub fn start(metrics: &ReconcileMetrics, kind: &str) -> ReconcileTimer {
        metrics.total.with_label_values(&[kind]).inc();
        ReconcileTimer {
            timer: Some(metrics.duration.with_label_values(&[kind]).start_timer()),
        }
    }

    /// Not observed: a reconcile that did no work.
    fn discard(mut self) {
        if let Some(t) = self.timer.take() {
            t.stop_and_discard();
        }
    }
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        if let Some(t) = self.timer.take() {
            t.observe_duration();
        }
    }
}

/// Per-object backoff: consecutive failures counted by object, reset by a successful reconcile;
/// the delay after them is `policy::backoff`'s (API errors within 10 s, others up to 5 min),
/// jittered.
#[derive(Default)]
struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    fn next(&self, key: &str, retry: Retry) -> Duration {
        let n = {
            let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
            let n = failures.entry(key.to_string()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        backoff::jittered(backoff::delay(n, retry), rand::random_range(0.5..1.0))
    }

    fn reset(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watch's errors stay where it is decoded (logged, its backoff paces it): after an
    /// outage the controller gets the events at once, not a queue of errors it backs off on.
    #[tokio::test]
    async fn a_watch_decoded_beside_passes_its_events_and_keeps_its_errors() {
        let watch = futures::stream::iter([
            Ok(1),
            Err(watcher::Error::NoResourceVersion),
            Err(watcher::Error::NoResourceVersion),
            Ok(2),
        ]);
        let got: Vec<_> = decoded_beside(watch, "numbers").collect().await;
        let got: Vec<_> = got.into_iter().map(|r| r.ok()).collect();
        assert_eq!(got, [Some(1), Some(2)]);
    }

    fn reconciler() -> Arc<Reconciler> {
        // An API server that answers every request with a 500 (nothing here reaches it but
        // the Event of an unreadable object).
        let client = crate::testing::FakeApi::default().failing();
        let ctx = crate::testing::context(client, crate::admin::config::Config::for_tests());
        Arc::new(Reconciler {
            ctx: Arc::new(ctx),
            backoff: Backoff::default(),
            behind: behind::Behind::default(),
        })
    }

    /// A log line written during a reconcile names the object and its run (the reconcile's
    /// span): here the warning about an object that does not parse as its kind.
    #[tokio::test]
    async fn reconcile_log_lines_carry_kind_namespace_benchmark_and_run() {
        let unreadable: Guarded<crds::IngressBenchmark> =
            serde_json::from_value(serde_json::json!({
                "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
                "metadata": {"name": "web", "namespace": "team-a", "generation": 3,
                             "uid": "3f2a9c1d-aaaa-bbbb-cccc-123456789012"},
                "spec": {"target": "not an object"},
            }))
            .unwrap();
        assert!(unreadable.0.is_err(), "the fixture must not parse");
        let (result, lines) = crate::testing::log_capture::capture(
            false,
            reconcile(Arc::new(unreadable), reconciler()),
        )
        .await;
        assert!(result.is_ok(), "{result:?}");
        let warning = crate::testing::log_capture::line_with(&lines, "unreadable object");
        for field in [
            "kind=IngressBenchmark",
            "namespace=\"team-a\"",
            "benchmark=\"web\"",
            "run=3f2a9c1d-g3",
        ] {
            assert!(warning.contains(field), "{field} missing: {warning}");
        }
    }

    /// Benchmark team-a/b (at resourceVersion 5) held by an API server whose every answer
    /// takes a second, the reconciler on it, and the wakes its works' ends send.
    fn slow_api_server() -> (
        crate::testing::FakeApi,
        Arc<Reconciler>,
        tokio::sync::mpsc::UnboundedReceiver<crate::context::Wake>,
    ) {
        let bm = benchmark_at("5");
        let api_server = crate::testing::FakeApi::default();
        let client = api_server.client_after(Duration::from_secs(1), move |seen| {
            crate::testing::fake_api::holding(&bm, seen)
        });
        let (wake, wakes) = tokio::sync::mpsc::unbounded_channel();
        let reporter = kube::runtime::events::Reporter {
            controller: "netbench-operator".into(),
            instance: None,
        };
        let config = crate::admin::config::Config::for_tests();
        let metrics = Arc::new(crate::base::metrics::Metrics::new());
        let ctx = Context::new(client, config, metrics, reporter, wake, Default::default());
        let r = Arc::new(Reconciler {
            ctx: Arc::new(ctx),
            backoff: Backoff::default(),
            behind: behind::Behind::default(),
        });
        (api_server, r, wakes)
    }

    fn benchmark_at(version: &str) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
            "metadata": {"name": "b", "namespace": "team-a", "generation": 1,
                         "uid": "5c2a9e10-0000-4c1d-9e3f-1234567890ab",
                         "resourceVersion": version, "finalizers": [FINALIZER]},
            "spec": {"target": {"url": "http://x.team-a/"}, "load": {"duration": "10s"}},
        })
    }

    fn object_at(version: &str) -> Arc<Guarded<crds::IngressBenchmark>> {
        Arc::new(serde_json::from_value(benchmark_at(version)).unwrap())
    }

    async fn woken(wakes: &mut tokio::sync::mpsc::UnboundedReceiver<crate::context::Wake>) {
        let woken = tokio::time::timeout(Duration::from_secs(120), wakes.recv())
            .await
            .expect("woken once the work ended")
            .expect("a wake");
        let names = (
            woken.kind.as_str(),
            woken.namespace.as_str(),
            woken.name.as_str(),
        );
        assert_eq!(names, ("IngressBenchmark", "team-a", "b"));
    }

    /// A reconcile against a slow API server holds its object for the grace only, a reconcile
    /// meanwhile asks nothing, and the work's end wakes the benchmark, whose next reconcile
    /// does the work again (it was woken meanwhile).
    #[tokio::test(start_paused = true)]
    async fn a_slow_api_server_holds_a_reconcile_for_the_grace_only() {
        let (api_server, r, mut wakes) = slow_api_server();
        let obj = object_at("5");
        let began = tokio::time::Instant::now();
        let action = reconcile(obj.clone(), r.clone()).await.unwrap();
        assert_eq!(began.elapsed(), behind::GRACE);
        assert_eq!(action, Action::requeue(behind::NET));
        let asked = api_server.requests();
        assert_eq!(asked.len(), 1, "its first request is under way: {asked:?}");

        let action = reconcile(obj.clone(), r.clone()).await.unwrap();
        assert_eq!(began.elapsed(), behind::GRACE, "no wait");
        assert_eq!(action, Action::requeue(behind::NET));
        assert_eq!(api_server.requests(), asked, "nothing asked");

        woken(&mut wakes).await;
        assert!(
            began.elapsed() >= Duration::from_secs(2),
            "{:?}",
            began.elapsed()
        );
        assert_eq!(r.behind.going(), 0);
        let before = api_server.requests().len();
        reconcile(obj.clone(), r.clone()).await.unwrap();
        assert!(api_server.requests().len() > before, "the work done again");
    }

    /// The reconcile a work's end woke returns the work's action only for the copy the work
    /// left; a copy changed since (by anyone else) has the work done again.
    #[tokio::test(start_paused = true)]
    async fn a_works_action_stands_only_for_the_copy_it_left() {
        for (version, again) in [("5", false), ("6", true)] {
            let (api_server, r, mut wakes) = slow_api_server();
            reconcile(object_at("5"), r.clone()).await.unwrap();
            woken(&mut wakes).await;
            let before = api_server.requests().len();
            let action = reconcile(object_at(version), r.clone()).await.unwrap();
            let asked = api_server.requests().len() > before;
            assert_eq!(asked, again, "at version {version}: {action:?}");
            if !again {
                assert_ne!(
                    action,
                    Action::requeue(behind::NET),
                    "the work's own action"
                );
            }
        }
    }

    #[test]
    fn backoff_is_jittered_per_object_and_reset_by_success() {
        let b = Backoff::default();
        for _ in 0..4 {
            b.next("ns/a", Retry::Slowly);
        }
        let d = b.next("ns/a", Retry::Slowly);
        assert!(
            d >= Duration::from_secs(8) && d <= Duration::from_secs(16),
            "{d:?}"
        );
        let other = b.next("ns/b", Retry::Slowly);
        assert!(other <= Duration::from_secs(1), "{other:?}");
        b.reset("ns/a");
        assert!(b.next("ns/a", Retry::Slowly) <= Duration::from_secs(1));
        // A refused write: retried every 5-10 s at most, however long the refusal lasts.
        let refused: Vec<Duration> = (0..12).map(|_| b.next("ns/c", Retry::Soon)).collect();
        assert!(refused[0] <= Duration::from_secs(1), "{refused:?}");
        assert!(
            refused.iter().all(|d| *d <= backoff::SOON_CAP),
            "{refused:?}"
        );
        assert!(refused[11] >= backoff::SOON_CAP / 2, "{refused:?}");
    }
}
