//! The run record: what the operator itself decided about a benchmark's current run (that it
//! left the queue and when; how it ended, when and why), kept in a ConfigMap per benchmark in
//! the operator's namespace (`netbench-run-<uid>`, see `records`), where benchmark authors
//! cannot write. A BenchmarkResult takes its phase, message and times from here, and whether a
//! result is due at all (so whether a run's reports may go before one is written); the status
//! fields of the same name are a report of these decisions, never read back for them.
//!
//! Two writes a run: when it leaves the queue ([`start`]) and when it ends ([`end`]); each is a
//! no-op when the record already says so (a retried reconcile, an operator restart). The record
//! holds one run: a new run's start replaces the previous run's record. Every call is bounded
//! ([`TIMEOUT`]); a record that cannot be written never holds a run up (the caller says so in
//! an Event).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use serde::{Deserialize, Serialize};

use crds::Phase;

use crate::base::error::{Error, Result};
use crate::base::memo::Memo;
use crate::store::records::{Owner, Store, Stored};

/// The record's kind ("netbench-run-<uid>").
pub const RECORD: &str = "run";
/// Longest a load or a write of the record may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// Event reason when the record cannot be written.
pub const WRITE_FAILED: &str = "RunRecordFailed";

/// What the operator decided about one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// The run id.
    pub run: String,
    /// When the run left the queue (its deadline counts from there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<Time>,
    /// Whether the run left the queue (measured, or might have): only such a run gets a
    /// result. True with no `started` for a run whose start could not be recorded, or that
    /// was under way when the operator began to keep records.
    #[serde(default)]
    pub admitted: bool,
    /// How the run ended, once it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<Ended>,
}

/// How a run ended, as the operator decided it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ended {
    /// Succeeded or Failed.
    pub phase: Phase,
    /// The failure's reason ("DeadlineExceeded", "GateFailed", ...), "Succeeded" otherwise.
    pub reason: String,
    pub message: String,
    pub at: Time,
    /// Whether the run ended from Preparing, Running or Collecting (so it left the queue).
    #[serde(default)]
    pub measuring: bool,
}

impl RunRecord {
    /// Whether a result is due for this run: it left the queue.
    pub fn result_due(&self) -> bool {
        self.admitted || self.started.is_some()
    }

    /// The record with its start: `self` if it already is `run`'s with a start, else `run`'s
    /// fresh record (a new run replaces the previous one's).
    fn started(&self, run: &str, at: Time) -> Option<RunRecord> {
        if self.run == run && self.started.is_some() {
            return None;
        }
        let mut next = if self.run == run {
            self.clone()
        } else {
            RunRecord::default()
        };
        next.run = run.to_string();
        next.started = Some(at);
        next.admitted = true;
        Some(next)
    }

    /// The record with `run`'s end; None when it already holds one (the first end stands).
    fn ended(&self, run: &str, ended: &Ended) -> Option<RunRecord> {
        if self.run == run && self.ended.is_some() {
            return None;
        }
        let mut next = if self.run == run {
            self.clone()
        } else {
            RunRecord {
                run: run.to_string(),
                ..RunRecord::default()
            }
        };
        next.admitted = next.admitted || next.started.is_some() || ended.measuring;
        next.ended = Some(ended.clone());
        Some(next)
    }

    /// `self` with `pending` (an end decided this reconcile whose write failed) laid over it.
    pub fn with_pending(self, run: &str, pending: Option<&Ended>) -> Option<RunRecord> {
        match pending {
            Some(e) => Some(self.ended(run, e).unwrap_or(self)),
            None => Some(self),
        }
        .filter(|r| r.run == run)
    }
}

fn store(client: &Client, namespace: &str) -> Store {
    Store::new(client, namespace, RECORD)
}

/// Most records kept in memory (beyond, all are dropped: the next use of each reads it).
const MOST_KNOWN: usize = 4096;

/// The run records this process last read or wrote, by benchmark uid. They live in the
/// operator's namespace, where only the operator writes, and a process that stops leading
/// exits (a new leader starts with none known): a record known here is the stored one, and
/// reading it again (three times per run) would only cost the API server. A write that finds
/// it otherwise (a conflict) reads it again; a failed write forgets it.
pub struct Known(Memo<Stored<RunRecord>>);

impl Default for Known {
    /// Never stale by age: only a conflict, a failed write or a deletion makes it wrong.
    fn default() -> Self {
        Self(Memo::new(Duration::MAX, MOST_KNOWN))
    }
}

impl Known {
    fn get(&self, owner: &Owner) -> Option<Stored<RunRecord>> {
        self.0.get(&owner.uid)
    }

    fn keep(&self, owner: &Owner, stored: &Stored<RunRecord>) {
        self.0.keep(&owner.uid, stored.clone());
    }

    fn forget(&self, owner: &Owner) {
        self.0.forget(&owner.uid);
    }
}

/// Runs `f`, bounded by [`TIMEOUT`].
async fn bounded<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    match tokio::time::timeout(TIMEOUT, f).await {
        Ok(r) => r,
        Err(_) => Err(Error::TimedOut {
            what: "the run record",
            after: TIMEOUT,
        }),
    }
}

/// The stored record, any run's; a record that is not the owner's or cannot be read is none
/// (and is deleted, then replaced by the next write). From `known` if it is there.
async fn load_any(store: &Store, known: &Known, owner: &Owner) -> Result<Stored<RunRecord>> {
    if let Some(stored) = known.get(owner) {
        return Ok(stored);
    }
    let stored = match store.load::<RunRecord>(owner).await {
        Ok(Some(s)) => s,
        Ok(None) => Stored::new(RunRecord::default()),
        Err(Error::Internal(e)) => {
            tracing::warn!(benchmark = owner.name, "run record not used: {e}");
            store.delete(owner).await?;
            Stored::new(RunRecord::default())
        }
        Err(e) => return Err(e),
    };
    known.keep(owner, &stored);
    Ok(stored)
}

/// `run`'s record, if the stored one is of that run (from `known` if it is there).
pub async fn load(
    client: &Client,
    namespace: &str,
    known: &Known,
    owner: &Owner,
    run: &str,
) -> Result<Option<RunRecord>> {
    if let Some(stored) = known.get(owner) {
        return Ok(Some(stored.data).filter(|r| r.run == run));
    }
    let store = store(client, namespace);
    let found = bounded(async {
        match store.load::<RunRecord>(owner).await {
            Ok(found) => {
                let stored = found.unwrap_or_else(|| Stored::new(RunRecord::default()));
                known.keep(owner, &stored);
                Ok(Some(stored.data))
            }
            Err(Error::Internal(e)) => {
                tracing::warn!(benchmark = owner.name, "run record not used: {e}");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    })
    .await?;
    Ok(found.filter(|r| r.run == run))
}

/// Writes `change` of the stored record, if it makes one; one retry after a concurrent change.
/// `likely_absent`: a record this process does not know is first created without being read
/// (a new benchmark's first start: one round trip, not two); one that exists refuses the
/// creation (409), and is then read and written as any other.
async fn update(
    client: &Client,
    namespace: &str,
    known: &Known,
    owner: &Owner,
    likely_absent: bool,
    change: impl Fn(&RunRecord) -> Option<RunRecord>,
) -> Result<()> {
    let store = store(client, namespace);
    let written = bounded(async {
        let mut last = Ok(());
        // The guess of absence, when made, does not count as one of the two tries.
        let mut guess_absent = likely_absent;
        for _ in 0..(2 + usize::from(likely_absent)) {
            let mut stored = match known.get(owner) {
                Some(stored) => stored,
                None if guess_absent => Stored::new(RunRecord::default()),
                None => load_any(&store, known, owner).await?,
            };
            guess_absent = false;
            let Some(next) = change(&stored.data) else {
                return Ok(());
            };
            stored.data = next;
            let replacing = stored.is_stored();
            last = store.save(owner, &mut stored).await;
            match &last {
                // Changed, or deleted, by someone else: read again (and recreated if gone).
                Err(Error::Kube(kube::Error::Api(e)))
                    if e.code == 409 || (e.code == 404 && replacing) =>
                {
                    known.forget(owner)
                }
                Ok(()) => {
                    known.keep(owner, &stored);
                    return last;
                }
                Err(_) => return last,
            }
        }
        last
    })
    .await;
    if written.is_err() {
        known.forget(owner);
    }
    written
}

/// Records that `run` left the queue at `at` (no-op if its record says so already).
pub async fn start(
    client: &Client,
    namespace: &str,
    known: &Known,
    owner: &Owner,
    run: &str,
    at: Time,
) -> Result<()> {
    update(client, namespace, known, owner, true, |r| {
        r.started(run, at.clone())
    })
    .await
}

/// Records how `run` ended (no-op if its record holds an end already: the first stands).
pub async fn end(
    client: &Client,
    namespace: &str,
    known: &Known,
    owner: &Owner,
    run: &str,
    ended: &Ended,
) -> Result<()> {
    update(client, namespace, known, owner, false, |r| {
        r.ended(run, ended)
    })
    .await
}

/// The benchmark is deleted: its record goes.
pub async fn delete(client: &Client, namespace: &str, known: &Known, owner: &Owner) -> Result<()> {
    known.forget(owner);
    bounded(store(client, namespace).delete(owner)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    fn t(secs: i64) -> Time {
        Time(jiff::Timestamp::from_second(1_800_000_000 + secs).unwrap())
    }

    fn end_of(phase: Phase) -> Ended {
        end_with(phase, true)
    }

    fn end_with(phase: Phase, measuring: bool) -> Ended {
        Ended {
            phase,
            reason: "R".into(),
            message: "m".into(),
            at: t(100),
            measuring,
        }
    }

    #[test]
    fn a_start_is_written_once_per_run_and_replaces_another_runs_record() {
        let none = RunRecord::default();
        let r1 = none.started("r1", t(1)).unwrap();
        assert_eq!(r1.run, "r1");
        assert_eq!(r1.started, Some(t(1)));
        assert!(r1.result_due());
        assert_eq!(r1.started("r1", t(2)), None, "the first start stands");
        let ended = r1.ended("r1", &end_with(Phase::Failed, false)).unwrap();
        let r2 = ended.started("r2", t(3)).unwrap();
        assert_eq!((r2.run.as_str(), r2.ended.as_ref()), ("r2", None));
    }

    #[test]
    fn an_end_is_written_once_and_tells_whether_a_result_is_due() {
        let r1 = RunRecord::default().started("r1", t(1)).unwrap();
        let failed = r1.ended("r1", &end_with(Phase::Failed, false)).unwrap();
        assert_eq!(failed.ended.as_ref().map(|e| e.phase), Some(Phase::Failed));
        assert_eq!(failed.ended("r1", &end_with(Phase::Succeeded, true)), None);
        assert!(failed.result_due());
        // Refused in the queue: ended, never started, no result due.
        let refused = RunRecord::default()
            .ended("r2", &end_with(Phase::Failed, false))
            .unwrap();
        assert!(!refused.result_due());
        // Under way before records were kept: ended from a measuring phase.
        let old = RunRecord::default()
            .ended("r3", &end_with(Phase::Succeeded, true))
            .unwrap();
        assert!(old.result_due());
        assert_eq!(old.started, None);
    }

    #[test]
    fn a_pending_end_is_laid_over_the_stored_record_of_its_run_only() {
        let r1 = RunRecord::default().started("r1", t(1)).unwrap();
        let e = end_with(Phase::Succeeded, true);
        let over = r1.clone().with_pending("r1", Some(&e)).unwrap();
        assert_eq!(over.ended, Some(e.clone()));
        assert_eq!(r1.clone().with_pending("r1", None), Some(r1.clone()));
        assert_eq!(r1.clone().with_pending("r9", None), None);
        let fresh = RunRecord::default().with_pending("r9", Some(&e)).unwrap();
        assert!(fresh.result_due());
    }

    #[test]
    fn the_record_reads_back_what_it_wrote() {
        let r = RunRecord::default()
            .started("r1", t(1))
            .unwrap()
            .ended("r1", &end_with(Phase::Failed, true))
            .unwrap();
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"phase\":\"Failed\""), "{text}");
        assert_eq!(serde_json::from_str::<RunRecord>(&text).unwrap(), r);
    }

    /// An API server holding the operator's ConfigMaps in memory (one object per name; a
    /// replace with a stale resourceVersion is a conflict, as on a real one), and a switch that
    /// makes the next replace a conflict as if someone else had written.
    type Held = Arc<Mutex<HashMap<String, serde_json::Value>>>;

    fn configmaps() -> (crate::testing::FakeApi, Client, Arc<AtomicBool>, Held) {
        let api = crate::testing::FakeApi::default();
        let held: Held = Arc::default();
        let stored = held.clone();
        let conflict = Arc::new(AtomicBool::new(false));
        let next_conflict = conflict.clone();
        let client = api.client(move |seen| {
            use crate::testing::fake_api::status;
            let mut stored = stored.lock().unwrap();
            let name = seen.path.rsplit('/').next().unwrap_or_default().to_string();
            let body = || serde_json::from_str::<serde_json::Value>(&seen.body).unwrap();
            match seen.method.as_str() {
                "GET" => match stored.get(&name) {
                    Some(cm) => (200, cm.clone()),
                    None => (404, status(404, "NotFound")),
                },
                "POST" => {
                    let mut cm = body();
                    cm["metadata"]["resourceVersion"] = "1".into();
                    let name = cm["metadata"]["name"].as_str().unwrap().to_string();
                    if stored.contains_key(&name) {
                        return (409, status(409, "AlreadyExists"));
                    }
                    stored.insert(name, cm.clone());
                    (201, cm)
                }
                "PUT" => {
                    let mut cm = body();
                    let Some(held) = stored.get(&name).cloned() else {
                        return (404, status(404, "NotFound"));
                    };
                    if next_conflict.swap(false, Ordering::SeqCst)
                        || held["metadata"]["resourceVersion"] != cm["metadata"]["resourceVersion"]
                    {
                        return (409, status(409, "Conflict"));
                    }
                    let version: u64 = held["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .parse()
                        .unwrap();
                    cm["metadata"]["resourceVersion"] = (version + 1).to_string().into();
                    stored.insert(name, cm.clone());
                    (200, cm)
                }
                _ => (404, status(404, "NotFound")),
            }
        });
        (api, client, conflict, held)
    }

    #[tokio::test]
    async fn a_run_reads_its_record_once_and_again_only_after_a_conflict() {
        let (api, client, conflict, held) = configmaps();
        let known = Known::default();
        let owner = crate::testing::owner("IngressBenchmark", "web", "uid-1");
        let verbs = |from: usize| -> Vec<String> {
            api.requests()[from..]
                .iter()
                .map(|l| l.split(' ').next().unwrap_or_default().to_string())
                .collect()
        };
        start(&client, "ops", &known, &owner, "r1", t(1))
            .await
            .unwrap();
        assert_eq!(
            verbs(0),
            ["POST"],
            "a new benchmark's record created unread"
        );
        end(
            &client,
            "ops",
            &known,
            &owner,
            "r1",
            &end_of(Phase::Succeeded),
        )
        .await
        .unwrap();
        assert_eq!(verbs(1), ["PUT"], "written from what it knew");
        let loaded = load(&client, "ops", &known, &owner, "r1").await.unwrap();
        assert_eq!(verbs(2), Vec::<String>::new(), "the result reads no GET");
        let loaded = loaded.unwrap();
        assert_eq!(loaded.ended.map(|e| e.phase), Some(Phase::Succeeded));
        // Someone else wrote: the next write is refused, reads the record again and writes.
        conflict.store(true, Ordering::SeqCst);
        start(&client, "ops", &known, &owner, "r2", t(2))
            .await
            .unwrap();
        assert_eq!(verbs(2), ["PUT", "GET", "PUT"]);
        let r2 = load(&client, "ops", &known, &owner, "r2").await.unwrap();
        assert_eq!(r2.map(|r| r.started), Some(Some(t(2))));
        // Another process (a new leader) knows nothing and reads the stored record.
        let fresh = Known::default();
        let stored = load(&client, "ops", &fresh, &owner, "r2").await.unwrap();
        assert_eq!(verbs(5), ["GET"]);
        assert_eq!(stored.map(|r| r.started), Some(Some(t(2))));
        // Deleted behind its back (an admin): the write finds it gone, reads, and recreates it.
        held.lock().unwrap().clear();
        end(&client, "ops", &known, &owner, "r2", &end_of(Phase::Failed))
            .await
            .unwrap();
        assert_eq!(verbs(6), ["PUT", "GET", "POST"]);
        assert_eq!(held.lock().unwrap().len(), 1);
        // A leader that knows nothing starts the next run of a benchmark whose record exists:
        // the creation is refused, and the record read and replaced, not lost.
        let fresh = Known::default();
        start(&client, "ops", &fresh, &owner, "r3", t(3))
            .await
            .unwrap();
        assert_eq!(verbs(9), ["POST", "GET", "PUT"]);
        let r3 = load(&client, "ops", &fresh, &owner, "r3").await.unwrap();
        assert_eq!(r3.map(|r| r.started), Some(Some(t(3))));
        // Its first start stands: the same run started again changes nothing, asks nothing.
        start(&client, "ops", &fresh, &owner, "r3", t(4))
            .await
            .unwrap();
        assert_eq!(verbs(12), Vec::<String>::new());
        let r3 = load(&client, "ops", &fresh, &owner, "r3").await.unwrap();
        assert_eq!(r3.map(|r| r.started), Some(Some(t(3))));
        // So does it for yet another process that knows nothing: refused, read, not written.
        let another = Known::default();
        start(&client, "ops", &another, &owner, "r3", t(5))
            .await
            .unwrap();
        assert_eq!(verbs(12), ["POST", "GET"]);
        let r3 = load(&client, "ops", &Known::default(), &owner, "r3")
            .await
            .unwrap();
        assert_eq!(r3.map(|r| r.started), Some(Some(t(3))));
    }
}
