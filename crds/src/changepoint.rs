//! Change points over a benchmark's history: the runs at which a figure's distribution shifted.
//!
//! Method (deterministic, in the spirit of Apache Otava/Hunter and MongoDB's change-point
//! workflow): binary segmentation with a two-sample t-test. In a segment, every split that leaves at
//! least [`Options::min_segment`] runs on each side is a candidate; the one with the largest
//! |t| is kept when its two-sided p-value, times the number of candidates (Bonferroni), is below
//! [`Options::alpha`]; then both sides are searched again. So on a series without a shift
//! (independent, roughly normal noise) the chance of reporting any change point in a segment is
//! at most `alpha`; a step is found at its run, a slow drift as a shift somewhere inside it.
//!
//! Series come from stored results (hostile): non-finite values are left out before the search,
//! the work is bounded ([`MAX_SERIES`] values, at most [`Options::max_points`] change points),
//! and nothing here can panic.

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::history::Better;

/// Longest series searched (the newest values are kept): a history holds at most 100 results.
pub const MAX_SERIES: usize = 1000;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// Probability of a false change point per segment searched.
    pub alpha: f64,
    /// Fewest runs on each side of a change point.
    pub min_segment: usize,
    /// Most change points reported.
    pub max_points: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            alpha: 0.01,
            min_segment: 3,
            max_points: 8,
        }
    }
}

/// A shift in the distribution of a series.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangePoint {
    /// The first value of the new regime (an index into the series searched).
    pub index: usize,
    /// Mean of the segment before and after it (within the segment it was found in).
    pub before: f64,
    pub after: f64,
    /// (after - before) / |before| in percent; 0 when `before` is 0.
    pub change_percent: f64,
    /// The t-test's two-sided p-value, Bonferroni-corrected for the candidates of its segment.
    pub p_value: f64,
}

/// The change points of `series` (oldest first), ordered by index.
pub fn find(series: &[f64], opts: Options) -> Vec<ChangePoint> {
    let start = series.len().saturating_sub(MAX_SERIES);
    let values: Vec<f64> = series
        .get(start..)
        .unwrap_or_default()
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let min = opts.min_segment.max(2);
    let mut found = vec![];
    let mut segments = vec![(0usize, values.len())];
    while let Some((lo, hi)) = segments.pop() {
        if found.len() >= opts.max_points {
            break;
        }
        let Some(segment) = values.get(lo..hi) else {
            continue;
        };
        if let Some(cp) = best_split(segment, min, opts.alpha) {
            let at = lo + cp.index;
            segments.push((lo, at));
            segments.push((at, hi));
            found.push(ChangePoint { index: at, ..cp });
        }
    }
    found.sort_by_key(|c| c.index);
    found
}

/// The change points of a series whose values belong to places (a result's position in a
/// history, a run's index): `points` is (place, value), oldest first; non-finite values are
/// left out before the search, and each change point comes with the place of its first value.
pub fn find_at(points: &[(usize, f64)], opts: Options) -> Vec<(usize, ChangePoint)> {
    let finite: Vec<(usize, f64)> = points.iter().copied().filter(|p| p.1.is_finite()).collect();
    let start = finite.len().saturating_sub(MAX_SERIES);
    let finite = finite.get(start..).unwrap_or_default();
    let values: Vec<f64> = finite.iter().map(|p| p.1).collect();
    find(&values, opts)
        .into_iter()
        .filter_map(|cp| Some((finite.get(cp.index)?.0, cp)))
        .collect()
}

impl ChangePoint {
    /// Whether the shift is for the worse, for a figure that is good when `better`.
    pub fn worse(&self, better: Better) -> bool {
        match better {
            Better::Higher => self.after < self.before,
            Better::Lower => self.after > self.before,
        }
    }
}

/// The most significant split of `x`, if it passes the corrected test. O(n): prefix sums.
fn best_split(x: &[f64], min: usize, alpha: f64) -> Option<ChangePoint> {
    let n = x.len();
    if n < 2 * min {
        return None;
    }
    let candidates = n - 2 * min + 1;
    let mut sum = Vec::with_capacity(n + 1);
    let mut sq = Vec::with_capacity(n + 1);
    let (mut s, mut q) = (0.0, 0.0);
    sum.push(0.0);
    sq.push(0.0);
    for v in x {
        s += v;
        q += v * v;
        sum.push(s);
        sq.push(q);
    }
    let side = |from: usize, to: usize| -> Option<Side> {
        let count = to.checked_sub(from)? as f64;
        let total = sum.get(to)? - sum.get(from)?;
        let squares = sq.get(to)? - sq.get(from)?;
        let mean = total / count;
        let var = ((squares - total * mean) / (count - 1.0).max(1.0)).max(0.0);
        Some(Side { count, mean, var })
    };
    let mut best: Option<(usize, f64, f64)> = None;
    for k in min..=n - min {
        let Some((t, df)) = student_t(side(0, k)?, side(k, n)?) else {
            continue;
        };
        if best.is_none_or(|(_, bt, _)| t.abs() > bt.abs()) {
            best = Some((k, t, df));
        }
    }
    let (k, t, df) = best?;
    let p = two_sided_p(t, df)?;
    let corrected = (p * candidates as f64).min(1.0);
    if corrected >= alpha {
        return None;
    }
    let (before, after) = (side(0, k)?.mean, side(k, n)?.mean);
    let change_percent = if before == 0.0 {
        0.0
    } else {
        (after - before) / before.abs() * 100.0
    };
    Some(ChangePoint {
        index: k,
        before,
        after,
        change_percent,
        p_value: corrected,
    })
}

/// Count, mean and sample variance of one side of a split.
#[derive(Clone, Copy)]
struct Side {
    count: f64,
    mean: f64,
    var: f64,
}

/// Student's two-sample t (pooled variance: under "no change" both sides come from one
/// distribution, and the test is then exact for normal noise; Welch's approximation with
/// three runs on a side gave twice the stated false-alarm rate) and its degrees of freedom.
/// None when there is no spread and the means are equal (nothing to tell apart; equal within
/// rounding) or the figures overflow; two constant sides that differ give an infinite t (a certain shift). Spread below
/// rounding noise counts as none.
fn student_t(a: Side, b: Side) -> Option<(f64, f64)> {
    let df = a.count + b.count - 2.0;
    let pooled = ((a.count - 1.0) * a.var + (b.count - 1.0) * b.var) / df.max(1.0);
    let se2 = pooled * (1.0 / a.count + 1.0 / b.count);
    if !se2.is_finite() || !a.mean.is_finite() || !b.mean.is_finite() {
        return None;
    }
    let scale = a.mean.abs().max(b.mean.abs()).max(f64::MIN_POSITIVE);
    if se2 <= (scale * 1e-12).powi(2) {
        // The means come from prefix sums: a constant series such as 9.9, 9.9, ... gives
        // means a rounding error apart, which is no shift.
        let apart = (b.mean - a.mean).abs() > scale * 1e-9;
        return apart.then_some((f64::INFINITY.copysign(b.mean - a.mean), df));
    }
    let t = (b.mean - a.mean) / se2.sqrt();
    (t.is_finite() && df > 0.0).then_some((t, df))
}

fn two_sided_p(t: f64, df: f64) -> Option<f64> {
    if t.is_infinite() {
        return Some(0.0);
    }
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let p = 2.0 * (1.0 - dist.cdf(t.abs()));
    p.is_finite().then_some(p.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic standard normal noise (xorshift64* + Box-Muller).
    struct Noise(u64);
    impl Noise {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            let bits = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
            (bits as f64 + 0.5) / (1u64 << 53) as f64
        }
        fn normal(&mut self) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        }
    }

    fn noisy(seed: u64, n: usize, level: impl Fn(usize) -> f64, sd: f64) -> Vec<f64> {
        let mut noise = Noise(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        (0..n).map(|i| level(i) + sd * noise.normal()).collect()
    }

    #[test]
    fn a_step_is_found_at_its_run_with_its_size_and_direction() {
        let mut misses = 0;
        for seed in 0..200 {
            // 10 000 req/s for 5 runs, then 8 % slower (4 sd of the run-to-run noise).
            let s = noisy(seed, 12, |i| if i < 5 { 10_000.0 } else { 9_200.0 }, 200.0);
            let found = find(&s, Options::default());
            match found.as_slice() {
                [cp] if cp.index.abs_diff(5) <= 1 => {
                    assert!((cp.change_percent + 8.0).abs() < 4.0, "{cp:?}");
                    assert!(cp.after < cp.before && cp.p_value < 0.01);
                }
                _ => misses += 1,
            }
        }
        // A 4-sd step over 5 + 7 runs is found nearly always, exactly once, within one run.
        eprintln!("step: missed or misplaced in {misses} of 200 series");
        assert!(
            misses <= 10,
            "missed or misplaced in {misses} of 200 series"
        );
    }

    #[test]
    fn noise_alone_gives_a_change_point_at_most_at_the_stated_rate() {
        let series = 2000;
        let false_alarms = (0..series)
            .filter(|&seed| !find(&noisy(seed, 20, |_| 100.0, 3.0), Options::default()).is_empty())
            .count();
        // alpha = 0.01 per segment (Bonferroni is conservative): at most 1 % of the series,
        // with room for the binomial spread (mean 20 at exactly 1 %, sd 4.5).
        eprintln!("noise only: {false_alarms} of {series} series with a change point");
        assert!(false_alarms <= 30, "{false_alarms} of {series}");
    }

    #[test]
    fn a_slow_drift_is_found_as_a_worse_regime_inside_it() {
        let mut found_worse = 0;
        for seed in 0..100 {
            // 2 % slower every run for 20 runs, noise 1 %.
            let s = noisy(seed, 20, |i| 1000.0 * (1.0 - 0.02 * i as f64), 10.0);
            let cps = find(&s, Options::default());
            if cps
                .iter()
                .any(|c| c.change_percent < 0.0 && (3..17).contains(&c.index))
            {
                found_worse += 1;
            }
            assert!(cps.iter().all(|c| c.change_percent < 0.0), "{cps:?}");
        }
        eprintln!("drift: a worse regime found in {found_worse} of 100 series");
        assert!(found_worse >= 95, "{found_worse} of 100");
    }

    #[test]
    fn two_steps_are_both_found() {
        let mut exact = 0;
        for seed in 0..200 {
            let s = noisy(
                seed,
                24,
                |i| match i {
                    0..8 => 50.0,
                    8..16 => 60.0,
                    _ => 45.0,
                },
                1.0,
            );
            let at: Vec<usize> = find(&s, Options::default())
                .iter()
                .map(|c| c.index)
                .collect();
            exact += usize::from(at == [8, 16]);
        }
        // Both steps always; a third, false one at most at about the stated rate.
        eprintln!("two steps: exactly both in {exact} of 200 series");
        assert!(exact >= 190, "{exact} of 200");
    }

    #[test]
    fn places_survive_left_out_values_and_direction_follows_better() {
        let points: Vec<(usize, f64)> = [1.0, f64::NAN, 1.0, 1.0, 2.0, f64::INFINITY, 2.0, 2.0]
            .iter()
            .enumerate()
            .map(|(i, v)| (i * 10, *v))
            .collect();
        let found = find_at(&points, Options::default());
        let [(place, cp)] = found.as_slice() else {
            panic!("{found:?}")
        };
        assert_eq!(*place, 40, "the place of the first value of the new regime");
        assert!(cp.worse(Better::Lower) && !cp.worse(Better::Higher));
        assert!(find_at(&[], Options::default()).is_empty());
    }

    #[test]
    fn hostile_series_never_panic_and_short_ones_have_nothing() {
        assert!(find(&[], Options::default()).is_empty());
        assert!(find(&[1.0, 2.0, 3.0, 4.0, 5.0], Options::default()).is_empty());
        let nan = [
            f64::NAN,
            f64::INFINITY,
            1.0,
            1.0,
            1.0,
            5.0,
            5.0,
            5.0,
            f64::NEG_INFINITY,
        ];
        let cps = find(&nan, Options::default());
        assert_eq!(cps.len(), 1, "constant sides that differ: a certain shift");
        assert_eq!((cps[0].index, cps[0].before, cps[0].after), (3, 1.0, 5.0));
        assert!(find(&[7.0; 40], Options::default()).is_empty());
        // Constant series whose sums round: no shift between means a rounding error apart.
        for v in [9.9, 0.1, 1e-7, 20696.19 * 1.004, 6.45, 1e300] {
            for n in [6, 12, 100, 1000] {
                assert!(
                    find(&vec![v; n], Options::default()).is_empty(),
                    "{v} x {n}"
                );
            }
        }
        let huge: Vec<f64> = (0..5000)
            .map(|i| if i % 2 == 0 { f64::MAX } else { -f64::MAX })
            .collect();
        let _ = find(
            &huge,
            Options {
                min_segment: 0,
                alpha: 1.0,
                max_points: usize::MAX,
            },
        );
    }
}
