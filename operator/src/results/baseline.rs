//! The verdict against the benchmark's baseline: a named result, or the previous N succeeded
//! results of the same spec (their samples pooled), of this run's environment (`matching`).
//! Each judged figure regresses when it is worse by more than its tolerance and the 95%
//! intervals do not overlap (crds::stats).

use kube::api::{Api, ListParams};
use kube::ResourceExt;

use crds::history::Baseline;
use crds::result::{MeasurementStats, Verdict, BENCHMARK_LABEL, KIND_LABEL, SPEC_HASH_LABEL};
use crds::{BenchmarkResult, BenchmarkResultSpec, Phase};

use super::build::label_value;
use super::matching;
use crate::base::error::Result;
use crate::run::{Hooks, Run};

/// None without a baseline in the spec.
pub async fn judge<K: Hooks>(
    run: &Run<'_, K>,
    now: &BenchmarkResultSpec,
) -> Result<Option<Verdict>> {
    let Some(baseline) = run.obj().outline().repetition.baseline.clone() else {
        return Ok(None);
    };
    if now.phase != Phase::Succeeded {
        return Ok(Some(unknown(
            "the run did not succeed, so it is not judged",
        )));
    }
    let api: Api<BenchmarkResult> = Api::namespaced(run.ctx().client.clone(), run.ns());
    let (what, candidates, n) = match (&baseline.result, baseline.previous) {
        (Some(name), _) => (format!("result {name}"), named(&api, name).await?, 1),
        (None, Some(n)) => (
            format!("the previous {n} result(s) of this spec"),
            previous(&api, now).await?,
            n,
        ),
        (None, None) => return Ok(None),
    };
    Ok(Some(judged(
        now,
        &baseline,
        &what,
        &candidates,
        n,
        run.obj().outline().default_judged(),
    )))
}

/// The verdict against the first `n` of `candidates` (newest first) of this run's environment.
fn judged(
    now: &BenchmarkResultSpec,
    baseline: &Baseline,
    what: &str,
    candidates: &[BenchmarkResult],
    n: u32,
    defaults: Vec<crds::history::MetricTolerance>,
) -> Verdict {
    if candidates.is_empty() {
        return unknown(&format!("{what}: none found to compare with"));
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    let choice = matching::choose(now, candidates, n, &baseline.ignore_environment);
    let mut v = if choice.used.is_empty() {
        unknown(&format!("{what}: none of this run's environment"))
    } else {
        verdict(now, baseline, what, &choice.used, defaults)
    };
    let note = choice.note();
    if !note.is_empty() {
        v.baseline = clip(&format!("{}; {note}", v.baseline));
    }
    v.skipped = choice.skipped_lines();
    v.ignored = choice.ignored_lines();
    v
}

/// Compares `now` with the pooled `results`.
fn verdict(
    now: &BenchmarkResultSpec,
    baseline: &Baseline,
    what: &str,
    results: &[&BenchmarkResult],
    defaults: Vec<crds::history::MetricTolerance>,
) -> Verdict {
    let each: Vec<Vec<MeasurementStats>> = results.iter().map(|r| r.spec.statistics()).collect();
    let refs: Vec<&[MeasurementStats]> = each.iter().map(Vec::as_slice).collect();
    let pooled = crds::stats::pool(&refs);
    let judged = if baseline.metrics.is_empty() {
        defaults
    } else {
        baseline.metrics.clone()
    };
    let metrics = crds::stats::compare(&now.statistics(), &pooled, &judged);
    // Every judged figure of every baseline step or case must have been compared: a run that
    // lacks one is no evidence of "no regression".
    let expected = pooled
        .iter()
        .map(|m| {
            judged
                .iter()
                .filter(|t| m.metric(&t.name).is_some())
                .count()
        })
        .sum::<usize>();
    let complete = !metrics.is_empty() && metrics.len() >= expected;
    let regressed = match (metrics.iter().any(|m| m.regressed), complete) {
        (true, _) => "True",
        (false, true) => "False",
        (false, false) => "Unknown",
    };
    Verdict {
        baseline: if complete {
            what.to_string()
        } else {
            format!(
                "{what}: only {} of {expected} judged figures could be compared",
                metrics.len()
            )
        },
        baseline_results: results.iter().map(|r| r.name_any()).collect(),
        regressed: regressed.into(),
        metrics,
        ..Default::default()
    }
}

fn unknown(why: &str) -> Verdict {
    Verdict {
        baseline: clip(why),
        regressed: "Unknown".into(),
        ..Default::default()
    }
}

/// At most the 1024 characters a verdict's baseline holds.
fn clip(text: &str) -> String {
    crate::base::text::clip(text, 1023)
}

/// The named result, when `name` is an object name at all (the spec may predate the schema's
/// pattern; a name is never put into a URL unchecked).
async fn named(api: &Api<BenchmarkResult>, name: &str) -> Result<Vec<BenchmarkResult>> {
    let dns = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    if name.is_empty() || name.len() > 253 || !name.chars().all(dns) {
        return Ok(vec![]);
    }
    Ok(api.get_opt(name).await?.into_iter().collect())
}

/// The succeeded results of this benchmark and spec, this run's excluded, newest first.
async fn previous(
    api: &Api<BenchmarkResult>,
    now: &BenchmarkResultSpec,
) -> Result<Vec<BenchmarkResult>> {
    let b = &now.benchmark;
    let hash16: String = now.spec_hash.chars().take(16).collect();
    let selector = format!(
        "{BENCHMARK_LABEL}={},{KIND_LABEL}={},{SPEC_HASH_LABEL}={hash16}",
        label_value(&b.name),
        b.kind.to_lowercase()
    );
    let mut found: Vec<BenchmarkResult> = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|r| {
            let s = &r.spec;
            s.benchmark == *b
                && s.spec_hash == now.spec_hash
                && s.phase == Phase::Succeeded
                && s.run_id != now.run_id
        })
        .collect();
    found.sort_by(|x, y| {
        let t = |r: &BenchmarkResult| r.spec.completion_time.as_ref().map(|t| t.0);
        t(y).cmp(&t(x))
    });
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::history::{Better, MetricTolerance};
    use crds::result::Measurement;

    fn result(name: &str, rps: &[f64]) -> BenchmarkResult {
        let measurement = Measurement {
            index: 0,
            name: "step 0".into(),
            metrics: vec![crds::stats::metric(
                "rps",
                "req/s",
                Better::Higher,
                rps.to_vec(),
            )],
            ..Default::default()
        };
        let spec = crate::testing::results::succeeded(name, vec![measurement]);
        BenchmarkResult::new(name, spec)
    }

    /// The verdict over the pooled `before`, with the default baseline settings.
    fn by_default(
        now: &BenchmarkResultSpec,
        what: &str,
        before: &[BenchmarkResult],
        judged: Vec<MetricTolerance>,
    ) -> Verdict {
        let refs: Vec<&BenchmarkResult> = before.iter().collect();
        verdict(now, &Baseline::default(), what, &refs, judged)
    }

    fn rps_10() -> Vec<MetricTolerance> {
        vec![MetricTolerance {
            name: "rps".into(),
            tolerance_percent: 10.0,
            better: None,
        }]
    }

    #[test]
    fn a_slower_run_regresses_against_pooled_previous_results() {
        let now = result("now", &[600.0, 610.0, 605.0]).spec;
        let before = [result("a", &[1000.0, 990.0]), result("b", &[1010.0])];
        let v = by_default(&now, "previous 2", &before, rps_10());
        assert_eq!(v.regressed, "True");
        assert_eq!(v.baseline_results, ["a", "b"]);
        assert_eq!(v.metrics[0].baseline_mean, 1000.0);
        let same = result("same", &[1000.0, 1005.0, 995.0]).spec;
        let v = by_default(&same, "previous 2", &before, rps_10());
        assert_eq!(v.regressed, "False");
    }

    #[test]
    fn a_missing_step_makes_no_regression_unknown() {
        let now = result("now", &[1000.0]).spec;
        let mut before = result("a", &[1000.0]);
        let mut second = before.spec.measurements[0].clone();
        second.index = 1;
        second.name = "step 1".into();
        before.spec.measurements.push(second);
        let v = by_default(&now, "result a", &[before], rps_10());
        assert_eq!(v.regressed, "Unknown", "{v:?}");
        assert!(v.baseline.contains("only 1 of 2"), "{}", v.baseline);
    }

    #[test]
    fn nothing_in_common_is_unknown() {
        let now = result("now", &[600.0]).spec;
        let before = [result("a", &[1000.0])];
        let judged = vec![MetricTolerance {
            name: "p99Ms".into(),
            tolerance_percent: 10.0,
            better: None,
        }];
        let v = by_default(&now, "result a", &before, judged);
        assert_eq!(v.regressed, "Unknown");
    }

    fn on_kernel(mut r: BenchmarkResult, kernel: &str) -> BenchmarkResult {
        r.spec.environment = Some(crds::environment::Environment {
            kernel: Some(kernel.into()),
            ..Default::default()
        });
        r
    }

    #[test]
    fn a_result_of_another_kernel_is_not_the_baseline_and_the_verdict_says_so() {
        let now = on_kernel(result("now", &[600.0]), "6.1.0-21").spec;
        let before = [on_kernel(result("r2", &[1000.0]), "6.1.0-18")];
        let b = Baseline::default();
        let v = judged(&now, &b, "the previous 3", &before, 3, rps_10());
        assert_eq!(v.regressed, "Unknown");
        assert!(v.baseline_results.is_empty() && v.metrics.is_empty());
        assert_eq!(
            v.baseline,
            "the previous 3: none of this run's environment; skipped 1 result(s) of another environment (r2: kernel)"
        );
        assert_eq!(v.skipped, ["r2: kernel 6.1.0-18 (this run: 6.1.0-21)"]);
        // Told to ignore the kernel, the same result is the baseline and the difference named.
        let b = Baseline {
            ignore_environment: vec![crds::environment::EnvironmentField::Kernel],
            ..Default::default()
        };
        let v = judged(&now, &b, "the previous 3", &before, 3, rps_10());
        assert_eq!(v.regressed, "True");
        assert_eq!(v.baseline_results, ["r2"]);
        assert_eq!(
            v.baseline,
            "the previous 3; ignored environment differences (r2: kernel)"
        );
        assert_eq!(v.ignored, ["r2: kernel 6.1.0-18 (this run: 6.1.0-21)"]);
        assert!(v.skipped.is_empty());
    }

    #[test]
    fn results_from_before_fingerprints_are_skipped_unless_all_is_ignored() {
        let now = on_kernel(result("now", &[1000.0]), "6.1.0-21").spec;
        let before = [
            on_kernel(result("r3", &[1000.0]), "6.1.0-21"),
            result("old", &[1000.0]),
        ];
        let v = judged(
            &now,
            &Baseline::default(),
            "the previous 2",
            &before,
            2,
            rps_10(),
        );
        assert_eq!(v.regressed, "False");
        assert_eq!(v.baseline_results, ["r3"]);
        assert_eq!(
            v.skipped,
            ["old: no environment recorded (written before fingerprints)"]
        );
        let all = Baseline {
            ignore_environment: vec![crds::environment::EnvironmentField::All],
            ..Default::default()
        };
        let v = judged(&now, &all, "the previous 2", &before, 2, rps_10());
        assert_eq!(v.baseline_results, ["r3", "old"]);
        assert_eq!(
            v.ignored,
            ["old: no environment recorded (written before fingerprints)"]
        );
        let none = judged(&now, &all, "result x", &[], 1, rps_10());
        assert_eq!(none.baseline, "result x: none found to compare with");
    }
}
