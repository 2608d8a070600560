//! The sweep target's saved spec, kept in the operator's namespace (crate::store::records) where
//! benchmark authors cannot write: saved before the first patch, the only source of every
//! restore, re-checked against the admin's sweep pairs (and, for the current run, the spec)
//! before any patch, and deleted only once a read-back shows the target as saved.
//! status.savedTarget is a copy for the user, never read.

use kube::Client;
use serde::{Deserialize, Serialize};

use crds::ingress::SavedTarget;
use crds::IngressBenchmark;

use crate::admin::config::Config;
use crate::base::error::{Error, Result};
use crate::context::Context;
use crate::ingress::target;
use crate::store::records::{Owner, Store, Stored};

/// The stored record: the saved target (and, with controllers swept, the others) and the run
/// that saved them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TargetRecord {
    pub run: String,
    pub saved: SavedTarget,
    /// The other controllers' targets (a record of one target, as older versions wrote it,
    /// has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<SavedTarget>,
}

impl TargetRecord {
    /// Every target the record saved, the first one first.
    pub fn targets(&self) -> impl Iterator<Item = &SavedTarget> {
        std::iter::once(&self.saved).chain(&self.others)
    }
}

/// The records' kind in the operator's namespace.
const WHAT: &str = "target";

pub fn store(client: &Client, config: &Config) -> Store {
    Store::new(client, &config.namespace, WHAT)
}

/// The store of one benchmark's record (`Context::restore_records`).
fn benchmark_store(ctx: &Context) -> Store {
    ctx.restore_records(WHAT)
}

/// What a restore attempt found.
#[derive(Debug, PartialEq)]
pub enum Restore {
    /// No record: nothing was patched (or it is restored and verified already).
    Nothing,
    /// Every target written back and read back as saved; the record is deleted.
    Restored(Vec<SavedTarget>),
    /// The admin's pairs (or the spec) do not allow touching it: nothing was patched.
    Refused(String),
    /// The patch or the read-back failed; retried later.
    Failed(String),
}

/// A restore that must be retried.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The patch or the read-back failed.
    #[error("restoring the sweep target: {0}")]
    Failed(String),
    /// The target is restored, but its record could not be deleted.
    #[error("deleting the target record: {0}")]
    DeleteRecord(#[source] Error),
}

impl From<RestoreError> for Error {
    fn from(e: RestoreError) -> Error {
        Error::Internal(Box::new(e))
    }
}

/// May this benchmark patch the record's targets? The admin's pairs always; for the current
/// run each must also be one the spec's sweep scales (an older run's may differ after a spec
/// change).
pub fn permitted(
    record: &TargetRecord,
    ib: &IngressBenchmark,
    current_run: &str,
    config: &Config,
) -> Result<(), String> {
    record
        .targets()
        .try_for_each(|s| permitted_one(s, &record.run, ib, current_run, config))
}

/// May this benchmark patch `s`, saved by its run `saved_by`?
fn permitted_one(
    s: &SavedTarget,
    saved_by: &str,
    ib: &IngressBenchmark,
    current_run: &str,
    config: &Config,
) -> Result<(), String> {
    let ns = ib.metadata.namespace.clone().unwrap_or_default();
    if !config.sweep_allows(&ns, &s.namespace, &s.name) {
        return Err(format!(
            "sweeps from namespace {ns} may not patch {}/{} (Helm value security.sweepTargets); not touched",
            s.namespace, s.name
        ));
    }
    if saved_by != current_run {
        return Ok(());
    }
    if ib.spec.sweep.is_none() {
        return Err(format!(
            "{} {}/{}: the spec has no sweep; not touched",
            s.kind, s.namespace, s.name
        ));
    }
    let in_spec = super::plan::sweep_targets(&ib.spec)
        .into_iter()
        .any(|t| target::is_saved_of(s, t, &ns));
    if !in_spec {
        return Err(format!(
            "{} {}/{} is not the spec's sweep target; not touched",
            s.kind, s.namespace, s.name
        ));
    }
    Ok(())
}

/// The first of `targets` another benchmark's record still holds (a sweep of its not restored
/// yet), said as why this run may not save it: a run saving a target another has patched
/// would keep the patched spec as the original.
pub async fn held_elsewhere(
    client: &Client,
    config: &Config,
    ib: &IngressBenchmark,
    targets: &[SavedTarget],
) -> Result<Option<String>> {
    let me = Owner::of(ib);
    let records = store(client, config).list::<TargetRecord>().await?;
    for (owner, record) in records.iter().filter(|(o, _)| o.uid != me.uid) {
        for held in record.targets() {
            let same = |t: &&SavedTarget| {
                t.kind == held.kind && t.namespace == held.namespace && t.name == held.name
            };
            if let Some(t) = targets.iter().find(same) {
                return Ok(Some(format!(
                    "{} {}/{} is still held by the sweep of {}/{}, not restored yet",
                    t.kind, t.namespace, t.name, owner.namespace, owner.name
                )));
            }
        }
    }
    Ok(None)
}

/// Loads the record; None when there is none.
pub async fn load(ctx: &Context, ib: &IngressBenchmark) -> Result<Option<TargetRecord>> {
    Ok(benchmark_store(ctx)
        .load::<TargetRecord>(&Owner::of(ib))
        .await?
        .map(|s| s.data))
}

/// Stores the saved target before the first patch.
pub async fn save(ctx: &Context, ib: &IngressBenchmark, record: TargetRecord) -> Result<()> {
    benchmark_store(ctx)
        .save(&Owner::of(ib), &mut Stored::new(record))
        .await
}

/// Writes each saved spec back and reads it back; deletes the record once every target reads
/// back as saved. A target refused or failed does not stop the others: those restored leave
/// the record, which keeps only what is still to restore.
pub async fn restore(ctx: &Context, ib: &IngressBenchmark, current_run: &str) -> Result<Restore> {
    let (client, config) = (&ctx.client, &ctx.config);
    let records = benchmark_store(ctx);
    let owner = Owner::of(ib);
    let Some(mut stored) = records.load::<TargetRecord>(&owner).await? else {
        return Ok(Restore::Nothing);
    };
    let record = stored.data.clone();
    let (mut restored, mut left, mut why) = (vec![], vec![], vec![]);
    let mut refused_only = true;
    for saved in record.targets() {
        let outcome = match permitted_one(saved, &record.run, ib, current_run, config) {
            Err(m) => Err((m, true)),
            Ok(()) => restore_one(client, saved).await.map_err(|m| (m, false)),
        };
        match outcome {
            Ok(()) => restored.push(saved.clone()),
            Err((m, refused)) => {
                refused_only &= refused;
                why.push(m);
                left.push(saved.clone());
            }
        }
    }
    let mut left = left.into_iter();
    let Some(first_left) = left.next() else {
        records
            .delete(&owner)
            .await
            .map_err(RestoreError::DeleteRecord)?;
        return Ok(Restore::Restored(restored));
    };
    let mut m = why.join("; ");
    if !restored.is_empty() {
        stored.data = TargetRecord {
            run: record.run.clone(),
            saved: first_left,
            others: left.collect(),
        };
        records.save(&owner, &mut stored).await?;
        let named: Vec<String> = restored.iter().map(describe).collect();
        m = format!("{m} ({} restored)", named.join(", "));
    }
    Ok(if refused_only {
        Restore::Refused(m)
    } else {
        Restore::Failed(m)
    })
}

/// "Deployment ns/name".
pub fn describe(s: &SavedTarget) -> String {
    format!("{} {}/{}", s.kind, s.namespace, s.name)
}

/// Writes `saved` back and reads it back as saved; Err says why not.
async fn restore_one(client: &Client, saved: &SavedTarget) -> std::result::Result<(), String> {
    target::restore(client, saved)
        .await
        .map_err(|e| e.to_string())?;
    match target::is_restored(client, saved).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!(
            "{} does not read back as saved yet",
            describe(saved)
        )),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::allow::SweepPairs;

    fn ib(target: &str) -> IngressBenchmark {
        serde_yaml::from_str(&format!(
            "{{apiVersion: netbench.io/v1alpha1, kind: IngressBenchmark, metadata: {{name: b, namespace: team-a, uid: u}}, spec: {{target: {{url: 'http://x/'}}, sweep: {{targetRef: {target}, steps: [{{cpu: '1'}}]}}}}}}"
        ))
        .unwrap()
    }

    fn record(ns: &str, name: &str) -> TargetRecord {
        TargetRecord {
            run: "r1".into(),
            saved: SavedTarget {
                kind: "Deployment".into(),
                namespace: ns.into(),
                name: name.into(),
                container: "c".into(),
                container_index: 0,
                replicas: Some(1),
                resources_json: "{}".into(),
                restored: false,
            },
            others: vec![],
        }
    }

    #[test]
    fn a_target_is_patched_only_within_the_admins_pairs_and_the_spec() {
        let b = ib("{name: web}");
        let mut c = Config::for_tests();
        let own = record("team-a", "web");
        let err = permitted(&own, &b, "r1", &c).unwrap_err();
        assert!(err.contains("may not patch team-a/web"), "{err}");
        c.sweep_targets = SweepPairs::parse("team-a=.");
        assert_eq!(permitted(&own, &b, "r1", &c), Ok(()));
        // A record naming another team's Deployment: refused by the pairs.
        let other = record("team-b", "web");
        assert!(permitted(&other, &b, "r1", &c).is_err());
        // Within the pairs but not the spec's target (for the current run).
        c.sweep_targets = SweepPairs::parse("team-a=*");
        let err = permitted(&other, &b, "r1", &c).unwrap_err();
        assert!(err.contains("not the spec's sweep target"), "{err}");
        assert_eq!(
            permitted(&other, &b, "r0", &c),
            Ok(()),
            "an older run's target"
        );
    }

    #[test]
    fn every_controllers_target_is_checked_and_a_one_target_record_still_reads() {
        let b: IngressBenchmark = serde_yaml::from_str(
            "{apiVersion: netbench.io/v1alpha1, kind: IngressBenchmark, metadata: {name: b, namespace: team-a, uid: u}, spec: {target: {url: 'http://x/'}, controllers: [{name: a, sweepTarget: {name: web-a}}, {name: b, sweepTarget: {name: web-b}}], sweep: {steps: [{cpu: '1'}]}}}",
        )
        .unwrap();
        let mut c = Config::for_tests();
        c.sweep_targets = SweepPairs::parse("team-a=.,team-b=*");
        let mut both = record("team-a", "web-a");
        both.others = vec![record("team-a", "web-b").saved];
        assert_eq!(permitted(&both, &b, "r1", &c), Ok(()));
        // A record that slipped in a target the spec does not sweep, or the pairs forbid.
        both.others.push(record("team-a", "web-c").saved);
        let err = permitted(&both, &b, "r1", &c).unwrap_err();
        assert!(
            err.contains("team-a/web-c is not the spec's sweep target"),
            "{err}"
        );
        both.others = vec![record("team-b", "web-b").saved];
        let err = permitted(&both, &b, "r0", &c).unwrap_err();
        assert!(err.contains("may not patch team-b/web-b"), "{err}");
        // What older versions stored: one target, no others.
        let old = r#"{"run":"r1","saved":{"kind":"Deployment","namespace":"team-a","name":"web-a","container":"c","containerIndex":0,"resourcesJson":"{}"}}"#;
        let read: TargetRecord = serde_json::from_str(old).unwrap();
        assert_eq!(read.targets().count(), 1);
    }

    fn two_target_record(run: &str) -> TargetRecord {
        let mut r = record("team-a", "web-a");
        r.run = run.into();
        r.others = vec![record("team-a", "web-b").saved];
        r
    }

    fn configmap_of(r: &TargetRecord, uid: &str, name: &str) -> serde_json::Value {
        serde_json::json!({
            "metadata": {"name": format!("netbench-target-{uid}"), "resourceVersion": "7", "labels": {
                "app.kubernetes.io/managed-by": "netbench-operator", "netbench.io/kind": "ingressbenchmark",
                "netbench.io/namespace": "team-a", "netbench.io/benchmark": name,
                "netbench.io/uid": uid, "netbench.io/record": "target"}},
            "data": {"record.json": serde_json::to_string(r).unwrap()}
        })
    }

    /// One target whose patch is refused by the API server does not keep the other from
    /// being restored; the record then holds only the one still to restore.
    #[tokio::test]
    async fn a_failed_target_leaves_the_others_restored_and_the_record_holds_the_rest() {
        use crate::testing::fake_api::{status, FakeApi};
        let b = ib("{name: web-a}");
        let mut c = Config::for_tests();
        c.sweep_targets = SweepPairs::parse("team-a=.");
        let stored = configmap_of(&two_target_record("r0"), "u", "b");
        let fake = FakeApi::default();
        let client = fake.client(
            move |seen| match (seen.method.as_str(), seen.path.as_str()) {
                ("GET", p) if p.ends_with("/configmaps/netbench-target-u") => (200, stored.clone()),
                ("PUT", p) if p.ends_with("/configmaps/netbench-target-u") => (200, stored.clone()),
                // web-a is gone (counts as restored); web-b's patch is refused.
                ("PATCH", p) if p.ends_with("/deployments/web-b") => (422, status(422, "Invalid")),
                _ => (404, status(404, "NotFound")),
            },
        );
        let ctx = crate::testing::fake_api::context(client, c);
        let outcome = restore(&ctx, &b, "r1").await.unwrap();
        let Restore::Failed(m) = outcome else {
            panic!("{outcome:?}")
        };
        assert!(m.contains("(Deployment team-a/web-a restored)"), "{m}");
        let seen = fake.requests();
        let patched: Vec<&String> = seen.iter().filter(|r| r.starts_with("PATCH")).collect();
        assert_eq!(patched.len(), 2, "both tried: {seen:#?}");
        let put = seen
            .iter()
            .find(|r| r.starts_with("PUT"))
            .expect("the record rewritten");
        assert!(put.contains("web-b") && !put.contains("web-a"), "{put}");
        assert!(!seen.iter().any(|r| r.starts_with("DELETE")), "{seen:#?}");
    }

    /// A target another benchmark's record still holds is not saved again.
    #[tokio::test]
    async fn a_target_another_sweep_still_holds_is_named() {
        use crate::testing::fake_api::{status, FakeApi};
        let b = ib("{name: web-a}");
        let c = Config::for_tests();
        let theirs = configmap_of(&two_target_record("x"), "other", "theirs");
        let mine = configmap_of(&two_target_record("r0"), "u", "b");
        let list = serde_json::json!({"metadata": {}, "items": [mine, theirs]});
        let fake = FakeApi::default();
        let client = fake.client(move |seen| match seen.method.as_str() {
            "GET" if seen.path.ends_with("/configmaps") => (200, list.clone()),
            _ => (404, status(404, "NotFound")),
        });
        let wanted = [record("team-a", "web-b").saved];
        let m = held_elsewhere(&client, &c, &b, &wanted)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            m,
            "Deployment team-a/web-b is still held by the sweep of team-a/theirs, not restored yet"
        );
        let free = [record("team-a", "web-c").saved];
        assert_eq!(held_elsewhere(&client, &c, &b, &free).await.unwrap(), None);
    }
}
