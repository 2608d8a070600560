//! Prometheus metrics (prefix `netbench_`), served on /metrics.

use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};
use protocol::worker::ProgressUpdate;

pub struct Metrics {
    pub registry: Registry,
    pub reconcile_total: IntCounterVec,
    pub reconcile_errors: IntCounterVec,
    pub reconcile_duration: HistogramVec,
    pub phase: GaugeVec,
    pub schedule_next: GaugeVec,
    pub ingress_rps: GaugeVec,
    pub ingress_latency: GaugeVec,
    pub ingress_errors: GaugeVec,
    pub ingress_error_ratio: GaugeVec,
    pub ingress_efficiency: GaugeVec,
    pub live_rps: GaugeVec,
    pub live_bits: GaugeVec,
    pub live_latency: GaugeVec,
    pub live_errors: GaugeVec,
    pub egress_bits: GaugeVec,
    pub egress_overhead: GaugeVec,
    pub egress_retransmits: GaugeVec,
    pub egress_transactions: GaugeVec,
    pub egress_latency: GaugeVec,
    pub egress_loss: GaugeVec,
    pub egress_jitter: GaugeVec,
    pub live_transactions: GaugeVec,
    pub live_loss: GaugeVec,
    pub api_requests: IntCounterVec,
    pub api_rejected: IntCounterVec,
    pub reports_rejected: IntCounterVec,
    pub leader: IntGauge,
    pub regression: GaugeVec,
    pub result_mean: GaugeVec,
    pub result_ci95: GaugeVec,
}

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

/// The `reason` labels of `netbench_reports_rejected_total`: a forged object in the operator's
/// namespace, a report-labelled object in the benchmark's, an object holding a report's name
/// (replaced), a second and different report of one worker (refused).
pub const REPORT_REJECTIONS: [&str; 4] = ["forged", "outside", "shadowed", "conflict"];

/// The `quantile` labels of `netbench_egress_latency_seconds`.
const CASE_QUANTILES: [&str; 5] = ["0.5", "0.9", "0.99", "0.999", "1"];

/// The `quantile` labels of `netbench_ingress_live_latency_seconds`.
const LIVE_QUANTILES: [&str; 3] = ["0.5", "0.99", "1"];

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            let g = GaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(g.clone()))
                .expect("unique metric");
            g
        };
        let step = ["namespace", "name", "step"];
        let reconcile_duration = HistogramVec::new(
            HistogramOpts::new(
                "netbench_reconcile_duration_seconds",
                "Duration of one reconcile",
            )
            .buckets(vec![
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            ]),
            &["kind"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(reconcile_duration.clone()))
            .expect("unique metric");
        let leader = IntGauge::new(
            "netbench_leader",
            "1 while this replica holds the leader Lease",
        )
        .expect("valid metric");
        registry
            .register(Box::new(leader.clone()))
            .expect("unique metric");
        let metrics = Metrics {
            reconcile_total: counter("netbench_reconcile_total", "Reconciles", &["kind"]),
            reconcile_errors: counter(
                "netbench_reconcile_errors_total",
                "Failed reconciles by error",
                &["kind", "error"],
            ),
            reconcile_duration,
            phase: gauge(
                "netbench_benchmark_phase",
                "1 for the benchmark's current phase",
                &["kind", "namespace", "name", "phase"],
            ),
            schedule_next: gauge(
                "netbench_schedule_next_run_timestamp_seconds",
                "When a scheduled benchmark's next run is due (Unix time; absent while suspended)",
                &["kind", "namespace", "name"],
            ),
            ingress_rps: gauge(
                "netbench_ingress_rps",
                "Requests per second of a finished step, all workers",
                &step,
            ),
            ingress_latency: gauge(
                "netbench_ingress_latency_seconds",
                "Latency quantiles of a finished step from the merged histogram",
                &["namespace", "name", "step", "quantile"],
            ),
            ingress_errors: gauge(
                "netbench_ingress_errors",
                "Failed requests of a finished step by class",
                &["namespace", "name", "step", "class"],
            ),
            ingress_error_ratio: gauge(
                "netbench_ingress_error_ratio",
                "Failed / all requests of a finished step",
                &step,
            ),
            ingress_efficiency: gauge(
                "netbench_ingress_scaling_efficiency",
                "Speed-up / size factor against the first step (1 = linear)",
                &step,
            ),
            live_rps: gauge(
                "netbench_live_rps",
                "Requests per second over the last second, per worker, while running",
                &["namespace", "name", "worker"],
            ),
            live_bits: gauge(
                "netbench_live_bits_per_second",
                "Bits per second over the last second, per worker, while running",
                &["namespace", "name", "worker"],
            ),
            live_latency: gauge(
                "netbench_ingress_live_latency_seconds",
                "Latency quantiles (0.5, 0.99, 1 = max) of the last second's responses, per HTTP \
                 worker, while running",
                &["namespace", "name", "worker", "quantile"],
            ),
            live_errors: gauge(
                "netbench_ingress_live_errors_per_second",
                "Failed requests plus 4xx/5xx responses per second over the last second, per \
                 HTTP worker, while running",
                &["namespace", "name", "worker"],
            ),
            egress_bits: gauge(
                "netbench_egress_bits_per_second",
                "Throughput of a finished case",
                &["namespace", "name", "case", "side", "offload"],
            ),
            egress_overhead: gauge(
                "netbench_egress_overhead_percent",
                "Throughput lost against the baseline case",
                &["namespace", "name", "case"],
            ),
            egress_retransmits: gauge(
                "netbench_egress_retransmits",
                "TCP retransmits of a finished case",
                &["namespace", "name", "case"],
            ),
            egress_transactions: gauge(
                "netbench_egress_transactions_per_second",
                "Transactions per second of a finished request/response case (tcp-rr, tcp-crr, \
                 udp-rr)",
                &["namespace", "name", "case", "protocol"],
            ),
            egress_latency: gauge(
                "netbench_egress_latency_seconds",
                "Latency quantiles (1 = max) of a finished request/response case, or of a \
                 tcp-stream case's latency probe",
                &["namespace", "name", "case", "quantile"],
            ),
            egress_loss: gauge(
                "netbench_egress_loss_ratio",
                "Datagrams lost (0 to 1) in a finished udp-rr or udp-stream case",
                &["namespace", "name", "case"],
            ),
            egress_jitter: gauge(
                "netbench_egress_jitter_seconds",
                "RFC 3550 interarrival jitter of a finished udp-stream case",
                &["namespace", "name", "case"],
            ),
            live_transactions: gauge(
                "netbench_live_transactions_per_second",
                "Transactions per second over the last second, per request/response worker, \
                 while running",
                &["namespace", "name", "worker"],
            ),
            live_loss: gauge(
                "netbench_live_loss_ratio",
                "Datagrams lost (0 to 1) so far, per udp-stream worker that receives, while \
                 running",
                &["namespace", "name", "worker"],
            ),
            api_requests: counter(
                "netbench_api_requests_total",
                "Worker API requests by endpoint and status code",
                &["endpoint", "code"],
            ),
            api_rejected: counter(
                "netbench_api_rejected_total",
                "Worker API requests refused, by reason",
                &["reason"],
            ),
            reports_rejected: counter(
                "netbench_reports_rejected_total",
                "Report objects ignored or refused as forged or conflicting, by reason",
                &["reason"],
            ),
            regression: gauge(
                "netbench_regression",
                "1 when the latest run's figure regressed against the benchmark's baseline \
                 (worse beyond the tolerance and the noise), else 0",
                &["kind", "namespace", "name", "measurement", "metric"],
            ),
            result_mean: gauge(
                "netbench_result_mean",
                "Mean over the samples of a figure of the latest BenchmarkResult (its history \
                 is the series over time)",
                &["kind", "namespace", "name", "measurement", "metric"],
            ),
            result_ci95: gauge(
                "netbench_result_ci95",
                "Half-width of the 95% confidence interval of netbench_result_mean",
                &["kind", "namespace", "name", "measurement", "metric"],
            ),
            leader,
            registry,
        };
        // Every known error series exists from the start at 0, so "no errors" reads as a rate
        // of 0 rather than as no data.
        for kind in ["IngressBenchmark", "EgressBenchmark"] {
            for error in crate::base::error::Error::CATEGORIES {
                metrics.reconcile_errors.with_label_values(&[kind, error]);
            }
        }
        for reason in crate::api::REASONS {
            metrics.api_rejected.with_label_values(&[reason]);
        }
        for reason in REPORT_REJECTIONS {
            metrics.reports_rejected.with_label_values(&[reason]);
        }
        metrics
    }

    pub fn set_phase(&self, kind: &str, namespace: &str, name: &str, phase: crds::Phase) {
        let current = format!("{phase:?}");
        for p in PHASES {
            self.phase
                .with_label_values(&[kind, namespace, name, p])
                .set(if p == current { 1.0 } else { 0.0 });
        }
    }

    /// Drops every series of a deleted benchmark.
    pub fn forget(&self, kind: &str, namespace: &str, name: &str) {
        for p in PHASES {
            let _ = self.phase.remove_label_values(&[kind, namespace, name, p]);
        }
        for g in [&self.regression, &self.result_mean, &self.result_ci95] {
            remove_benchmark(g, kind, namespace, name);
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

    /// Publishes a finished run's result: each figure's mean and interval, and the verdict.
    pub fn set_result(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        r: &crds::BenchmarkResultSpec,
    ) {
        // Only this result's series: a renamed case or a dropped baseline leaves none behind.
        for g in [&self.regression, &self.result_mean, &self.result_ci95] {
            remove_benchmark(g, kind, namespace, name);
        }
        for m in &r.measurements {
            for f in &m.metrics {
                let labels = [kind, namespace, name, m.name.as_str(), f.name.as_str()];
                self.result_mean.with_label_values(&labels).set(f.mean);
                self.result_ci95.with_label_values(&labels).set(f.ci95);
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

    /// Publishes a finished step: RPS, latency quantiles, errors by class and their ratio.
    pub fn set_ingress_step(&self, namespace: &str, name: &str, r: &crds::ingress::StepResult) {
        let step = r.index.to_string();
        let labels = [namespace, name, step.as_str()];
        self.ingress_rps.with_label_values(&labels).set(r.rps);
        let l = &r.latency_ms;
        for (q, v) in [
            ("0.5", l.p50),
            ("0.9", l.p90),
            ("0.99", l.p99),
            ("0.999", l.p999),
            ("1", l.max),
        ] {
            self.ingress_latency
                .with_label_values(&[namespace, name, &step, q])
                .set(v / 1000.0);
        }
        let e = &r.errors;
        for (class, v) in [
            ("connect", e.connect),
            ("timeout", e.timeout),
            ("read", e.read),
            ("write", e.write),
            ("status4xx", e.status4xx),
            ("status5xx", e.status5xx),
            ("parse", e.parse),
        ] {
            self.ingress_errors
                .with_label_values(&[namespace, name, &step, class])
                .set(v as f64);
        }
        let all = r.requests as f64 + e.total() as f64;
        let ratio = if all > 0.0 {
            e.total() as f64 / all
        } else {
            0.0
        };
        self.ingress_error_ratio
            .with_label_values(&labels)
            .set(ratio);
    }

    /// Publishes a sweep's scaling efficiency per step.
    pub fn set_ingress_scaling(&self, namespace: &str, name: &str, s: &crds::ingress::Scaling) {
        for row in &s.rows {
            let step = row.index.to_string();
            self.ingress_efficiency
                .with_label_values(&[namespace, name, &step])
                .set(row.efficiency);
        }
    }

    /// Publishes every result an IngressBenchmark's status holds (after a restart, say).
    pub fn export_ingress(&self, namespace: &str, name: &str, s: &crds::IngressBenchmarkStatus) {
        for step in &s.steps {
            self.set_ingress_step(namespace, name, step);
        }
        if let Some(scaling) = &s.scaling {
            self.set_ingress_scaling(namespace, name, scaling);
        }
    }

    /// Publishes every case result an EgressBenchmark's status holds.
    pub fn export_egress(&self, namespace: &str, name: &str, s: &crds::EgressBenchmarkStatus) {
        for c in &s.cases {
            self.set_egress_case(namespace, name, c);
        }
    }

    /// Publishes a finished case: sender and receiver throughput, overhead, retransmits.
    pub fn set_egress_case(&self, namespace: &str, name: &str, c: &crds::egress::CaseResult) {
        let offload = c.offload_profile.as_deref().unwrap_or("none");
        for (side, v) in [
            ("sender", c.sender_bits_per_second),
            ("receiver", c.receiver_bits_per_second),
        ] {
            self.egress_bits
                .with_label_values(&[namespace, name, &c.name, side, offload])
                .set(v);
        }
        let labels = [namespace, name, c.name.as_str()];
        if let Some(o) = c.overhead_percent {
            self.egress_overhead.with_label_values(&labels).set(o);
        }
        self.egress_retransmits
            .with_label_values(&labels)
            .set(c.retransmits as f64);
        if let Some(tps) = c.transactions_per_second {
            let protocol = c.protocol.unwrap_or_default();
            self.egress_transactions
                .with_label_values(&[namespace, name, &c.name, protocol.as_str()])
                .set(tps);
        }
        if let Some(l) = c.latency.as_ref().or(c.probe_latency.as_ref()) {
            for (q, ms) in CASE_QUANTILES
                .into_iter()
                .zip([l.p50, l.p90, l.p99, l.p999, l.max])
            {
                self.egress_latency
                    .with_label_values(&[namespace, name, &c.name, q])
                    .set(ms / 1000.0);
            }
        }
        if let Some(loss) = c.loss_percent {
            self.egress_loss
                .with_label_values(&labels)
                .set(loss / 100.0);
        }
        if let Some(j) = c.jitter_ms {
            self.egress_jitter
                .with_label_values(&labels)
                .set(j / 1000.0);
        }
    }

    /// Drops a deleted benchmark's case series.
    pub fn forget_egress_case(
        &self,
        namespace: &str,
        name: &str,
        case: &str,
        profile: Option<&str>,
    ) {
        let offload = profile.unwrap_or("none");
        for side in ["sender", "receiver"] {
            let _ = self
                .egress_bits
                .remove_label_values(&[namespace, name, case, side, offload]);
        }
        let _ = self
            .egress_overhead
            .remove_label_values(&[namespace, name, case]);
        let _ = self
            .egress_retransmits
            .remove_label_values(&[namespace, name, case]);
        for protocol in protocol::Protocol::ALL {
            let _ = self.egress_transactions.remove_label_values(&[
                namespace,
                name,
                case,
                protocol.as_str(),
            ]);
        }
        for q in CASE_QUANTILES {
            let _ = self
                .egress_latency
                .remove_label_values(&[namespace, name, case, q]);
        }
        let _ = self
            .egress_loss
            .remove_label_values(&[namespace, name, case]);
        let _ = self
            .egress_jitter
            .remove_label_values(&[namespace, name, case]);
    }

    /// Sets a worker's live series from one progress update. The HTTP-only series are set
    /// only when the worker sends them (TCP workers and older HTTP workers do not).
    pub fn set_live(&self, namespace: &str, name: &str, update: &ProgressUpdate) {
        let labels = [namespace, name, update.worker.as_str()];
        self.live_rps.with_label_values(&labels).set(update.rps);
        self.live_bits
            .with_label_values(&labels)
            .set(update.bits_per_second);
        if let Some(e) = update.errors_per_second {
            self.live_errors.with_label_values(&labels).set(e);
        }
        // A worker's figures, so only plausible ones (the final report is validated in full).
        if let Some(t) = update
            .transactions_per_second
            .filter(|t| t.is_finite() && *t >= 0.0)
        {
            self.live_transactions.with_label_values(&labels).set(t);
        }
        if let Some(l) = update.loss_percent.filter(|l| (0.0..=100.0).contains(l)) {
            self.live_loss.with_label_values(&labels).set(l / 100.0);
        }
        if let Some(l) = &update.latency {
            for (q, ms) in LIVE_QUANTILES
                .into_iter()
                .zip([l.p50_ms, l.p99_ms, l.max_ms])
            {
                self.live_latency
                    .with_label_values(&[namespace, name, &update.worker, q])
                    .set(ms / 1000.0);
            }
        }
    }

    /// Drops a worker's live series (its run ended: the report is stored).
    pub fn forget_live(&self, namespace: &str, name: &str, worker: &str) {
        let labels = [namespace, name, worker];
        let _ = self.live_rps.remove_label_values(&labels);
        let _ = self.live_bits.remove_label_values(&labels);
        let _ = self.live_errors.remove_label_values(&labels);
        let _ = self.live_transactions.remove_label_values(&labels);
        let _ = self.live_loss.remove_label_values(&labels);
        for q in LIVE_QUANTILES {
            let _ = self
                .live_latency
                .remove_label_values(&[namespace, name, worker, q]);
        }
    }

    pub fn render(&self) -> String {
        let mut buf = vec![];
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding");
        String::from_utf8(buf).expect("metrics are UTF-8")
    }
}

/// Observes a reconcile's duration when dropped.
pub struct ReconcileTimer {
    timer: Option<prometheus::HistogramTimer>,
}

impl ReconcileTimer {
    pub fn start(metrics: &Metrics, kind: &str) -> ReconcileTimer {
        metrics.reconcile_total.with_label_values(&[kind]).inc();
        ReconcileTimer {
            timer: Some(
                metrics
                    .reconcile_duration
                    .with_label_values(&[kind])
                    .start_timer(),
            ),
        }
    }
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        if let Some(t) = self.timer.take() {
            t.observe_duration();
        }
    }
}

/// Removes every series of `g` labelled with this benchmark (kind, namespace, name first).
fn remove_benchmark(g: &GaugeVec, kind: &str, namespace: &str, name: &str) {
    use prometheus::core::Collector;
    let ours = [kind, namespace, name];
    for family in g.collect() {
        for m in family.get_metric() {
            let labels: std::collections::HashMap<&str, &str> = m
                .get_label()
                .iter()
                .map(|l| (l.name(), l.value()))
                .collect();
            let same = ["kind", "namespace", "name"]
                .iter()
                .zip(ours)
                .all(|(k, v)| labels.get(k) == Some(&v));
            if same {
                let _ = g.remove(&labels);
            }
        }
    }
}
