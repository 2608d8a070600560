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

pub fn store(client: &Client, config: &Config) -> Store {
    Store::new(client, &config.namespace, "target")
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
    let ns = ib.metadata.namespace.clone().unwrap_or_default();
    for s in record.targets() {
        if !config.sweep_allows(&ns, &s.namespace, &s.name) {
            return Err(format!(
                "sweeps from namespace {ns} may not patch {}/{} (Helm value security.sweepTargets); not touched",
                s.namespace, s.name
            ));
        }
        if record.run != current_run {
            continue;
        }
        if ib.spec.sweep.is_none() {
            return Err(format!(
                "{} {}/{}: the spec has no sweep; not touched",
                s.kind, s.namespace, s.name
            ));
        }
        let in_spec = super::plan::sweep_targets(&ib.spec).into_iter().any(|t| {
            let t_ns = t.namespace.as_deref().unwrap_or(&ns);
            t_ns == s.namespace && t.name == s.name && target::kind_name(t.kind) == s.kind
        });
        if !in_spec {
            return Err(format!(
                "{} {}/{} is not the spec's sweep target; not touched",
                s.kind, s.namespace, s.name
            ));
        }
    }
    Ok(())
}

/// Loads the record; None when there is none.
pub async fn load(
    client: &Client,
    config: &Config,
    ib: &IngressBenchmark,
) -> Result<Option<TargetRecord>> {
    Ok(store(client, config)
        .load::<TargetRecord>(&Owner::of(ib))
        .await?
        .map(|s| s.data))
}

/// Stores the saved target before the first patch.
pub async fn save(
    client: &Client,
    config: &Config,
    ib: &IngressBenchmark,
    record: TargetRecord,
) -> Result<()> {
    store(client, config)
        .save(&Owner::of(ib), &mut Stored::new(record))
        .await
}

/// Writes the saved spec back, reads it back, and deletes the record once they agree.
pub async fn restore(
    client: &Client,
    config: &Config,
    ib: &IngressBenchmark,
    current_run: &str,
) -> Result<Restore> {
    let Some(record) = load(client, config, ib).await? else {
        return Ok(Restore::Nothing);
    };
    if let Err(m) = permitted(&record, ib, current_run, config) {
        return Ok(Restore::Refused(m));
    }
    for saved in record.targets() {
        if let Err(e) = target::restore(client, saved).await {
            return Ok(Restore::Failed(e.to_string()));
        }
    }
    for saved in record.targets() {
        match target::is_restored(client, saved).await {
            Ok(true) => {}
            Ok(false) => {
                return Ok(Restore::Failed(format!(
                    "{} {}/{} does not read back as saved yet",
                    saved.kind, saved.namespace, saved.name
                )))
            }
            Err(e) => return Ok(Restore::Failed(e.to_string())),
        }
    }
    store(client, config)
        .delete(&Owner::of(ib))
        .await
        .map_err(RestoreError::DeleteRecord)?;
    Ok(Restore::Restored(record.targets().cloned().collect()))
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
}
