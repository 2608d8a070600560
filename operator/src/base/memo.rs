//! Answers of the API server used again for a while: what changes seldom and many runs ask
//! (a node's health, the cluster's version and nodes), read once per period instead of once
//! per run.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Values by key, each used for `fresh` after it was kept; at most `most` of them (beyond, the
/// stale ones go, then all).
pub struct Memo<V> {
    fresh: Duration,
    most: usize,
    kept: Mutex<HashMap<String, (Instant, V)>>,
}

impl<V: Clone> Memo<V> {
    pub fn new(fresh: Duration, most: usize) -> Self {
        Self {
            fresh,
            most,
            kept: Mutex::default(),
        }
    }

    /// The value kept for `key`, if it is still fresh.
    pub fn get(&self, key: &str) -> Option<V> {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, value) = kept.get(key)?;
        (at.elapsed() < self.fresh).then(|| value.clone())
    }

    /// Keeps `value` for `key` from now.
    pub fn keep(&self, key: &str, value: V) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= self.most {
            let fresh = self.fresh;
            kept.retain(|_, (at, _)| at.elapsed() < fresh);
        }
        if kept.len() >= self.most {
            kept.clear();
        }
        kept.insert(key.to_string(), (Instant::now(), value));
    }

    /// Drops what is kept for `key`.
    pub fn forget(&self, key: &str) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.remove(key);
    }
}

/// Most absent objects remembered (beyond, all are forgotten: the next use of each asks).
const MOST_ABSENT: usize = 4096;
/// How long an object is known absent: an admin may put one back by hand (a restore record
/// recreated, a backup restored), which this process would otherwise never see.
const ABSENT_FOR: Duration = Duration::from_secs(600);

/// Objects this process knows do not exist, by a key naming each: it found none, or deleted
/// them. Kept only for objects that only this process creates (the leader's records in its
/// namespace, a benchmark's HTTPRoutes), so "absent" stays true until this process creates
/// one, and every creation (or deletion) forgets it first: a failed one leaves it unknown.
/// The users of one key run one at a time (a benchmark's reconciles do), so a late answer
/// never hides a creation. Known for [`ABSENT_FOR`] at most, then asked again.
pub struct Absent(Memo<()>);

impl Default for Absent {
    fn default() -> Self {
        Self(Memo::new(ABSENT_FOR, MOST_ABSENT))
    }
}

impl Absent {
    /// Whether `key` is known absent.
    pub fn knows(&self, key: &str) -> bool {
        self.0.get(key).is_some()
    }

    /// Remembers that `key` is absent (`true`), or forgets what was known of it.
    pub fn note(&self, key: &str, absent: bool) {
        match absent {
            true => self.0.keep(key, ()),
            false => self.0.forget(key),
        }
    }
}

/// How long the cluster's facts in a result are read again: a minute-old kernel or kubelet
/// version is the one the run saw unless the node was upgraded during that minute.
const FACTS_FRESH: Duration = Duration::from_secs(60);
/// Most nodes (and their CNIs) remembered.
const FACTS_NODES: usize = 1024;

/// How long the API server's addresses are used again (`admin::caps::lookup`): every run's
/// target check needs them, and they change only with the control plane.
const API_SERVER_FRESH: Duration = Duration::from_secs(10);

/// What the results read about the cluster (`results::facts`), for [`FACTS_FRESH`]: the API
/// server's version, each node's description (None: no such node), the CNIs on each node; and
/// the API server's addresses as the target check read them, for [`API_SERVER_FRESH`].
pub struct ClusterFactsMemo {
    pub version: Memo<String>,
    pub nodes: Memo<Option<crds::result::NodeFacts>>,
    pub cni: Memo<Vec<String>>,
    pub api_server: Memo<Vec<std::net::IpAddr>>,
}

impl Default for ClusterFactsMemo {
    fn default() -> Self {
        Self {
            version: Memo::new(FACTS_FRESH, 1),
            nodes: Memo::new(FACTS_FRESH, FACTS_NODES),
            cni: Memo::new(FACTS_FRESH, FACTS_NODES),
            api_server: Memo::new(API_SERVER_FRESH, 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_used_while_fresh_and_never_after() {
        let memo = Memo::new(Duration::from_secs(3600), 8);
        assert_eq!(memo.get("a"), None);
        memo.keep("a", 1);
        assert_eq!(memo.get("a"), Some(1));
        memo.keep("a", 2);
        assert_eq!(memo.get("a"), Some(2));
        memo.forget("a");
        assert_eq!(memo.get("a"), None);
        let stale = Memo::new(Duration::ZERO, 8);
        stale.keep("a", 1);
        assert_eq!(stale.get("a"), None);
    }

    #[test]
    fn it_never_holds_more_than_its_most() {
        let memo = Memo::new(Duration::from_secs(3600), 3);
        for (i, key) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            memo.keep(key, i);
            assert!(memo.kept.lock().unwrap().len() <= 3);
        }
        assert_eq!(memo.get("e"), Some(4));
    }
}
