//! A finished run's result on /metrics: `netbench_result_mean`, `netbench_result_ci95` and
//! `netbench_regression`, per figure of the latest BenchmarkResult.

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
