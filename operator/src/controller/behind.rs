//! A reconcile's work that outlasts a grace goes on in a task of its own, so that no reconcile
//! holds its object in the controller for longer than [`GRACE`] while it waits for the API
//! server (under load each round trip takes 100-600 ms; `docs/scale.md`). The way pod creation
//! already works (`k8s::creation`), for the whole of the work.
//!
//! What stays as it was:
//! - One object's work runs once at a time. A reconcile of an object whose work is under way
//!   does nothing and ends; the work's end wakes the object.
//! - The work is the same work, in the same order (its status write, then its Events, then
//!   its reports released), so every guarantee of `driver::apply` holds; what a crash in the
//!   middle leaves is what a crash inside the reconcile left.
//! - The outcome reaches the controller: the reconcile woken by the work's end returns it, so
//!   an error is logged, counted and backed off as before, and an action's requeue is
//!   scheduled from the moment the work ended. Should the object have been woken while its work
//!   went on (its own status write coming back, a worker's report), that reconcile runs the
//!   work again instead, as the controller would have run it right after.
//!
//! What changes: `netbench_reconcile_duration_seconds` is the time a reconcile holds its object
//! (at most the grace, plus what comes before the work); `netbench_reconcile_work_duration_seconds`
//! is the whole work, wherever it ran. Nothing gets faster: an object's next step still waits
//! for its last write.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kube::runtime::controller::Action;
use tokio::sync::{oneshot, Notify};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::base::error::Result;

/// How long a reconcile waits for its work before the work goes on behind it.
pub const GRACE: Duration = Duration::from_millis(50);

/// How soon a reconcile that left its work behind (or found it under way) looks again, should
/// the wake at the work's end not come: a net, never the way the object moves on.
pub const NET: Duration = Duration::from_secs(60);

/// How long an outcome nobody came for is kept (its object was deleted meanwhile).
const KEEP_UNCLAIMED: Duration = Duration::from_secs(600);

/// The works of one kind's objects that went on behind their reconciles, by object key
/// (namespace/name; each entry names the object's uid, so that an object re-created under the
/// same name is not handed its predecessor's outcome).
#[derive(Default)]
pub struct Behind {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
    ended: Arc<Notify>,
    ids: AtomicU64,
    /// Where the works run (None: the runtime of the reconcile that begins each).
    works: Option<tokio::runtime::Handle>,
    /// Set by [`Behind::stop_all`] (under the entries' lock, and read under it): no work
    /// begins after it, though a reconcile may still run on the controller's thread while
    /// that thread learns it is to stop.
    stopped: AtomicBool,
}

enum Entry {
    /// Work under way. `waited`: the reconcile that began it still waits (within its grace);
    /// `poked`: the object was reconciled again meanwhile.
    Going {
        id: u64,
        waited: bool,
        poked: bool,
        abort: AbortHandle,
    },
    /// Work that ended after its reconcile stopped waiting, its outcome kept for the reconcile
    /// its end woke.
    Ended {
        uid: String,
        outcome: Result<Action>,
        poked: bool,
        at: Instant,
    },
}

/// What a reconcile is to do, given what went on behind the object's earlier reconciles.
#[derive(Debug)]
pub enum Before {
    /// The object's work is under way: end with this action (the work's end wakes it).
    Going(Action),
    /// The work that ended behind the last reconcile: its outcome, and whether the object was
    /// reconciled again while it went on (what woke it then may need the work done again).
    Ended {
        outcome: Result<Action>,
        poked: bool,
    },
    /// Nothing under way: begin the work.
    Begin,
}

impl Behind {
    /// Works run on `runtime`, wherever their reconciles run (`controller::run`: the
    /// reconciles on a thread of their own, the works on the shared runtime).
    pub fn working_on(runtime: tokio::runtime::Handle) -> Self {
        Self {
            works: Some(runtime),
            ..Self::default()
        }
    }

    /// What the reconcile of `key` (the object of `uid`) is to do now (see [`Before`]).
    pub fn before(&self, key: &str, uid: &str) -> Before {
        let mut entries = lock(&self.entries);
        match entries.get_mut(key) {
            None => Before::Begin,
            // Even another object's of this name (the deleted one's cleanup): one at a time.
            Some(Entry::Going { poked, .. }) => {
                *poked = true;
                Before::Going(Action::requeue(NET))
            }
            Some(Entry::Ended { .. }) => match entries.remove(key) {
                Some(Entry::Ended {
                    uid: of,
                    outcome,
                    poked,
                    ..
                }) if of == uid => Before::Ended { outcome, poked },
                // The outcome of a deleted object of the same name: not this one's.
                _ => Before::Begin,
            },
        }
    }

    /// Runs `work` (the reconcile of `key`, the object of `uid`) in a task of its own and
    /// waits for it at most `grace`: its outcome, or, should it take longer, an action of
    /// [`NET`]; then `woken` is called once the work has ended, and [`Behind::before`] hands its
    /// outcome over.
    pub async fn run<W, F>(
        &self,
        (key, uid): (&str, &str),
        grace: Duration,
        work: W,
        woken: F,
    ) -> Result<Action>
    where
        W: Future<Output = Result<Action>> + Send + 'static,
        F: FnOnce() + Send + 'static,
    {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let (tx, mut rx) = oneshot::channel();
        {
            // Entered before the task can look for it.
            let mut entries = lock(&self.entries);
            if self.stopped.load(Ordering::SeqCst) {
                return Ok(Action::requeue(NET));
            }
            sweep(&mut entries);
            let mut end = End {
                entries: self.entries.clone(),
                ended: self.ended.clone(),
                key: key.to_string(),
                uid: uid.to_string(),
                id,
                waiting: Some(tx),
                woken: Some(woken),
            };
            let work = async move {
                let outcome = work.await;
                end.settle(outcome);
            };
            let task = match &self.works {
                Some(runtime) => runtime.spawn(work),
                None => tokio::spawn(work),
            };
            entries.insert(
                key.to_string(),
                Entry::Going {
                    id,
                    waited: true,
                    poked: false,
                    abort: task.abort_handle(),
                },
            );
        }
        match tokio::time::timeout(grace, &mut rx).await {
            Ok(Ok(outcome)) => outcome,
            // The work ended without an outcome (stopped, or it panicked: its end then woke
            // the object).
            Ok(Err(_)) => Ok(Action::requeue(NET)),
            Err(_) => {
                let mut entries = lock(&self.entries);
                // Ended as the grace did.
                if let Ok(outcome) = rx.try_recv() {
                    return outcome;
                }
                if let Some(Entry::Going { id: i, waited, .. }) = entries.get_mut(key) {
                    if *i == id {
                        *waited = false;
                    }
                }
                Ok(Action::requeue(NET))
            }
        }
    }

    /// Waits until no work is under way, at most `within`; then stops what still is. What
    /// the controllers' end leaves: each work finished like the reconciles the controller
    /// itself lets finish, none going on once another replica may lead.
    pub async fn finish(&self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let ended = self.ended.notified();
            if self.going() == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                tracing::warn!(
                    "{} reconciles still under way when the controller stopped: stopped",
                    self.going()
                );
                break;
            }
        }
        self.stop_all();
    }

    /// Stops every work under way, forgets every outcome, and begins no work from now on.
    pub fn stop_all(&self) {
        let mut entries = lock(&self.entries);
        self.stopped.store(true, Ordering::SeqCst);
        for entry in entries.values() {
            if let Entry::Going { abort, .. } = entry {
                abort.abort();
            }
        }
        entries.clear();
    }

    /// How many works are under way.
    pub fn going(&self) -> usize {
        lock(&self.entries)
            .values()
            .filter(|e| matches!(e, Entry::Going { .. }))
            .count()
    }
}

/// The end of one work, owned by its task: [`End::settle`] with its outcome, or, dropped
/// without (the work panicked), its entry removed and the object woken to begin anew.
struct End<F: FnOnce()> {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
    ended: Arc<Notify>,
    key: String,
    uid: String,
    id: u64,
    waiting: Option<oneshot::Sender<Result<Action>>>,
    woken: Option<F>,
}

impl<F: FnOnce()> End<F> {
    /// Whether this work's entry is still under way (not stopped, not replaced): whether its
    /// reconcile still waits for it, and whether its object was reconciled meanwhile.
    fn going(&self, entries: &HashMap<String, Entry>) -> Option<(bool, bool)> {
        match entries.get(&self.key) {
            Some(Entry::Going {
                id, waited, poked, ..
            }) if *id == self.id => Some((*waited, *poked)),
            _ => None,
        }
    }

    /// The outcome handed to the reconcile still waiting for it, or kept for the one its
    /// wake brings.
    fn settle(&mut self, outcome: Result<Action>) {
        let woken = self.woken.take();
        let kept = {
            let mut entries = lock(&self.entries);
            match self.going(&entries) {
                // Stopped, or not this work's any more: nobody to tell.
                None => false,
                Some((waited, poked)) => {
                    let unclaimed = if waited {
                        entries.remove(&self.key);
                        match self.waiting.take() {
                            Some(tx) => tx.send(outcome).err(),
                            None => Some(outcome),
                        }
                    } else {
                        Some(outcome)
                    };
                    // Past the grace, or nobody waits any more (a reconcile dropped within
                    // its grace): kept for the reconcile the wake brings.
                    match unclaimed {
                        None => false,
                        Some(outcome) => {
                            let ended = Entry::Ended {
                                uid: self.uid.clone(),
                                outcome,
                                poked,
                                at: Instant::now(),
                            };
                            entries.insert(self.key.clone(), ended);
                            true
                        }
                    }
                }
            }
        };
        self.ended.notify_waiters();
        if let (true, Some(woken)) = (kept, woken) {
            woken();
        }
    }
}

impl<F: FnOnce()> Drop for End<F> {
    fn drop(&mut self) {
        let Some(woken) = self.woken.take() else {
            return; // settled
        };
        let removed = {
            let mut entries = lock(&self.entries);
            self.going(&entries).is_some() && entries.remove(&self.key).is_some()
        };
        self.ended.notify_waiters();
        // Stopped (`stop_all` forgot it first): nobody to wake. Panicked: begin anew.
        if removed {
            woken();
        }
    }
}

/// Forgets the outcomes nobody came for within [`KEEP_UNCLAIMED`] (their objects were deleted).
fn sweep(entries: &mut HashMap<String, Entry>) {
    let now = Instant::now();
    entries.retain(|_, e| match e {
        Entry::Ended { at, .. } => now.saturating_duration_since(*at) < KEEP_UNCLAIMED,
        Entry::Going { .. } => true,
    });
}

fn lock(entries: &Mutex<HashMap<String, Entry>>) -> MutexGuard<'_, HashMap<String, Entry>> {
    entries.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::Error;
    use std::sync::atomic::AtomicUsize;

    const KEY: &str = "team-a/web";
    const UID: &str = "u1";

    /// A work that takes `after` and ends with `outcome`, counting its starts in `started`.
    fn work(
        after: Duration,
        outcome: fn() -> Result<Action>,
        started: &Arc<AtomicUsize>,
    ) -> impl Future<Output = Result<Action>> + Send + 'static {
        let started = started.clone();
        async move {
            started.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(after).await;
            outcome()
        }
    }

    fn again() -> Result<Action> {
        Ok(Action::requeue(Duration::from_secs(7)))
    }

    fn refused() -> Result<Action> {
        Err(Error::TimedOut {
            what: "a status write",
            after: Duration::from_secs(1),
        })
    }

    /// A wake that sends on the channel returned.
    fn waker() -> (
        impl FnOnce() + Send + 'static,
        tokio::sync::mpsc::UnboundedReceiver<()>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (
            move || {
                let _ = tx.send(());
            },
            rx,
        )
    }

    async fn woken_within(rx: &mut tokio::sync::mpsc::UnboundedReceiver<()>, d: Duration) {
        tokio::time::timeout(d, rx.recv())
            .await
            .expect("woken in time")
            .expect("a wake");
    }

    #[tokio::test(start_paused = true)]
    async fn quick_work_is_the_reconciles_own_and_leaves_nothing_behind() {
        let (behind, started) = (Behind::default(), Arc::new(AtomicUsize::new(0)));
        let (wake, mut wakes) = waker();
        let began = tokio::time::Instant::now();
        let outcome = behind
            .run(
                (KEY, UID),
                GRACE,
                work(Duration::from_millis(10), again, &started),
                wake,
            )
            .await;
        assert_eq!(outcome.unwrap(), Action::requeue(Duration::from_secs(7)));
        assert_eq!(began.elapsed(), Duration::from_millis(10));
        assert_eq!(behind.going(), 0);
        assert!(matches!(behind.before(KEY, UID), Before::Begin));
        tokio::task::yield_now().await;
        assert!(wakes.try_recv().is_err(), "nobody to wake");
    }

    /// The reconciles on a thread of their own, the works on a shared runtime: each work runs
    /// there, and a reconcile still returns once its grace ended.
    #[test]
    fn works_run_on_the_runtime_they_are_given() {
        let shared = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("nb-test-works")
            .enable_all()
            .build()
            .unwrap();
        let behind = Arc::new(Behind::working_on(shared.handle().clone()));
        let reconciles = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (ran_on_tx, ran_on) = std::sync::mpsc::channel();
        let (wake, _wakes) = waker();
        let (release, released) = oneshot::channel::<()>();
        let work = async move {
            let _ = ran_on_tx.send(std::thread::current().name().map(str::to_string));
            // Longer than the grace: it goes on behind.
            let _ = released.await;
            Ok(Action::await_change())
        };
        let outcome = reconciles.block_on(behind.run((KEY, UID), GRACE, work, wake));
        assert_eq!(
            outcome.unwrap(),
            Action::requeue(NET),
            "returned at the grace"
        );
        let ran_on = ran_on.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(ran_on.as_deref(), Some("nb-test-works"));
        assert_eq!(behind.going(), 1);
        let _ = release.send(());
        let ended = async {
            loop {
                let ended = behind.ended.notified();
                if behind.going() == 0 {
                    break;
                }
                ended.await;
            }
        };
        shared
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), ended).await })
            .expect("the work ended on its runtime");
    }

    #[tokio::test(start_paused = true)]
    async fn slow_work_goes_on_behind_once_and_its_end_hands_the_outcome_over() {
        let (behind, started) = (Behind::default(), Arc::new(AtomicUsize::new(0)));
        let (wake, mut wakes) = waker();
        let began = tokio::time::Instant::now();
        let slow = Duration::from_millis(600);
        let outcome = behind
            .run((KEY, UID), GRACE, work(slow, again, &started), wake)
            .await;
        assert_eq!(began.elapsed(), GRACE, "the reconcile held the grace only");
        assert_eq!(outcome.unwrap(), Action::requeue(NET));
        assert_eq!(behind.going(), 1);
        woken_within(&mut wakes, Duration::from_secs(1)).await;
        assert_eq!(began.elapsed(), slow, "woken as the work ended");
        assert_eq!(started.load(Ordering::SeqCst), 1);
        let Before::Ended { outcome, poked } = behind.before(KEY, UID) else {
            panic!("the work's outcome is handed over");
        };
        assert_eq!(outcome.unwrap(), Action::requeue(Duration::from_secs(7)));
        assert!(!poked);
        assert!(
            matches!(behind.before(KEY, UID), Before::Begin),
            "handed once"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconcile_while_the_work_goes_on_neither_waits_nor_starts_it_again() {
        let (behind, started) = (Behind::default(), Arc::new(AtomicUsize::new(0)));
        let (wake, mut wakes) = waker();
        let outcome = behind.run(
            (KEY, UID),
            GRACE,
            work(Duration::from_secs(2), again, &started),
            wake,
        );
        assert_eq!(outcome.await.unwrap(), Action::requeue(NET));
        // Woken meanwhile (its own write coming back, a report): told to wait for the end.
        let Before::Going(action) = behind.before(KEY, UID) else {
            panic!("under way");
        };
        assert_eq!(action, Action::requeue(NET));
        // Another object is not held up by it.
        assert!(matches!(behind.before("team-a/other", "u2"), Before::Begin));
        woken_within(&mut wakes, Duration::from_secs(3)).await;
        // Poked meanwhile: said, so that the work is done again.
        assert!(matches!(
            behind.before(KEY, UID),
            Before::Ended {
                outcome: Ok(_),
                poked: true
            }
        ));
        assert_eq!(started.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_behind_reaches_the_controller_even_when_poked() {
        for poke in [false, true] {
            let (behind, started) = (Behind::default(), Arc::new(AtomicUsize::new(0)));
            let (wake, mut wakes) = waker();
            let failing = work(Duration::from_secs(1), refused, &started);
            assert!(behind.run((KEY, UID), GRACE, failing, wake).await.is_ok());
            if poke {
                assert!(matches!(behind.before(KEY, UID), Before::Going(_)));
            }
            woken_within(&mut wakes, Duration::from_secs(2)).await;
            let Before::Ended {
                outcome: Err(e),
                poked,
            } = behind.before(KEY, UID)
            else {
                panic!("the error is returned (poked: {poke})");
            };
            assert!(e.to_string().contains("a status write"), "{e}");
            assert_eq!(poked, poke);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_within_the_grace_is_the_reconciles_own() {
        let (behind, started) = (Behind::default(), Arc::new(AtomicUsize::new(0)));
        let (wake, _wakes) = waker();
        let outcome = behind
            .run(
                (KEY, UID),
                GRACE,
                work(Duration::ZERO, refused, &started),
                wake,
            )
            .await;
        assert!(outcome.is_err());
        assert!(matches!(behind.before(KEY, UID), Before::Begin));
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_ends_the_work_under_way_and_wakes_nobody() {
        let behind = Behind::default();
        let finished = Arc::new(AtomicUsize::new(0));
        let done = finished.clone();
        let (wake, mut wakes) = waker();
        let hour = async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            done.fetch_add(1, Ordering::SeqCst);
            again()
        };
        behind.run((KEY, UID), GRACE, hour, wake).await.unwrap();
        let began = tokio::time::Instant::now();
        behind.finish(Duration::from_secs(30)).await;
        assert_eq!(began.elapsed(), Duration::from_secs(30), "waited its bound");
        assert_eq!(behind.going(), 0);
        tokio::time::sleep(Duration::from_secs(7200)).await;
        assert_eq!(finished.load(Ordering::SeqCst), 0, "the work was stopped");
        assert!(wakes.try_recv().is_err());
        assert!(matches!(behind.before(KEY, UID), Before::Begin));
        // A reconcile the controller's thread still runs meanwhile begins no work.
        let (started, (wake, _)) = (Arc::new(AtomicUsize::new(0)), waker());
        let late = work(Duration::ZERO, again, &started);
        let outcome = behind.run((KEY, UID), GRACE, late, wake).await;
        assert_eq!(outcome.unwrap(), Action::requeue(NET));
        tokio::task::yield_now().await;
        assert_eq!(started.load(Ordering::SeqCst), 0, "no work after the stop");
        assert_eq!(behind.going(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn finishing_waits_for_the_work_under_way_to_end() {
        let (behind, started) = (Behind::default(), Arc::new(AtomicUsize::new(0)));
        let (wake, _wakes) = waker();
        let slow = work(Duration::from_secs(2), again, &started);
        behind.run((KEY, UID), GRACE, slow, wake).await.unwrap();
        let began = tokio::time::Instant::now();
        behind.finish(Duration::from_secs(30)).await;
        assert_eq!(began.elapsed(), Duration::from_secs(2) - GRACE);
        assert_eq!(behind.going(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn outcomes_nobody_came_for_are_forgotten() {
        let (behind, started) = (Behind::default(), Arc::new(AtomicUsize::new(0)));
        let (wake, mut wakes) = waker();
        let first = work(Duration::from_secs(1), again, &started);
        behind
            .run(("team-a/deleted", "u3"), GRACE, first, wake)
            .await
            .unwrap();
        woken_within(&mut wakes, Duration::from_secs(2)).await;
        // Its object is gone: no reconcile comes for the outcome.
        tokio::time::sleep(KEEP_UNCLAIMED).await;
        let (wake, mut wakes) = waker();
        let second = work(Duration::from_secs(1), again, &started);
        behind.run((KEY, UID), GRACE, second, wake).await.unwrap();
        woken_within(&mut wakes, Duration::from_secs(2)).await;
        assert!(matches!(
            behind.before("team-a/deleted", "u3"),
            Before::Begin
        ));
        assert!(matches!(
            behind.before(KEY, UID),
            Before::Ended { outcome: Ok(_), .. }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_recreated_under_the_same_name_is_not_handed_the_old_outcome() {
        let (behind, started) = (Behind::default(), Arc::new(AtomicUsize::new(0)));
        let (wake, mut wakes) = waker();
        let cleanup = work(Duration::from_secs(1), again, &started);
        behind
            .run((KEY, "old"), GRACE, cleanup, wake)
            .await
            .unwrap();
        // The new object waits for the old one's work too: one at a time under one name.
        assert!(matches!(behind.before(KEY, "new"), Before::Going(_)));
        woken_within(&mut wakes, Duration::from_secs(2)).await;
        assert!(matches!(behind.before(KEY, "new"), Before::Begin));
        assert!(
            matches!(behind.before(KEY, "old"), Before::Begin),
            "forgotten"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_work_that_panics_leaves_nothing_under_way_and_wakes_its_object() {
        for grace in [GRACE, Duration::from_secs(5)] {
            let behind = Behind::default();
            let (wake, mut wakes) = waker();
            let panicking = async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                panic!("a bug in the work");
            };
            let action = behind.run((KEY, UID), grace, panicking, wake).await;
            assert_eq!(action.unwrap(), Action::requeue(NET));
            woken_within(&mut wakes, Duration::from_secs(2)).await;
            assert_eq!(behind.going(), 0);
            assert!(matches!(behind.before(KEY, UID), Before::Begin));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconcile_dropped_within_its_grace_leaves_the_outcome_for_the_next() {
        let (behind, started) = (Behind::default(), Arc::new(AtomicUsize::new(0)));
        let (wake, mut wakes) = waker();
        let slow = work(Duration::from_secs(1), again, &started);
        let dropped = tokio::time::timeout(
            Duration::from_millis(10),
            behind.run((KEY, UID), GRACE, slow, wake),
        )
        .await;
        assert!(dropped.is_err(), "dropped within the grace");
        woken_within(&mut wakes, Duration::from_secs(2)).await;
        assert!(matches!(
            behind.before(KEY, UID),
            Before::Ended {
                outcome: Ok(_),
                poked: false
            }
        ));
    }
}
