//! The versions of each benchmark the operator last read or wrote (its resourceVersion, by
//! uid). A reconcile handed the controller's cached copy at exactly the last one already holds
//! the operator's own last status write, so it needs no fresh GET. A copy at an earlier one of
//! ours is behind: the watch has yet to show our later write, and showing it wakes the object
//! again, unless the watch stalls: a copy is taken for behind only within [`BEHIND_FOR`] of
//! the last version noted, after which it is read fresh as before. Any other version (a user's
//! edit) is read fresh. One entry per benchmark, gone at cleanup.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Earlier versions remembered per benchmark (a run writes a handful in quick succession).
const EARLIER_KEPT: usize = 8;
/// How long after the last version noted a copy at an earlier one is taken for behind: the
/// watch shows a write within milliseconds; one that has not for this long may have stalled
/// (a dropped connection, a backoff), and the run must not wait for it.
pub const BEHIND_FOR: Duration = Duration::from_secs(5);

struct Seen {
    last: String,
    /// When `last` was noted.
    at: Instant,
    /// Versions read or written before `last`, newest last.
    earlier: VecDeque<String>,
}

#[derive(Default)]
pub struct Versions(Mutex<HashMap<String, Seen>>);

impl Versions {
    fn seen(&self) -> std::sync::MutexGuard<'_, HashMap<String, Seen>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `version` of the object `uid` is the one last read or written.
    pub fn is_current(&self, uid: &str, version: &str) -> bool {
        self.seen().get(uid).is_some_and(|s| s.last == version)
    }

    /// Whether `version` of the object `uid` is one this process read or wrote before the last:
    /// a copy older than what the API server holds, and than what the watch will show next.
    /// Only within [`BEHIND_FOR`] of the last version noted.
    pub fn is_behind(&self, uid: &str, version: &str) -> bool {
        self.seen().get(uid).is_some_and(|s| {
            s.last != version
                && s.at.elapsed() < BEHIND_FOR
                && s.earlier.iter().any(|v| v == version)
        })
    }

    /// The object `uid` was read or written at `version` (reads and writes of one benchmark
    /// come in order: its reconciles never overlap).
    pub fn note(&self, uid: &str, version: &str) {
        let mut seen = self.seen();
        let entry = seen.entry(uid.to_string()).or_insert_with(|| Seen {
            last: String::new(),
            at: Instant::now(),
            earlier: VecDeque::new(),
        });
        if entry.last == version {
            return;
        }
        let last = std::mem::replace(&mut entry.last, version.to_string());
        entry.at = Instant::now();
        if !last.is_empty() {
            entry.earlier.push_back(last);
        }
        while entry.earlier.len() > EARLIER_KEPT {
            entry.earlier.pop_front();
        }
    }

    /// `obj` was read or written at the version it holds (an object without uid or version
    /// notes nothing).
    pub fn note_object<K: kube::Resource>(&self, obj: &K) {
        if let (Some(uid), Some(version)) = (
            obj.meta().uid.as_deref(),
            obj.meta().resource_version.as_deref(),
        ) {
            self.note(uid, version);
        }
    }

    pub fn forget(&self, uid: &str) {
        self.seen().remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_version_last_seen_is_current() {
        let v = Versions::default();
        assert!(!v.is_current("u", "1"), "nothing seen yet");
        v.note("u", "1");
        assert!(v.is_current("u", "1"));
        v.note("u", "2");
        assert!(!v.is_current("u", "1"), "an older copy is read fresh");
        assert!(v.is_current("u", "2") && !v.is_current("w", "2"));
        v.forget("u");
        assert!(!v.is_current("u", "2"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_copy_is_behind_only_for_a_while_after_the_last_version_noted() {
        let v = Versions::default();
        v.note("u", "1");
        v.note("u", "2");
        tokio::time::advance(BEHIND_FOR / 2).await;
        assert!(v.is_behind("u", "1"));
        tokio::time::advance(BEHIND_FOR / 2).await;
        assert!(
            !v.is_behind("u", "1"),
            "a watch this late may have stalled: read fresh"
        );
        v.note("u", "3");
        assert!(v.is_behind("u", "2"), "a new note starts the while anew");
    }

    #[tokio::test]
    async fn only_an_earlier_version_of_ours_is_behind() {
        let v = Versions::default();
        assert!(!v.is_behind("u", "1"), "nothing seen yet");
        v.note("u", "1");
        assert!(!v.is_behind("u", "1"), "the last is current, not behind");
        v.note("u", "2");
        v.note("u", "2");
        assert!(v.is_behind("u", "1") && !v.is_behind("u", "2"));
        assert!(
            !v.is_behind("u", "9"),
            "a version not ours (a user's edit) is read"
        );
        assert!(!v.is_behind("w", "1"), "another object's");
        for i in 3..20 {
            v.note("u", &i.to_string());
        }
        assert!(!v.is_behind("u", "1"), "only the last few are kept");
        assert!(v.is_behind("u", "18"));
        v.forget("u");
        assert!(!v.is_behind("u", "18"));
    }
}
