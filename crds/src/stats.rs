//! The arithmetic of samples and verdicts, shared by the operator (status, results, the
//! Regressed condition) and the `netbench` command line (compare, report). Pure functions.

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::history::{Better, MetricTolerance};
use crate::result::{MeasurementStats, MetricStats, MetricVerdict};

/// Mean, sample standard deviation and the half-width of the 95% confidence interval of the
/// mean (Student's t with n-1 degrees of freedom). Values that are not finite are left out;
/// with fewer than two values the deviation and interval are 0 (the noise is unknown).
pub fn summarize(values: &[f64]) -> (f64, f64, f64) {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let n = finite.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let mean = finite.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (mean, 0.0, 0.0);
    }
    let var = finite.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let sd = var.sqrt();
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
        .map(|d| d.inverse_cdf(0.975))
        .unwrap_or(1.96);
    let ci = t * sd / (n as f64).sqrt();
    (finite_or_zero(mean), finite_or_zero(sd), finite_or_zero(ci))
}

fn finite_or_zero(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

/// A figure's statistics from its values.
pub fn metric(name: &str, unit: &str, better: Better, values: Vec<f64>) -> MetricStats {
    let (mean, stddev, ci95) = summarize(&values);
    MetricStats {
        name: name.into(),
        unit: unit.into(),
        better,
        values,
        mean,
        stddev,
        ci95,
    }
}

impl MetricStats {
    /// The 95% interval as a share of the mean, percent (infinite when the mean is 0).
    pub fn ci_percent(&self) -> f64 {
        if self.mean == 0.0 {
            return f64::INFINITY;
        }
        (self.ci95 / self.mean.abs()) * 100.0
    }

    /// Adds one sample's value and recomputes.
    pub fn push(&mut self, value: f64) {
        self.values.push(value);
        let (mean, sd, ci) = summarize(&self.values);
        (self.mean, self.stddev, self.ci95) = (mean, sd, ci);
    }
}

/// One baseline from several results: every figure's values of the same step or case pooled.
pub fn pool(results: &[&[MeasurementStats]]) -> Vec<MeasurementStats> {
    let mut pooled: Vec<MeasurementStats> = vec![];
    for measurements in results {
        for m in measurements.iter() {
            let slot = match pooled
                .iter_mut()
                .find(|p| p.index == m.index && p.name == m.name)
            {
                Some(p) => p,
                None => {
                    pooled.push(MeasurementStats {
                        index: m.index,
                        name: m.name.clone(),
                        metrics: vec![],
                    });
                    let last = pooled.len() - 1;
                    &mut pooled[last]
                }
            };
            for f in &m.metrics {
                match slot.metrics.iter_mut().find(|g| g.name == f.name) {
                    Some(g) => g.values.extend(f.values.iter().copied()),
                    None => slot.metrics.push(f.clone()),
                }
            }
        }
    }
    for m in pooled.iter_mut().flat_map(|p| p.metrics.iter_mut()) {
        (m.mean, m.stddev, m.ci95) = summarize(&m.values);
    }
    pooled
}

/// Each judged figure of each step or case present on both sides, against the baseline.
pub fn compare(
    current: &[MeasurementStats],
    baseline: &[MeasurementStats],
    judged: &[MetricTolerance],
) -> Vec<MetricVerdict> {
    let mut verdicts = vec![];
    for now in current {
        let Some(then) = baseline
            .iter()
            .find(|b| b.index == now.index && b.name == now.name)
        else {
            continue;
        };
        for t in judged {
            if let (Some(a), Some(b)) = (now.metric(&t.name), then.metric(&t.name)) {
                verdicts.push(judge(&now.name, a, b, t));
            }
        }
    }
    verdicts
}

/// One figure against its baseline.
pub fn judge(
    measurement: &str,
    now: &MetricStats,
    then: &MetricStats,
    t: &MetricTolerance,
) -> MetricVerdict {
    let better = t.better.unwrap_or(now.better);
    let delta = delta_percent(now.mean, then.mean);
    let worse_by = match better {
        Better::Higher => -delta,
        Better::Lower => delta,
    };
    let exceeds = worse_by > t.tolerance_percent;
    let beyond_noise = intervals_apart(now, then);
    MetricVerdict {
        measurement: measurement.into(),
        metric: now.name.clone(),
        better,
        baseline_mean: then.mean,
        baseline_ci95: then.ci95,
        mean: now.mean,
        ci95: now.ci95,
        delta_percent: delta,
        tolerance_percent: t.tolerance_percent,
        exceeds_tolerance: exceeds,
        beyond_noise,
        regressed: exceeds && beyond_noise,
    }
}

/// Whether the 95% confidence intervals of two figures do not overlap: the test of a
/// significant difference that baselines and the controllers' comparison use.
pub fn intervals_apart(a: &MetricStats, b: &MetricStats) -> bool {
    a.mean + a.ci95 < b.mean - b.ci95 || a.mean - a.ci95 > b.mean + b.ci95
}

/// (now - then) / |then|, percent; finite always (a zero baseline gives 0 or ±100).
pub fn delta_percent(now: f64, then: f64) -> f64 {
    if !now.is_finite() || !then.is_finite() {
        return 0.0;
    }
    if then == 0.0 {
        return if now == 0.0 {
            0.0
        } else {
            100.0 * now.signum()
        };
    }
    let d = (now - then) / then.abs() * 100.0;
    d.clamp(-1e12, 1e12)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tol(name: &str, pct: f64) -> MetricTolerance {
        MetricTolerance {
            name: name.into(),
            tolerance_percent: pct,
            better: None,
        }
    }

    fn step(values: &[f64]) -> MeasurementStats {
        MeasurementStats {
            index: 0,
            name: "step 0".into(),
            metrics: vec![metric("rps", "req/s", Better::Higher, values.to_vec())],
        }
    }

    #[test]
    fn the_interval_follows_students_t() {
        let (mean, sd, ci) = summarize(&[10.0, 12.0, 14.0]);
        assert_eq!(mean, 12.0);
        assert!((sd - 2.0).abs() < 1e-12);
        // t(0.975, 2) = 4.3027; 4.3027 * 2 / sqrt(3) = 4.968
        assert!((ci - 4.968).abs() < 1e-3, "{ci}");
        assert_eq!(summarize(&[7.0]), (7.0, 0.0, 0.0));
        assert_eq!(summarize(&[]), (0.0, 0.0, 0.0));
        assert_eq!(summarize(&[f64::NAN, 3.0, f64::INFINITY]), (3.0, 0.0, 0.0));
    }

    #[test]
    fn a_drop_beyond_tolerance_and_noise_regresses() {
        let v = compare(
            &[step(&[700.0, 710.0, 705.0])],
            &[step(&[1000.0, 1010.0, 990.0])],
            &[tol("rps", 10.0)],
        );
        assert_eq!(v.len(), 1);
        assert!(v[0].exceeds_tolerance && v[0].beyond_noise && v[0].regressed);
        assert!((v[0].delta_percent + 29.5).abs() < 0.01, "{:?}", v[0]);
    }

    #[test]
    fn a_drop_within_the_noise_or_tolerance_does_not() {
        // 15% lower, but the intervals overlap.
        let noisy = compare(
            &[step(&[500.0, 1200.0, 850.0])],
            &[step(&[1000.0, 1010.0, 990.0])],
            &[tol("rps", 10.0)],
        );
        assert!(noisy[0].exceeds_tolerance && !noisy[0].beyond_noise && !noisy[0].regressed);
        // Beyond the noise, within the tolerance.
        let small = compare(
            &[step(&[950.0, 951.0, 949.0])],
            &[step(&[1000.0, 1001.0, 999.0])],
            &[tol("rps", 10.0)],
        );
        assert!(!small[0].exceeds_tolerance && small[0].beyond_noise && !small[0].regressed);
        // Better is never a regression.
        let faster = compare(&[step(&[2000.0])], &[step(&[1000.0])], &[tol("rps", 10.0)]);
        assert!(!faster[0].regressed);
    }

    #[test]
    fn lower_is_better_for_latency_and_overrides_apply() {
        let lat = |v: &[f64]| MeasurementStats {
            index: 0,
            name: "step 0".into(),
            metrics: vec![metric("p99Ms", "ms", Better::Lower, v.to_vec())],
        };
        let v = compare(&[lat(&[13.0])], &[lat(&[10.0])], &[tol("p99Ms", 20.0)]);
        assert!(v[0].regressed);
        let mut flipped = tol("p99Ms", 20.0);
        flipped.better = Some(Better::Higher);
        let v = compare(&[lat(&[13.0])], &[lat(&[10.0])], &[flipped]);
        assert!(!v[0].regressed);
    }

    #[test]
    fn pooling_joins_the_samples_of_each_step() {
        let a = [step(&[1.0, 2.0])];
        let b = [step(&[3.0])];
        let p = pool(&[&a, &b]);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].metrics[0].values, vec![1.0, 2.0, 3.0]);
        assert_eq!(p[0].metrics[0].mean, 2.0);
    }

    #[test]
    fn deltas_stay_finite() {
        assert_eq!(delta_percent(5.0, 0.0), 100.0);
        assert_eq!(delta_percent(0.0, 0.0), 0.0);
        assert_eq!(delta_percent(f64::NAN, 1.0), 0.0);
        assert!(delta_percent(f64::MAX, 1e-300).is_finite());
    }
}
