//! Offload tuning with privileged Jobs, truthfully:
//! 1. the records of a case's devices are written to the operator's namespace (crate::store::records,
//!    where benchmark authors cannot write), after a check against the spec and the admin's
//!    allow-lists;
//! 2. a read Job records each device's whole feature state (`offload get --state`), and that
//!    state is stored BEFORE anything changes; it is never overwritten (a re-run apply cannot
//!    record already-changed values as "before");
//! 3. the apply Job is created only after `apply_started` is stored;
//! 4. restore Jobs write back what differs and read back the result; a device counts as
//!    restored only when that read-back equals the state before. A missing or failed restore
//!    Job is retried with a new Job, never counted as restored.
//!
//! Every Job is re-checked against the spec and the allow-lists (namespace opt-in, interface,
//! features, node selector) just before it is created. status.offload is a copy for the user,
//! never read.
//!
//! The Jobs live in the operator's own namespace, not the benchmark's: a restore must still run
//! while the benchmark's namespace is being deleted (no new objects are allowed there), the
//! privileged pods stay out of reach of whoever may create benchmarks, and one Role in one
//! namespace is all the RBAC they need. Labels tie them to their benchmark.
//!
//! This file holds what both directions share: the stage a step reports, the handles of one
//! reconcile ([`Offload`]), naming, observing and creating a group's Job (always behind the
//! re-check), and the bookkeeping over a group's records. The apply (steps 1 to 3) is in
//! `apply.rs`, the restore (step 4) in `restore.rs`.

mod apply;
mod book;
mod checks;
pub mod in_run;
mod job;
mod observe;
pub mod record;
mod restore;

use kube::Client;

use crds::egress::EgressBenchmark;

use crate::admin::config::Config;
use crate::base::error::Result;
pub use book::Book;
use checks::recheck;
use job::{Action, Device, JobKey};
pub use observe::delete_jobs;
use observe::{JobState, Outcome};
pub use record::restore_problems;
use record::DeviceRecord;

/// A read or apply Job that vanished this often (deleted by someone) fails the case.
const MAX_ATTEMPTS: u32 = 3;

/// Where a stage stands.
#[derive(Debug, PartialEq)]
pub enum Stage {
    Done,
    /// Jobs are running (or were just created); the message says which.
    Waiting(String),
    /// The apply failed; the run must fail (and restore what did change).
    Failed(String),
    /// The admin's lists (or the spec) do not allow a Job: none was created.
    Refused(String),
}

/// Everything one reconcile's offload steps need.
pub struct Offload<'a> {
    pub client: &'a Client,
    pub config: &'a Config,
    pub eb: &'a EgressBenchmark,
    /// The benchmark's current run.
    pub run: &'a str,
}

type Group = (String, String, String);

impl Offload<'_> {
    fn key<'g>(&self, g: &'g Group, action: Action, attempt: u32) -> JobKey<'g> {
        JobKey {
            run: &g.0,
            case: &g.1,
            node: &g.2,
            action,
            attempt,
        }
    }

    fn job_name(&self, g: &Group, action: Action, attempt: u32) -> String {
        job::job_name(self.eb, &self.key(g, action, attempt))
    }

    async fn observe(
        &self,
        g: &Group,
        action: Action,
        attempt: u32,
        idx: &[usize],
    ) -> Result<JobState> {
        let containers: Vec<String> = idx.iter().map(|&i| job::container_name(i)).collect();
        let name = self.job_name(g, action, attempt);
        Ok(observe::observe(self.client, &self.config.namespace, &name, &containers).await?)
    }

    /// The highest attempt of the records `idx` at the group's `action` Job, and the state of
    /// that attempt's Job (none is looked for before a first attempt).
    async fn job_state(
        &self,
        book: &Book,
        g: &Group,
        action: Action,
        idx: &[usize],
        of: impl Fn(&DeviceRecord) -> u32,
    ) -> Result<(u32, JobState)> {
        let attempt = attempts(book.records(), idx, of);
        let state = if attempt == 0 {
            JobState::Missing
        } else {
            self.observe(g, action, attempt, idx).await?
        };
        Ok((attempt, state))
    }

    /// Stores attempt `attempt` of the group's `action` Job on the records `idx` (for an
    /// apply, that it started: from then on a restore is owed), then re-checks and creates the
    /// Job, each container setting what `action` sets on its device.
    async fn start_job(
        &self,
        book: &mut Book,
        g: &Group,
        action: Action,
        attempt: u32,
        idx: &[usize],
    ) -> Result<Result<(), String>> {
        mark(&mut book.stored.data, idx, |r| match action {
            Action::Read => r.read_attempts = attempt,
            Action::Apply => {
                r.apply_started = true;
                r.apply_attempts = attempt;
            }
            Action::Restore => r.restore_attempts = attempt,
        });
        // Stored before the Job exists.
        book.save().await?;
        let devices = devices(book.records(), idx, |r| match action {
            Action::Read => Default::default(),
            Action::Apply => r.wanted.clone(),
            Action::Restore => r.restore_features(),
        });
        self.create(book, g, action, attempt, &devices).await
    }

    /// Re-checks, then creates the Job (the records are stored by the caller first).
    async fn create(
        &self,
        book: &Book,
        g: &Group,
        action: Action,
        attempt: u32,
        devices: &[Device],
    ) -> Result<Result<(), String>> {
        let records: Vec<&DeviceRecord> = devices
            .iter()
            .filter_map(|(i, _, _)| book.records().get(*i))
            .collect();
        if let Err(m) = recheck(self.client, self.config, self.eb, self.run, &records).await? {
            return Ok(Err(m));
        }
        let job = job::job(self.eb, &self.key(g, action, attempt), devices, self.config);
        observe::create(self.client, &self.config.namespace, &job).await?;
        Ok(Ok(()))
    }
}

/// The highest attempt count among the records (they share their Jobs).
fn attempts(records: &[DeviceRecord], idx: &[usize], of: impl Fn(&DeviceRecord) -> u32) -> u32 {
    idx.iter()
        .filter_map(|&i| records.get(i))
        .map(of)
        .max()
        .unwrap_or(0)
}

fn mark(records: &mut [DeviceRecord], idx: &[usize], f: impl Fn(&mut DeviceRecord)) {
    for &i in idx {
        if let Some(r) = records.get_mut(i) {
            f(r);
        }
    }
}

/// What the Job's containers work on: record index, interface and the features `features`
/// picks (what to set; nothing for a read).
fn devices(
    records: &[DeviceRecord],
    idx: &[usize],
    features: impl Fn(&DeviceRecord) -> std::collections::BTreeMap<String, bool>,
) -> Vec<Device> {
    idx.iter()
        .filter_map(|&i| {
            let r = records.get(i)?;
            Some((i, r.interface.clone(), features(r)))
        })
        .collect()
}

/// Calls `take` with each record of `idx` and the outcome its container reported (None if
/// none); an index outside the records is skipped.
fn each_outcome(
    records: &mut [DeviceRecord],
    idx: &[usize],
    outcomes: &std::collections::BTreeMap<String, Outcome>,
    mut take: impl FnMut(&mut DeviceRecord, Option<&Outcome>),
) {
    for &i in idx {
        let outcome = outcomes.get(&job::container_name(i));
        if let Some(r) = records.get_mut(i) {
            take(r, outcome);
        }
    }
}

fn describe(outcome: Option<&Outcome>) -> String {
    match outcome {
        None => "the container reported nothing".into(),
        Some(Outcome { error: Some(e), .. }) => e.clone(),
        Some(Outcome { state: Some(s), .. }) => {
            format!("the state read is of {}", s.interface)
        }
        Some(_) => "no state".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_shares_its_highest_attempt_and_each_device_gets_its_own_features() {
        let records: Vec<DeviceRecord> = (0..3u32)
            .map(|n| DeviceRecord {
                interface: format!("vx{n}"),
                restore_attempts: n,
                wanted: [(format!("f{n}"), n % 2 == 0)].into(),
                ..Default::default()
            })
            .collect();
        assert_eq!(attempts(&records, &[0, 1], |r| r.restore_attempts), 1);
        assert_eq!(attempts(&records, &[2, 0], |r| r.restore_attempts), 2);
        assert_eq!(attempts(&records, &[], |r| r.restore_attempts), 0);
        // An index outside the records is skipped, not a panic.
        assert_eq!(attempts(&records, &[1, 9], |r| r.restore_attempts), 1);
        let got = devices(&records, &[2, 0, 9], |r| r.wanted.clone());
        assert_eq!(
            got,
            [
                (2, "vx2".to_string(), [("f2".to_string(), true)].into()),
                (0, "vx0".to_string(), [("f0".to_string(), true)].into()),
            ]
        );
        let mut records = records;
        mark(&mut records, &[1, 9], |r| r.restored = true);
        let restored: Vec<bool> = records.iter().map(|r| r.restored).collect();
        assert_eq!(restored, [false, true, false]);
    }
}
