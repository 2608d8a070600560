//! Applying a case's offload profile, steps 1 to 3 of the module: the case's records are
//! stored, then a read Job records each device's state before, then the apply Job changes it.
//!
//! Invariants:
//! - every step is stored before the next one acts: the records before any Job, the read
//!   attempt before the read Job, `apply_started` before the apply Job (from there on a restore
//!   is owed);
//! - the state before is taken only from a clean read of the same interface and is never
//!   overwritten (a record with a `before` is not read again);
//! - a refusal (the spec or the admin's lists no longer allow a device) stores nothing owed and
//!   creates no Job;
//! - a read or apply Job that vanished `MAX_ATTEMPTS` times fails the case.

use std::collections::BTreeMap;

use crds::egress::EgressCase;

use super::checks::recheck;
use super::job::Action;
use super::observe::{JobState, Outcome};
use super::record::{self, groups, indices, DeviceRecord};
use super::{describe, each_outcome, Book, Group, Offload, Stage, MAX_ATTEMPTS};
use crate::base::error::Result;

impl Offload<'_> {
    /// Why the admin's lists refuse some offload setting the cases use, before anything runs.
    pub async fn refusal(&self) -> Result<Option<String>> {
        let records: Vec<DeviceRecord> = self
            .eb
            .spec
            .cases
            .iter()
            .flat_map(|c| record::records_for(self.eb, self.run, c))
            .collect();
        if records.is_empty() {
            return Ok(None);
        }
        let refs: Vec<&DeviceRecord> = records.iter().collect();
        Ok(recheck(self.client, self.config, self.eb, self.run, &refs)
            .await?
            .err())
    }

    /// Applies case `case`'s profile: records, read Job, apply Job, each stored before the next.
    pub async fn apply(&self, case: &EgressCase, book: &mut Book) -> Result<Stage> {
        if !book
            .records()
            .iter()
            .any(|r| of_case(r, self.run, &case.name))
        {
            let new = record::records_for(self.eb, self.run, case);
            let refs: Vec<&DeviceRecord> = new.iter().collect();
            if let Err(m) = recheck(self.client, self.config, self.eb, self.run, &refs).await? {
                return Ok(Stage::Refused(m));
            }
            book.stored.data.extend(new);
            book.save().await?;
        }
        let mut waiting = vec![];
        let mut errors = vec![];
        for g in to_apply(book.records(), self.run, &case.name) {
            match self.apply_group(&g, book).await? {
                Stage::Done => {}
                Stage::Waiting(m) => waiting.push(m),
                Stage::Failed(m) => errors.push(m),
                refused @ Stage::Refused(_) => return Ok(refused),
            }
        }
        Ok(if !errors.is_empty() {
            Stage::Failed(format!(
                "case {}: offload not applied: {}",
                case.name,
                errors.join("; ")
            ))
        } else if !waiting.is_empty() {
            Stage::Waiting(format!("case {}: {}", case.name, waiting.join(", ")))
        } else {
            Stage::Done
        })
    }

    async fn apply_group(&self, g: &Group, book: &mut Book) -> Result<Stage> {
        let unread = indices(book.records(), g, |r| r.before.is_none());
        if !unread.is_empty() {
            let stage = self.read_step(g, &unread, book).await?;
            if stage != Stage::Done {
                return Ok(stage);
            }
        }
        let idx = indices(book.records(), g, |r| !r.apply_done);
        let (attempt, state) = self
            .job_state(book, g, Action::Apply, &idx, |r| r.apply_attempts)
            .await?;
        let applying = || Stage::Waiting(format!("applying on {}", g.2));
        match state {
            JobState::Missing if attempt >= MAX_ATTEMPTS => Ok(vanished(g, "apply", attempt)),
            JobState::Missing => {
                // Checked before apply_started is stored: a refusal leaves nothing owed.
                let records: Vec<&DeviceRecord> =
                    idx.iter().filter_map(|&i| book.records().get(i)).collect();
                if let Err(m) =
                    recheck(self.client, self.config, self.eb, self.run, &records).await?
                {
                    return Ok(Stage::Refused(m));
                }
                // apply_started is stored before the Job exists: from here on a restore is owed.
                let created = self
                    .start_job(book, g, Action::Apply, attempt + 1, &idx)
                    .await?;
                Ok(created.map_or_else(Stage::Refused, |()| applying()))
            }
            JobState::Running => Ok(applying()),
            JobState::Finished(outcomes) => {
                let errors = take_apply(&mut book.stored.data, &idx, &outcomes);
                book.save().await?;
                Ok(failed_if_any(errors))
            }
        }
    }

    /// Records the state before of `unread` devices (read Job). Done once all are stored.
    async fn read_step(&self, g: &Group, unread: &[usize], book: &mut Book) -> Result<Stage> {
        let (attempt, state) = self
            .job_state(book, g, Action::Read, unread, |r| r.read_attempts)
            .await?;
        let reading = || Stage::Waiting(format!("recording the state on {}", g.2));
        match state {
            JobState::Missing if attempt >= MAX_ATTEMPTS => Ok(vanished(g, "read", attempt)),
            JobState::Missing => {
                let created = self
                    .start_job(book, g, Action::Read, attempt + 1, unread)
                    .await?;
                Ok(created.map_or_else(Stage::Refused, |()| reading()))
            }
            JobState::Running => Ok(reading()),
            JobState::Finished(outcomes) => {
                let errors = take_reads(&mut book.stored.data, unread, &outcomes);
                book.save().await?;
                Ok(failed_if_any(errors))
            }
        }
    }
}

/// The case fails: the group's `job` Job vanished `attempt` times.
fn vanished(g: &Group, job: &str, attempt: u32) -> Stage {
    Stage::Failed(format!("{}: the {job} Job vanished {attempt} times", g.2))
}

/// Done, or Failed with every error.
fn failed_if_any(errors: Vec<String>) -> Stage {
    if errors.is_empty() {
        Stage::Done
    } else {
        Stage::Failed(errors.join("; "))
    }
}

/// A record of case `case` in run `run`.
fn of_case(r: &DeviceRecord, run: &str, case: &str) -> bool {
    r.run == run && r.case == case
}

/// The groups of case `case` in run `run` whose apply has not finished.
fn to_apply(records: &[DeviceRecord], run: &str, case: &str) -> Vec<Group> {
    groups(records, |r| of_case(r, run, case) && !r.apply_done)
}

/// Copies a read Job's outcome into its records: the state before is taken only from a clean
/// read of the record's own interface. Returns the errors.
fn take_reads(
    records: &mut [DeviceRecord],
    unread: &[usize],
    outcomes: &BTreeMap<String, Outcome>,
) -> Vec<String> {
    let mut errors = vec![];
    each_outcome(records, unread, outcomes, |r, outcome| match outcome {
        Some(Outcome {
            state: Some(s),
            error: None,
        }) if s.interface == r.interface => r.before = Some(s.clone()),
        other => errors.push(format!(
            "{}/{}: reading the state failed: {}",
            r.node,
            r.interface,
            describe(other)
        )),
    });
    errors
}

/// Copies an apply Job's outcome into its records; returns the errors.
pub(super) fn take_apply(
    records: &mut [DeviceRecord],
    idx: &[usize],
    outcomes: &BTreeMap<String, Outcome>,
) -> Vec<String> {
    let mut errors = vec![];
    each_outcome(records, idx, outcomes, |r, outcome| {
        r.apply_done = true;
        if let Some(s) = outcome.and_then(|o| o.state.clone()) {
            if s.interface == r.interface {
                r.applied = Some(s.clone());
                r.after = Some(s);
            }
        }
        if let Some(e) = outcome.map_or(Some("no outcome".to_string()), |o| o.error.clone()) {
            r.apply_error = Some(e.clone());
            errors.push(format!("{}/{}: {e}", r.node, r.interface));
        }
    });
    errors
}

#[cfg(test)]
mod tests {
    use super::super::job;
    use super::*;
    use crate::admin::config::Config;
    use crate::egress::offload::record::tests::{
        allowing, jobs_created, requests, state, stored_before_first_job, Rig,
    };
    use crate::testing::fake_api::FakeApi;

    fn device(run: &str, case: &str, node: &str, interface: &str) -> DeviceRecord {
        DeviceRecord {
            run: run.into(),
            case: case.into(),
            node: node.into(),
            interface: interface.into(),
            ..Default::default()
        }
    }

    /// Devices of case vx in run r1 on node n1, one per interface.
    fn on_n1(interfaces: &[&str]) -> Vec<DeviceRecord> {
        interfaces
            .iter()
            .map(|i| device("r1", "vx", "n1", i))
            .collect()
    }

    fn clean(s: protocol::offload::DeviceState) -> Outcome {
        Outcome {
            state: Some(s),
            error: None,
        }
    }

    fn failed(s: protocol::offload::DeviceState, error: &str) -> Outcome {
        Outcome {
            state: Some(s),
            error: Some(error.into()),
        }
    }

    /// The outcomes of a Job, each by the container of its record's index.
    fn outcomes<const N: usize>(of: [(usize, Outcome); N]) -> BTreeMap<String, Outcome> {
        of.into_iter()
            .map(|(i, o)| (job::container_name(i), o))
            .collect()
    }

    #[test]
    fn only_the_unfinished_groups_of_the_case_in_this_run_are_applied() {
        let mut done = device("r1", "vx", "n3", "vx0");
        done.apply_done = true;
        let records = [
            device("r1", "vx", "n1", "vx0"),
            device("r1", "vx", "n1", "eth9"),
            device("r0", "vx", "n2", "vx0"),
            device("r1", "other", "n4", "vx0"),
            done,
            device("r1", "vx", "n5", "vx0"),
        ];
        let nodes: Vec<String> = to_apply(&records, "r1", "vx")
            .into_iter()
            .map(|(run, case, node)| {
                assert_eq!((run.as_str(), case.as_str()), ("r1", "vx"));
                node
            })
            .collect();
        assert_eq!(nodes, ["n1", "n5"]);
    }

    #[test]
    fn the_state_before_comes_only_from_a_clean_read_of_the_same_device() {
        let mut records = on_n1(&["vx0", "vx1", "eth9", "vx2", "vx3"]);
        let read = state(&[("tx-checksum-ip-generic", true)]);
        let outcomes = outcomes([
            (0, clean(read.clone())),
            (1, failed(read.clone(), "exit code 1: no such device")),
            // A state of vx0 reported for eth9 is not eth9's state.
            (2, clean(read.clone())),
            (4, clean(read.clone())),
        ]);
        // Record 4 is not being read: its outcome is ignored.
        let errors = take_reads(&mut records, &[0, 1, 2, 3], &outcomes);
        assert_eq!(records[0].before, Some(read));
        assert!(records.iter().skip(1).all(|r| r.before.is_none()));
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].starts_with("n1/vx1: ") && errors[0].contains("no such device"));
        assert!(errors[1].starts_with("n1/eth9: ") && errors[1].contains("is of vx0"));
        assert!(errors[2].starts_with("n1/vx2: ") && errors[2].contains("reported nothing"));
    }

    #[test]
    fn an_apply_outcome_is_recorded_per_device_and_every_failure_named() {
        let mut records = on_n1(&["vx0", "vx1", "eth9", "vx2"]);
        let changed = state(&[("tx-checksum-ip-generic", false)]);
        let outcomes = outcomes([
            (0, clean(changed.clone())),
            (1, failed(changed.clone(), "exit code 1: busy")),
            (2, clean(changed.clone())),
        ]);
        let errors = take_apply(&mut records, &[0, 1, 2, 3], &outcomes);
        // Every device's apply is over, whatever its outcome: a restore may now be needed.
        assert!(records.iter().all(|r| r.apply_done));
        assert_eq!(records[0].applied, Some(changed.clone()));
        assert_eq!(records[0].after, Some(changed));
        assert_eq!(records[0].apply_error, None);
        assert_eq!(records[1].apply_error.as_deref(), Some("exit code 1: busy"));
        // Another interface's read-back is not this device's state.
        assert!(records[2].applied.is_none() && records[2].after.is_none());
        assert_eq!(records[3].apply_error.as_deref(), Some("no outcome"));
        assert_eq!(
            errors,
            ["n1/vx1: exit code 1: busy", "n1/vx2: no outcome"],
            "{records:?}"
        );
    }

    #[tokio::test]
    async fn a_refused_case_stores_nothing_and_creates_no_job() {
        let fake = FakeApi::default();
        // The namespace has not opted in to offload Jobs.
        let rig = Rig::new(&fake, true, Config::for_tests());
        let offload = rig.offload();
        let mut book = rig.book().await;
        let stage = offload
            .apply(&offload.eb.spec.cases[0], &mut book)
            .await
            .unwrap();
        let Stage::Refused(m) = stage else {
            panic!("{stage:?}")
        };
        assert!(m.contains("not enabled for namespace ns"), "{m}");
        assert!(book.records().is_empty());
        let writes: Vec<_> = requests(&fake)
            .into_iter()
            .filter(|(m, _, _)| m != "GET")
            .collect();
        assert!(writes.is_empty(), "{writes:?}");
        assert_eq!(
            offload.refusal().await.unwrap().as_deref(),
            Some(m.as_str())
        );
    }

    #[tokio::test]
    async fn the_records_are_stored_before_the_read_jobs_and_nothing_is_applied_yet() {
        let fake = FakeApi::default();
        let rig = Rig::new(&fake, true, allowing());
        let offload = rig.offload();
        assert_eq!(offload.refusal().await.unwrap(), None);
        let mut book = rig.book().await;
        let stage = offload
            .apply(&offload.eb.spec.cases[0], &mut book)
            .await
            .unwrap();
        assert_eq!(
            stage,
            Stage::Waiting(
                "case vx: recording the state on n1, recording the state on n2, \
                 recording the state on n3"
                    .into()
            )
        );
        let jobs = jobs_created(&fake);
        assert_eq!(jobs.len(), 3);
        assert!(jobs.iter().all(|j| j.contains("offload-read")), "{jobs:?}");
        assert!(!jobs.iter().any(|j| j.contains("offload-apply")));
        // The first Job exists only once its record and its read attempt are stored.
        let stored = stored_before_first_job(&fake).unwrap();
        assert_eq!(stored.len(), 3);
        assert_eq!(stored[0].node, "n1");
        assert_eq!(stored[0].read_attempts, 1);
        // Nothing is owed yet: no apply started, no state before invented.
        assert!(book
            .records()
            .iter()
            .all(|r| r.read_attempts == 1 && !r.apply_started && r.before.is_none()));
        assert!(!book.open());
    }
}
