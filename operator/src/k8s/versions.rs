//! The version of each benchmark the operator last read or wrote (its resourceVersion, by
//! uid). A reconcile handed the controller's cached copy at exactly that version already holds
//! the operator's own last status write, so it needs no fresh GET; any other version (the cache
//! behind our write, a user's edit) is read fresh. One entry per benchmark, gone at cleanup.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

#[derive(Default)]
pub struct Versions(Mutex<HashMap<String, String>>);

impl Versions {
    /// Whether `version` of the object `uid` is the one last read or written.
    pub fn is_current(&self, uid: &str, version: &str) -> bool {
        let seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get(uid).is_some_and(|v| v == version)
    }

    /// The object `uid` was read or written at `version`.
    pub fn note(&self, uid: &str, version: &str) {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.insert(uid.to_string(), version.to_string());
    }

    pub fn forget(&self, uid: &str) {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.remove(uid);
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
}
