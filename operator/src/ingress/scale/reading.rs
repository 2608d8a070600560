//! Reading a route scale's sample: from the sample's creation log (`status.routeScaleLog`) and
//! the workers' first answers per hostname, each route's time from its creation to its first
//! 2xx, the sample's figures, and the step's result.
//!
//! Invariants: the log is hostile like all status: sized to the spec's count, its instants held
//! to the sample's time (a creation before the load or after its end, or an answer far after
//! the sample, is unknown, never a figure); a route created with no instant counts as not
//! answered; a log of another sample is refused.

use std::collections::BTreeMap;

use protocol::worker::FinalReport;

use crds::history::Better;
use crds::ingress::{IngressBenchmark, IngressBenchmarkSpec, RouteScaleLog, RouteScaleResult};

use super::terms::{scaled, ALL_ANSWERED_MS, ANSWERED, UNTIMED};
use crate::ingress::result;
use crate::policy::samples::{Figure, Slot};
use crate::run::Run;

type IngressRun<'a> = Run<'a, IngressBenchmark>;

/// One sample of a route scale, read from its log and the workers' answers.
#[derive(Debug, PartialEq)]
pub struct SampleReading {
    /// Routes asked for.
    pub count: usize,
    /// Routes that exist (created, timed or not).
    pub made: usize,
    /// Per route: its creation's instant, if known.
    pub created: Vec<Option<u64>>,
    /// Per route: from its creation to its first 2xx, µs, if it answered.
    pub times: Vec<Option<u64>>,
    /// When the last route first answered, if all did.
    pub all_answered_at: Option<u64>,
    /// The end of the sample (the workers' last instant).
    pub end_us: u64,
    /// Hostnames that answered before their route was created.
    pub early: usize,
}

impl SampleReading {
    fn first_created(&self) -> Option<u64> {
        self.created.iter().flatten().min().copied()
    }

    fn answered(&self) -> usize {
        self.times.iter().flatten().count()
    }

    /// From the first creation until every route answered; None when not all did.
    pub(super) fn all_answered_us(&self) -> Option<u64> {
        let first = self.first_created()?;
        Some(self.all_answered_at?.saturating_sub(first))
    }

    /// The sample figure `routesAllAnsweredMs`: the time until all answered, or, when not all
    /// did, [`NOT_ALL_ANSWERED_MS`], which breaks any limit a gate may set.
    pub(super) fn all_answered_figure_ms(&self) -> f64 {
        self.all_answered_us()
            .map_or(NOT_ALL_ANSWERED_MS, |us| us as f64 / 1000.0)
    }
}

/// `routesAllAnsweredMs` of a sample whose routes did not all answer: twice the largest limit
/// a gate may set (crds::gates::MAX_MS), so every `max` gate on it breaks.
pub const NOT_ALL_ANSWERED_MS: f64 = 2.0 * crds::gates::MAX_MS;

/// The sample's reading: Err when its log is missing or no route was created.
pub fn read_sample(
    spec: &IngressBenchmarkSpec,
    log: Option<&RouteScaleLog>,
    slot: Slot,
    reports: &BTreeMap<String, FinalReport>,
) -> std::result::Result<Option<SampleReading>, String> {
    let Some((_, route)) = scaled(spec, slot.measurement) else {
        return Ok(None);
    };
    let count = usize::try_from(route.count).unwrap_or(0);
    let log = log
        .filter(|l| l.step == slot.measurement && l.sample == slot.sample)
        .ok_or("the route scale's record of this sample is missing from status")?;
    let (answers, end_us) = result::merged_answers(reports, "--host-count")?;
    let made = made(log, count, u64::MAX);
    if made == 0 {
        return Err(log
            .refused
            .clone()
            .unwrap_or_else(|| "no route of the route scale was created in this sample".into()));
    }
    // The log is status, the answers a worker's: an instant outside the sample (before its
    // load began, after its end) is no one's measurement and is held as unknown.
    let start = log.load_start_unix_us.unwrap_or(0);
    let window = |at: &u64| (start..=end_us).contains(at) && *at != UNTIMED;
    let mut created: Vec<Option<u64>> = log
        .created_unix_us
        .iter()
        .take(count)
        .map(|c| c.filter(window))
        .collect();
    created.resize(count, None);
    let firsts: Vec<Option<u64>> = answers
        .first_ok_by_host
        .iter()
        .map(|f| f.filter(window))
        .collect();
    let mut reading = reading_of(created, &firsts, end_us);
    reading.made = made;
    Ok(Some(reading))
}

/// Routes of the sample that exist (created, timed or not) by `until_us`, at most `count`.
fn made(log: &RouteScaleLog, count: usize, until_us: u64) -> usize {
    let made = log.created_unix_us.iter().take(count).flatten();
    made.filter(|at| **at <= until_us).count()
}

/// Routes the sample in `slot` made by `until_us` (Unix µs), from its record; None without a
/// route scale or a record of that sample.
pub fn made_in_sample(
    spec: &IngressBenchmarkSpec,
    log: Option<&RouteScaleLog>,
    slot: Slot,
    until_us: u64,
) -> Option<usize> {
    let (_, route) = scaled(spec, slot.measurement)?;
    let log = log.filter(|l| l.step == slot.measurement && l.sample == slot.sample)?;
    Some(made(
        log,
        usize::try_from(route.count).unwrap_or(0),
        until_us,
    ))
}

/// Each route's time from its creation to its hostname's first 2xx (`firsts`, by index).
pub fn reading_of(created: Vec<Option<u64>>, firsts: &[Option<u64>], end_us: u64) -> SampleReading {
    let mut early = 0;
    let mut times = Vec::with_capacity(created.len());
    let mut all_answered_at = Some(0u64);
    for (i, c) in created.iter().enumerate() {
        let first = firsts.get(i).copied().flatten();
        let time = match (c, first) {
            (Some(c), Some(f)) if f >= *c => Some(f - c),
            (Some(_), Some(_)) => {
                early += 1;
                None
            }
            _ => None,
        };
        all_answered_at = match (all_answered_at, time, first) {
            (Some(last), Some(_), Some(f)) => Some(last.max(f)),
            _ => None,
        };
        times.push(time);
    }
    SampleReading {
        count: created.len(),
        made: created.iter().flatten().count(),
        created,
        times,
        all_answered_at,
        end_us,
        early,
    }
}

/// The sample's figures (statistics, gates, results, history): the share of its routes that
/// answered, and the time from its first creation until all did (or, when not all did, the
/// time they were given: a lower bound).
pub fn sample_figures(
    ib: &IngressBenchmark,
    slot: Slot,
    reports: &BTreeMap<String, FinalReport>,
) -> std::result::Result<Vec<Figure>, String> {
    let log = ib.status.as_ref().and_then(|s| s.route_scale_log.as_ref());
    let Some(r) = read_sample(&ib.spec, log, slot, reports)? else {
        return Ok(vec![]);
    };
    let share = r.answered() as f64 / r.count.max(1) as f64;
    let all_ms = r.all_answered_figure_ms();
    Ok(vec![
        Figure {
            name: ANSWERED.into(),
            unit: "ratio".into(),
            better: Better::Higher,
            value: share,
        },
        Figure {
            name: ALL_ANSWERED_MS.into(),
            unit: "ms".into(),
            better: Better::Lower,
            value: all_ms,
        },
    ])
}

/// The step's route-scale result with this sample's added (once per sample).
pub fn add_sample(
    before: Option<&RouteScaleResult>,
    sample: u32,
    r: &SampleReading,
) -> std::result::Result<RouteScaleResult, String> {
    let mut out = before.cloned().unwrap_or_default();
    if out.samples.contains(&sample) {
        return Ok(out);
    }
    let (histogram, figures) =
        result::record_times(&out.histogram, r.times.iter().flatten().copied())?;
    let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    let first_sample = out.samples.is_empty();
    out.samples.push(sample);
    out.routes = n(r.count);
    out.created = out.created.saturating_add(n(r.made));
    out.answered = out.answered.saturating_add(n(r.answered()));
    [out.p50_ms, out.p99_ms, out.max_ms] = figures.map_or([None; 3], |f| f.map(Some));
    let ms = |us: u64| us as f64 / 1000.0;
    // The longest over the samples, and only while every sample's routes all answered.
    let this = r.all_answered_us().map(ms);
    out.all_answered_ms = match (first_sample, out.all_answered_ms, this) {
        (true, _, this) => this,
        (false, Some(before), Some(this)) => Some(before.max(this)),
        _ => None,
    };
    let mut notes = vec![];
    let untimed = r.made.saturating_sub(r.created.iter().flatten().count());
    if untimed > 0 {
        notes.push(format!(
            "sample {sample}: {untimed} route(s) created with no record of when (counted as not answered)"
        ));
    }
    let unmade = r.count.saturating_sub(r.made);
    if unmade > 0 {
        notes.push(format!("sample {sample}: {unmade} route(s) not created"));
    }
    if r.early > 0 {
        notes.push(format!(
            "sample {sample}: {} hostname(s) answered before their route was created (another route matches them?)",
            r.early
        ));
    }
    if !notes.is_empty() {
        let mut note = out.note.take().map(|n| vec![n]).unwrap_or_default();
        note.extend(notes);
        out.note = Some(note.join("; ").chars().take(1000).collect());
    }
    out.histogram = histogram;
    Ok(out)
}

/// The sample's route-scale figures into the step's result (`before`: its result so far).
pub fn collect(
    run: &IngressRun<'_>,
    slot: Slot,
    reports: &BTreeMap<String, FinalReport>,
    before: Option<&RouteScaleResult>,
) -> std::result::Result<Option<RouteScaleResult>, String> {
    let log = run.status().route_scale_log.as_ref();
    let Some(r) = read_sample(&run.obj().spec, log, slot, reports)? else {
        return Ok(None);
    };
    add_sample(before, slot.sample, &r).map(Some)
}
