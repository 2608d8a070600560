//! The run's own series: `netbench_benchmark_phase` and
//! `netbench_schedule_next_run_timestamp_seconds`.

use prometheus::{GaugeVec, Registry};

use crate::base::metrics::{gauge, Family};

/// The phases exported by `netbench_benchmark_phase` (1 for the current one, 0 for the rest).
const PHASES: [&str; 7] = [
    "Pending",
    "Queued",
    "Preparing",
    "Running",
    "Collecting",
    "Succeeded",
    "Failed",
];

pub struct RunMetrics {
    phase: GaugeVec,
    schedule_next: GaugeVec,
}

impl Family for RunMetrics {
    fn register(registry: &Registry) -> Self {
        RunMetrics {
            phase: gauge(
                registry,
                "netbench_benchmark_phase",
                "1 for the benchmark's current phase",
                &["kind", "namespace", "name", "phase"],
            ),
            schedule_next: gauge(
                registry,
                "netbench_schedule_next_run_timestamp_seconds",
                "When a scheduled benchmark's next run is due (Unix time; absent while suspended)",
                &["kind", "namespace", "name"],
            ),
        }
    }
}

impl RunMetrics {
    pub fn set_phase(&self, kind: &str, namespace: &str, name: &str, phase: crds::Phase) {
        let current = format!("{phase:?}");
        for p in PHASES {
            self.phase
                .with_label_values(&[kind, namespace, name, p])
                .set(if p == current { 1.0 } else { 0.0 });
        }
    }

    /// Drops the series of a deleted benchmark.
    pub fn forget(&self, kind: &str, namespace: &str, name: &str) {
        for p in PHASES {
            let _ = self.phase.remove_label_values(&[kind, namespace, name, p]);
        }
        self.set_schedule_next(kind, namespace, name, None);
    }

    /// When a scheduled benchmark's next run is due; None drops the series (no schedule, or
    /// suspended).
    pub fn set_schedule_next(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        next: Option<jiff::Timestamp>,
    ) {
        let labels = [kind, namespace, name];
        match next {
            Some(t) => self
                .schedule_next
                .with_label_values(&labels)
                .set(t.as_millisecond() as f64 / 1000.0),
            None => {
                let _ = self.schedule_next.remove_label_values(&labels);
            }
        }
    }
}
