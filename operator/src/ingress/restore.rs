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

/// The stored record: the saved target and the run that saved it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TargetRecord {
    pub run: String,
    pub saved: SavedTarget,
}

pub fn store(client: &Client, config: &Config) -> Store {
    Store::new(client, &config.namespace, "target")
}

/// What a restore attempt found.
#[derive(Debug, PartialEq)]
pub enum Restore {
    /// No record: nothing was patched (or it is restored and verified already).
    Nothing,
    /// Written back and read back as saved; the record is deleted.
    Restored(SavedTarget),
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

/// May this benchmark patch the record's target? The admin's pairs always; for the current
/// run also the spec's targetRef (an older run's target may differ after a spec change).
pub fn permitted(
    record: &TargetRecord,
    ib: &IngressBenchmark,
    current_run: &str,
    config: &Config,
) -> Result<(), String> {
    let ns = ib.metadata.namespace.clone().unwrap_or_default();
    let s = &record.saved;
    if !config.sweep_allows(&ns, &s.namespace, &s.name) {
        return Err(format!(
            "sweeps from namespace {ns} may not patch {}/{} (Helm value security.sweepTargets); not touched",
            s.namespace, s.name
        ));
    }
    if record.run == current_run {
        let Some(tref) = ib.spec.sweep.as_ref().map(|s| &s.target_ref) else {
            return Err(format!(
                "{} {}/{}: the spec has no sweep; not touched",
                s.kind, s.namespace, s.name
            ));
        };
        let tref_ns = tref.namespace.as_deref().unwrap_or(&ns);
        let kind = target::kind_name(tref.kind);
        if tref_ns != s.namespace || tref.name != s.name || kind != s.kind {
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
    let saved = &record.saved;
    if let Err(e) = target::restore(client, saved).await {
        return Ok(Restore::Failed(e.to_string()));
    }
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
    store(client, config)
        .delete(&Owner::of(ib))
        .await
        .map_err(RestoreError::DeleteRecord)?;
    Ok(Restore::Restored(record.saved))
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
}
