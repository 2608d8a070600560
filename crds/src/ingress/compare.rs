//! Controllers side by side: each controller's step statistics (requests/s and p99 over its
//! samples) against the best controller's, with whether the difference is beyond the noise
//! (the two 95% confidence intervals do not overlap, as baselines are judged). One place for
//! the operator (status.comparison) and `netbench report` (from a result's measurements).

use super::{Comparison, ControllerRow, Standing};
use crate::result::{MeasurementStats, MetricStats};

/// The schema's bound on status.comparison.summary.
const MAX_SUMMARY: usize = 4096;

/// The comparison of the named controllers' steps (name, step statistics); None with fewer
/// than two of them measured (rps and p99Ms present).
pub fn comparison<'a>(
    steps: impl IntoIterator<Item = (&'a str, &'a MeasurementStats)>,
) -> Option<Comparison> {
    let mut measured: Vec<(&str, u32, &MeasurementStats)> = vec![];
    let (mut rps, mut p99): (Vec<MetricStats>, Vec<MetricStats>) = (vec![], vec![]);
    for (name, m) in steps {
        if let (Some(r), Some(p)) = (m.metric("rps"), m.metric("p99Ms")) {
            measured.push((name, m.index, m));
            rps.push(r.clone());
            p99.push(p.clone());
        }
    }
    if measured.len() < 2 {
        return None;
    }
    let best_rps = best(&rps, true);
    let best_p99 = best(&p99, false);
    let mut rows = vec![];
    let mut lines = vec![];
    let (top_r, top_p) = (&rps[best_rps], &p99[best_p99]);
    for (i, ((c, step, m), (r, p))) in measured.iter().zip(rps.iter().zip(&p99)).enumerate() {
        let rps_verdict = standing(i == best_rps, r, top_r);
        let p99_verdict = standing(i == best_p99, p, top_p);
        let relative = if top_r.mean > 0.0 {
            r.mean / top_r.mean
        } else {
            0.0
        };
        let name_of = |j: usize| measured.get(j).map_or("", |(c, _, _)| *c);
        lines.push(format!(
            "{}: {}; p99 {}",
            c,
            describe_rps(r, relative, rps_verdict, name_of(best_rps)),
            describe_p99(p, p99_verdict, name_of(best_p99)),
        ));
        rows.push(ControllerRow {
            name: c.to_string(),
            step: *step,
            samples: m.samples(),
            rps: r.mean,
            rps_ci95: r.ci95,
            relative_rps: relative,
            rps_verdict,
            p99_ms: p.mean,
            p99_ci95_ms: p.ci95,
            p99_verdict,
            error_rate: m.metric("errorRate").map_or(0.0, |e| e.mean),
        });
    }
    let mut summary = lines.join("\n");
    if summary.len() > MAX_SUMMARY {
        let cut = (0..=MAX_SUMMARY)
            .rev()
            .find(|&i| summary.is_char_boundary(i))
            .unwrap_or(0);
        summary.truncate(cut);
    }
    Some(Comparison { rows, summary })
}

/// Index of the best mean (highest, or lowest); NaN never wins.
fn best(figures: &[MetricStats], higher: bool) -> usize {
    let mut best = 0;
    for (i, f) in figures.iter().enumerate() {
        let b = figures.get(best).map_or(f64::NAN, |b| b.mean);
        let better = if higher { f.mean > b } else { f.mean < b };
        if better || b.is_nan() {
            best = i;
        }
    }
    best
}

/// Where `f` stands against the best figure `top`.
fn standing(is_best: bool, f: &MetricStats, top: &MetricStats) -> Standing {
    if is_best {
        return Standing::Best;
    }
    let finite = |m: &MetricStats| m.values.iter().filter(|v| v.is_finite()).count();
    if finite(f) < 2 || finite(top) < 2 {
        return Standing::Unknown;
    }
    if crate::stats::intervals_apart(f, top) {
        Standing::Worse
    } else {
        Standing::WithinNoise
    }
}

/// A figure as a whole number, or in scientific notation when it is absurdly large (a forged
/// status must not make the summary outgrow its bound).
fn whole(v: f64) -> String {
    if v.abs() < 1e12 {
        format!("{v:.0}")
    } else {
        format!("{v:.3e}")
    }
}

fn interval(f: &MetricStats, fmt: impl Fn(f64) -> String) -> String {
    if f.values.len() > 1 {
        format!("{} ± {}", fmt(f.mean), fmt(f.ci95))
    } else {
        fmt(f.mean)
    }
}

fn verdict(s: Standing, what: &str, best: &str) -> String {
    match s {
        Standing::Best => "best".into(),
        Standing::Worse => format!("{what} {best} (significant)"),
        Standing::WithinNoise => {
            format!("{what} {best}, not significant (the 95% intervals overlap)")
        }
        Standing::Unknown => format!("{what} {best}, significance unknown (one sample)"),
    }
}

/// A latency in milliseconds as people read it: "4.21ms", "1.20s" (scientific notation when
/// absurdly large). The printer column's p99 too.
pub fn format_ms(v: f64) -> String {
    if v.abs() >= 1e12 {
        format!("{v:.3e}ms")
    } else if v >= 1000.0 {
        format!("{:.2}s", v / 1000.0)
    } else {
        format!("{v:.2}ms")
    }
}

fn describe_rps(f: &MetricStats, relative: f64, s: Standing, best: &str) -> String {
    let value = interval(f, whole);
    if s == Standing::Best {
        return format!("{value} req/s (best)");
    }
    let fewer = format!("{:.1}% fewer than", (1.0 - relative) * 100.0);
    format!("{value} req/s, {}", verdict(s, &fewer, best))
}

fn describe_p99(f: &MetricStats, s: Standing, best: &str) -> String {
    let value = interval(f, format_ms);
    if s == Standing::Best {
        return format!("{value} (best)");
    }
    format!("{value}, {}", verdict(s, "above", best))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Better;

    fn controllers<'a>(names: &[&'a str]) -> Vec<&'a str> {
        names.to_vec()
    }

    /// The comparison of `names[i]` measured in step i.
    fn compare(names: &[&str], stats: &[MeasurementStats]) -> Option<Comparison> {
        comparison(
            names
                .iter()
                .zip(0u32..)
                .filter_map(|(n, i)| stats.iter().find(|m| m.index == i).map(|m| (*n, m))),
        )
    }

    fn step(index: u32, rps: &[f64], p99: &[f64]) -> MeasurementStats {
        MeasurementStats {
            index,
            name: format!("step {index}"),
            metrics: vec![
                crate::stats::metric("rps", "req/s", Better::Higher, rps.to_vec()),
                crate::stats::metric("p99Ms", "ms", Better::Lower, p99.to_vec()),
                crate::stats::metric("errorRate", "ratio", Better::Lower, vec![0.0; rps.len()]),
            ],
        }
    }

    #[test]
    fn a_clear_difference_is_significant_and_an_overlap_is_noise() {
        let c = controllers(&["a", "b", "c"]);
        let stats = [
            step(0, &[10000.0, 10100.0, 9900.0], &[2.0, 2.1, 1.9]),
            step(1, &[8000.0, 8100.0, 7900.0], &[2.05, 1.95, 2.1]),
            step(2, &[9950.0, 10050.0, 10000.0], &[5.0, 5.2, 4.8]),
        ];
        let cmp = compare(&c, &stats).unwrap();
        let standings: Vec<_> = cmp
            .rows
            .iter()
            .map(|r| (r.rps_verdict, r.p99_verdict))
            .collect();
        assert_eq!(
            standings,
            [
                (Standing::Best, Standing::Best),
                (Standing::Worse, Standing::WithinNoise),
                (Standing::WithinNoise, Standing::Worse),
            ]
        );
        assert!((cmp.rows[1].relative_rps - 0.8).abs() < 1e-9);
        assert!(
            cmp.summary
                .contains("b: 8000 ± 248 req/s, 20.0% fewer than a (significant)"),
            "{}",
            cmp.summary
        );
        assert!(
            cmp.summary
                .contains("c: 10000 ± 124 req/s, 0.0% fewer than a, not significant (the 95% intervals overlap)"),
            "{}",
            cmp.summary
        );
    }

    #[test]
    fn one_sample_says_nothing_of_significance_and_one_controller_is_no_comparison() {
        let c = controllers(&["a", "b"]);
        let stats = [step(0, &[100.0], &[1.0]), step(1, &[50.0], &[2.0])];
        let cmp = compare(&c, &stats).unwrap();
        assert_eq!(cmp.rows[1].rps_verdict, Standing::Unknown);
        assert!(cmp.summary.contains("significance unknown (one sample)"));
        assert_eq!(compare(&c[..1], &stats), None);
        assert_eq!(compare(&c, &stats[..1]), None, "b not measured");
    }

    #[test]
    fn a_forged_status_of_huge_figures_keeps_the_summary_within_its_bound() {
        let names = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let stats: Vec<_> = (0..8)
            .map(|i| step(i, &[1e300, 9e299], &[1e300, 2e300]))
            .collect();
        let cmp = compare(&names, &stats).unwrap();
        assert!(cmp.summary.len() <= MAX_SUMMARY, "{}", cmp.summary.len());
        assert!(cmp.summary.contains("e300"), "{}", cmp.summary);
    }

    #[test]
    fn absurd_figures_from_a_written_status_never_panic() {
        let c = controllers(&["a", "b"]);
        let stats = [
            step(0, &[f64::NAN, f64::INFINITY], &[f64::NAN]),
            step(1, &[0.0], &[-1.0]),
        ];
        let cmp = compare(&c, &stats).unwrap();
        assert_eq!(cmp.rows.len(), 2);
    }
}
