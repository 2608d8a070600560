//! The worker API's way into the [`Store`]: a report whose name was taken by another object, or
//! that contradicts a stored report of the same worker, is logged, counted and raised as a
//! Warning Event on its benchmark, never silently dropped.

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use protocol::worker::FinalReport;

use super::forged::{ReportMetrics, FORGED};
use super::store::{Store, StoreError, Stored};
use crate::base::metrics::Metrics;
use crate::store::owner::Owner;
use crate::store::registry::RunSpec;

/// Where accepted reports go: ConfigMaps in the operator's namespace (`ApiSink`).
pub trait ReportSink: Send + Sync {
    fn store<'a>(
        &'a self,
        run: &'a str,
        spec: &'a RunSpec,
        report: &'a FinalReport,
    ) -> BoxFuture<'a, Result<(), String>>;
}

pub struct ApiSink {
    pub store: Store,
    pub metrics: Arc<Metrics>,
    pub reporter: Reporter,
}

impl ApiSink {
    /// Makes `what` loud: a warning in the log, `netbench_reports_rejected_total{reason}` and a
    /// Warning Event on the benchmark (best effort: the report's fate does not depend on it).
    async fn raise(&self, owner: &Owner, reason: &str, what: &str) {
        tracing::warn!(
            benchmark = owner.name,
            namespace = owner.namespace,
            reason,
            "report object: {what}"
        );
        self.metrics
            .family::<ReportMetrics>()
            .rejected
            .with_label_values(&[reason])
            .inc();
        let recorder = Recorder::new(self.store.client.clone(), self.reporter.clone());
        let ev = Event {
            type_: EventType::Warning,
            reason: FORGED.into(),
            note: Some(what.to_string()),
            action: "StoreReport".into(),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&ev, &owner.reference()).await {
            tracing::debug!("publishing an event failed: {e}");
        }
    }
}

impl ReportSink for ApiSink {
    fn store<'a>(
        &'a self,
        run: &'a str,
        spec: &'a RunSpec,
        report: &'a FinalReport,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let owner = Owner {
                kind: spec.kind.clone(),
                namespace: spec.namespace.clone(),
                name: spec.benchmark.clone(),
                uid: spec.uid.clone(),
            };
            match self.store.store(&owner, run, report).await {
                Ok(Stored::New | Stored::Again) => Ok(()),
                Ok(Stored::Replaced(what)) => {
                    self.raise(&owner, "shadowed", &what).await;
                    Ok(())
                }
                Err(StoreError::Conflict(what)) => {
                    self.raise(&owner, "conflict", &what).await;
                    Err(what)
                }
                Err(e) => Err(e.to_string()),
            }
        })
    }
}
