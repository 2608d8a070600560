//! Restoring what a run changed, step 4 of the module: restore Jobs write back what may differ
//! from the state before and read back the result.
//!
//! Invariants:
//! - a device counts as restored only when a read-back of its own interface equals its state
//!   before (`DeviceRecord::take_read_back`); a missing or failed restore Job is retried with a
//!   new Job (the attempt is stored before the Job is created), never counted as restored;
//! - an apply still in flight is waited for; one whose Job is gone has an unknown effect, so
//!   every changeable feature is written back;
//! - a record without a state before, or on a node that no longer exists, is abandoned and
//!   says why (there is nothing to write back to); one whose apply read-back shows nothing
//!   changed is restored without a Job;
//! - the case being prepared in the current run is skipped (its apply is under way).

use std::collections::BTreeMap;

use super::apply::take_apply;
use super::checks::{check_node, NodeCheck};
use super::job::Action;
use super::observe::{self, JobState, Outcome};
use super::record::{groups, indices, DeviceRecord};
use super::{attempts, describe, each_outcome, mark, Book, Group, Offload, Stage};
use crate::base::error::Result;

impl Offload<'_> {
    /// Writes back every device that may differ from its state before, except the records of
    /// `skip` (the case being prepared in the current run). Done when nothing is left open
    /// (or only what the lists refuse: then Refused).
    pub async fn restore(&self, book: &mut Book, skip: Option<&str>) -> Result<Stage> {
        let mut waiting = vec![];
        let mut refused = vec![];
        for g in owed(book.records(), self.run, skip) {
            match self.restore_group(&g, book).await? {
                Stage::Done => {}
                Stage::Waiting(m) => waiting.push(m),
                Stage::Failed(m) | Stage::Refused(m) => refused.push(m),
            }
        }
        Ok(if !waiting.is_empty() {
            Stage::Waiting(format!(
                "restoring offload settings on {}",
                waiting.join(", ")
            ))
        } else if !refused.is_empty() {
            Stage::Refused(refused.join("; "))
        } else {
            Stage::Done
        })
    }

    async fn restore_group(&self, g: &Group, book: &mut Book) -> Result<Stage> {
        if let Some(waiting) = self.finish_apply_in_flight(g, book).await? {
            return Ok(waiting);
        }
        settle_without_job(&mut book.stored.data, g);
        let idx = indices(book.records(), g, DeviceRecord::needs_restore);
        if idx.is_empty() {
            book.save().await?;
            return Ok(Stage::Done);
        }
        if let NodeCheck::Gone = check_node(self.client, self.config, &g.2).await? {
            // A replacement node starts with its own defaults: there is nothing to write back.
            let why = format!("node {} no longer exists; not restored", g.2);
            mark(&mut book.stored.data, &idx, |r| {
                r.abandoned = Some(why.clone())
            });
            book.save().await?;
            return Ok(Stage::Done);
        }
        let (attempt, state) = self
            .job_state(book, g, Action::Restore, &idx, |r| r.restore_attempts)
            .await?;
        match state {
            JobState::Missing => self.start_restore(g, &idx, attempt + 1, book).await,
            JobState::Running => Ok(Stage::Waiting(g.2.clone())),
            JobState::Finished(outcomes) => {
                take_read_backs(&mut book.stored.data, &idx, &outcomes);
                book.save().await?;
                let name = self.job_name(g, Action::Restore, attempt);
                observe::delete(self.client, &self.config.namespace, &name).await?;
                let open = idx.iter().any(|&i| {
                    book.records()
                        .get(i)
                        .is_some_and(DeviceRecord::needs_restore)
                });
                if open {
                    // A new Job (next attempt) on the next call.
                    return self.start_restore(g, &idx, attempt + 1, book).await;
                }
                Ok(Stage::Done)
            }
        }
    }

    /// An apply still in flight (deletion mid-apply) must finish before it can be undone.
    /// Some(Waiting) while it runs.
    async fn finish_apply_in_flight(&self, g: &Group, book: &mut Book) -> Result<Option<Stage>> {
        let in_flight = indices(book.records(), g, |r| r.apply_started && !r.apply_done);
        if in_flight.is_empty() {
            return Ok(None);
        }
        let attempt = attempts(book.records(), &in_flight, |r| r.apply_attempts);
        match self.observe(g, Action::Apply, attempt, &in_flight).await? {
            JobState::Running => {
                return Ok(Some(Stage::Waiting(format!(
                    "{} (apply still running)",
                    g.2
                ))))
            }
            JobState::Finished(outcomes) => {
                take_apply(&mut book.stored.data, &in_flight, &outcomes);
            }
            // Gone or never created: its effect is unknown, so every changeable feature is
            // written back.
            JobState::Missing => mark(&mut book.stored.data, &in_flight, |r| r.apply_done = true),
        }
        book.save().await?;
        Ok(None)
    }

    async fn start_restore(
        &self,
        g: &Group,
        idx: &[usize],
        attempt: u32,
        book: &mut Book,
    ) -> Result<Stage> {
        Ok(
            match self
                .start_job(book, g, Action::Restore, attempt, idx)
                .await?
            {
                Ok(()) => Stage::Waiting(if attempt > 1 {
                    format!("{} (retrying)", g.2)
                } else {
                    g.2.clone()
                }),
                Err(m) => Stage::Refused(m),
            },
        )
    }
}

/// The groups that owe a restore, except the records of case `skip` in run `run`.
fn owed(records: &[DeviceRecord], run: &str, skip: Option<&str>) -> Vec<Group> {
    let skipped = |r: &DeviceRecord| r.run == run && Some(r.case.as_str()) == skip;
    groups(records, |r| r.needs_restore() && !skipped(r))
}

/// Records that need no restore Job: without a state before there is nothing to restore to
/// (abandoned, said so); an apply whose own read-back shows nothing changed is restored.
fn settle_without_job(records: &mut [DeviceRecord], g: &Group) {
    let idx = indices(records, g, |r| r.needs_restore());
    mark(records, &idx, |r| {
        if r.before.is_none() {
            r.abandoned = Some("no state before was recorded; not restored".into());
        } else if let Some(after) = r.after.clone().filter(|_| r.restore_features().is_empty()) {
            r.take_read_back(after);
        }
    });
}

/// Copies a restore Job's read-backs into its records (a record counts as restored only when
/// its read-back equals its state before; see `DeviceRecord::take_read_back`).
fn take_read_backs(
    records: &mut [DeviceRecord],
    idx: &[usize],
    outcomes: &BTreeMap<String, Outcome>,
) {
    each_outcome(records, idx, outcomes, |r, outcome| match outcome {
        Some(Outcome { state: Some(s), .. }) => r.take_read_back(s.clone()),
        other => r.restore_error = Some(describe(other)),
    });
}

#[cfg(test)]
mod tests {
    use super::super::job;
    use super::*;
    use crate::egress::offload::record::tests::{
        allowing, jobs_created, state, stored_before_first_job, Rig,
    };
    use crate::testing::fake_api::FakeApi;

    const A: &str = "tx-checksum-ip-generic";
    const B: &str = "tx-tcp-segmentation";

    /// A device of an older run whose apply changed A (B unchanged).
    fn applied(node: &str) -> DeviceRecord {
        DeviceRecord {
            run: "r0".into(),
            case: "vx".into(),
            node: node.into(),
            interface: "vx0".into(),
            before: Some(state(&[(A, true), (B, true)])),
            after: Some(state(&[(A, false), (B, true)])),
            apply_started: true,
            apply_done: true,
            apply_attempts: 1,
            ..Default::default()
        }
    }

    fn group(r: &DeviceRecord) -> Group {
        (r.run.clone(), r.case.clone(), r.node.clone())
    }

    #[test]
    fn only_the_case_being_prepared_in_this_run_is_skipped() {
        let mut this_run = applied("n1");
        this_run.run = "r1".into();
        let mut other_case = applied("n2");
        other_case.run = "r1".into();
        other_case.case = "other".into();
        let mut restored = applied("n3");
        restored.restored = true;
        let mut never_started = applied("n4");
        never_started.apply_started = false;
        let records = [
            this_run.clone(),
            other_case.clone(),
            applied("n5"),
            restored,
            never_started,
        ];
        let nodes = |skip| -> Vec<String> {
            owed(&records, "r1", skip)
                .into_iter()
                .map(|g| g.2)
                .collect()
        };
        assert_eq!(nodes(Some("vx")), ["n2", "n5"]);
        assert_eq!(nodes(Some("other")), ["n1", "n5"]);
        assert_eq!(nodes(None), ["n1", "n2", "n5"]);
    }

    #[test]
    fn a_device_is_settled_without_a_job_only_when_nothing_can_or_need_be_written() {
        let mut no_before = applied("n1");
        no_before.before = None;
        let mut unchanged = applied("n1");
        unchanged.after = unchanged.before.clone();
        let changed = applied("n1");
        let mut records = vec![no_before, unchanged, changed];
        let g = group(&records[0]);
        settle_without_job(&mut records, &g);
        assert!(records[0]
            .abandoned
            .as_deref()
            .is_some_and(|m| m.contains("no state before")));
        assert!(!records[0].needs_restore());
        assert!(records[1].restored && records[1].abandoned.is_none());
        // A device that differs still owes a restore Job.
        assert!(records[2].needs_restore() && records[2].abandoned.is_none());
        assert_eq!(
            records[2].restore_features(),
            BTreeMap::from([(A.to_string(), true)])
        );
    }

    #[test]
    fn only_a_read_back_equal_to_before_counts_as_restored() {
        let mut records = vec![applied("n1"), applied("n1"), applied("n1")];
        let outcomes = BTreeMap::from([
            (
                job::container_name(0),
                Outcome {
                    state: Some(state(&[(A, true), (B, true)])),
                    error: None,
                },
            ),
            (
                job::container_name(1),
                Outcome {
                    state: Some(state(&[(A, false), (B, true)])),
                    error: None,
                },
            ),
        ]);
        take_read_backs(&mut records, &[0, 1, 2], &outcomes);
        assert!(records[0].restored && !records[0].needs_restore());
        assert!(records[1].needs_restore());
        assert!(records[1]
            .restore_error
            .as_deref()
            .is_some_and(|e| e.contains("differs from before")));
        assert!(records[2].needs_restore());
        assert_eq!(
            records[2].restore_error.as_deref(),
            Some("the container reported nothing")
        );
    }

    async fn restore_with(
        fake: &FakeApi,
        nodes_exist: bool,
        records: Vec<DeviceRecord>,
    ) -> (Stage, Vec<DeviceRecord>) {
        let rig = Rig::new(fake, nodes_exist, allowing());
        let mut book = rig.book().await;
        book.stored.data = records;
        let stage = rig.offload().restore(&mut book, None).await.unwrap();
        (stage, book.records().to_vec())
    }

    #[tokio::test]
    async fn a_restore_job_writes_back_what_differs_after_storing_its_attempt() {
        let fake = FakeApi::default();
        let (stage, records) = restore_with(&fake, true, vec![applied("n1")]).await;
        assert_eq!(
            stage,
            Stage::Waiting("restoring offload settings on n1".into())
        );
        let jobs = jobs_created(&fake);
        assert_eq!(jobs.len(), 1);
        assert!(jobs[0].contains("offload-restore"), "{}", jobs[0]);
        assert!(jobs[0].contains(&format!("{A}=on")), "{}", jobs[0]);
        assert!(!jobs[0].contains(B), "B is unchanged: {}", jobs[0]);
        assert_eq!(
            stored_before_first_job(&fake).unwrap()[0].restore_attempts,
            1
        );
        // Creating the Job restores nothing.
        assert!(records[0].needs_restore() && records[0].restore_attempts == 1);
    }

    #[tokio::test]
    async fn an_apply_job_gone_mid_apply_means_every_changeable_feature_is_written_back() {
        let fake = FakeApi::default();
        let mut in_flight = applied("n1");
        in_flight.apply_done = false;
        in_flight.after = None;
        let (stage, records) = restore_with(&fake, true, vec![in_flight]).await;
        assert_eq!(
            stage,
            Stage::Waiting("restoring offload settings on n1".into())
        );
        assert!(records[0].apply_done);
        let jobs = jobs_created(&fake);
        assert_eq!(jobs.len(), 1);
        assert!(jobs[0].contains(&format!("{A}=on")), "{}", jobs[0]);
        assert!(jobs[0].contains(&format!("{B}=on")), "{}", jobs[0]);
    }

    #[tokio::test]
    async fn a_device_on_a_node_that_is_gone_is_abandoned_without_a_job() {
        let fake = FakeApi::default();
        let (stage, records) = restore_with(&fake, false, vec![applied("n1")]).await;
        assert_eq!(stage, Stage::Done);
        assert!(jobs_created(&fake).is_empty());
        assert!(!records[0].restored);
        assert_eq!(
            records[0].abandoned.as_deref(),
            Some("node n1 no longer exists; not restored")
        );
        assert_eq!(
            crate::egress::offload::restore_problems(&records),
            ["n1/vx0: node n1 no longer exists; not restored"]
        );
    }
}
