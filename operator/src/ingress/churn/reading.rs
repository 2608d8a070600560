//! Reading a sample's route changes: its change log in status checked, each change's
//! propagation read from the workers' answers, the sample's figures (shown share and p99 per
//! kind of change), and the step's route-change results.

use std::collections::BTreeMap;

use protocol::report::answers::{Answers, Sighting, MAX_SIGHTINGS};
use protocol::worker::FinalReport;

use crds::history::Better;
use crds::ingress::{
    IngressBenchmark, IngressBenchmarkSpec, Made, MadeChange, RouteChangeAction, RouteChangeLog,
    RouteChangeResult, StepResult,
};

use super::schedule::{count, micros};
use crate::ingress::{plan, result};
use crate::policy::samples::{Figure, Slot};
use crate::run::Run;

type IngressRun<'a> = Run<'a, IngressBenchmark>;

/// One sample's changes against what its clients saw: each change's propagation in µs (until
/// answers that show it began: 2xx of its backend, or for a deletion a 404 from the Gateway
/// itself), None for a change not shown before the next one (or `end_us`) and for an untimed
/// one. A change back to the backend that never stopped answering (the change before it was
/// not applied, or coalesced with it) shows nothing.
pub fn propagation(made: &[MadeChange], answers: &Answers, end_us: u64) -> Vec<Option<u64>> {
    made.iter()
        .enumerate()
        .map(|(i, change)| {
            if change.untimed {
                return None;
            }
            let until = made.get(i + 1).map_or(end_us, |next| next.at_unix_us);
            let shows = |s: &Sighting| match change.made {
                Made::Deleted => s.status == 404 && s.backend.is_none(),
                Made::Swapped | Made::Created => {
                    (200..300).contains(&s.status) && s.backend.as_deref() == Some(&change.backend)
                }
            };
            let first = answers.first_begun_at_or_after(change.at_unix_us, shows)?;
            (first < until).then(|| first - change.at_unix_us)
        })
        .collect()
}

/// Each change's time to show, for the sample's figures: the propagation of a shown change;
/// for one not shown, the time it was given (until the next change or `end_us`), so the figure
/// is at least what the data plane took and a change it never applied is not left out as if it
/// were fast. None for an untimed change (its instant is not known).
pub fn given(made: &[MadeChange], shown: &[Option<u64>], end_us: u64) -> Vec<Option<u64>> {
    made.iter()
        .zip(shown)
        .enumerate()
        .map(|(i, (change, shown))| {
            if change.untimed {
                return None;
            }
            let until = made.get(i + 1).map_or(end_us, |next| next.at_unix_us);
            Some(shown.unwrap_or_else(|| until.saturating_sub(change.at_unix_us)))
        })
        .collect()
}

/// The 99th percentile (nearest rank) of `values` in ms; None when empty.
pub(super) fn p99_ms(values: &[u64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = (v.len() * 99).div_ceil(100).max(1);
    v.get(rank - 1).map(|us| *us as f64 / 1000.0)
}

/// The figure names of one kind of change: (shown share, p99).
fn figure_names(made: Made) -> (&'static str, &'static str) {
    match made {
        Made::Swapped => ("routeChangesShown", "routeChangeP99Ms"),
        Made::Created => ("routeCreationsShown", "routeCreationP99Ms"),
        Made::Deleted => ("routeDeletionsShown", "routeDeletionP99Ms"),
    }
}

/// Every route-change figure a sample can have (the gates' list is checked against it).
#[cfg(test)]
pub fn all_figure_names() -> impl Iterator<Item = &'static str> {
    [Made::Swapped, Made::Created, Made::Deleted]
        .into_iter()
        .flat_map(|m| {
            let (shown, p99) = figure_names(m);
            [shown, p99]
        })
}

/// The kinds of change an action makes.
fn kinds(action: RouteChangeAction) -> &'static [Made] {
    match action {
        RouteChangeAction::SwapBackend => &[Made::Swapped],
        RouteChangeAction::DeleteAndCreate => &[Made::Deleted, Made::Created],
    }
}

/// What one sample's changes came to: its log checked, and each change's propagation read
/// from the workers' answers.
#[derive(Debug)]
pub struct SampleReading {
    action: RouteChangeAction,
    changes: Vec<MadeChange>,
    shown: Vec<Option<u64>>,
    /// The end of the sample: the workers' last instant, or the changes' window on the
    /// operator's clock if that ends later.
    end_us: u64,
    /// A backend itself answered 4xx (not only the Gateway, naming no backend).
    pub backend_4xx: bool,
}

/// The log of `slot` in status, checked: Err when it is not there, empty, not in the order the
/// operator writes it, or lacks a kind of change the action makes (the schedule was missed: an
/// operator that was not running at its time).
pub fn checked_log(
    log: Option<&RouteChangeLog>,
    slot: Slot,
    action: RouteChangeAction,
) -> std::result::Result<(&[MadeChange], u64), String> {
    let log = log
        .filter(|l| l.step == slot.measurement && l.sample == slot.sample)
        .ok_or("no route change of this sample is in status (the operator was not running when they were due?)")?;
    let anchor = log
        .anchor_unix_us
        .ok_or("the sample's route changes have no start")?;
    let ordered = log
        .changes
        .iter()
        .try_fold(anchor, |last, c| {
            (c.at_unix_us >= last).then_some(c.at_unix_us.saturating_add(1))
        })
        .is_some();
    if !ordered {
        return Err(
            "the route change log in status is not the operator's: its instants are out of order"
                .into(),
        );
    }
    for kind in kinds(action) {
        if !log.changes.iter().any(|c| c.made == *kind) {
            return Err(format!(
                "this sample made no route change of kind {kind:?} (the operator was not running when it was due?)"
            ));
        }
    }
    Ok((&log.changes, anchor))
}

/// Reads the sample `slot`: None without routeChanges; Err (the run fails BadReport) when its
/// log or its workers' answers cannot say what the changes did.
pub fn read_sample(
    spec: &IngressBenchmarkSpec,
    log: Option<&RouteChangeLog>,
    slot: Slot,
    reports: &BTreeMap<String, FinalReport>,
) -> std::result::Result<Option<SampleReading>, String> {
    let Some(changes) = &spec.route_changes else {
        return Ok(None);
    };
    let (made, anchor) = checked_log(log, slot, changes.action)?;
    let (answers, end_us) = answers(reports)?;
    let first = plan::controller(spec, slot.measurement)
        .and_then(|c| c.route.as_ref())
        .map(|r| r.backend.name.as_str());
    if let Some(first) = first {
        if !answers
            .sightings
            .iter()
            .any(|s| s.backend.as_deref() == Some(first))
        {
            return Err(format!(
                "no answer came from {first}, the route's backend, by name: the backends must answer with X-Netbench-Backend: <their Service's name> (netbench-loadgen http-server --name)"
            ));
        }
    }
    let shown = propagation(made, &answers, end_us);
    let every_us = micros(changes.every.as_std());
    let window_end = anchor.saturating_add(count(spec).saturating_mul(every_us));
    let backend_4xx = answers
        .sightings
        .iter()
        .any(|s| (400..500).contains(&s.status) && s.backend.is_some());
    Ok(Some(SampleReading {
        action: changes.action,
        changes: made.to_vec(),
        shown,
        end_us: end_us.max(window_end),
        backend_4xx,
    }))
}

/// The sample's route-change figures (statistics, gates, results, history), per kind of change
/// the action makes: the share of its changes shown (0 to 1), and the 99th percentile of their
/// time to show, a change not shown counted at the time it was given (see [`given`]; untimed
/// changes count as not shown and are left out of the percentile). Err (BadReport) when they
/// cannot be read, so that every sample has the same figures.
pub fn sample_figures(
    ib: &IngressBenchmark,
    slot: Slot,
    reports: &BTreeMap<String, FinalReport>,
) -> std::result::Result<Vec<Figure>, String> {
    let log = ib.status.as_ref().and_then(|s| s.route_change_log.as_ref());
    let Some(r) = read_sample(&ib.spec, log, slot, reports)? else {
        return Ok(vec![]);
    };
    let given = given(&r.changes, &r.shown, r.end_us);
    let mut figures = vec![];
    for &kind in kinds(r.action) {
        let mine: Vec<usize> = (0..r.changes.len())
            .filter(|&i| r.changes.get(i).is_some_and(|c| c.made == kind))
            .collect();
        let times: Vec<u64> = mine
            .iter()
            .filter_map(|&i| given.get(i).copied().flatten())
            .collect();
        let seen = mine
            .iter()
            .filter(|&&i| r.shown.get(i).is_some_and(Option::is_some))
            .count();
        let p99 = p99_ms(&times).ok_or_else(|| {
            format!("every route change of kind {kind:?} of this sample is untimed")
        })?;
        let share = seen as f64 / mine.len().max(1) as f64;
        let (shown_name, p99_name) = figure_names(kind);
        figures.push(Figure {
            name: shown_name.into(),
            unit: "ratio".into(),
            better: Better::Higher,
            value: share,
        });
        figures.push(Figure {
            name: p99_name.into(),
            unit: "ms".into(),
            better: Better::Lower,
            value: p99,
        });
    }
    Ok(figures)
}

/// The answers of every worker of the sample, merged; Err when the workers recorded none or
/// no answer named its backend (the figures would mean nothing).
pub fn answers(
    reports: &BTreeMap<String, FinalReport>,
) -> std::result::Result<(Answers, u64), String> {
    let (all, end_us) = result::merged_answers(reports, "--record-answers")?;
    if !all.complete {
        return Err(format!(
            "the answers changed too often to record ({MAX_SIGHTINGS} sightings): fewer changes or connections"
        ));
    }
    if all.sightings.iter().all(|s| s.backend.is_none()) {
        return Err("no answer named its backend (header X-Netbench-Backend): routeChanges needs backends that name themselves, e.g. netbench-loadgen http-server --name <Service> (deploy/examples/target.yaml)".into());
    }
    Ok((all, end_us))
}

/// The step's route-change figures with this sample's added (once per sample).
pub fn add_sample(
    before: Option<&RouteChangeResult>,
    sample: u32,
    shown: &[Option<u64>],
    untimed: u32,
) -> std::result::Result<RouteChangeResult, String> {
    let mut r = before.cloned().unwrap_or_default();
    if r.samples.contains(&sample) {
        return Ok(r);
    }
    let (histogram, figures) = result::record_times(&r.histogram, shown.iter().flatten().copied())?;
    let made = u32::try_from(shown.len()).unwrap_or(u32::MAX);
    let seen = u32::try_from(shown.iter().flatten().count()).unwrap_or(u32::MAX);
    r.samples.push(sample);
    r.changes = r.changes.saturating_add(made);
    r.shown = r.shown.saturating_add(seen);
    r.untimed = r.untimed.saturating_add(untimed);
    // From the histogram alone (a percentile in status that it does not hold is not kept).
    [r.p50_ms, r.p99_ms, r.max_ms] = figures.map_or([None; 3], |f| f.map(Some));
    r.histogram = histogram;
    Ok(r)
}

/// One step's route-change figures: swaps, or creations and deletions.
#[derive(Debug, Default, PartialEq)]
pub struct Figures {
    pub swaps: Option<RouteChangeResult>,
    pub creations: Option<RouteChangeResult>,
    pub deletions: Option<RouteChangeResult>,
    /// A backend itself answered 4xx in this sample (not only the Gateway while the route
    /// was gone).
    pub backend_4xx: bool,
}

impl Figures {
    /// Into the step's result.
    pub fn fill(self, result: &mut StepResult) {
        result.route_changes = self.swaps;
        result.route_creations = self.creations;
        result.route_deletions = self.deletions;
    }
}

/// The figures of the changes of kind `made` with this sample's added.
pub(super) fn figures_of(
    made: Made,
    changes: &[MadeChange],
    shown: &[Option<u64>],
    before: Option<&RouteChangeResult>,
    sample: u32,
) -> std::result::Result<Option<RouteChangeResult>, String> {
    let mine: Vec<_> = changes
        .iter()
        .zip(shown)
        .filter(|(c, _)| c.made == made)
        .collect();
    let times: Vec<Option<u64>> = mine.iter().map(|(_, s)| **s).collect();
    let untimed = mine.iter().filter(|(c, _)| c.untimed).count();
    let untimed = u32::try_from(untimed).unwrap_or(u32::MAX);
    add_sample(before, sample, &times, untimed).map(Some)
}

/// The sample's figures into `step`'s result (`before`: the step's result so far): Err (the
/// run fails BadReport) when they cannot be read.
pub fn collect(
    run: &IngressRun<'_>,
    slot: Slot,
    reports: &BTreeMap<String, FinalReport>,
    before: Option<&StepResult>,
) -> std::result::Result<Figures, String> {
    let log = run.status().route_change_log.as_ref();
    let Some(r) = read_sample(&run.obj().spec, log, slot, reports)? else {
        return Ok(Figures::default());
    };
    let (changes, shown, sample) = (&r.changes, &r.shown, slot.sample);
    let before_of = |f: fn(&StepResult) -> Option<&RouteChangeResult>| before.and_then(f);
    Ok(match r.action {
        RouteChangeAction::SwapBackend => Figures {
            swaps: figures_of(
                Made::Swapped,
                changes,
                shown,
                before_of(|s| s.route_changes.as_ref()),
                sample,
            )?,
            backend_4xx: r.backend_4xx,
            ..Figures::default()
        },
        RouteChangeAction::DeleteAndCreate => Figures {
            swaps: None,
            creations: figures_of(
                Made::Created,
                changes,
                shown,
                before_of(|s| s.route_creations.as_ref()),
                sample,
            )?,
            deletions: figures_of(
                Made::Deleted,
                changes,
                shown,
                before_of(|s| s.route_deletions.as_ref()),
                sample,
            )?,
            backend_4xx: r.backend_4xx,
        },
    })
}
