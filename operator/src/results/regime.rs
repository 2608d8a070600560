//! The NewRegime condition: whether the newest runs of a benchmark start a new regime, judged
//! over its history (the BenchmarkResults the operator wrote for it, succeeded, same spec) with
//! `crds::changepoint`. Pure: the caller lists the results; nothing here reads status.
//!
//! Per step or case, the main figure (the first figure of the newest result's measurement) is
//! read from every result of the history, oldest first, and its change points found. Each side
//! of a change point needs [`MIN_SEGMENT`] results, so a shift at the newest run can be found
//! only once that many runs were made in the new regime: the newest change point is reported
//! with how many runs ago it began, and the condition is True while that is fewer than
//! [`RECENT_RUNS`] (found late by a run or two, it still counts).

use crds::changepoint::{self, Options, MAX_SERIES};
use crds::history::Better;
use crds::result::BenchmarkResultSpec;
use kube::runtime::events::EventType;

use crate::base::events::PendingEvent;

/// Fewest results on each side of a change point.
pub const MIN_SEGMENT: usize = 3;
/// A change point this many runs back or fewer (0: at the newest run) counts as a new regime.
pub const RECENT_RUNS: usize = 2 * MIN_SEGMENT;
/// Measurements and figures looked at per result (the schema's limits; a stored object older
/// than the schema may hold more).
const MAX_MEASUREMENTS: usize = 64;
const MAX_METRICS: usize = 32;
/// Longest condition message or Event note.
const MAX_MESSAGE: usize = 1000;

fn options() -> Options {
    Options {
        min_segment: MIN_SEGMENT,
        ..Options::default()
    }
}

/// One result of the history.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    /// The BenchmarkResult's name.
    pub name: &'a str,
    pub spec: &'a BenchmarkResultSpec,
}

/// Whether a shift is for the better or the worse, per the figure's `better`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Better,
    Worse,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Better => "better",
            Direction::Worse => "worse",
        }
    }
}

/// The newest change point of one step's or case's main figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Shift {
    pub measurement: String,
    pub figure: String,
    pub unit: String,
    pub direction: Direction,
    /// Means of the figure before and from the change point (within the segment it was found
    /// in), and the change in percent of `before`.
    pub before: f64,
    pub after: f64,
    pub change_percent: f64,
    pub p_value: f64,
    /// The result at which the new regime began.
    pub started_at: String,
    /// When that result's run started (its `startTime`), if it records one.
    pub started_time: Option<jiff::Timestamp>,
    /// Runs since then: 0 when it began at the newest result.
    pub runs_ago: usize,
    /// Found only now: the history without the newest result had no change point of the same
    /// direction within one run of it.
    pub new: bool,
}

impl Shift {
    /// "step 0 rps worse -12.0% (10000.00 -> 8800.00 req/s) since web-x-r7 (2 runs ago)"
    fn describe(&self) -> String {
        let ago = match self.runs_ago {
            0 => "the newest run".to_string(),
            1 => "1 run ago".to_string(),
            n => format!("{n} runs ago"),
        };
        format!(
            "{} {} {} {:+.1}% ({:.2} -> {:.2} {}) since {} ({ago}; p = {:.4})",
            self.measurement,
            self.figure,
            self.direction.as_str(),
            self.change_percent,
            self.before,
            self.after,
            self.unit,
            self.started_at,
            self.p_value,
        )
    }
}

/// What the history says about the newest run.
#[derive(Clone, Debug, PartialEq)]
pub struct Regime {
    /// Results judged (at most MAX_SERIES).
    pub results: usize,
    /// The newest change point of each step's or case's main figure that has one.
    pub shifts: Vec<Shift>,
}

impl Regime {
    /// The shifts that began within the last [`RECENT_RUNS`] runs.
    pub fn recent(&self) -> impl Iterator<Item = &Shift> {
        self.shifts.iter().filter(|s| s.runs_ago < RECENT_RUNS)
    }

    /// The NewRegime condition: (status, reason, message).
    pub fn condition(&self) -> (&'static str, &'static str, String) {
        let needed = 2 * MIN_SEGMENT;
        if self.results < needed {
            let m = format!(
                "{} succeeded result(s) of this spec; change points need at least {needed}",
                self.results
            );
            return ("Unknown", "TooFewResults", m);
        }
        let recent: Vec<String> = self.recent().map(Shift::describe).collect();
        if !recent.is_empty() {
            let m = clip(&format!("new regime: {}", recent.join("; ")));
            return ("True", "NewRegime", m);
        }
        let window = RECENT_RUNS.min(self.results);
        let mut m = format!(
            "no change in the last {window} runs ({} results of this spec judged)",
            self.results
        );
        if let Some(older) = self.shifts.iter().min_by_key(|s| s.runs_ago) {
            m.push_str(&format!("; the newest change point: {}", older.describe()));
        }
        ("False", "NoRecentChange", clip(&m))
    }

    /// The Event of the recent shifts found only now (Warning when one is worse); None when
    /// there are none.
    pub fn event(&self) -> Option<PendingEvent> {
        let fresh: Vec<&Shift> = self.recent().filter(|s| s.new).collect();
        if fresh.is_empty() {
            return None;
        }
        let worse = fresh.iter().any(|s| s.direction == Direction::Worse);
        let kind = if worse {
            EventType::Warning
        } else {
            EventType::Normal
        };
        let text: Vec<String> = fresh.iter().map(|s| s.describe()).collect();
        let note = clip(&format!("new regime: {}", text.join("; ")));
        Some((kind, "NewRegime".into(), note))
    }
}

fn clip(text: &str) -> String {
    crate::base::text::clip(text, MAX_MESSAGE)
}

/// Judges `history` (oldest first; its last entry is the newest run). Only the newest
/// MAX_SERIES entries are read; non-finite means are left out of a series.
pub fn judge(history: &[Entry<'_>]) -> Regime {
    let start = history.len().saturating_sub(MAX_SERIES);
    let history = history.get(start..).unwrap_or_default();
    let mut shifts = vec![];
    let mut seen: Vec<&str> = vec![];
    if let Some(newest) = history.last() {
        for m in newest.spec.measurements.iter().take(MAX_MEASUREMENTS) {
            let Some(main) = m.metrics.first() else {
                continue;
            };
            if seen.contains(&m.name.as_str()) {
                continue;
            }
            seen.push(&m.name);
            if let Some(s) = newest_shift(history, &m.name, &main.name, &main.unit, main.better) {
                shifts.push(s);
            }
        }
    }
    Regime {
        results: history.len(),
        shifts,
    }
}

/// The newest change point of one figure of one measurement, None without one (or when the
/// newest result has no finite value of it).
fn newest_shift(
    history: &[Entry<'_>],
    measurement: &str,
    figure: &str,
    unit: &str,
    better: Better,
) -> Option<Shift> {
    // (position in the history, mean), oldest first, finite means only.
    let series: Vec<(usize, f64)> = history
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some((i, mean_of(e.spec, measurement, figure)?)))
        .collect();
    let last = history.len().checked_sub(1)?;
    if series.last().map(|p| p.0) != Some(last) {
        return None;
    }
    let values: Vec<f64> = series.iter().map(|p| p.1).collect();
    let direction = |before: f64, after: f64| {
        let worse = match better {
            Better::Higher => after < before,
            Better::Lower => after > before,
        };
        if worse {
            Direction::Worse
        } else {
            Direction::Better
        }
    };
    let cp = changepoint::find(&values, options()).pop()?;
    let at = series.get(cp.index)?.0;
    let dir = direction(cp.before, cp.after);
    // The same search without the newest result: was this shift there already?
    let earlier = values
        .get(..values.len().saturating_sub(1))
        .unwrap_or_default();
    let known = changepoint::find(earlier, options()).iter().any(|old| {
        series
            .get(old.index)
            .is_some_and(|p| p.0.abs_diff(at) <= 1 && direction(old.before, old.after) == dir)
    });
    Some(Shift {
        measurement: measurement.to_string(),
        figure: figure.to_string(),
        unit: unit.to_string(),
        direction: dir,
        before: cp.before,
        after: cp.after,
        change_percent: cp.change_percent,
        p_value: cp.p_value,
        started_at: history
            .get(at)
            .map_or_else(String::new, |e| e.name.to_string()),
        started_time: history
            .get(at)
            .and_then(|e| e.spec.start_time.as_ref())
            .map(|t| t.0),
        runs_ago: last.saturating_sub(at),
        new: !known,
    })
}

/// The finite mean of `figure` of `measurement` in one result.
fn mean_of(spec: &BenchmarkResultSpec, measurement: &str, figure: &str) -> Option<f64> {
    let m = spec
        .measurements
        .iter()
        .take(MAX_MEASUREMENTS)
        .find(|m| m.name == measurement)?;
    let f = m
        .metrics
        .iter()
        .take(MAX_METRICS)
        .find(|f| f.name == figure)?;
    f.mean.is_finite().then_some(f.mean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::result::{Measurement, MetricStats};

    fn figure(name: &str, unit: &str, better: Better, mean: f64) -> MetricStats {
        MetricStats {
            name: name.into(),
            unit: unit.into(),
            better,
            values: vec![mean],
            mean,
            stddev: 0.0,
            ci95: 0.0,
        }
    }

    /// A result with one step: rps (main figure) and p99Ms.
    fn result(rps: f64) -> BenchmarkResultSpec {
        results_of(&[("step 0", rps)])
    }

    fn results_of(steps: &[(&str, f64)]) -> BenchmarkResultSpec {
        let measurements = steps
            .iter()
            .enumerate()
            .map(|(i, (name, rps))| Measurement {
                index: i as u32,
                name: (*name).into(),
                metrics: vec![
                    figure("rps", "req/s", Better::Higher, *rps),
                    figure("p99Ms", "ms", Better::Lower, 1.0),
                ],
                ..Default::default()
            })
            .collect();
        crate::testing::results::succeeded("", measurements)
    }

    /// Deterministic noise in [-1, 1] (xorshift).
    fn noise(seed: u64, n: usize) -> Vec<f64> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            })
            .collect()
    }

    fn judge_means(means: &[f64]) -> Regime {
        let specs: Vec<BenchmarkResultSpec> = means.iter().map(|&m| result(m)).collect();
        let names: Vec<String> = (1..=specs.len()).map(|i| format!("web-r{i}")).collect();
        let entries: Vec<Entry<'_>> = specs
            .iter()
            .zip(&names)
            .map(|(spec, name)| Entry { name, spec })
            .collect();
        judge(&entries)
    }

    #[test]
    fn a_step_at_the_newest_runs_sets_new_regime_with_size_direction_and_run() {
        // 8 runs at 10 000 req/s (±1 %), then 3 at 8 800 (-12 %).
        let mut means: Vec<f64> = noise(1, 8).iter().map(|n| 10_000.0 + 100.0 * n).collect();
        means.extend(noise(2, 3).iter().map(|n| 8_800.0 + 100.0 * n));
        let r = judge_means(&means);
        let [s] = r.shifts.as_slice() else {
            panic!("{r:?}")
        };
        assert_eq!(
            (s.measurement.as_str(), s.figure.as_str()),
            ("step 0", "rps")
        );
        assert_eq!(s.direction, Direction::Worse);
        assert!((s.change_percent + 12.0).abs() < 2.0, "{s:?}");
        assert_eq!((s.started_at.as_str(), s.runs_ago), ("web-r9", 2));
        assert!(s.new, "the newest run revealed it");
        let (status, reason, message) = r.condition();
        assert_eq!((status, reason), ("True", "NewRegime"));
        assert!(
            message.contains("step 0 rps worse -1") && message.contains("since web-r9 (2 runs ago"),
            "{message}"
        );
        let (kind, reason, note) = r.event().expect("an Event for a new shift");
        assert_eq!((kind, reason.as_str()), (EventType::Warning, "NewRegime"));
        assert!(note.contains("worse"), "{note}");
    }

    #[test]
    fn a_shift_carries_the_start_time_of_the_run_that_began_it() {
        let mut specs: Vec<BenchmarkResultSpec> = [100.0, 101.0, 99.0, 100.0, 50.0, 51.0, 49.0]
            .iter()
            .map(|&m| result(m))
            .collect();
        for (i, s) in specs.iter_mut().enumerate() {
            // Run i started i days after 2025-11-15 02:00 UTC; run 2 records no start.
            let t = 1_763_172_000 + 86_400 * i as i64;
            s.start_time = (i != 2).then(|| {
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    jiff::Timestamp::from_second(t).unwrap(),
                )
            });
        }
        let entries: Vec<Entry<'_>> = specs.iter().map(|spec| Entry { name: "r", spec }).collect();
        let r = judge(&entries);
        let [s] = r.shifts.as_slice() else {
            panic!("{r:?}")
        };
        assert_eq!(s.runs_ago, 2);
        assert_eq!(
            s.started_time.map(|t| t.as_second()),
            Some(1_763_172_000 + 4 * 86_400)
        );
        specs[4].start_time = None;
        let entries: Vec<Entry<'_>> = specs.iter().map(|spec| Entry { name: "r", spec }).collect();
        assert_eq!(judge(&entries).shifts[0].started_time, None);
    }

    #[test]
    fn a_step_for_the_better_is_a_normal_event_and_lower_is_better_is_respected() {
        let mut means = vec![1000.0, 1001.0, 999.0, 1000.5, 999.5, 1000.0];
        means.extend([1200.0, 1201.0, 1199.0]);
        let r = judge_means(&means);
        let (kind, _, note) = r.event().expect("an Event");
        assert_eq!(kind, EventType::Normal);
        assert!(note.contains("better +20.0%"), "{note}");

        // Latency as the main figure: higher is worse.
        let specs: Vec<BenchmarkResultSpec> = means
            .iter()
            .map(|&m| {
                let mut s = result(m);
                s.measurements[0].metrics[0] = figure("p99Ms", "ms", Better::Lower, m);
                s
            })
            .collect();
        let entries: Vec<Entry<'_>> = specs.iter().map(|spec| Entry { name: "r", spec }).collect();
        let r = judge(&entries);
        assert_eq!(r.shifts[0].direction, Direction::Worse);
        assert_eq!(r.event().map(|e| e.0), Some(EventType::Warning));
    }

    #[test]
    fn noise_alone_is_false_with_the_window() {
        let mut alarms = 0;
        for seed in 0..200 {
            let means: Vec<f64> = noise(seed, 10)
                .iter()
                .map(|n| 10_000.0 + 200.0 * n)
                .collect();
            let r = judge_means(&means);
            let (status, reason, message) = r.condition();
            if status == "True" {
                alarms += 1;
                continue;
            }
            assert_eq!((status, reason), ("False", "NoRecentChange"), "{message}");
            assert!(
                message.starts_with("no change in the last 6 runs (10 results"),
                "{message}"
            );
            assert!(r.event().is_none());
        }
        // At most 1 % false alarms per segment searched.
        assert!(alarms <= 6, "{alarms} of 200 noise-only histories");
    }

    #[test]
    fn an_old_change_point_is_reported_but_not_a_new_regime() {
        // A step 10 runs back: the gauge's shift exists, the condition is False.
        let mut means = vec![500.0, 501.0, 499.0, 500.0];
        means.extend([
            400.0, 401.0, 399.0, 400.0, 400.5, 399.5, 400.0, 401.0, 399.0, 400.0,
        ]);
        let r = judge_means(&means);
        assert_eq!(r.shifts.len(), 1, "{r:?}");
        assert_eq!(r.shifts[0].runs_ago, 9);
        assert!(!r.shifts[0].new);
        let (status, _, message) = r.condition();
        assert_eq!(status, "False");
        assert!(message.contains("9 runs ago"), "{message}");
        assert!(r.event().is_none());
    }

    #[test]
    fn a_shift_already_found_before_the_newest_run_gives_no_second_event() {
        let mut means = vec![100.0; 6];
        means.extend([50.0; 4]);
        let before = judge_means(&means[..9]);
        assert!(before.shifts[0].new);
        let r = judge_means(&means);
        assert_eq!(r.shifts[0].runs_ago, 3);
        assert!(!r.shifts[0].new);
        assert_eq!(r.condition().0, "True", "still a recent regime");
        assert!(r.event().is_none(), "announced by the run before");
    }

    #[test]
    fn each_step_is_judged_on_its_own_and_too_few_results_are_unknown() {
        let specs: Vec<BenchmarkResultSpec> = (0..9)
            .map(|i| {
                results_of(&[
                    ("step 0", 100.0),
                    ("step 1", if i < 6 { 200.0 } else { 150.0 }),
                ])
            })
            .collect();
        let entries: Vec<Entry<'_>> = specs.iter().map(|spec| Entry { name: "r", spec }).collect();
        let r = judge(&entries);
        assert_eq!(r.shifts.len(), 1);
        assert_eq!(r.shifts[0].measurement, "step 1");
        let r = judge(entries.get(..5).unwrap_or_default());
        assert_eq!(r.condition().0, "Unknown");
        assert_eq!(r.condition().1, "TooFewResults");
        assert!(judge(&[]).shifts.is_empty());
    }

    #[test]
    fn hostile_histories_are_bounded_and_never_panic() {
        // NaN and infinite means are left out; the runs still count for "runs ago".
        let mut means = vec![100.0, f64::NAN, 100.0, 100.0, f64::INFINITY, 100.0];
        means.extend([50.0, f64::NEG_INFINITY, 50.0, 50.0]);
        let r = judge_means(&means);
        assert_eq!(r.shifts.len(), 1, "{r:?}");
        assert_eq!(
            (r.shifts[0].started_at.as_str(), r.shifts[0].runs_ago),
            ("web-r7", 3)
        );
        // A newest result without a finite main figure has no shift.
        let mut means = vec![100.0; 6];
        means.extend([50.0, 50.0, 50.0, f64::NAN]);
        assert!(judge_means(&means).shifts.is_empty());
        // Extremes.
        let means: Vec<f64> = (0..40)
            .map(|i| if i % 2 == 0 { f64::MAX } else { -f64::MAX })
            .collect();
        let _ = judge_means(&means).condition();
        // 10^6 results: only the newest MAX_SERIES are read.
        let spec = result(1.0);
        let stepped = result(2.0);
        let entries: Vec<Entry<'_>> = (0..1_000_000)
            .map(|i| Entry {
                name: "r",
                spec: if i < 999_995 { &spec } else { &stepped },
            })
            .collect();
        let r = judge(&entries);
        assert_eq!(r.results, MAX_SERIES);
        assert_eq!(r.shifts.first().map(|s| s.runs_ago), Some(4));
        // A result with more measurements and figures than the schema allows.
        let mut huge = result(1.0);
        let m = huge.measurements[0].clone();
        huge.measurements = vec![m; 100_000];
        let entries = vec![
            Entry {
                name: "r",
                spec: &huge
            };
            10
        ];
        let r = judge(&entries);
        assert!(r.shifts.is_empty());
        let (_, _, message) = r.condition();
        assert!(message.chars().count() <= MAX_MESSAGE + 1);
    }
}
