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
use super::job::{self, Action};
use super::observe::{self, JobState, Outcome};
use super::record::{groups, indices, DeviceRecord};
use super::{attempts, describe, devices, mark, Book, Group, Offload, Stage};
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
        let attempt = attempts(book.records(), &idx, |r| r.restore_attempts);
        let state = if attempt == 0 {
            JobState::Missing
        } else {
            self.observe(g, Action::Restore, attempt, &idx).await?
        };
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
        mark(&mut book.stored.data, idx, |r| r.restore_attempts = attempt);
        book.save().await?;
        let devices = devices(book.records(), idx, DeviceRecord::restore_features);
        Ok(
            match self
                .create(book, g, Action::Restore, attempt, &devices)
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
    for &i in idx {
        let outcome = outcomes.get(&job::container_name(i));
        let Some(r) = records.get_mut(i) else {
            continue;
        };
        match outcome {
            Some(Outcome { state: Some(s), .. }) => r.take_read_back(s.clone()),
            other => r.restore_error = Some(describe(other)),
        }
    }
}
