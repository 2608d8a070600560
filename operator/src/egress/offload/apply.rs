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
use super::job::{self, Action};
use super::observe::{JobState, Outcome};
use super::record::{self, groups, indices, DeviceRecord};
use super::{attempts, describe, devices, Book, Group, Offload, Stage, MAX_ATTEMPTS};
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
        let attempt = attempts(book.records(), &idx, |r| r.apply_attempts);
        let state = if attempt == 0 {
            JobState::Missing
        } else {
            self.observe(g, Action::Apply, attempt, &idx).await?
        };
        match state {
            JobState::Missing if attempt >= MAX_ATTEMPTS => Ok(Stage::Failed(format!(
                "{}: the apply Job vanished {attempt} times",
                g.2
            ))),
            JobState::Missing => {
                // Checked before apply_started is stored: a refusal leaves nothing owed.
                let records: Vec<&DeviceRecord> =
                    idx.iter().filter_map(|&i| book.records().get(i)).collect();
                if let Err(m) =
                    recheck(self.client, self.config, self.eb, self.run, &records).await?
                {
                    return Ok(Stage::Refused(m));
                }
                for &i in &idx {
                    if let Some(r) = book.stored.data.get_mut(i) {
                        r.apply_started = true;
                        r.apply_attempts = attempt + 1;
                    }
                }
                // Stored before the Job exists: from here on a restore is owed.
                book.save().await?;
                let devices = devices(book.records(), &idx, |r| r.wanted.clone());
                match self
                    .create(book, g, Action::Apply, attempt + 1, &devices)
                    .await?
                {
                    Ok(()) => Ok(Stage::Waiting(format!("applying on {}", g.2))),
                    Err(m) => Ok(Stage::Refused(m)),
                }
            }
            JobState::Running => Ok(Stage::Waiting(format!("applying on {}", g.2))),
            JobState::Finished(outcomes) => {
                let errors = take_apply(&mut book.stored.data, &idx, &outcomes);
                book.save().await?;
                Ok(if errors.is_empty() {
                    Stage::Done
                } else {
                    Stage::Failed(errors.join("; "))
                })
            }
        }
    }

    /// Records the state before of `unread` devices (read Job). Done once all are stored.
    async fn read_step(&self, g: &Group, unread: &[usize], book: &mut Book) -> Result<Stage> {
        let attempt = attempts(book.records(), unread, |r| r.read_attempts);
        let state = if attempt == 0 {
            JobState::Missing
        } else {
            self.observe(g, Action::Read, attempt, unread).await?
        };
        match state {
            JobState::Missing if attempt >= MAX_ATTEMPTS => Ok(Stage::Failed(format!(
                "{}: the read Job vanished {attempt} times",
                g.2
            ))),
            JobState::Missing => {
                for &i in unread {
                    if let Some(r) = book.stored.data.get_mut(i) {
                        r.read_attempts = attempt + 1;
                    }
                }
                book.save().await?;
                let devices = devices(book.records(), unread, |_| Default::default());
                match self
                    .create(book, g, Action::Read, attempt + 1, &devices)
                    .await?
                {
                    Ok(()) => Ok(Stage::Waiting(format!("recording the state on {}", g.2))),
                    Err(m) => Ok(Stage::Refused(m)),
                }
            }
            JobState::Running => Ok(Stage::Waiting(format!("recording the state on {}", g.2))),
            JobState::Finished(outcomes) => {
                let errors = take_reads(&mut book.stored.data, unread, &outcomes);
                book.save().await?;
                Ok(if errors.is_empty() {
                    Stage::Done
                } else {
                    Stage::Failed(errors.join("; "))
                })
            }
        }
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
    for &i in unread {
        let Some(r) = records.get_mut(i) else {
            continue;
        };
        match outcomes.get(&job::container_name(i)) {
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
        }
    }
    errors
}

/// Copies an apply Job's outcome into its records; returns the errors.
pub(super) fn take_apply(
    records: &mut [DeviceRecord],
    idx: &[usize],
    outcomes: &BTreeMap<String, Outcome>,
) -> Vec<String> {
    let mut errors = vec![];
    for &i in idx {
        let outcome = outcomes.get(&job::container_name(i));
        let Some(r) = records.get_mut(i) else {
            continue;
        };
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
    }
    errors
}
