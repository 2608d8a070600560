//! The early abort of SLO gates (`abortOnFail`): the progress the clients of one sample push
//! every second, merged across all of them (never one worker's), and the decision whether a
//! gate has been broken long enough to end the run.
//!
//! What "broken for good" means, exactly: a point is the clients' latest pushes merged, made
//! only when every client of the sample has pushed and their latest pushes are at most
//! [`FRESH_S`] apart (one point per second of the load). The run is aborted when every point
//! of the last `abortAfter` (and the one just before it, so the window is covered from its
//! start) breaks the gate for certain, the points are at most [`MAX_GAP_S`] apart, and the
//! window starts after the warm-up. "For certain" per figure:
//! - rps, transactionsPerSecond, bits/s: the sum over all clients of their last second's rate.
//! - errorRate: the last second's errors over responses plus errors, summed over all clients.
//! - p50Ms, p99Ms, lossPercent: the merged value lies between the lowest and the highest of
//!   the clients' values (a quantile or a weighted mean of a mixture does), so a max is broken
//!   for certain when the lowest client is above it, a min when the highest is below it.
//!
//! Other figures (p90Ms, p999Ms, jitterMs, retransmits, ...) have no live counterpart: their
//! gates are judged when a sample's reports are in. Progress is a worker's word: values that
//! are not finite and non-negative are left out (a point without them judges nothing).

use std::collections::{BTreeMap, VecDeque};

use protocol::worker::ProgressUpdate;
use protocol::ReportKind;

use crds::gates::{Gate, GateFigure};

/// Latest pushes of all clients further apart than this make no point.
pub const FRESH_S: f64 = 2.5;
/// Points further apart than this break a window (a client stalled, a push was lost).
pub const MAX_GAP_S: f64 = 2.5;
/// Points kept per sample: an hour of seconds (the longest abortAfter) and some.
const MAX_POINTS: usize = 3700;
/// The longest elapsed time a push may claim (a day and then some).
const MAX_ELAPSED_S: f64 = 100_000.0;

/// One client's latest push, with only the values a gate can use.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    pub elapsed_s: f64,
    rps: Option<f64>,
    bits: Option<f64>,
    tps: Option<f64>,
    errors: Option<f64>,
    p50: Option<f64>,
    p99: Option<f64>,
    loss: Option<f64>,
}

fn plausible(v: f64) -> Option<f64> {
    (v.is_finite() && v >= 0.0).then_some(v)
}

impl Reading {
    /// None when the push's time is not plausible (then it is dropped whole).
    pub fn of(u: &ProgressUpdate) -> Option<Reading> {
        let elapsed_s = plausible(u.elapsed_s).filter(|e| *e <= MAX_ELAPSED_S)?;
        Some(Reading {
            elapsed_s,
            rps: plausible(u.rps),
            bits: plausible(u.bits_per_second),
            tps: u.transactions_per_second.and_then(plausible),
            errors: u.errors_per_second.and_then(plausible),
            p50: u.latency.and_then(|l| plausible(l.p50_ms)),
            p99: u.latency.and_then(|l| plausible(l.p99_ms)),
            loss: u.loss_percent.and_then(plausible).filter(|l| *l <= 100.0),
        })
    }
}

impl Reading {
    /// Only the figures a worker of `report_kind` measures: a field it leaves at 0 (a
    /// request/response worker's bits/s, a TCP worker's requests/s) is not a reading, and a UDP
    /// sender's rate is not what its receiver got (no certain break).
    pub fn only_for(self, report_kind: ReportKind) -> Reading {
        let keep = |on: bool, v: Option<f64>| v.filter(|_| on);
        // The protocol crate's registration says, per kind, what its workers measure.
        let live = report_kind.live_figures();
        Reading {
            elapsed_s: self.elapsed_s,
            rps: keep(live.requests, self.rps),
            bits: keep(live.bits, self.bits),
            tps: keep(live.transactions, self.tps),
            errors: keep(live.requests, self.errors),
            p50: keep(live.requests, self.p50),
            p99: keep(live.requests, self.p99),
            loss: keep(live.loss, self.loss),
        }
    }
}

/// The clients' latest pushes merged: sums over all of them, or the range of their values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Point {
    pub elapsed_s: f64,
    pub rps: Option<f64>,
    pub bits: Option<f64>,
    pub tps: Option<f64>,
    pub errors: Option<f64>,
    pub p50: Option<(f64, f64)>,
    pub p99: Option<(f64, f64)>,
    pub loss: Option<(f64, f64)>,
}

/// The sum over all readings, when every one has the value.
fn sum(readings: &[&Reading], f: impl Fn(&Reading) -> Option<f64>) -> Option<f64> {
    readings.iter().map(|r| f(r)).sum()
}

/// The lowest and highest value among the readings that have one.
fn range(readings: &[&Reading], f: impl Fn(&Reading) -> Option<f64>) -> Option<(f64, f64)> {
    readings.iter().filter_map(|r| f(r)).fold(None, |acc, v| {
        Some(match acc {
            None => (v, v),
            Some((lo, hi)) => (lo.min(v), hi.max(v)),
        })
    })
}

impl Point {
    fn merge(readings: &[&Reading], elapsed_s: f64) -> Point {
        Point {
            elapsed_s,
            rps: sum(readings, |r| r.rps),
            bits: sum(readings, |r| r.bits),
            tps: sum(readings, |r| r.tps),
            errors: sum(readings, |r| r.errors),
            p50: range(readings, |r| r.p50),
            p99: range(readings, |r| r.p99),
            loss: range(readings, |r| r.loss),
        }
    }

    /// The merged figure as far as it is certain against `gate`: Some(value) when the gate is
    /// broken for certain at this point (the value shown: the sum, or the bound that breaks
    /// it), None when it is not or cannot be told.
    pub fn breaks(&self, gate: &Gate) -> Option<f64> {
        let (limit, upper) = gate.limit()?;
        let broken = |v: f64| (if upper { v > limit } else { v < limit }).then_some(v);
        let bounded = |r: Option<(f64, f64)>| {
            let (lo, hi) = r?;
            broken(if upper { lo } else { hi })
        };
        match gate.figure {
            GateFigure::Rps => broken(self.rps?),
            GateFigure::TransactionsPerSecond => broken(self.tps?),
            GateFigure::ReceiverBitsPerSecond | GateFigure::SenderBitsPerSecond => {
                broken(self.bits?)
            }
            GateFigure::ErrorRate => {
                // Live errors/s hold 4xx/5xx answers (also in rps) and unanswered requests
                // (not in rps) without telling them apart: the rate lies between "all were
                // unanswered" and "all were answers".
                let (errors, rps) = (self.errors?, self.rps?);
                let all = errors + rps;
                let lo = (all > 0.0).then(|| errors / all)?;
                let hi = if rps > 0.0 {
                    (errors / rps).min(1.0)
                } else {
                    1.0
                };
                bounded(Some((lo, hi)))
            }
            GateFigure::P50Ms => bounded(self.p50),
            GateFigure::P99Ms => bounded(self.p99),
            GateFigure::LossPercent => bounded(self.loss),
            _ => None,
        }
    }
}

/// Whether a gate's figure has a live counterpart (otherwise it is judged on reports only).
pub fn is_live(figure: GateFigure) -> bool {
    matches!(
        figure,
        GateFigure::Rps
            | GateFigure::TransactionsPerSecond
            | GateFigure::ReceiverBitsPerSecond
            | GateFigure::SenderBitsPerSecond
            | GateFigure::ErrorRate
            | GateFigure::P50Ms
            | GateFigure::P99Ms
            | GateFigure::LossPercent
    )
}

/// The merged points of one sample, as its clients push.
#[derive(Clone, Debug, Default)]
pub struct Series {
    latest: BTreeMap<String, Reading>,
    points: VecDeque<Point>,
}

impl Series {
    /// A client's push; `clients` is how many the sample has. A push older than the client's
    /// latest is dropped.
    pub fn push(&mut self, worker: &str, reading: Reading, clients: usize) {
        if let Some(prev) = self.latest.get(worker) {
            if prev.elapsed_s > reading.elapsed_s {
                return;
            }
        }
        self.latest.insert(worker.to_string(), reading);
        if clients == 0 || self.latest.len() < clients {
            return;
        }
        let readings: Vec<&Reading> = self.latest.values().collect();
        let times = readings.iter().map(|r| r.elapsed_s);
        let oldest = times.clone().fold(f64::INFINITY, f64::min);
        let newest = times.fold(0.0, f64::max);
        if newest - oldest > FRESH_S {
            return;
        }
        let point = Point::merge(&readings, oldest);
        match self.points.back_mut() {
            Some(last) if last.elapsed_s.floor() == oldest.floor() => *last = point,
            Some(last) if last.elapsed_s > oldest => {}
            _ => self.points.push_back(point),
        }
        while self.points.len() > MAX_POINTS {
            self.points.pop_front();
        }
    }

    pub fn points(&self) -> Vec<Point> {
        self.points.iter().cloned().collect()
    }
}

/// Why a gate aborts the run: the merged value at the last point and how long it was broken.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveBreach {
    pub value: f64,
    pub seconds: f64,
}

/// Whether `gate` (with abortOnFail) is broken for good on `points` (in time order), counting
/// only points after `from_s` (the warm-up). See the module's header for the rule.
pub fn decide(points: &[Point], gate: &Gate, from_s: f64) -> Option<LiveBreach> {
    if !gate.abort_on_fail || !is_live(gate.figure) {
        return None;
    }
    let window = gate.abort_after.as_std().as_secs_f64();
    let points: Vec<&Point> = points.iter().filter(|p| p.elapsed_s >= from_s).collect();
    let last = points.last()?;
    let start = last.elapsed_s - window;
    // The last point at or before the window's start: the window is covered from there.
    let first = points.iter().rposition(|p| p.elapsed_s <= start)?;
    let window_points = points.get(first..)?;
    let mut value = None;
    for (i, p) in window_points.iter().enumerate() {
        value = Some(p.breaks(gate)?);
        if let Some(prev) = i.checked_sub(1).and_then(|j| window_points.get(j)) {
            if p.elapsed_s - prev.elapsed_s > MAX_GAP_S {
                return None;
            }
        }
    }
    Some(LiveBreach {
        value: value?,
        seconds: last.elapsed_s - window_points.first()?.elapsed_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::worker::LiveLatency;

    fn gate(yaml: &str) -> Gate {
        serde_yaml::from_str(yaml).unwrap()
    }

    /// Each kind keeps exactly its own figures of a push that claims every one.
    #[test]
    fn each_kind_keeps_exactly_its_figures() {
        let all = ProgressUpdate {
            elapsed_s: 3.0,
            rps: 100.0,
            bits_per_second: 1e9,
            transactions_per_second: Some(500.0),
            errors_per_second: Some(2.0),
            latency: Some(LiveLatency {
                p50_ms: 1.0,
                p99_ms: 9.0,
                max_ms: 12.0,
            }),
            loss_percent: Some(0.5),
            ..ProgressUpdate::default()
        };
        let full = Reading::of(&all).unwrap();
        let kept = |r: &Reading| {
            [
                ("rps", r.rps.is_some()),
                ("bits", r.bits.is_some()),
                ("tps", r.tps.is_some()),
                ("errors", r.errors.is_some()),
                ("p50", r.p50.is_some()),
                ("p99", r.p99.is_some()),
                ("loss", r.loss.is_some()),
            ]
            .into_iter()
            .filter(|(_, on)| *on)
            .map(|(name, _)| name)
            .collect::<Vec<_>>()
        };
        assert_eq!(kept(&full).len(), 7, "the push claims every figure");
        for kind in ReportKind::ALL {
            let expected: &[&str] = match kind {
                ReportKind::Http => &["rps", "errors", "p50", "p99"],
                ReportKind::Tcp => &["bits"],
                ReportKind::Rr => &["tps"],
                ReportKind::Udp => &["loss"],
            };
            let r = full.clone().only_for(kind);
            assert_eq!(kept(&r), expected, "{kind}");
            assert_eq!(r.elapsed_s, 3.0);
        }
    }

    /// A worker's zeros for figures it does not measure are no readings: an rr case's bits/s
    /// never break a bits/s gate, a TCP case's requests/s never break an rps gate.
    #[test]
    fn figures_a_worker_does_not_measure_are_no_readings() {
        let rr = ProgressUpdate {
            elapsed_s: 3.0,
            transactions_per_second: Some(500.0),
            ..ProgressUpdate::default()
        };
        let r = Reading::of(&rr).unwrap().only_for(ReportKind::Rr);
        assert_eq!((r.tps, r.bits, r.rps), (Some(500.0), None, None));
        let tcp = ProgressUpdate {
            elapsed_s: 3.0,
            bits_per_second: 1e9,
            ..ProgressUpdate::default()
        };
        let t = Reading::of(&tcp).unwrap().only_for(ReportKind::Tcp);
        assert_eq!((t.bits, t.rps, t.errors), (Some(1e9), None, None));
        let u = Reading::of(&tcp).unwrap().only_for(ReportKind::Udp);
        assert_eq!(u.bits, None, "a UDP sender's rate is not the receiver's");
        let h = Reading::of(&http(3.0, 100.0, 9.0))
            .unwrap()
            .only_for(ReportKind::Http);
        assert_eq!((h.rps, h.bits, h.p99), (Some(100.0), None, Some(9.0)));
    }

    fn http(elapsed_s: f64, rps: f64, p99_ms: f64) -> ProgressUpdate {
        ProgressUpdate {
            elapsed_s,
            rps,
            errors_per_second: Some(0.0),
            latency: Some(LiveLatency {
                p50_ms: p99_ms / 2.0,
                p99_ms,
                max_ms: p99_ms * 2.0,
            }),
            ..ProgressUpdate::default()
        }
    }

    /// Points of one client at 1 s steps from `t0`, p99 from `p99`.
    fn series(t0: f64, p99: &[f64]) -> Vec<Point> {
        let mut s = Series::default();
        for (i, v) in p99.iter().enumerate() {
            let r = Reading::of(&http(t0 + i as f64, 100.0, *v)).unwrap();
            s.push("w0", r, 1);
        }
        s.points()
    }

    #[test]
    fn a_gate_broken_every_second_of_abort_after_aborts() {
        let g = gate("{figure: p99Ms, max: 1, abortOnFail: true, abortAfter: 5s}");
        // Broken from second 1: at second 5 the window [0, 5] starts before the first point.
        assert_eq!(decide(&series(1.0, &[9.0; 5]), &g, 0.0), None);
        let b = decide(&series(1.0, &[9.0; 6]), &g, 0.0).unwrap();
        assert_eq!((b.value, b.seconds), (9.0, 5.0));
        // One second under the limit inside the window: not yet.
        let mut v = vec![9.0; 10];
        v[7] = 0.5;
        assert_eq!(decide(&series(1.0, &v), &g, 0.0), None);
        v.extend([9.0; 3]);
        assert_eq!(
            decide(&series(1.0, &v), &g, 0.0),
            None,
            "the window starts at it"
        );
        v.push(9.0);
        assert!(
            decide(&series(1.0, &v), &g, 0.0).is_some(),
            "broken again for 5 s"
        );
        // The warm-up does not count.
        assert_eq!(decide(&series(1.0, &[9.0; 8]), &g, 4.0), None);
        assert!(decide(&series(1.0, &[9.0; 10]), &g, 4.0).is_some());
        // Without abortOnFail, or on a figure with no live counterpart: never.
        let quiet = gate("{figure: p99Ms, max: 1}");
        assert_eq!(decide(&series(1.0, &[9.0; 20]), &quiet, 0.0), None);
        let p999 = gate("{figure: p999Ms, max: 1, abortOnFail: true}");
        assert_eq!(decide(&series(1.0, &[9.0; 20]), &p999, 0.0), None);
    }

    #[test]
    fn a_gap_in_the_pushes_breaks_the_window() {
        let g = gate("{figure: p99Ms, max: 1, abortOnFail: true, abortAfter: 5s}");
        let mut s = Series::default();
        for t in [1.0, 2.0, 3.0, 6.5, 7.5, 8.5, 9.5] {
            s.push("w0", Reading::of(&http(t, 100.0, 9.0)).unwrap(), 1);
        }
        assert_eq!(decide(&s.points(), &g, 0.0), None);
        for t in [12.1, 13.0, 14.0, 15.0, 16.0] {
            s.push("w0", Reading::of(&http(t, 100.0, 9.0)).unwrap(), 1);
            assert_eq!(
                decide(&s.points(), &g, 0.0),
                None,
                "the window holds the gap at {t}"
            );
        }
        s.push("w0", Reading::of(&http(17.2, 100.0, 9.0)).unwrap(), 1);
        assert!(decide(&s.points(), &g, 0.0).is_some());
    }

    #[test]
    fn latency_is_broken_for_certain_only_when_every_client_is_above_the_max() {
        let g = gate("{figure: p99Ms, max: 5, abortOnFail: true, abortAfter: 2s}");
        let mut s = Series::default();
        for t in 1..=6 {
            let t = f64::from(t);
            s.push("fast", Reading::of(&http(t, 100.0, 1.0)).unwrap(), 2);
            s.push("slow", Reading::of(&http(t + 0.2, 100.0, 50.0)).unwrap(), 2);
        }
        assert_eq!(
            decide(&s.points(), &g, 0.0),
            None,
            "one worker's p99 is not the merged p99"
        );
        let min = gate("{figure: p99Ms, min: 10, abortOnFail: true, abortAfter: 2s}");
        assert_eq!(decide(&s.points(), &min, 0.0), None);
        let mut s = Series::default();
        for t in 1..=6 {
            let t = f64::from(t);
            s.push("a", Reading::of(&http(t, 100.0, 8.0)).unwrap(), 2);
            s.push("b", Reading::of(&http(t + 0.2, 100.0, 50.0)).unwrap(), 2);
        }
        let b = decide(&s.points(), &g, 0.0).unwrap();
        assert_eq!(
            b.value, 8.0,
            "the lowest client's p99 bounds the merged one"
        );
    }

    #[test]
    fn throughput_is_summed_over_every_client_and_needs_all_of_them() {
        let g = gate("{figure: rps, min: 1000, abortOnFail: true, abortAfter: 3s}");
        let mut s = Series::default();
        for t in 1..=6 {
            s.push(
                "a",
                Reading::of(&http(f64::from(t), 600.0, 1.0)).unwrap(),
                2,
            );
        }
        assert!(s.points().is_empty(), "one client of two makes no point");
        let mut s = Series::default();
        for t in 1..=6 {
            let t = f64::from(t);
            s.push("a", Reading::of(&http(t, 600.0, 1.0)).unwrap(), 2);
            s.push("b", Reading::of(&http(t + 0.1, 600.0, 1.0)).unwrap(), 2);
        }
        assert_eq!(decide(&s.points(), &g, 0.0), None, "1200 req/s together");
        let mut s = Series::default();
        for t in 1..=6 {
            let t = f64::from(t);
            s.push("a", Reading::of(&http(t, 400.0, 1.0)).unwrap(), 2);
            s.push("b", Reading::of(&http(t + 0.1, 400.0, 1.0)).unwrap(), 2);
        }
        assert_eq!(decide(&s.points(), &g, 0.0).unwrap().value, 800.0);
    }

    #[test]
    fn error_rate_and_loss() {
        let g = gate("{figure: errorRate, max: 0.1, abortOnFail: true, abortAfter: 2s}");
        let mut s = Series::default();
        for t in 1..=4 {
            let mut u = http(f64::from(t), 80.0, 1.0);
            u.errors_per_second = Some(20.0);
            s.push("a", Reading::of(&u).unwrap(), 1);
        }
        assert_eq!(decide(&s.points(), &g, 0.0).unwrap().value, 0.2);
        // 9.5 errors/s beside 90 answers/s: 0.095 if none of them were answers, 0.106 if all
        // were 5xx answers. Not broken for certain, so no abort.
        let mut s = Series::default();
        for t in 1..=4 {
            let mut u = http(f64::from(t), 90.0, 1.0);
            u.errors_per_second = Some(9.5);
            s.push("a", Reading::of(&u).unwrap(), 1);
        }
        assert_eq!(decide(&s.points(), &g, 0.0), None);
        let loss = gate("{figure: lossPercent, max: 1, abortOnFail: true, abortAfter: 2s}");
        let mut s = Series::default();
        for t in 1..=4 {
            let u = ProgressUpdate {
                elapsed_s: f64::from(t),
                loss_percent: Some(3.0),
                ..ProgressUpdate::default()
            };
            s.push("a", Reading::of(&u).unwrap(), 1);
        }
        assert_eq!(decide(&s.points(), &loss, 0.0).unwrap().value, 3.0);
    }

    #[test]
    fn hostile_pushes_judge_nothing() {
        let g = gate("{figure: rps, min: 1000, abortOnFail: true, abortAfter: 2s}");
        let latency = gate("{figure: p99Ms, max: 1, abortOnFail: true, abortAfter: 2s}");
        for bad in [f64::NAN, f64::INFINITY, -5.0, f64::NEG_INFINITY] {
            assert_eq!(Reading::of(&http(bad, 1.0, 1.0)), None, "time {bad}");
            let mut s = Series::default();
            for t in 1..=6 {
                s.push("a", Reading::of(&http(f64::from(t), bad, bad)).unwrap(), 1);
            }
            assert_eq!(decide(&s.points(), &g, 0.0), None, "rps {bad}");
            assert_eq!(decide(&s.points(), &latency, 0.0), None, "p99 {bad}");
        }
        assert_eq!(Reading::of(&http(1e12, 1.0, 1.0)), None);
        // An old push after a newer one is dropped; the series stays bounded.
        let mut s = Series::default();
        s.push("a", Reading::of(&http(5.0, 1.0, 1.0)).unwrap(), 1);
        s.push("a", Reading::of(&http(2.0, 1.0, 1.0)).unwrap(), 1);
        assert_eq!(s.points().len(), 1);
        for t in 0..5000 {
            s.push(
                "a",
                Reading::of(&http(6.0 + f64::from(t), 1.0, 1.0)).unwrap(),
                1,
            );
        }
        assert_eq!(s.points().len(), MAX_POINTS);
    }
}
