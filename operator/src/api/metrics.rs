//! The worker API's series: requests by endpoint and code, refusals by reason (each reason's
//! series exists at 0 from the start), and the live figures workers push while they measure.

use prometheus::{GaugeVec, IntCounterVec, Registry};
use protocol::worker::ProgressUpdate;

use super::reasons::REASONS;
use crate::base::metrics::{counter, gauge, Family};

/// `netbench_api_requests_total` and `netbench_api_rejected_total`.
pub struct ApiMetrics {
    pub requests: IntCounterVec,
    pub rejected: IntCounterVec,
}

impl Family for ApiMetrics {
    fn register(registry: &Registry) -> Self {
        let m = ApiMetrics {
            requests: counter(
                registry,
                "netbench_api_requests_total",
                "Worker API requests by endpoint and status code",
                &["endpoint", "code"],
            ),
            rejected: counter(
                registry,
                "netbench_api_rejected_total",
                "Worker API requests refused, by reason",
                &["reason"],
            ),
        };
        for reason in REASONS {
            m.rejected.with_label_values(&[reason]);
        }
        m
    }
}

/// The `quantile` labels of `netbench_ingress_live_latency_seconds`.
const LIVE_QUANTILES: [&str; 3] = ["0.5", "0.99", "1"];

/// A worker's figures over the last second, while it runs.
pub struct LiveMetrics {
    rps: GaugeVec,
    bits: GaugeVec,
    latency: GaugeVec,
    errors: GaugeVec,
    transactions: GaugeVec,
    loss: GaugeVec,
}

impl Family for LiveMetrics {
    fn register(registry: &Registry) -> Self {
        let worker = ["namespace", "name", "worker"];
        LiveMetrics {
            rps: gauge(
                registry,
                "netbench_live_rps",
                "Requests per second over the last second, per worker, while running",
                &worker,
            ),
            bits: gauge(
                registry,
                "netbench_live_bits_per_second",
                "Bits per second over the last second, per worker, while running",
                &worker,
            ),
            latency: gauge(
                registry,
                "netbench_ingress_live_latency_seconds",
                "Latency quantiles (0.5, 0.99, 1 = max) of the last second's responses, per HTTP \
                 worker, while running",
                &["namespace", "name", "worker", "quantile"],
            ),
            errors: gauge(
                registry,
                "netbench_ingress_live_errors_per_second",
                "Failed requests plus 4xx/5xx responses per second over the last second, per \
                 HTTP worker, while running",
                &worker,
            ),
            transactions: gauge(
                registry,
                "netbench_live_transactions_per_second",
                "Transactions per second over the last second, per request/response worker, \
                 while running",
                &worker,
            ),
            loss: gauge(
                registry,
                "netbench_live_loss_ratio",
                "Datagrams lost (0 to 1) so far, per udp-stream worker that receives, while \
                 running",
                &worker,
            ),
        }
    }
}

impl LiveMetrics {
    /// Sets a worker's live series from one progress update. The HTTP-only series are set
    /// only when the worker sends them (TCP workers and older HTTP workers do not).
    pub fn set(&self, namespace: &str, name: &str, update: &ProgressUpdate) {
        let labels = [namespace, name, update.worker.as_str()];
        self.rps.with_label_values(&labels).set(update.rps);
        self.bits
            .with_label_values(&labels)
            .set(update.bits_per_second);
        if let Some(e) = update.errors_per_second {
            self.errors.with_label_values(&labels).set(e);
        }
        // A worker's figures, so only plausible ones (the final report is validated in full).
        if let Some(t) = update
            .transactions_per_second
            .filter(|t| t.is_finite() && *t >= 0.0)
        {
            self.transactions.with_label_values(&labels).set(t);
        }
        if let Some(l) = update.loss_percent.filter(|l| (0.0..=100.0).contains(l)) {
            self.loss.with_label_values(&labels).set(l / 100.0);
        }
        if let Some(l) = &update.latency {
            for (q, ms) in LIVE_QUANTILES
                .into_iter()
                .zip([l.p50_ms, l.p99_ms, l.max_ms])
            {
                self.latency
                    .with_label_values(&[namespace, name, &update.worker, q])
                    .set(ms / 1000.0);
            }
        }
    }

    /// Drops a worker's live series (its run ended: the report is stored).
    pub fn forget(&self, namespace: &str, name: &str, worker: &str) {
        let labels = [namespace, name, worker];
        let _ = self.rps.remove_label_values(&labels);
        let _ = self.bits.remove_label_values(&labels);
        let _ = self.errors.remove_label_values(&labels);
        let _ = self.transactions.remove_label_values(&labels);
        let _ = self.loss.remove_label_values(&labels);
        for q in LIVE_QUANTILES {
            let _ = self
                .latency
                .remove_label_values(&[namespace, name, worker, q]);
        }
    }
}
