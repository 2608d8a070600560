//! How far the end of each run got in this process (the finish handler's work, the stored
//! status saying it ended, the runs it held up woken, its reports' deletion handed over), kept
//! by the registry beside the runs under way (`Registry::ends`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The end of a run, as far as this process took it. `created_result`: this process created
/// the run's BenchmarkResult itself (known first-hand, not read from status), so its reports
/// may go without asking the API server whether the result exists.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ending {
    /// The finish handler did all it owes (result written, the kind's wrap-up done), but the
    /// status saying so is not stored yet.
    Finishing { created_result: bool },
    /// And the stored status shows it ended: a later reconcile of the benchmark (its own
    /// status write coming back, its pods going) has nothing left to do. Whether the runs it
    /// held up in the queue were woken since; whether the deletion of its reports was handed
    /// over (to a task of its own: see `driver::status::release_reports`).
    Done {
        queue_woken: bool,
        created_result: bool,
        releasing: bool,
    },
    /// A part of its end done behind the finish handler (its pods' deletion) failed for good
    /// before the handler said it did all it owes: that saying does not count, and the end is
    /// done in full again.
    Owed,
}

/// The key of a run's end in the registry: its benchmark's uid and the run id.
pub fn ending_key(uid: &str, run: &str) -> String {
    format!("{uid}/{run}")
}

/// Finished runs remembered at most; beyond it the set starts again (each of those runs then
/// finishes once more, harmlessly).
const DONE_AT_MOST: usize = 100_000;

/// How far the end of each run got, by benchmark uid and run id (a run id alone is 32 bits of
/// a uid: two benchmarks may share one): see [`Ending`]. In memory only: after a restart the
/// first reconcile finishes once more (every step of it is idempotent).
#[derive(Default)]
pub struct Ends(Mutex<HashMap<String, Ending>>);

impl Ends {
    fn done(&self) -> MutexGuard<'_, HashMap<String, Ending>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The finish handler did all run `key` ([`ending_key`]) owes, and created its result now
    /// (`created_result`) or not; it is done once the stored status shows it ended
    /// ([`Ends::stored_ended`]).
    pub fn finishing(&self, key: &str, created_result: bool) {
        let mut done = self.done();
        if done.get(key) == Some(&Ending::Owed) {
            done.remove(key);
            return;
        }
        if done.len() >= DONE_AT_MOST {
            done.clear();
        }
        done.insert(key.to_string(), Ending::Finishing { created_result });
    }

    /// The stored status shows run `key` ended: if its finish handler did all it owes, it is
    /// done (true: the registry forgets the run, `Registry::stored_ended`).
    pub(super) fn stored_ended(&self, key: &str) -> bool {
        let mut done = self.done();
        let Some(Ending::Finishing { created_result }) = done.get(key).copied() else {
            return false;
        };
        done.insert(
            key.to_string(),
            Ending::Done {
                queue_woken: false,
                created_result,
                releasing: false,
            },
        );
        true
    }

    /// Run `key` is measuring (or waiting) again: a status taken back. Its end, when it comes,
    /// is done in full again.
    pub fn reopen(&self, key: &str) {
        self.done().remove(key);
    }

    /// A part of run `key`'s end done behind its finish handler (its pods' deletion) failed
    /// for good: its end is owed again, whether or not the handler has yet said it did all it
    /// owes ([`Ends::finishing`]).
    pub fn owe_again(&self, key: &str) {
        let mut done = self.done();
        match done.get(key) {
            None => {
                done.insert(key.to_string(), Ending::Owed);
            }
            Some(_) => {
                done.remove(key);
            }
        }
    }

    /// Whether this process saw run `key` through to its end.
    pub fn is_finished(&self, key: &str) -> bool {
        matches!(self.done().get(key), Some(Ending::Done { .. }))
    }

    /// True once for a finished run: the first time the runs it held up in the queue are to
    /// be woken.
    pub fn take_queue_wake(&self, key: &str) -> bool {
        match self.done().get_mut(key) {
            Some(Ending::Done { queue_woken, .. }) => !std::mem::replace(queue_woken, true),
            _ => false,
        }
    }

    /// Whether this process saw run `key` through to its end and created its result itself
    /// on the way (its reports are no longer needed for it).
    pub fn created_result(&self, key: &str) -> bool {
        matches!(
            self.done().get(key),
            Some(Ending::Done {
                created_result: true,
                ..
            })
        )
    }

    /// For a run whose result this process created ([`Self::created_result`]): true the first
    /// time, when the deletion of its reports is to be handed over; false while it is under
    /// way or once it is done (until [`Self::release_failed`]).
    pub fn begin_release(&self, key: &str) -> bool {
        match self.done().get_mut(key) {
            Some(Ending::Done {
                created_result: true,
                releasing,
                ..
            }) => !std::mem::replace(releasing, true),
            _ => false,
        }
    }

    /// The deletion of run `key`'s reports failed for good: the next reconcile hands it over
    /// again.
    pub fn release_failed(&self, key: &str) {
        if let Some(Ending::Done { releasing, .. }) = self.done().get_mut(key) {
            *releasing = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ending_key;
    use crate::store::registry::Registry;

    #[test]
    fn a_run_is_done_once_its_end_is_stored_and_until_it_is_reopened() {
        let r = Registry::default();
        let (a, b) = (ending_key("uid-a", "r1"), ending_key("uid-b", "r1"));
        assert!(!r.ends.is_finished(&a));
        assert!(!r.ends.take_queue_wake(&a), "not finished: nothing to wake");
        r.stored_ended(&a, "r1");
        assert!(
            !r.ends.is_finished(&a),
            "stored, but the finish handler did not say it is done"
        );
        r.ends.finishing(&a, true);
        assert!(
            !r.ends.is_finished(&a),
            "done in full, but its end is not stored yet"
        );
        assert!(!r.ends.created_result(&a), "not before its end is stored");
        r.stored_ended(&a, "r1");
        assert!(r.ends.is_finished(&a));
        assert!(
            !r.ends.is_finished(&b),
            "another benchmark's run of the same id is not done"
        );
        assert!(r.ends.take_queue_wake(&a));
        assert!(!r.ends.take_queue_wake(&a), "only the first look wakes");
        assert!(r.ends.created_result(&a));
        assert!(!r.ends.created_result(&b));
        r.ends.reopen(&a);
        assert!(
            !r.ends.is_finished(&a),
            "a status taken back makes it owe its end again"
        );
        assert!(
            !r.ends.created_result(&a),
            "nor is its result known any more"
        );
        // Done without creating the result now (status already named it, or none was due):
        // its reports go only once the API server was asked.
        r.ends.finishing(&a, false);
        r.stored_ended(&a, "r1");
        assert!(r.ends.is_finished(&a) && !r.ends.created_result(&a));
    }

    #[test]
    fn a_pod_deletion_failed_before_the_handler_said_it_is_done_makes_the_end_owed_again() {
        let r = Registry::default();
        let a = ending_key("uid-a", "r1");
        // The deletion sent first by the finish handler failed for good while the handler
        // still wrote the result: its saying it did all it owes does not count.
        r.ends.owe_again(&a);
        r.ends.finishing(&a, true);
        r.stored_ended(&a, "r1");
        assert!(!r.ends.is_finished(&a), "its pods' deletion is owed again");
        // The next end, in full, counts.
        r.ends.finishing(&a, true);
        r.stored_ended(&a, "r1");
        assert!(r.ends.is_finished(&a));
        // Failed after the run was done: owed again, as before.
        r.ends.owe_again(&a);
        assert!(!r.ends.is_finished(&a));
        r.ends.finishing(&a, true);
        r.stored_ended(&a, "r1");
        assert!(r.ends.is_finished(&a), "not owed twice for one failure");
    }

    #[test]
    fn a_finished_run_s_reports_are_handed_over_once_until_that_failed() {
        let r = Registry::default();
        let (a, b) = (ending_key("uid-a", "r1"), ending_key("uid-b", "r1"));
        r.ends.finishing(&a, true);
        assert!(!r.ends.begin_release(&a), "not before its end is stored");
        r.stored_ended(&a, "r1");
        assert!(r.ends.begin_release(&a));
        assert!(!r.ends.begin_release(&a), "under way: not again");
        r.ends.release_failed(&a);
        assert!(
            r.ends.begin_release(&a),
            "failed for good: handed over again"
        );
        // A result this process did not create: asked of the API server, never handed over.
        r.ends.finishing(&b, false);
        r.stored_ended(&b, "r1");
        assert!(!r.ends.begin_release(&b));
    }
}
