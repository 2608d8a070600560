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

mod book;
mod checks;
pub mod in_run;
mod job;
mod observe;
pub mod record;

use kube::Client;

use crds::egress::{EgressBenchmark, EgressCase};

use crate::admin::config::Config;
use crate::base::error::Result;
pub use book::Book;
use checks::{check_node, recheck, NodeCheck};
use job::{Action, Device, JobKey};
pub use observe::delete_jobs;
use observe::{JobState, Outcome};
pub use record::restore_problems;
use record::{groups, indices, DeviceRecord};

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
        let mine = |r: &DeviceRecord| r.run == self.run && r.case == case.name;
        if !book.records().iter().any(mine) {
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
        for g in groups(book.records(), |r| mine(r) && !r.apply_done) {
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
        let attempt = attempts(book, &idx, |r| r.apply_attempts);
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
                let devices = devices(book, &idx, |r| r.wanted.clone());
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
                let errors = take_apply(book, &idx, &outcomes);
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
        let attempt = attempts(book, unread, |r| r.read_attempts);
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
                let devices = devices(book, unread, |_| Default::default());
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
                let mut errors = vec![];
                for &i in unread {
                    let Some(r) = book.stored.data.get_mut(i) else {
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
                book.save().await?;
                Ok(if errors.is_empty() {
                    Stage::Done
                } else {
                    Stage::Failed(errors.join("; "))
                })
            }
        }
    }

    /// Writes back every device that may differ from its state before, except the records of
    /// `skip` (the case being prepared in the current run). Done when nothing is left open
    /// (or only what the lists refuse: then Refused).
    pub async fn restore(&self, book: &mut Book, skip: Option<&str>) -> Result<Stage> {
        let skipped = |r: &DeviceRecord| r.run == self.run && Some(r.case.as_str()) == skip;
        let mut waiting = vec![];
        let mut refused = vec![];
        for g in groups(book.records(), |r| r.needs_restore() && !skipped(r)) {
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
        settle_without_job(book, g);
        let idx = indices(book.records(), g, DeviceRecord::needs_restore);
        if idx.is_empty() {
            book.save().await?;
            return Ok(Stage::Done);
        }
        if let NodeCheck::Gone = check_node(self.client, self.config, &g.2).await? {
            // A replacement node starts with its own defaults: there is nothing to write back.
            let why = format!("node {} no longer exists; not restored", g.2);
            mark(book, &idx, |r| r.abandoned = Some(why.clone()));
            book.save().await?;
            return Ok(Stage::Done);
        }
        let attempt = attempts(book, &idx, |r| r.restore_attempts);
        let state = if attempt == 0 {
            JobState::Missing
        } else {
            self.observe(g, Action::Restore, attempt, &idx).await?
        };
        match state {
            JobState::Missing => self.start_restore(g, &idx, attempt + 1, book).await,
            JobState::Running => Ok(Stage::Waiting(g.2.clone())),
            JobState::Finished(outcomes) => {
                take_read_backs(book, &idx, &outcomes);
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
        let attempt = attempts(book, &in_flight, |r| r.apply_attempts);
        match self.observe(g, Action::Apply, attempt, &in_flight).await? {
            JobState::Running => {
                return Ok(Some(Stage::Waiting(format!(
                    "{} (apply still running)",
                    g.2
                ))))
            }
            JobState::Finished(outcomes) => {
                take_apply(book, &in_flight, &outcomes);
            }
            // Gone or never created: its effect is unknown, so every changeable feature is
            // written back.
            JobState::Missing => mark(book, &in_flight, |r| r.apply_done = true),
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
        mark(book, idx, |r| r.restore_attempts = attempt);
        book.save().await?;
        let devices = devices(book, idx, DeviceRecord::restore_features);
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

/// The highest attempt count among the records (they share their Jobs).
fn attempts(book: &Book, idx: &[usize], of: impl Fn(&DeviceRecord) -> u32) -> u32 {
    idx.iter()
        .filter_map(|&i| book.records().get(i))
        .map(of)
        .max()
        .unwrap_or(0)
}

fn mark(book: &mut Book, idx: &[usize], f: impl Fn(&mut DeviceRecord)) {
    for &i in idx {
        if let Some(r) = book.stored.data.get_mut(i) {
            f(r);
        }
    }
}

/// Records that need no restore Job: without a state before there is nothing to restore to
/// (abandoned, said so); an apply whose own read-back shows nothing changed is restored.
fn settle_without_job(book: &mut Book, g: &Group) {
    let idx = indices(book.records(), g, |r| r.needs_restore());
    mark(book, &idx, |r| {
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
    book: &mut Book,
    idx: &[usize],
    outcomes: &std::collections::BTreeMap<String, Outcome>,
) {
    for &i in idx {
        let outcome = outcomes.get(&job::container_name(i));
        let Some(r) = book.stored.data.get_mut(i) else {
            continue;
        };
        match outcome {
            Some(Outcome { state: Some(s), .. }) => r.take_read_back(s.clone()),
            other => r.restore_error = Some(describe(other)),
        }
    }
}

fn devices(
    book: &Book,
    idx: &[usize],
    features: impl Fn(&DeviceRecord) -> std::collections::BTreeMap<String, bool>,
) -> Vec<Device> {
    idx.iter()
        .filter_map(|&i| {
            let r = book.records().get(i)?;
            Some((i, r.interface.clone(), features(r)))
        })
        .collect()
}

/// Copies an apply Job's outcome into its records; returns the errors.
fn take_apply(
    book: &mut Book,
    idx: &[usize],
    outcomes: &std::collections::BTreeMap<String, Outcome>,
) -> Vec<String> {
    let mut errors = vec![];
    for &i in idx {
        let outcome = outcomes.get(&job::container_name(i));
        let Some(r) = book.stored.data.get_mut(i) else {
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
