//! Restore records: what a restore needs (offload state before a change, a sweep target's spec
//! before the first patch), kept in a ConfigMap per benchmark in the OPERATOR's namespace,
//! where benchmark authors cannot write. Written before the change, read to drive every
//! restore, deleted only once the restore was verified. A benchmark's status carries a copy as
//! a report and is never read back for a decision.
//!
//! The ConfigMap is named after the benchmark's uid and labelled with its kind, namespace, name
//! and uid; a record whose labels do not name the benchmark asking for it is refused. Writes
//! carry the resourceVersion read, so two operators (or a stale cache) never overwrite each
//! other's record.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::base::error::{Error, Result};
use crate::base::labels;
use crate::base::memo::Absent;
pub use crate::store::owner::Owner;

/// The key of the record's JSON in the ConfigMap.
const DATA_KEY: &str = "record.json";
/// Label carrying the benchmark's uid.
pub const UID: &str = "netbench.io/uid";
/// Marks restore records (and tells which kind of record).
pub const RECORD: &str = "netbench.io/record";

/// `netbench-<what>-<uid>`; the uid is the API server's (a UUID), filtered anyway.
fn configmap_name(owner: &Owner, what: &str) -> String {
    let uid: String = owner
        .uid
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(40)
        .collect::<String>()
        .to_ascii_lowercase();
    format!("netbench-{what}-{uid}")
}

/// Every label a record of `owner` carries (the kind lowercased: "egressbenchmark").
fn record_labels(owner: &Owner, what: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (labels::MANAGED_BY.to_string(), labels::OPERATOR.to_string()),
        (labels::KIND.to_string(), owner.kind.to_lowercase()),
        (labels::NAMESPACE.to_string(), owner.namespace.clone()),
        (
            labels::BENCHMARK.to_string(),
            labels::truncate(&owner.name, 63),
        ),
        (UID.to_string(), owner.uid.clone()),
        (RECORD.to_string(), what.to_string()),
    ])
}

/// A record as stored: its data and the resourceVersion it was read or written at.
#[derive(Clone, Debug, PartialEq)]
pub struct Stored<T> {
    pub data: T,
    resource_version: Option<String>,
}

impl<T> Stored<T> {
    /// A record not written yet.
    pub fn new(data: T) -> Stored<T> {
        Stored {
            data,
            resource_version: None,
        }
    }

    /// Whether it was read from (or written to) the API server, so that a save replaces it.
    pub fn is_stored(&self) -> bool {
        self.resource_version.is_some()
    }
}

/// One kind of record ("offload", "target") of benchmarks, in the operator's namespace.
pub struct Store {
    api: Api<ConfigMap>,
    what: &'static str,
    absent: Option<Arc<Absent>>,
}

impl Store {
    pub fn new(client: &Client, operator_namespace: &str, what: &'static str) -> Store {
        Store {
            api: Api::namespaced(client.clone(), operator_namespace),
            what,
            absent: None,
        }
    }

    /// The same store, asking the API server for no record `absent` knows is not there (by
    /// ConfigMap name: it read none, or deleted it). Only the operator writes its namespace,
    /// so that stays true until this process writes the record; every write and deletion
    /// forgets it first (a failed one leaves it unknown). A record that exists is always read
    /// from the API server: what is restored is never decided from memory.
    pub fn knowing_absent(self, absent: Arc<Absent>) -> Store {
        Store {
            absent: Some(absent),
            ..self
        }
    }

    /// Remembers that `name` is absent (`true`) or forgets what was known of it.
    fn note_absent(&self, name: &str, absent: bool) {
        if let Some(known) = &self.absent {
            known.note(name, absent);
        }
    }

    /// The owner's record, if there is one; Err if it is not the owner's or cannot be read.
    pub async fn load<T: DeserializeOwned>(&self, owner: &Owner) -> Result<Option<Stored<T>>> {
        let name = configmap_name(owner, self.what);
        if self.absent.as_ref().is_some_and(|a| a.knows(&name)) {
            return Ok(None);
        }
        let Some(cm) = self.api.get_opt(&name).await? else {
            self.note_absent(&name, true);
            return Ok(None);
        };
        check_owner(&cm, &record_labels(owner, self.what)).map_err(RecordError::NotOurs)?;
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(DATA_KEY))
            .ok_or_else(|| RecordError::Empty(name.clone()))?;
        let data = serde_json::from_str(text).map_err(|e| RecordError::Unreadable(name, e))?;
        Ok(Some(Stored {
            data,
            resource_version: cm.metadata.resource_version,
        }))
    }

    /// The owner's record, or a new default one (saved by the caller) when there is none or it
    /// cannot be used (not ours, unreadable): that one is logged as a `what` record, deleted,
    /// and so made again and replaced.
    pub async fn load_or_default<T: DeserializeOwned + Default>(
        &self,
        owner: &Owner,
        what: &str,
    ) -> Result<Stored<T>> {
        match self.load::<T>(owner).await {
            Ok(Some(s)) => Ok(s),
            Ok(None) => Ok(Stored::new(T::default())),
            Err(Error::Internal(e)) => {
                tracing::warn!("{what} record of {}: {e}", owner.name);
                self.delete(owner).await?;
                Ok(Stored::new(T::default()))
            }
            Err(e) => Err(e),
        }
    }

    /// Writes the record (creates it the first time); fails on a concurrent change.
    pub async fn save<T: Serialize>(&self, owner: &Owner, record: &mut Stored<T>) -> Result<()> {
        let name = configmap_name(owner, self.what);
        let text = serde_json::to_string(&record.data)
            .map_err(|e| RecordError::Encoding(name.clone(), e))?;
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(record_labels(owner, self.what)),
                resource_version: record.resource_version.clone(),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(DATA_KEY.to_string(), text)])),
            ..Default::default()
        };
        let pp = PostParams::default();
        self.note_absent(&name, false);
        let written = match &record.resource_version {
            None => self.api.create(&pp, &cm).await?,
            Some(_) => self.api.replace(&name, &pp, &cm).await?,
        };
        record.resource_version = written.metadata.resource_version;
        Ok(())
    }

    /// Every record of this kind in the operator's namespace, each with the labels naming
    /// its benchmark (namespace, name, uid); a record that does not read is left out.
    pub async fn list<T: DeserializeOwned>(&self) -> Result<Vec<(Owner, T)>> {
        let params = ListParams::default().labels(&format!("{RECORD}={}", self.what));
        let found = self.api.list(&params).await?;
        Ok(found
            .items
            .into_iter()
            .filter_map(|cm| {
                let labels = cm.metadata.labels.as_ref()?;
                let owner = Owner {
                    kind: labels.get(labels::KIND)?.clone(),
                    namespace: labels.get(labels::NAMESPACE)?.clone(),
                    name: labels.get(labels::BENCHMARK)?.clone(),
                    uid: labels.get(UID)?.clone(),
                };
                let text = cm.data.as_ref()?.get(DATA_KEY)?;
                Some((owner, serde_json::from_str(text).ok()?))
            })
            .collect())
    }

    /// Deletes the owner's record (call only once its restore is verified).
    pub async fn delete(&self, owner: &Owner) -> Result<()> {
        let name = configmap_name(owner, self.what);
        self.note_absent(&name, false);
        let gone = match self.api.delete(&name, &DeleteParams::default()).await {
            Err(kube::Error::Api(e)) if e.code == 404 => true,
            // Left: still there, its deletion waits for a finalizer.
            r => r?.is_right(),
        };
        self.note_absent(&name, gone);
        Ok(())
    }
}

/// A record the operator cannot use.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Its labels name another benchmark.
    #[error("{0}")]
    NotOurs(String),
    #[error("record {0} holds no {DATA_KEY}")]
    Empty(String),
    #[error("record {0} is unreadable: {1}")]
    Unreadable(String, #[source] serde_json::Error),
    #[error("encoding record {0}: {1}")]
    Encoding(String, #[source] serde_json::Error),
}

impl From<RecordError> for Error {
    fn from(e: RecordError) -> Error {
        Error::Internal(Box::new(e))
    }
}

/// A record is the owner's only if every identifying label says so.
fn check_owner(cm: &ConfigMap, want: &BTreeMap<String, String>) -> Result<(), String> {
    let have = cm.metadata.labels.clone().unwrap_or_default();
    let wrong: Vec<&str> = want
        .iter()
        .filter(|(k, v)| have.get(*k) != Some(v))
        .map(|(k, _)| k.as_str())
        .collect();
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "record {} does not belong to this benchmark (labels {} differ); not used",
            cm.name_any(),
            wrong.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER_UID: &str = "0b6e1f7c-AAAA-4c1d-9e3f-1234567890ab";

    fn owner() -> Owner {
        crate::testing::owner("EgressBenchmark", "e", OWNER_UID)
    }

    #[test]
    fn names_and_labels_identify_the_benchmark() {
        let o = owner();
        assert_eq!(
            configmap_name(&o, "offload"),
            "netbench-offload-0b6e1f7c-aaaa-4c1d-9e3f-1234567890ab"
        );
        let mut hostile = o.clone();
        hostile.uid = "../x/../../Y".into();
        assert_eq!(configmap_name(&hostile, "offload"), "netbench-offload-xy");
        let l = record_labels(&o, "offload");
        assert_eq!(l[UID], o.uid);
        assert_eq!(l[labels::NAMESPACE], "team-a");
        assert_eq!(l[RECORD], "offload");
    }

    #[test]
    fn a_record_of_another_benchmark_is_refused() {
        let o = owner();
        let mut cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("netbench-offload-x".into()),
                labels: Some(record_labels(&o, "offload")),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(check_owner(&cm, &record_labels(&o, "offload")), Ok(()));
        let mut other = o.clone();
        other.namespace = "team-b".into();
        let err = check_owner(&cm, &record_labels(&other, "offload")).unwrap_err();
        assert!(err.contains("netbench.io/namespace"), "{err}");
        cm.metadata.labels = None;
        assert!(check_owner(&cm, &record_labels(&o, "offload")).is_err());
    }

    use crate::testing::fake_api::{status, FakeApi, Seen};
    use serde_json::json;
    use std::sync::{Arc, Mutex};

    /// An API server holding at most the one record of [`owner`], and a store of it that knows
    /// absent records. `delete_keeps`: a deletion leaves the record there (a finalizer waits);
    /// `fail_writes`: every write and deletion is answered 500.
    fn api_server(delete_keeps: bool, fail_writes: bool) -> (FakeApi, Store) {
        let held: Arc<Mutex<Option<serde_json::Value>>> = Arc::default();
        let fake = FakeApi::default();
        let client = fake.client(move |seen: &Seen| {
            let mut held = held.lock().unwrap();
            match seen.method.as_str() {
                "GET" => match held.clone() {
                    Some(cm) => (200, cm),
                    None => (404, status(404, "NotFound")),
                },
                _ if fail_writes => (500, status(500, "InternalError")),
                "POST" | "PUT" => {
                    let mut cm: serde_json::Value = serde_json::from_str(&seen.body).unwrap();
                    cm["metadata"]["resourceVersion"] = json!("7");
                    *held = Some(cm.clone());
                    (200, cm)
                }
                "DELETE" if delete_keeps => {
                    let mut cm = held.clone().unwrap_or_else(|| json!({"metadata": {}}));
                    cm["metadata"]["deletionTimestamp"] = json!("2026-12-05T00:00:00Z");
                    (200, cm)
                }
                "DELETE" => {
                    *held = None;
                    (
                        200,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
                    )
                }
                _ => (405, status(405, "MethodNotAllowed")),
            }
        });
        let store = Store::new(&client, "ops", "offload").knowing_absent(Arc::default());
        (fake, store)
    }

    fn gets(fake: &FakeApi) -> usize {
        fake.requests()
            .iter()
            .filter(|r| r.starts_with("GET "))
            .count()
    }

    #[tokio::test]
    async fn a_record_known_absent_is_not_asked_for_again() {
        let (fake, store) = api_server(false, false);
        let o = owner();
        assert_eq!(store.load::<Vec<u8>>(&o).await.unwrap(), None);
        assert_eq!(store.load::<Vec<u8>>(&o).await.unwrap(), None);
        assert_eq!(gets(&fake), 1, "{:?}", fake.requests());

        // Written: every load asks the API server again.
        store.save(&o, &mut Stored::new(vec![1u8])).await.unwrap();
        for _ in 0..2 {
            let loaded = store.load::<Vec<u8>>(&o).await.unwrap().unwrap();
            assert_eq!(loaded.data, vec![1u8]);
        }
        assert_eq!(gets(&fake), 3);

        // Deleted: known absent again.
        store.delete(&o).await.unwrap();
        assert_eq!(store.load::<Vec<u8>>(&o).await.unwrap(), None);
        assert_eq!(gets(&fake), 3);
    }

    #[tokio::test]
    async fn a_record_whose_deletion_waits_or_whose_write_failed_is_asked_for() {
        let (fake, store) = api_server(true, false);
        let o = owner();
        store.save(&o, &mut Stored::new(vec![1u8])).await.unwrap();
        store.delete(&o).await.unwrap();
        assert!(store.load::<Vec<u8>>(&o).await.unwrap().is_some());
        assert_eq!(gets(&fake), 1);

        let (fake, store) = api_server(false, true);
        assert_eq!(store.load::<Vec<u8>>(&o).await.unwrap(), None);
        assert!(store.save(&o, &mut Stored::new(vec![1u8])).await.is_err());
        // The failed POST may have landed: asked again.
        assert_eq!(store.load::<Vec<u8>>(&o).await.unwrap(), None);
        assert!(store.delete(&o).await.is_err());
        assert_eq!(store.load::<Vec<u8>>(&o).await.unwrap(), None);
        assert_eq!(gets(&fake), 3);
    }

    #[tokio::test]
    async fn without_the_memory_every_load_asks() {
        let (fake, store) = api_server(false, false);
        let store = Store {
            absent: None,
            ..store
        };
        for _ in 0..2 {
            assert_eq!(store.load::<Vec<u8>>(&owner()).await.unwrap(), None);
        }
        assert_eq!(gets(&fake), 2);
    }
}
