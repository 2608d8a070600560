//! Starting a step's worker pods. A refusal by the API server (a ResourceQuota, PodSecurity
//! admission, an invalid quantity) ends the run at once with the server's message; other
//! errors (5xx, 429, timeouts) are retried until the worker start timeout, then end the run
//! naming the last one. Either way the pods already created go, and nothing blocks the queue.
//!
//! The pods are created by a task of their own (16 POSTs at a time, `pods::create_pods`), not
//! inside a reconcile: a reconcile starts the task and waits for it at most [`GRACE`] (a step
//! of a few pods is usually done by then and goes on in the same reconcile); beyond, it
//! returns, and the task wakes the benchmark once it has ended, whose next reconcile reads the
//! outcome. So a 256-worker step holds no reconcile for the seconds its POSTs take. The tasks
//! are kept in memory ([`Creations`]); a run that ends stops its own ([`Creations::stop`]);
//! after a restart creation starts again from the first pod (AlreadyExists is success).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::events::EventType;
use kube::Client;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::base::clock::elapsed_since;
use crate::base::conditions::{self, WORKERS_SCHEDULED};
use crate::base::error::Result;
use crate::base::events::PendingEvent;
use crate::base::outcome::{Failure, Reason};
use crate::base::text::clip;
use crate::k8s::pods::{self, PodCreateError};

/// Condition reason (WorkersScheduled=False) and Event reason while creation is retried (its
/// failures are Reason::PodCreationRefused and Reason::PodCreationTimeout).
pub const RETRYING: &str = "PodCreationRetrying";

/// Longest API server message kept in status.
const MAX_MESSAGE: usize = 1024;

/// How long a reconcile waits for the creation it started before it returns (and is woken
/// when the creation has ended).
pub const GRACE: Duration = Duration::from_millis(50);

/// Steps whose creation is remembered at most. Beyond it, those that ended are forgotten
/// first; while that many are under way, no other starts (its reconcile tries again shortly).
const STEPS_AT_MOST: usize = 4096;

/// How long [`Creations::stop`] waits for the POSTs already sent to be answered before it
/// aborts them.
const DRAIN: Duration = Duration::from_secs(10);

/// What a creation came to, and how long it took.
type Outcome = (std::result::Result<(), PodCreateError>, Duration);

/// The creation of one step's pods: a task under way, or what it came to.
enum State {
    Creating {
        task: AbortHandle,
        /// Set by [`Creations::stop`]: no further POST is sent.
        stopped: Arc<AtomicBool>,
        /// Closed once the task has ended (its sender goes with it).
        ended: watch::Receiver<()>,
    },
    Ended(Outcome),
}

struct Creation {
    /// The uid of the benchmark and the run whose pods these are ([`Creations::stop`]).
    uid: String,
    run: String,
    /// Which task (a step's creation tried again gets a new one): a stopped task's outcome
    /// is not taken for a later one's.
    task: u64,
    state: State,
}

/// The creation of worker pods under way or ended, by step (benchmark uid, namespace and
/// selector).
#[derive(Default)]
pub struct Creations {
    steps: Mutex<HashMap<String, Creation>>,
    tasks: AtomicU64,
}

/// What [`Creations::take`] found for a step.
enum Found {
    /// Nothing: a task is to be started.
    Nothing,
    Creating,
    Ended(Outcome),
}

impl Creations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Creation>> {
        self.steps.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state of step `key`; an ended creation is taken (forgotten), and a task that ended
    /// without saying so (aborted) counts as none.
    fn take(&self, key: &str) -> Found {
        let mut steps = self.lock();
        match steps.get(key).map(|c| &c.state) {
            None => Found::Nothing,
            Some(State::Creating { task, .. }) if !task.is_finished() => Found::Creating,
            Some(_) => match steps.remove(key).map(|c| c.state) {
                Some(State::Ended(outcome)) => Found::Ended(outcome),
                _ => Found::Nothing,
            },
        }
    }

    /// Starts creating `pods` for step `key` as a task, bounded by `bound` (past it, a
    /// transient error naming the first pod); its outcome is kept for the step's next look.
    /// None: [`STEPS_AT_MOST`] creations are under way already. Also the flag that says it
    /// was stopped.
    fn begin(
        self: &Arc<Self>,
        key: &str,
        owner: (&str, &str),
        (client, namespace, pods): (Client, String, Vec<Pod>),
        bound: Duration,
    ) -> Option<(tokio::task::JoinHandle<()>, Arc<AtomicBool>)> {
        let mut steps = self.lock();
        if steps.len() >= STEPS_AT_MOST && !steps.contains_key(key) {
            steps.retain(|_, c| matches!(c.state, State::Creating { .. }));
            if steps.len() >= STEPS_AT_MOST {
                return None;
            }
        }
        let task = self.tasks.fetch_add(1, Ordering::Relaxed);
        let creations = Arc::clone(self);
        let step = key.to_string();
        let stopped = Arc::new(AtomicBool::new(false));
        let (done, ended) = watch::channel(());
        let stop = Arc::clone(&stopped);
        // The lock is held while the task is spawned and recorded: it cannot record its end
        // first.
        let handle = tokio::spawn(async move {
            let _done = done;
            let began = tokio::time::Instant::now();
            let create = pods::create_pods(&client, &namespace, &pods, &stop);
            let outcome = match tokio::time::timeout(bound, create).await {
                Ok(outcome) => outcome,
                Err(_) => Err(PodCreateError {
                    pod: pods
                        .first()
                        .and_then(|p| p.metadata.name.clone())
                        .unwrap_or_default(),
                    refused: false,
                    message: format!(
                        "creating the step's worker pods took longer than {}s",
                        bound.as_secs()
                    ),
                }),
            };
            creations.end(&step, task, (outcome, began.elapsed()));
        });
        let (uid, run) = owner;
        steps.insert(
            key.to_string(),
            Creation {
                uid: uid.to_string(),
                run: run.to_string(),
                task,
                state: State::Creating {
                    task: handle.abort_handle(),
                    stopped: Arc::clone(&stopped),
                    ended,
                },
            },
        );
        Some((handle, stopped))
    }

    /// Task `task` of step `key` ended with `outcome` (kept only if the step is still its).
    fn end(&self, key: &str, task: u64, outcome: Outcome) {
        if let Some(c) = self.lock().get_mut(key).filter(|c| c.task == task) {
            c.state = State::Ended(outcome);
        }
    }

    /// Run `run` of the benchmark of uid `uid` (every run of it: None) ended or goes: its
    /// creations under way send no further POST, and this waits (at most [`DRAIN`], then
    /// aborts them) until those already sent were answered, so that the caller's deletion of
    /// the run's pods comes after every pod that will exist. What is known of its steps is
    /// forgotten.
    pub async fn stop(&self, uid: &str, run: Option<&str>) {
        self.stop_where(|c| c.uid == uid && run.is_none_or(|r| c.run == r))
            .await;
    }

    /// Every creation stops (the operator stops leading), as [`Creations::stop`].
    pub async fn stop_all(&self) {
        self.stop_where(|_| true).await;
    }

    async fn stop_where(&self, its: impl Fn(&Creation) -> bool) {
        let mut under_way = vec![];
        self.lock().retain(|_, c| {
            if !its(c) {
                return true;
            }
            if let State::Creating {
                task,
                stopped,
                ended,
            } = &c.state
            {
                stopped.store(true, Ordering::Relaxed);
                under_way.push((task.clone(), ended.clone()));
            }
            false
        });
        for (task, mut ended) in under_way {
            // Err: the sender went with the task, which has ended.
            if tokio::time::timeout(DRAIN, ended.changed()).await.is_err() {
                task.abort();
            }
        }
    }

    /// Creations under way or ended and not yet looked at.
    pub fn known(&self) -> usize {
        self.lock().len()
    }

    /// The runs of the benchmark of uid `uid` with a creation under way or not yet looked at.
    pub fn runs_of(&self, uid: &str) -> Vec<String> {
        let steps = self.lock();
        let mut runs: Vec<String> = steps
            .values()
            .filter(|c| c.uid == uid)
            .map(|c| c.run.clone())
            .collect();
        runs.sort();
        runs.dedup();
        runs
    }
}

#[derive(Debug, PartialEq)]
pub enum Started {
    /// Every pod exists.
    Yes,
    /// The pods are being created: the benchmark is woken once that has ended.
    Creating,
    /// A transient error; try again shortly. The message says what failed.
    Retrying(String),
    /// The run must end.
    Failed(Failure),
}

/// What one creation attempt means, given how long creation has already been failing. Pure.
pub fn judge(
    result: std::result::Result<(), PodCreateError>,
    failing_for: Duration,
    timeout: Duration,
) -> Started {
    let e = match result {
        Ok(()) => return Started::Yes,
        Err(e) => e,
    };
    let message = clip(&e.message, MAX_MESSAGE);
    if e.refused {
        return Started::Failed(Failure::new(
            Reason::PodCreationRefused,
            format!("the API server refused worker pod {}: {message}", e.pod),
        ));
    }
    if failing_for >= timeout {
        return Started::Failed(Failure::new(
            Reason::PodCreationTimeout,
            format!(
                "worker pod {} could not be created within the worker start timeout ({}s); last error: {message}",
                e.pod,
                timeout.as_secs()
            ),
        ));
    }
    Started::Retrying(format!(
        "creating worker pod {} failed, retrying: {message}",
        e.pod
    ))
}

/// One step's pods, for [`start`].
pub struct StepPods<'a> {
    /// The kind of their benchmark.
    pub kind: &'a str,
    /// Whether Services may stand in front of them (`pods::delete_workers`).
    pub services: bool,
    pub namespace: &'a str,
    /// Selects the step's pods (to remove them when the run cannot start).
    pub selector: &'a str,
    /// Builds the pods: only when their creation begins (every reconcile of a step being
    /// created comes here, and building hundreds of pods on each was most of its work).
    pub pods: &'a (dyn Fn() -> Vec<Pod> + Sync),
    /// The benchmark's uid and the run id ([`Creations::stop`]).
    pub owner: (&'a str, &'a str),
    pub creations: &'a Arc<Creations>,
    /// Called once a creation that outlived [`GRACE`] has ended (wakes the benchmark).
    pub woken: Box<dyn FnOnce() + Send>,
}

/// Creates the pods (see the module's comment) and records the outcome in the WorkersScheduled
/// condition (whose lastTransitionTime while it says PodCreationRetrying is when the failures
/// began) and, on failure, in a Warning Event. The caller ends the run on `Started::Failed`.
pub async fn start(
    client: &Client,
    timeout: Duration,
    step: StepPods<'_>,
    run: &mut crds::RunStatus,
    events: &mut Vec<PendingEvent>,
    generation: i64,
) -> Result<Started> {
    let (uid, _) = step.owner;
    let key = format!("{uid}/{}/{}", step.namespace, step.selector);
    let retrying = conditions::get(&run.conditions, WORKERS_SCHEDULED)
        .filter(|c| c.reason == RETRYING)
        .map(|c| c.last_transition_time.clone());
    let failing_for = elapsed_since(&retrying);
    let (result, took) = match step.creations.take(&key) {
        Found::Creating => return Ok(Started::Creating),
        Found::Ended(outcome) => outcome,
        Found::Nothing => {
            // Within what is left of the worker start timeout (at least a second).
            let bound = timeout
                .saturating_sub(failing_for)
                .max(Duration::from_secs(1));
            let what = (client.clone(), step.namespace.to_string(), (step.pods)());
            let Some((mut task, stopped)) = step.creations.begin(&key, step.owner, what, bound)
            else {
                let m = format!("{STEPS_AT_MOST} pod creations are under way; trying again");
                return Ok(Started::Retrying(m));
            };
            if tokio::time::timeout(GRACE, &mut task).await.is_err() {
                let woken = step.woken;
                tokio::spawn(async move {
                    // A stopped creation wakes nobody: its run ended or goes.
                    if task.await.is_ok() && !stopped.load(Ordering::Relaxed) {
                        woken();
                    }
                });
                return Ok(Started::Creating);
            }
            match step.creations.take(&key) {
                Found::Ended(outcome) => outcome,
                Found::Creating | Found::Nothing => return Ok(Started::Creating),
            }
        }
    };
    // A creation that failed only at the end of a long attempt (a hung API server) has been
    // failing for that long too.
    let failing_for = failing_for.saturating_add(took);
    let outcome = judge(result, failing_for, timeout);
    let generation = Some(generation);
    match &outcome {
        Started::Creating => {}
        Started::Yes => {
            if retrying.is_some() {
                let m = format!("{} worker pod(s) created", (step.pods)().len());
                conditions::set(
                    &mut run.conditions,
                    WORKERS_SCHEDULED,
                    false,
                    "Scheduling",
                    m,
                    generation,
                );
            }
        }
        Started::Retrying(m) => {
            if retrying.is_none() {
                // A fresh clock: the condition's transition time marks the first failure.
                run.conditions.retain(|c| c.type_ != WORKERS_SCHEDULED);
                events.push((EventType::Warning, RETRYING.into(), m.clone()));
            }
            conditions::set(
                &mut run.conditions,
                WORKERS_SCHEDULED,
                false,
                RETRYING,
                m.clone(),
                generation,
            );
        }
        Started::Failed(f) => {
            pods::delete_workers(
                client,
                step.kind,
                step.services,
                step.namespace,
                step.selector,
            )
            .await?;
            let reason = f.reason.as_str();
            conditions::set(
                &mut run.conditions,
                WORKERS_SCHEDULED,
                false,
                reason,
                f.message.clone(),
                generation,
            );
            events.push((EventType::Warning, reason.into(), f.message.clone()));
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(refused: bool) -> std::result::Result<(), PodCreateError> {
        Err(PodCreateError {
            pod: "b-r-s0-w0".into(),
            refused,
            message: "pods \"b-r-s0-w0\" is forbidden: exceeded quota: q".into(),
        })
    }

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn a_refusal_fails_at_once_with_the_servers_message() {
        let Started::Failed(Failure { reason, message: m }) =
            judge(err(true), Duration::ZERO, MINUTE)
        else {
            panic!("a refusal must end the run");
        };
        assert_eq!(reason, Reason::PodCreationRefused);
        assert!(
            m.contains("b-r-s0-w0") && m.contains("exceeded quota: q"),
            "{m}"
        );
    }

    #[test]
    fn transient_errors_retry_until_the_start_timeout() {
        assert!(matches!(
            judge(err(false), Duration::from_secs(59), MINUTE),
            Started::Retrying(m) if m.contains("retrying")
        ));
        let Started::Failed(Failure { reason, message: m }) = judge(err(false), MINUTE, MINUTE)
        else {
            panic!("past the start timeout the run must end");
        };
        assert_eq!(reason, Reason::PodCreationTimeout);
        assert!(m.contains("60s") && m.contains("exceeded quota"), "{m}");
        assert_eq!(judge(Ok(()), MINUTE, MINUTE), Started::Yes);
    }

    fn pod(name: String) -> Pod {
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A fake API server answering every request after `delay`, pod creations with `code`,
    /// and the names of the pods posted so far, in name order. The tests run with tokio's
    /// clock paused: it moves on only when every task waits, so the delays are exact.
    fn answering(code: u16, delay: Duration) -> (Client, impl Fn() -> Vec<String>) {
        let api_server = crate::testing::FakeApi::default();
        let client = api_server.client_after(delay, move |seen| match seen.method.as_str() {
            "POST" => (code, serde_json::json!({"code": code})),
            _ => (200, crate::testing::fake_api::empty_list()),
        });
        let posted = move || {
            let mut names: Vec<String> = api_server
                .requests()
                .into_iter()
                .filter(|l| l.starts_with("POST "))
                .filter_map(|l| {
                    let body = l.split_once('{')?.1;
                    let v: serde_json::Value = serde_json::from_str(&format!("{{{body}")).ok()?;
                    Some(v["metadata"]["name"].as_str()?.to_string())
                })
                .collect();
            names.sort();
            names
        };
        (client, posted)
    }

    const SELECTOR: &str = "netbench.io/run=r1,netbench.io/step=0";

    /// One reconcile's `start` of `pods` (of run r1 of benchmark uid u1): its outcome. A wake
    /// is sent on `woken`.
    async fn start_once(
        client: &Client,
        pods: &[Pod],
        creations: &Arc<Creations>,
        woken: &tokio::sync::mpsc::UnboundedSender<()>,
    ) -> Started {
        start_building(client, &|| pods.to_vec(), creations, woken).await
    }

    /// [`start_once`] with the pods built by `pods`.
    async fn start_building(
        client: &Client,
        pods: &(dyn Fn() -> Vec<Pod> + Sync),
        creations: &Arc<Creations>,
        woken: &tokio::sync::mpsc::UnboundedSender<()>,
    ) -> Started {
        let woken = woken.clone();
        let step = StepPods {
            kind: "IngressBenchmark",
            services: false,
            namespace: "team-a",
            selector: SELECTOR,
            pods,
            owner: ("u1", "r1"),
            creations,
            woken: Box::new(move || {
                let _ = woken.send(());
            }),
        };
        let mut status = crds::RunStatus::default();
        start(client, MINUTE, step, &mut status, &mut vec![], 1)
            .await
            .unwrap()
    }

    /// `n` pods, no creation yet, and the channel the creations' wakes come on.
    fn fixture(
        n: usize,
    ) -> (
        Vec<Pod>,
        Arc<Creations>,
        tokio::sync::mpsc::UnboundedSender<()>,
        tokio::sync::mpsc::UnboundedReceiver<()>,
    ) {
        let (woken, wakes) = tokio::sync::mpsc::unbounded_channel();
        let pods = names(n).into_iter().map(pod).collect();
        (pods, Arc::new(Creations::default()), woken, wakes)
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("w{i:02}")).collect()
    }

    /// Waits (at most 10 s of the test's clock) for the wake of an ended creation.
    async fn woken_up(wakes: &mut tokio::sync::mpsc::UnboundedReceiver<()>) {
        tokio::time::timeout(Duration::from_secs(10), wakes.recv())
            .await
            .expect("woken within 10 s")
            .expect("a wake");
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconcile_does_not_wait_for_slow_pods_and_is_woken_once_they_exist() {
        // Each POST answers after 20 ms, 16 at a time: 40 pods take 60 ms, beyond the grace.
        let (client, posted) = answering(201, Duration::from_millis(20));
        let (pods, creations, woken, mut wakes) = fixture(40);
        let began = tokio::time::Instant::now();
        assert_eq!(
            start_once(&client, &pods, &creations, &woken).await,
            Started::Creating
        );
        assert_eq!(
            began.elapsed(),
            GRACE,
            "the reconcile waited the grace only"
        );
        // (All 40 are sent by then, 16 at a time; the last 8 are answered at 60 ms.)
        // A reconcile in between neither waits nor starts a second creation.
        assert_eq!(
            start_once(&client, &pods, &creations, &woken).await,
            Started::Creating
        );
        woken_up(&mut wakes).await;
        assert_eq!(posted(), names(40), "every pod once");
        assert_eq!(
            start_once(&client, &pods, &creations, &woken).await,
            Started::Yes
        );
        assert_eq!(posted().len(), 40, "nothing posted again");
        // Over: a later start (a restart, another sample) creates them all again.
        assert_eq!(
            start_once(&client, &pods, &creations, &woken).await,
            Started::Creating
        );
        woken_up(&mut wakes).await;
        assert_eq!(posted().len(), 80, "every pod posted again");
    }

    /// The pods are built as their creation begins, not by each reconcile that finds it under
    /// way or ended: a step of hundreds of pods is reconciled on each of their events.
    #[tokio::test(start_paused = true)]
    async fn a_step_s_pods_are_built_once_for_their_creation_not_per_reconcile() {
        let (client, posted) = answering(201, Duration::from_millis(20));
        let (pods, creations, woken, mut wakes) = fixture(40);
        let builds = std::sync::atomic::AtomicUsize::new(0);
        let build = || {
            builds.fetch_add(1, Ordering::Relaxed);
            pods.clone()
        };
        let once = || start_building(&client, &build, &creations, &woken);
        assert_eq!(once().await, Started::Creating);
        assert_eq!(once().await, Started::Creating);
        woken_up(&mut wakes).await;
        assert_eq!(once().await, Started::Yes);
        assert_eq!(posted(), names(40));
        assert_eq!(
            builds.load(Ordering::Relaxed),
            1,
            "built for the creation only"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_quick_creation_goes_on_in_the_same_reconcile() {
        let (client, posted) = answering(201, Duration::ZERO);
        let (pods, creations, woken, mut wakes) = fixture(3);
        assert_eq!(
            start_once(&client, &pods, &creations, &woken).await,
            Started::Yes
        );
        assert_eq!(posted(), names(3));
        assert!(
            wakes.try_recv().is_err(),
            "no wake: the reconcile saw the end"
        );
    }

    /// Starts `pods` and, when the creation outlives the grace, waits for its wake and looks
    /// again: the outcome.
    async fn started(
        client: &Client,
        pods: &[Pod],
        creations: &Arc<Creations>,
        woken: &tokio::sync::mpsc::UnboundedSender<()>,
        wakes: &mut tokio::sync::mpsc::UnboundedReceiver<()>,
    ) -> Started {
        assert_eq!(
            start_once(client, pods, creations, woken).await,
            Started::Creating
        );
        woken_up(wakes).await;
        start_once(client, pods, creations, woken).await
    }

    const KEY: &str = "u1/team-a/netbench.io/run=r1,netbench.io/step=0";

    #[tokio::test(start_paused = true)]
    async fn a_failed_creation_is_tried_again_and_a_refusal_forgets_the_step() {
        // 20 pods, 16 at a time, 40 ms each: 80 ms, beyond the grace.
        let (pods, creations, woken, mut wakes) = fixture(20);
        let slow = Duration::from_millis(40);
        // Unavailable: retried, every pod posted again by the next creation.
        let (client, posted) = answering(503, slow);
        let outcome = started(&client, &pods, &creations, &woken, &mut wakes).await;
        assert!(matches!(outcome, Started::Retrying(_)), "{outcome:?}");
        assert_eq!(posted(), names(20));
        assert_eq!(creations.known(), 0, "the outcome was taken");
        // Refused: the run fails with the server's answer, and the step is forgotten.
        let (client, posted) = answering(403, slow);
        let outcome = started(&client, &pods, &creations, &woken, &mut wakes).await;
        let Started::Failed(f) = outcome else {
            panic!("a refusal ends the run: {outcome:?}");
        };
        assert_eq!(f.reason, Reason::PodCreationRefused);
        assert_eq!(posted(), names(20), "every pod tried");
        assert_eq!(creations.known(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_api_server_ends_the_run_at_the_worker_start_timeout() {
        // Pod POSTs that are not answered within the minute of the timeout.
        let (client, _) = answering(201, Duration::from_secs(3600));
        let (pods, creations, woken, mut wakes) = fixture(3);
        let began = tokio::time::Instant::now();
        assert_eq!(
            start_once(&client, &pods, &creations, &woken).await,
            Started::Creating
        );
        tokio::time::timeout(Duration::from_secs(120), wakes.recv())
            .await
            .expect("woken once the creation's bound passed");
        assert_eq!(
            began.elapsed(),
            MINUTE,
            "the creation's bound: the whole timeout"
        );
        let outcome = start_once(&client, &pods, &creations, &woken).await;
        let Started::Failed(f) = outcome else {
            panic!("the first attempt took the whole timeout: {outcome:?}");
        };
        assert_eq!(f.reason, Reason::PodCreationTimeout);
        assert!(f.message.contains("took longer than 60s"), "{}", f.message);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_creations_outcome_is_not_taken_for_the_next_one() {
        let (pods, creations, woken, mut wakes) = fixture(20);
        let (refusing, _) = answering(403, Duration::from_millis(100));
        assert_eq!(
            start_once(&refusing, &pods, &creations, &woken).await,
            Started::Creating
        );
        creations.stop("u1", Some("r1")).await;
        let (client, _) = answering(201, Duration::from_millis(100));
        let outcome = started(&client, &pods, &creations, &woken, &mut wakes).await;
        assert_eq!(outcome, Started::Yes, "not the stopped creation's refusal");
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_that_ends_stops_its_creation_and_no_other() {
        // The POSTs take 100 ms: at the end of the grace the first 16 are under way.
        let (client, posted) = answering(201, Duration::from_millis(100));
        let (pods, creations, woken, mut wakes) = fixture(40);
        let began = tokio::time::Instant::now();
        assert_eq!(
            start_once(&client, &pods, &creations, &woken).await,
            Started::Creating
        );
        let sent = posted().len();
        assert_eq!(sent, 16);
        // Another benchmark's run of the same id, and another run of this benchmark: no effect.
        creations.stop("u2", Some("r1")).await;
        creations.stop("u1", Some("r0")).await;
        assert!(matches!(creations.take(KEY), Found::Creating));
        // Its own: stop returns once the 16 POSTs sent were answered (at 100 ms), so that a
        // deletion sent after it comes after every pod that will exist.
        creations.stop("u1", Some("r1")).await;
        assert_eq!(began.elapsed(), Duration::from_millis(100));
        assert!(matches!(creations.take(KEY), Found::Nothing));
        // A second of the test's clock later: not one more POST, and no wake.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(posted().len(), sent, "{:?}", posted());
        assert!(wakes.try_recv().is_err(), "a stopped creation wakes nobody");
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_than_the_bound_of_creations_are_under_way() {
        let (client, _) = answering(201, Duration::from_secs(30));
        let creations = Arc::new(Creations::default());
        let one = vec![pod("w00".into())];
        for i in 0..STEPS_AT_MOST {
            let key = format!("x{i}/team-a/{SELECTOR}");
            let what = (client.clone(), "team-a".to_string(), one.clone());
            let owner = (format!("x{i}"), "r1".to_string());
            let began = creations.begin(&key, (&owner.0, &owner.1), what, MINUTE);
            assert!(began.is_some(), "{i}");
        }
        let (woken, _wakes) = tokio::sync::mpsc::unbounded_channel();
        let outcome = start_once(&client, &one, &creations, &woken).await;
        assert!(
            matches!(&outcome, Started::Retrying(m) if m.contains("4096 pod creations are under way")),
            "{outcome:?}"
        );
        // Those under way are neither forgotten nor disturbed.
        assert_eq!(creations.known(), STEPS_AT_MOST);
        creations.stop("x0", None).await;
        assert_eq!(creations.known(), STEPS_AT_MOST - 1);
    }

    #[test]
    fn only_final_api_answers_count_as_refusals() {
        let api = |code: u16| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..Default::default()
            }))
        };
        for code in [400, 403, 404, 422] {
            assert!(pods::is_refusal(&api(code)), "{code}");
        }
        for code in [409, 429, 500, 503] {
            assert!(!pods::is_refusal(&api(code)), "{code}");
        }
    }
}
