//! A finished run's result on /metrics: `netbench_result_mean`, `netbench_result_ci95` and
//! `netbench_regression`, per figure of the latest BenchmarkResult; and
//! `netbench_change_point_runs_ago` and `netbench_change_point_timestamp_seconds` over the
//! benchmark's history.

use prometheus::{GaugeVec, Registry};

use crate::base::metrics::{gauge, remove_benchmark, Family};

pub struct ResultMetrics {
    regression: GaugeVec,
    mean: GaugeVec,
    ci95: GaugeVec,
}

impl Family for ResultMetrics {
    fn register(registry: &Registry) -> Self {
        let figure = ["kind", "namespace", "name", "measurement", "metric"];
        ResultMetrics {
            regression: gauge(
                registry,
                "netbench_regression",
                "1 when the latest run's figure regressed against the benchmark's baseline \
                 (worse beyond the tolerance and the noise), else 0",
                &figure,
            ),
            mean: gauge(
                registry,
                "netbench_result_mean",
                "Mean over the samples of a figure of the latest BenchmarkResult (its history \
                 is the series over time)",
                &figure,
            ),
            ci95: gauge(
                registry,
                "netbench_result_ci95",
                "Half-width of the 95% confidence interval of netbench_result_mean",
                &figure,
            ),
        }
    }
}

impl ResultMetrics {
    /// Publishes a finished run's result: each figure's mean and interval, and the verdict.
    pub fn set(&self, kind: &str, namespace: &str, name: &str, r: &crds::BenchmarkResultSpec) {
        // Only this result's series: a renamed case or a dropped baseline leaves none behind.
        self.forget(kind, namespace, name);
        for m in &r.measurements {
            for f in &m.metrics {
                let labels = [kind, namespace, name, m.name.as_str(), f.name.as_str()];
                self.mean.with_label_values(&labels).set(f.mean);
                self.ci95.with_label_values(&labels).set(f.ci95);
            }
        }
        for v in r.verdict.iter().flat_map(|v| &v.metrics) {
            let labels = [
                kind,
                namespace,
                name,
                v.measurement.as_str(),
                v.metric.as_str(),
            ];
            let regressed = if v.regressed { 1.0 } else { 0.0 };
            self.regression.with_label_values(&labels).set(regressed);
        }
    }

    /// Drops every result series of a benchmark.
    pub fn forget(&self, kind: &str, namespace: &str, name: &str) {
        for g in [&self.regression, &self.mean, &self.ci95] {
            remove_benchmark(g, kind, namespace, name);
        }
    }
}

/// `netbench_change_point_runs_ago`: per step or case, the runs since the newest change point
/// of its main figure over the benchmark's history (see super::regime); and
/// `netbench_change_point_timestamp_seconds`: when the run that began it started, so that a
/// dashboard can mark it in time (a Grafana annotation with "series value as timestamp").
pub struct RegimeMetrics {
    runs_ago: GaugeVec,
    started: GaugeVec,
}

const REGIME_LABELS: [&str; 6] = [
    "kind",
    "namespace",
    "name",
    "measurement",
    "figure",
    "direction",
];

impl Family for RegimeMetrics {
    fn register(registry: &Registry) -> Self {
        RegimeMetrics {
            runs_ago: gauge(
                registry,
                "netbench_change_point_runs_ago",
                "Runs since the newest change point of a step's or case's main figure over the \
                 benchmark's succeeded results of the same spec (0: it began at the newest run); \
                 direction better or worse; no series without a change point",
                &REGIME_LABELS,
            ),
            started: gauge(
                registry,
                "netbench_change_point_timestamp_seconds",
                "Unix time at which the run that began the newest change point of a step's or \
                 case's main figure started (the same change point as \
                 netbench_change_point_runs_ago; no series when that result records no start)",
                &REGIME_LABELS,
            ),
        }
    }
}

impl RegimeMetrics {
    /// Publishes the newest change points of a benchmark; its other series go (a step without
    /// one now, a shift whose direction changed).
    pub fn set(&self, kind: &str, namespace: &str, name: &str, regime: &super::regime::Regime) {
        self.forget(kind, namespace, name);
        for s in &regime.shifts {
            let labels = [
                kind,
                namespace,
                name,
                s.measurement.as_str(),
                s.figure.as_str(),
                s.direction.as_str(),
            ];
            let runs = u32::try_from(s.runs_ago).unwrap_or(u32::MAX);
            self.runs_ago
                .with_label_values(&labels)
                .set(f64::from(runs));
            if let Some(t) = s.started_time {
                // Whole seconds: exact in an f64 for any time jiff can hold.
                let seconds = t.as_second() as f64;
                self.started.with_label_values(&labels).set(seconds);
            }
        }
    }

    /// Drops every series of a benchmark.
    pub fn forget(&self, kind: &str, namespace: &str, name: &str) {
        remove_benchmark(&self.runs_ago, kind, namespace, name);
        remove_benchmark(&self.started, kind, namespace, name);
    }
}

#[cfg(test)]
mod tests {
    use super::super::regime::{Direction, Regime, Shift};
    use super::*;
    use crate::base::metrics::Metrics;

    fn shift(measurement: &str, direction: Direction, runs_ago: usize) -> Shift {
        Shift {
            measurement: measurement.into(),
            figure: "rps".into(),
            unit: "req/s".into(),
            direction,
            before: 100.0,
            after: 90.0,
            change_percent: -10.0,
            p_value: 0.001,
            started_at: "web-r7".into(),
            started_time: None,
            runs_ago,
            new: true,
        }
    }

    #[test]
    fn change_point_series_follow_the_newest_judgement_and_go_with_the_benchmark() {
        let m = Metrics::new();
        let g = m.family::<RegimeMetrics>();
        let regime = |shifts| Regime {
            results: 10,
            shifts,
        };
        g.set(
            "IngressBenchmark",
            "team",
            "web",
            &regime(vec![
                shift("step 0", Direction::Worse, 2),
                shift("step 1", Direction::Better, 7),
            ]),
        );
        g.set(
            "IngressBenchmark",
            "team",
            "other",
            &regime(vec![shift("step 0", Direction::Worse, 0)]),
        );
        let text = m.render();
        assert!(
            text.contains(r#"netbench_change_point_runs_ago{direction="worse",figure="rps",kind="IngressBenchmark",measurement="step 0",name="web",namespace="team"} 2"#),
            "{text}"
        );
        assert!(text.contains(r#"measurement="step 1",name="web",namespace="team"} 7"#));
        // The next run: step 1 has no change point any more, step 0's turned better.
        g.set(
            "IngressBenchmark",
            "team",
            "web",
            &regime(vec![shift("step 0", Direction::Better, 3)]),
        );
        let text = m.render();
        assert!(
            !text.contains(r#"measurement="step 1",name="web""#),
            "{text}"
        );
        assert!(!text.contains(r#"direction="worse",figure="rps",kind="IngressBenchmark",measurement="step 0",name="web""#));
        assert!(text.contains(r#"direction="better",figure="rps",kind="IngressBenchmark",measurement="step 0",name="web",namespace="team"} 3"#));
        // Deleted: its series go, the other benchmark's stay.
        g.forget("IngressBenchmark", "team", "web");
        let text = m.render();
        assert!(!text.contains(r#"name="web""#), "{text}");
        assert!(text.contains(r#"name="other""#));
    }

    #[test]
    fn a_change_point_with_a_start_time_has_its_timestamp_and_it_goes_with_the_benchmark() {
        let m = Metrics::new();
        let g = m.family::<RegimeMetrics>();
        let mut dated = shift("step 0", Direction::Worse, 2);
        dated.started_time = Some(jiff::Timestamp::from_second(1_763_172_000).unwrap());
        let undated = shift("step 1", Direction::Better, 7);
        let regime = Regime {
            results: 10,
            shifts: vec![dated, undated],
        };
        g.set("IngressBenchmark", "team", "web", &regime);
        let text = m.render();
        assert!(
            text.contains(r#"netbench_change_point_timestamp_seconds{direction="worse",figure="rps",kind="IngressBenchmark",measurement="step 0",name="web",namespace="team"} 1763172000"#),
            "{text}"
        );
        // A result without a start time: runs ago only, no timestamp.
        assert!(text.contains(r#"netbench_change_point_runs_ago{direction="better",figure="rps",kind="IngressBenchmark",measurement="step 1""#));
        assert!(!text.contains(r#"netbench_change_point_timestamp_seconds{direction="better""#));
        // The next judgement without the change point drops its timestamp too.
        g.set(
            "IngressBenchmark",
            "team",
            "web",
            &Regime {
                results: 11,
                shifts: vec![],
            },
        );
        assert!(!m.render().contains(r#"name="web""#));
        g.set("IngressBenchmark", "team", "web", &regime);
        g.forget("IngressBenchmark", "team", "web");
        assert!(!m.render().contains(r#"name="web""#));
    }
}
