//! Pure result computation: worker reports -> one step result (histograms merged exactly),
//! the scaling table across steps, and the threshold verdict.

use std::collections::BTreeMap;

use crds::history::Better;
use crds::ingress::{
    IngressBenchmarkSpec, Scaling, ScalingRow, StepResult, SweepStep, Thresholds, WorkerSummary,
};
use crds::result::{Measurement, MeasurementStats};
use crds::{ErrorCounts, LatencyMillis};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub use crds::ingress::compare::format_ms;

use crate::policy::samples::Figure;
use protocol::report::HttpReport;
use protocol::worker::FinalReport;
use protocol::worker::{validate_final, CheckedReport};
use protocol::ReportKind;

/// A stored report, validated again (stored objects are as hostile as requests): an invalid
/// one fails the step naming its worker, rather than being left out of a sum it belongs to.
pub(super) fn http_of(r: &FinalReport) -> Result<HttpReport, String> {
    match validate_final(r, ReportKind::Http) {
        Ok(CheckedReport::Http(h)) => Ok(*h),
        Ok(_) => Err(format!("report of worker {} is not http", r.worker)),
        Err(e) => Err(format!("report of worker {:.253}: {e}", r.worker)),
    }
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Merges the reports of every worker of a step.
pub fn step_result(
    index: u32,
    step: Option<&SweepStep>,
    reports: &BTreeMap<String, FinalReport>,
) -> Result<StepResult, String> {
    let mut https = Vec::with_capacity(reports.len());
    let mut workers = Vec::with_capacity(reports.len());
    for r in reports.values() {
        let h = http_of(r)?;
        workers.push(WorkerSummary {
            pod: r.worker.clone(),
            node: r.node.clone(),
            rps: h.rps,
            requests: h.counters.requests,
            errors: h.counters.errors.total(),
            p99_ms: ms(h.latency.p99_us),
        });
        https.push(h);
    }
    let merged = protocol::report::merge_http(&https).map_err(|e| e.to_string())?;
    let starts: Vec<u64> = reports.values().map(|r| r.started_at_unix_ms).collect();
    let skew = match (starts.iter().min(), starts.iter().max()) {
        (Some(a), Some(b)) => Some((b - a) as f64),
        _ => None,
    };
    let e = &merged.counters.errors;
    let l = &merged.latency;
    Ok(StepResult {
        index,
        controller: None,
        cpu: step.and_then(|s| s.cpu.clone()),
        replicas: step.and_then(|s| s.replicas),
        rps: merged.rps,
        requested_rps: merged.rate.as_ref().map(|r| r.requested_rps),
        requests: merged.counters.requests,
        bytes_per_second: merged.bytes_per_sec,
        latency_ms: LatencyMillis {
            p50: ms(l.p50_us),
            p90: ms(l.p90_us),
            p99: ms(l.p99_us),
            p999: ms(l.p999_us),
            max: ms(l.max_us),
            mean: l.mean_us / 1000.0,
        },
        errors: ErrorCounts {
            connect: e.connect,
            timeout: e.timeout,
            read: e.read,
            write: e.write,
            status4xx: e.status_4xx,
            status5xx: e.status_5xx,
            parse: e.parse,
        },
        start_skew_ms: skew,
        workers,
        route_changes: None,
        route_creations: None,
        route_deletions: None,
        route_scale: None,
        workloads: vec![],
    })
}

/// CPU quantity in millicores ("500m" -> 500, "2" -> 2000, "1.5" -> 1500).
pub fn millicores(q: &str) -> Option<f64> {
    let q = q.trim();
    match q.strip_suffix('m') {
        Some(m) => m.parse::<f64>().ok(),
        None => q.parse::<f64>().ok().map(|c| c * 1000.0),
    }
}

/// Each step's size relative to the first: CPU when the sweep sets it, else replicas.
fn size_factors(steps: &[StepResult]) -> Vec<f64> {
    let size = |s: &StepResult| -> Option<f64> {
        match (&s.cpu, s.replicas) {
            (Some(cpu), replicas) => millicores(&cpu.0).map(|m| m * replicas.unwrap_or(1) as f64),
            (None, Some(r)) => Some(r as f64),
            (None, None) => None,
        }
    };
    let base = steps.first().and_then(size).filter(|b| *b > 0.0);
    steps
        .iter()
        .map(|s| match (base, size(s)) {
            (Some(b), Some(x)) => x / b,
            _ => 1.0,
        })
        .collect()
}

fn describe(s: &StepResult) -> String {
    match (&s.cpu, s.replicas) {
        (None, None) => format!("step {}", s.index),
        (cpu, replicas) => size(cpu.as_ref(), replicas),
    }
}

/// A sweep step's size: "2 CPU", "2 CPU x 3", "3 replicas".
pub fn describe_size(step: &SweepStep) -> String {
    size(step.cpu.as_ref(), step.replicas)
}

fn size(cpu: Option<&Quantity>, replicas: Option<i32>) -> String {
    match (cpu, replicas) {
        (Some(c), Some(r)) => format!("{} CPU x {r}", c.0),
        (Some(c), None) => format!("{} CPU", c.0),
        (None, Some(r)) => format!("{r} replicas"),
        (None, None) => "its size".to_string(),
    }
}

/// The scaling table of each controller's steps (steps without a controller are one table):
/// rows in step order, a summary line per controller ("traefik: 2 CPU: 1.9x ...").
pub fn scaling_by_controller(steps: &[StepResult]) -> Option<Scaling> {
    let mut names: Vec<Option<&str>> = vec![];
    for s in steps {
        if !names.contains(&s.controller.as_deref()) {
            names.push(s.controller.as_deref());
        }
    }
    let (mut rows, mut lines) = (vec![], vec![]);
    for name in names {
        let own: Vec<StepResult> = steps
            .iter()
            .filter(|s| s.controller.as_deref() == name)
            .cloned()
            .collect();
        let Some(table) = scaling(&own) else {
            continue;
        };
        rows.extend(table.rows.into_iter().map(|r| ScalingRow {
            controller: name.map(str::to_string),
            ..r
        }));
        lines.push(match name {
            Some(n) => format!("{n}: {}", table.summary),
            None => table.summary,
        });
    }
    if rows.is_empty() {
        return None;
    }
    rows.sort_by_key(|r| r.index);
    Some(Scaling {
        rows,
        summary: lines.join("; "),
    })
}

/// Throughput per step against linear growth from the first step.
pub fn scaling(steps: &[StepResult]) -> Option<Scaling> {
    if steps.len() < 2 || steps[0].rps <= 0.0 {
        return None;
    }
    let factors = size_factors(steps);
    let rows: Vec<ScalingRow> = steps
        .iter()
        .zip(&factors)
        .map(|(s, f)| {
            let speedup = s.rps / steps[0].rps;
            ScalingRow {
                index: s.index,
                controller: None,
                size_factor: *f,
                rps: s.rps,
                speedup,
                efficiency: speedup / f,
            }
        })
        .collect();
    let last = rows.last().expect("two or more rows");
    let summary = format!(
        "{}: {:.2}x the RPS of {} ({:.0}% of linear)",
        describe(steps.last().expect("steps")),
        last.speedup,
        describe(&steps[0]),
        last.efficiency * 100.0
    );
    Some(Scaling { rows, summary })
}

/// The thresholds against the `judged` steps (plan::judged_steps: the last, a sweep's largest,
/// of every controller; each explanation named by its controller); None without any.
pub fn judge_thresholds(
    t: &Thresholds,
    steps: &[StepResult],
    judged: std::ops::Range<u32>,
) -> Option<(bool, String)> {
    let verdicts: Vec<(bool, String)> = steps
        .iter()
        .filter(|s| judged.contains(&s.index))
        .map(|s| {
            let (ok, why) = check_thresholds(t, s);
            match &s.controller {
                Some(c) => (ok, format!("{c}: {why}")),
                None => (ok, why),
            }
        })
        .collect();
    if verdicts.is_empty() {
        return None;
    }
    // When met, every explanation; when not, those of the steps that missed.
    let ok = verdicts.iter().all(|(ok, _)| *ok);
    let why: Vec<&str> = verdicts
        .iter()
        .filter(|(o, _)| *o == ok)
        .map(|(_, w)| w.as_str())
        .collect();
    Some((ok, why.join("; ")))
}

/// A status histogram of times (base64 HDR, empty for none yet) with `us` recorded: its new
/// text, and its 50th and 99th percentile and largest value in ms (None while it is empty).
pub fn record_times(
    before: &str,
    us: impl IntoIterator<Item = u64>,
) -> Result<(String, Option<[f64; 3]>), String> {
    use protocol::report::histogram::{self, new_latency_histogram, LATENCY_MAX_US};
    let mut h = if before.is_empty() {
        new_latency_histogram()
    } else {
        histogram::decode(before)?
    };
    for t in us {
        h.saturating_record(t.clamp(1, LATENCY_MAX_US));
    }
    let ms = |us: u64| us as f64 / 1000.0;
    let figures = (!h.is_empty()).then(|| {
        [
            ms(h.value_at_quantile(0.5)),
            ms(h.value_at_quantile(0.99)),
            ms(h.max()),
        ]
    });
    Ok((histogram::encode(&h)?, figures))
}

/// The answers every worker of a sample recorded, merged, and the workers' last instant (µs);
/// Err when a worker recorded none (`what`: the option it needed).
pub fn merged_answers(
    reports: &BTreeMap<String, FinalReport>,
    what: &str,
) -> Result<(protocol::report::answers::Answers, u64), String> {
    let mut all = protocol::report::answers::Answers::new();
    let mut end_ms = 0;
    for r in reports.values() {
        let h = http_of(r)?;
        let Some(a) = &h.answers else {
            return Err(format!(
                "worker {:.253} recorded no answers (its loadgen does not support {what}?)",
                r.worker
            ));
        };
        all.merge(a);
        end_ms = end_ms.max(h.end_unix_ms);
    }
    Ok((all, end_ms.saturating_mul(1000)))
}

/// Checks a step against the thresholds; returns (met, explanation).
pub fn check_thresholds(t: &Thresholds, s: &StepResult) -> (bool, String) {
    let mut failures = vec![];
    if let Some(min) = t.min_rps {
        if s.rps < min {
            failures.push(format!("rps {:.1} < minRps {min}", s.rps));
        }
    }
    if let Some(max) = t.max_p99 {
        let max_ms = std::time::Duration::from(max).as_secs_f64() * 1000.0;
        if s.latency_ms.p99 > max_ms {
            failures.push(format!("p99 {:.2}ms > maxP99 {max_ms}ms", s.latency_ms.p99));
        }
    }
    if let Some(max) = t.max_error_rate {
        // Nothing attempted misses the threshold.
        let rate = s.errors.error_rate(s.requests).unwrap_or(1.0);
        if rate > max {
            failures.push(format!("error rate {rate:.4} > maxErrorRate {max}"));
        }
    }
    if failures.is_empty() {
        (true, "all thresholds met".into())
    } else {
        (false, failures.join("; "))
    }
}

/// The figures of one sample, main figure first (samples, results, verdicts).
pub fn figures(r: &StepResult) -> Vec<Figure> {
    let fig = |name: &'static str, unit: &'static str, better, value| Figure {
        name: name.into(),
        unit: unit.into(),
        better,
        value,
    };
    let error_rate = r.errors.error_rate(r.requests).unwrap_or(0.0);
    let l = &r.latency_ms;
    vec![
        fig("rps", "req/s", Better::Higher, r.rps),
        fig("p50Ms", "ms", Better::Lower, l.p50),
        fig("p90Ms", "ms", Better::Lower, l.p90),
        fig("p99Ms", "ms", Better::Lower, l.p99),
        fig("p999Ms", "ms", Better::Lower, l.p999),
        fig("errorRate", "ratio", Better::Lower, error_rate),
    ]
}

/// The steps with each one's mean requests/s over its samples (what the scaling table is
/// computed from when there are several).
pub fn with_mean_rps(steps: &[StepResult], stats: &[MeasurementStats]) -> Vec<StepResult> {
    steps
        .iter()
        .map(|s| {
            let mean = stats
                .iter()
                .find(|m| m.index == s.index)
                .and_then(|m| m.metric("rps"))
                .map(|m| m.mean);
            StepResult {
                rps: mean.unwrap_or(s.rps),
                ..s.clone()
            }
        })
        .collect()
}

/// A result's sweep steps as the scaling table needs them: size and controller from the spec,
/// requests/s the mean over the samples.
pub fn sweep_steps(spec: &IngressBenchmarkSpec, measurements: &[Measurement]) -> Vec<StepResult> {
    measurements
        .iter()
        .filter_map(|m| {
            let step = super::plan::sweep_step(spec, m.index)?;
            Some(StepResult {
                index: m.index,
                controller: super::plan::controller(spec, m.index).map(|c| c.name.clone()),
                cpu: step.cpu.clone(),
                replicas: step.replicas,
                rps: m.metrics.iter().find(|f| f.name == "rps")?.mean,
                ..Default::default()
            })
        })
        .collect()
}

/// "12034 ± 210" (mean ± 95% interval), or "12034" with one sample.
pub fn rps_interval(stats: &MeasurementStats) -> Option<String> {
    let rps = stats.metric("rps")?;
    Some(if rps.values.len() > 1 {
        format!("{:.0} ± {:.0}", rps.mean, rps.ci95)
    } else {
        format!("{:.0}", rps.mean)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_results_scaling_comes_from_the_spec_sizes_and_the_sample_means() {
        let spec: IngressBenchmarkSpec = serde_json::from_value(serde_json::json!({
            "target": {"url": "http://x/"},
            "sweep": {"targetRef": {"name": "web"}, "steps": [{"cpu": "1"}, {"cpu": "2"}]}
        }))
        .unwrap();
        let m = |index, values: Vec<f64>| Measurement {
            index,
            name: format!("step {index}"),
            metrics: vec![crds::stats::metric("rps", "req/s", Better::Higher, values)],
            ..Default::default()
        };
        // A third measurement the spec lacks is left out.
        let ms = [
            m(0, vec![900.0, 1100.0]),
            m(1, vec![1800.0]),
            m(7, vec![1.0]),
        ];
        let table = scaling(&sweep_steps(&spec, &ms)).unwrap();
        assert_eq!(table.rows.len(), 2);
        assert_eq!(table.rows[0].rps, 1000.0);
        assert!((table.rows[1].speedup - 1.8).abs() < 1e-9);
        assert!((table.rows[1].efficiency - 0.9).abs() < 1e-9);
    }

    fn step(index: u32, cpu: &str, rps: f64) -> StepResult {
        StepResult {
            index,
            cpu: Some(Quantity(cpu.into())),
            rps,
            ..Default::default()
        }
    }

    #[test]
    fn seed_report_scaling_table() {
        // The seed's physical-server figures.
        let steps = [
            step(0, "1", 3209.66),
            step(1, "2", 5709.07),
            step(2, "4", 9005.79),
            step(3, "8", 20696.19),
        ];
        let s = scaling(&steps).unwrap();
        let eff: Vec<String> = s
            .rows
            .iter()
            .map(|r| format!("{:.2}", r.efficiency))
            .collect();
        assert_eq!(eff, ["1.00", "0.89", "0.70", "0.81"]);
        assert_eq!(s.rows[3].size_factor, 8.0);
        assert_eq!(s.summary, "8 CPU: 6.45x the RPS of 1 CPU (81% of linear)");
    }

    /// A stored report of `worker`: one 1 ms request, as the engine reports it.
    fn stored(worker: &str, requests: u64) -> FinalReport {
        let mut report = crate::testing::reports::http_report(&[1000], 0);
        report["counters"]["requests"] = requests.into();
        FinalReport::new(worker, None, 0, 5, report)
    }

    #[test]
    fn an_invalid_stored_report_fails_the_step_naming_its_worker() {
        let good = BTreeMap::from([("w0".to_string(), stored("w0", 1))]);
        assert_eq!(step_result(0, None, &good).unwrap().requests, 1);
        let mut reports = good.clone();
        reports.insert("w1".into(), stored("w1", 1 << 40));
        let err = step_result(0, None, &reports).unwrap_err();
        assert!(
            err.contains("report of worker w1: invalid report: report.counters.requests"),
            "{err}"
        );
    }

    #[test]
    fn millicores_parse() {
        assert_eq!(millicores("500m"), Some(500.0));
        assert_eq!(millicores("2"), Some(2000.0));
        assert_eq!(millicores("1.5"), Some(1500.0));
        assert_eq!(millicores("x"), None);
    }

    #[test]
    fn thresholds() {
        let mut s = step(0, "1", 100.0);
        s.requests = 1000;
        s.errors.status5xx = 20;
        s.latency_ms.p99 = 12.0;
        let t = Thresholds {
            min_rps: Some(50.0),
            max_p99: Some("10ms".parse().unwrap()),
            max_error_rate: Some(0.01),
        };
        let (ok, msg) = check_thresholds(&t, &s);
        assert!(!ok);
        assert!(msg.contains("p99 12.00ms > maxP99 10ms"), "{msg}");
        assert!(
            msg.contains("error rate 0.0200 > maxErrorRate 0.01"),
            "20 of 1000 answers were 503s: {msg}"
        );
        let (ok, _) = check_thresholds(
            &Thresholds {
                min_rps: Some(50.0),
                ..Default::default()
            },
            &s,
        );
        assert!(ok);
    }

    #[test]
    fn the_error_rate_figure_counts_a_503_once() {
        // 2000 answers, half of them 503s, and 0 unanswered: half the requests failed.
        let mut s = step(0, "1", 200.0);
        s.requests = 2000;
        s.errors.status5xx = 1000;
        let rate = |s: &StepResult| {
            figures(s)
                .into_iter()
                .find(|f| f.name == "errorRate")
                .map(|f| f.value)
        };
        assert_eq!(rate(&s), Some(0.5));
        // 500 more refused connections: 1500 of 2500 attempts.
        s.errors.connect = 500;
        assert_eq!(rate(&s), Some(0.6));
        let t = Thresholds {
            max_error_rate: Some(0.59),
            ..Default::default()
        };
        assert!(!check_thresholds(&t, &s).0);
    }

    #[test]
    fn thresholds_judge_the_last_step_or_every_controller() {
        let t = Thresholds {
            min_rps: Some(150.0),
            ..Default::default()
        };
        let (slow, mut fast) = (step(0, "1", 100.0), step(1, "2", 200.0));
        assert_eq!(judge_thresholds(&t, &[], 1..2), None);
        let (ok, _) = judge_thresholds(&t, &[slow.clone(), fast.clone()], 1..2).unwrap();
        assert!(ok, "a sweep is judged at its last step");
        let mut slow = slow;
        slow.controller = Some("a".into());
        fast.controller = Some("b".into());
        let (ok, why) = judge_thresholds(&t, &[slow, fast], 0..2).unwrap();
        assert!(!ok);
        assert!(why.starts_with("a: rps 100.0 < minRps 150"), "{why}");
        assert!(
            !why.contains("b: "),
            "only the controllers that missed: {why}"
        );
    }

    #[test]
    fn controllers_swept_side_by_side_get_a_scaling_table_each() {
        // Steps in rounds: step = sweep step x 2 + controller (a, b).
        let spec: IngressBenchmarkSpec = serde_json::from_value(serde_json::json!({
            "target": {"url": "http://x/"},
            "controllers": [
                {"name": "a", "sweepTarget": {"name": "web-a"}},
                {"name": "b", "sweepTarget": {"name": "web-b"}}
            ],
            "sweep": {"steps": [{"cpu": "1"}, {"cpu": "2"}]}
        }))
        .unwrap();
        let m = |index, rps: f64| Measurement {
            index,
            name: format!("step {index}"),
            metrics: vec![crds::stats::metric(
                "rps",
                "req/s",
                Better::Higher,
                vec![rps],
            )],
            ..Default::default()
        };
        let ms = [m(0, 100.0), m(1, 300.0), m(2, 190.0), m(3, 330.0)];
        let steps = sweep_steps(&spec, &ms);
        let named: Vec<(u32, Option<&str>, Option<&str>)> = steps
            .iter()
            .map(|s| {
                (
                    s.index,
                    s.controller.as_deref(),
                    s.cpu.as_ref().map(|c| c.0.as_str()),
                )
            })
            .collect();
        assert_eq!(
            named,
            [
                (0, Some("a"), Some("1")),
                (1, Some("b"), Some("1")),
                (2, Some("a"), Some("2")),
                (3, Some("b"), Some("2"))
            ]
        );
        let table = scaling_by_controller(&steps).unwrap();
        assert_eq!(table.rows.len(), 4);
        let a2 = table.rows.iter().find(|r| r.index == 2).unwrap();
        assert_eq!(a2.controller.as_deref(), Some("a"));
        assert!(
            (a2.speedup - 1.9).abs() < 1e-9,
            "a's 2 CPUs against a's 1 CPU"
        );
        let b2 = table.rows.iter().find(|r| r.index == 3).unwrap();
        assert!(
            (b2.speedup - 1.1).abs() < 1e-9,
            "b's against b's own first step"
        );
        assert_eq!(
            table.summary,
            "a: 2 CPU: 1.90x the RPS of 1 CPU (95% of linear); b: 2 CPU: 1.10x the RPS of 1 CPU (55% of linear)"
        );
        // Without controllers, one table as before.
        let plain: Vec<StepResult> = steps
            .iter()
            .map(|s| StepResult {
                controller: None,
                ..s.clone()
            })
            .take(2)
            .collect();
        assert!(scaling_by_controller(&plain)
            .unwrap()
            .summary
            .starts_with("1 CPU: 3.00x"));
    }
}
