//! `netbench compare --history KIND/NAME`: instead of B against A, every figure of a
//! benchmark's history with the change points found in it: the runs at which the figure's
//! distribution shifted, with the size and direction of the shift. The method is
//! `crds::changepoint`, as the operator's NewRegime condition and `netbench report` use it.
//!
//! The history is what the operator judges: the benchmark's succeeded results of one spec (the
//! newest result's, unless every spec is asked for), oldest first. Everything in it is
//! untrusted: lists are bounded, non-finite means are left out of a series, nothing is indexed
//! or unwrapped.

use anyhow::{bail, Result};
use crds::changepoint::{self, Options};
use crds::history::Better;
use crds::Phase;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Serialize;

use crate::kube_client::BenchRef;
use crate::shown;
use crate::source::Loaded;
use crate::text;

/// Fewest results a change point can be found in: three on each side.
pub const MIN_RESULTS: usize = 6;
/// Most results judged (a benchmark keeps at most 100).
pub const MAX_RUNS: usize = crds::changepoint::MAX_SERIES;
/// Measurements and figures looked at per result (the schema's limits).
const MAX_MEASUREMENTS: usize = 64;
const MAX_METRICS: usize = 32;

/// One result of the history judged.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// Its position, oldest first, from 1.
    pub run: usize,
    pub result: String,
    pub run_id: String,
    /// When it started (else when the result was created).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date: Option<Time>,
}

/// A change point of one figure.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// The first run of the new regime.
    #[serde(flatten)]
    pub at: Run,
    /// Runs since then (0: the newest run).
    pub runs_ago: usize,
    /// Means of the figure before and from the change point, within the segment it was found
    /// in, in the figure's stored unit.
    pub before: f64,
    pub after: f64,
    /// (after - before) / |before| in percent.
    pub change_percent: f64,
    /// "better" or "worse", per the figure's `better`.
    pub direction: &'static str,
    /// The t-test's p-value, corrected for the splits tried.
    pub p_value: f64,
}

/// One figure of one step or case over the history.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Figure {
    pub measurement: String,
    pub figure: String,
    pub unit: String,
    pub better: Better,
    /// Results with a finite mean of it (the series searched).
    pub results: usize,
    pub change_points: Vec<Change>,
}

/// The change-point view of a history.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct History {
    pub benchmark: String,
    /// The spec judged (absent with every spec).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_hash: Option<String>,
    /// The results judged, oldest first.
    pub runs: Vec<Run>,
    pub figures: Vec<Figure>,
    /// Results left out, too short a history, and other caveats.
    pub notes: Vec<String>,
}

impl History {
    pub fn change_points(&self) -> impl Iterator<Item = (&Figure, &Change)> {
        self.figures
            .iter()
            .flat_map(|f| f.change_points.iter().map(move |c| (f, c)))
    }
}

/// The results of `bench` among `results` (of namespace `namespace` when given); all of them
/// must be of one namespace.
pub fn select<'a>(
    results: &'a [Loaded],
    bench: &BenchRef,
    namespace: Option<&str>,
) -> Result<Vec<&'a Loaded>> {
    let ours: Vec<&Loaded> = results
        .iter()
        .filter(|r| {
            let b = &r.spec.benchmark;
            b.kind == bench.kind.kind_name()
                && b.name == bench.name
                && namespace.is_none_or(|n| b.namespace == n)
        })
        .collect();
    let Some(first) = ours.first() else {
        bail!(
            "no result of {} {}{} among the {} read",
            bench.kind.kind_name(),
            namespace.map_or_else(String::new, |n| format!("{}/", text::label(n))),
            text::label(&bench.name),
            results.len()
        );
    };
    let ns = &first.spec.benchmark.namespace;
    if let Some(other) = ours.iter().find(|r| &r.spec.benchmark.namespace != ns) {
        bail!(
            "results of {} {} in namespaces {} and {}: choose one with -n",
            bench.kind.kind_name(),
            text::label(&bench.name),
            text::label(ns),
            text::label(&other.spec.benchmark.namespace)
        );
    }
    Ok(ours)
}

/// Judges the history of one benchmark (pure). `results` are its results in any order;
/// `runs` is the most results judged (the newest); with `all_specs` results of every spec
/// count, otherwise only the newest result's spec.
pub fn judge(results: &[&Loaded], runs: usize, all_specs: bool) -> History {
    let mut notes = vec![];
    // One entry per result (a result named twice, e.g. in two files, counts once).
    let mut unique: Vec<&Loaded> = vec![];
    for r in results.iter().copied() {
        if !unique
            .iter()
            .any(|u| u.name == r.name && u.spec.run_id == r.spec.run_id)
        {
            unique.push(r);
        }
    }
    unique.sort_by(|a, b| a.when().cmp(&b.when()).then_with(|| a.name.cmp(&b.name)));
    let failed = unique.len();
    unique.retain(|r| r.spec.phase == Phase::Succeeded);
    let failed = failed.saturating_sub(unique.len());
    if failed > 0 {
        notes.push(format!(
            "{failed} result(s) of runs that did not succeed left out"
        ));
    }
    let spec_hash = (!all_specs)
        .then(|| unique.last().map(|r| r.spec.spec_hash.clone()))
        .flatten();
    if let Some(hash) = &spec_hash {
        let before = unique.len();
        unique.retain(|r| &r.spec.spec_hash == hash);
        let other = before.saturating_sub(unique.len());
        if other > 0 {
            notes.push(format!(
                "{other} result(s) of other specs left out (--all-specs judges them too)"
            ));
        }
    }
    let runs = runs.min(MAX_RUNS);
    let start = unique.len().saturating_sub(runs);
    if start > 0 {
        notes.push(format!(
            "{start} older result(s) left out: at most {runs} judged"
        ));
    }
    let history = unique.get(start..).unwrap_or_default();
    if history.len() < MIN_RESULTS {
        notes.push(format!(
            "{} result(s) judged; a change point needs at least {MIN_RESULTS} (3 on each side)",
            history.len()
        ));
    }
    let run_of = |i: usize| -> Option<Run> {
        let r = history.get(i)?;
        Some(Run {
            run: i.saturating_add(1),
            result: r.display_name().to_string(),
            run_id: r.spec.run_id.clone(),
            date: r.when().cloned(),
        })
    };
    History {
        benchmark: history.last().map_or_else(String::new, |r| {
            let b = &r.spec.benchmark;
            format!("{} {}/{}", b.kind, b.namespace, b.name)
        }),
        spec_hash,
        runs: (0..history.len()).filter_map(run_of).collect(),
        figures: figures(history, &run_of),
        notes,
    }
}

/// Every figure of every step or case of the newest result, over the history.
fn figures(history: &[&Loaded], run_of: &dyn Fn(usize) -> Option<Run>) -> Vec<Figure> {
    let Some(newest) = history.last() else {
        return vec![];
    };
    let last = history.len().saturating_sub(1);
    let mut out: Vec<Figure> = vec![];
    for m in newest.spec.measurements.iter().take(MAX_MEASUREMENTS) {
        for f in m.metrics.iter().take(MAX_METRICS) {
            if out
                .iter()
                .any(|o| o.measurement == m.name && o.figure == f.name)
            {
                continue;
            }
            let series: Vec<(usize, f64)> = history
                .iter()
                .enumerate()
                .filter_map(|(i, r)| Some((i, mean_of(r, &m.name, &f.name)?)))
                .collect();
            let change_points = changepoint::find_at(&series, Options::default())
                .into_iter()
                .filter_map(|(i, cp)| {
                    Some(Change {
                        at: run_of(i)?,
                        runs_ago: last.saturating_sub(i),
                        direction: if cp.worse(f.better) {
                            "worse"
                        } else {
                            "better"
                        },
                        before: cp.before,
                        after: cp.after,
                        change_percent: cp.change_percent,
                        p_value: cp.p_value,
                    })
                })
                .collect();
            out.push(Figure {
                measurement: m.name.clone(),
                figure: f.name.clone(),
                unit: f.unit.clone(),
                better: f.better,
                results: series.iter().filter(|p| p.1.is_finite()).count(),
                change_points,
            });
        }
    }
    out
}

/// The mean of `figure` of `measurement` in one result.
fn mean_of(r: &Loaded, measurement: &str, figure: &str) -> Option<f64> {
    r.spec
        .measurements
        .iter()
        .take(MAX_MEASUREMENTS)
        .find(|m| m.name == measurement)?
        .metrics
        .iter()
        .take(MAX_METRICS)
        .find(|f| f.name == figure)
        .map(|f| f.mean)
}

/// The change points as an aligned plain-text table.
pub fn to_text(h: &History) -> String {
    let first = h.runs.first().map(|r| text::time(r.date.as_ref()));
    let last = h.runs.last().map(|r| text::time(r.date.as_ref()));
    let mut out = format!(
        "history: {}, {} succeeded result(s){}{}, oldest first\n",
        text::label(&h.benchmark),
        h.runs.len(),
        h.spec_hash.as_ref().map_or_else(
            || " of every spec".to_string(),
            |s| format!(" of spec {}", text::label(s.get(..12).unwrap_or(s)))
        ),
        match (first, last) {
            (Some(a), Some(b)) => format!(" ({a} .. {b})"),
            _ => String::new(),
        },
    );
    out.push_str(
        "change points: a two-sample t-test over the history (crds::changepoint), at most 1 % \
         false alarms per segment searched, at least 3 results on each side\n\n",
    );
    let mut rows: Vec<[String; 8]> = vec![[
        "STEP/CASE".into(),
        "FIGURE".into(),
        "RUN".into(),
        "RESULT".into(),
        "STARTED".into(),
        "BEFORE -> AFTER".into(),
        "CHANGE".into(),
        "DIRECTION (p)".into(),
    ]];
    for (f, c) in h.change_points() {
        let (factor, unit, d) = shown::unit(&f.unit);
        rows.push([
            text::label(&f.measurement),
            format!("{} ({})", text::label(&f.figure), text::label(unit)),
            format!("{} ({} ago)", c.at.run, c.runs_ago),
            text::label(&c.at.result),
            text::time(c.at.date.as_ref()),
            format!(
                "{} -> {}",
                text::num(c.before * factor, d),
                text::num(c.after * factor, d)
            ),
            text::signed_percent(c.change_percent),
            format!("{} ({})", c.direction, text::num(c.p_value, 4)),
        ]);
    }
    let found = rows.len().saturating_sub(1);
    if found > 0 {
        out.push_str(&text::aligned(&rows));
        out.push('\n');
    }
    for n in &h.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    let worse = h
        .change_points()
        .filter(|(_, c)| c.direction == "worse")
        .count();
    let judged = h.figures.len();
    out.push_str(&match found {
        0 => format!(
            "no change point in {judged} figure(s): no shift stands out of the run-to-run noise\n"
        ),
        n => format!(
            "{n} change point(s) in {} of {judged} figure(s), {worse} for the worse\n",
            h.figures
                .iter()
                .filter(|f| !f.change_points.is_empty())
                .count()
        ),
    });
    out
}
