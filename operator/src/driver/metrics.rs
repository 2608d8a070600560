//! The run's own series: `netbench_benchmark_phase` and
//! `netbench_schedule_next_run_timestamp_seconds`; and where a reconcile's time goes,
//! `netbench_reconcile_step_duration_seconds`.

use std::time::Instant;

use prometheus::{GaugeVec, HistogramOpts, HistogramVec, Registry};

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

/// The time of each step of a reconcile (`driver::apply`'s numbered steps, and each phase
/// handler by the phase it started in), by kind: what `netbench_reconcile_work_duration_seconds`
/// is made of. Buckets from 1 ms to 10 s.
pub struct StepMetrics {
    duration: HistogramVec,
}

impl Family for StepMetrics {
    fn register(registry: &Registry) -> Self {
        let opts = HistogramOpts::new(
            "netbench_reconcile_step_duration_seconds",
            "Duration of one step of a reconcile (get, extra, start, each phase handler, status, publish, reports; the parts of Collecting as \"Collecting: ...\", inside the Collecting handler's time)",
        )
        .buckets(vec![
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ]);
        let duration = HistogramVec::new(opts, &["kind", "step"]).expect("valid metric");
        registry
            .register(Box::new(duration.clone()))
            .expect("unique metric");
        StepMetrics { duration }
    }
}

impl StepMetrics {
    /// Observes the time since `since` as `step` of a `kind` reconcile; returns now, the
    /// start of the next step.
    pub fn lap(&self, kind: &str, step: &str, since: Instant) -> Instant {
        let now = Instant::now();
        self.duration
            .with_label_values(&[kind, step])
            .observe(now.saturating_duration_since(since).as_secs_f64());
        now
    }
}
