//! Forged report objects: the reasons `netbench_reports_rejected_total` counts them by, the
//! impostors in a benchmark's own namespace, and the one Warning Event Collecting raises for
//! what it met of them on the way to a step's reports.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kube::runtime::events::EventType;
use prometheus::IntCounterVec;
use protocol::worker::{FinalReport, Role};

use super::store::Store;
use crate::base::events::PendingEvent;
use crate::base::labels;
use crate::base::metrics::{counter, Family, Metrics};
use crate::base::text::clip;
use crate::store::owner::Owner;

/// The `reason` labels of `netbench_reports_rejected_total`: a forged object in the operator's
/// namespace, a report-labelled object in the benchmark's, an object holding a report's name
/// (replaced), a second and different report of one worker (refused).
pub const REPORT_REJECTIONS: [&str; 4] = ["forged", "outside", "shadowed", "conflict"];

/// `netbench_reports_rejected_total` (each reason's series exists at 0 from the start).
pub struct ReportMetrics {
    pub rejected: IntCounterVec,
}

impl Family for ReportMetrics {
    fn register(registry: &prometheus::Registry) -> Self {
        let rejected = counter(
            registry,
            "netbench_reports_rejected_total",
            "Report objects ignored or refused as forged or conflicting, by reason",
            &["reason"],
        );
        for reason in REPORT_REJECTIONS {
            rejected.with_label_values(&[reason]);
        }
        ReportMetrics { rejected }
    }
}

/// How long the look for forged reports after a Collecting may take.
const LOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Event reason of every forged or shadowed report object.
pub const FORGED: &str = "ForgedReport";

/// Whether labels claim an object is a report of `owner` or of its run `run`.
pub(super) fn poses_as_report(
    have: Option<&BTreeMap<String, String>>,
    owner: &Owner,
    run: &str,
) -> bool {
    let Some(have) = have.filter(|l| l.contains_key(labels::REPORT)) else {
        return false;
    };
    let ours = labels::run_labels(&owner.kind, &owner.name, run);
    [labels::RUN, labels::BENCHMARK]
        .iter()
        .any(|k| have.get(*k).is_some() && have.get(*k) == ours.get(*k))
}

impl Store {
    /// ConfigMaps in the benchmark's own namespace that pose as reports of this benchmark or
    /// run (reports were kept there once): metadata only, their content is never read.
    async fn impostors(&self, owner: &Owner, run: &str) -> Result<Vec<String>, kube::Error> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &owner.namespace);
        let list = api
            .list_metadata(&ListParams::default().labels(labels::REPORT))
            .await?;
        Ok(list
            .items
            .iter()
            .filter(|cm| poses_as_report(cm.metadata.labels.as_ref(), owner, run))
            .map(|cm| {
                format!(
                    "ConfigMap {}/{}: reports are never read from the benchmark's namespace",
                    owner.namespace,
                    cm.metadata.name.as_deref().unwrap_or("")
                )
            })
            .collect())
    }

    /// The step's verified reports for Collecting. The forgeries met on the way (rejected
    /// objects, and impostors in the benchmark's namespace, looked for after this returns: a
    /// list Collecting need not wait for; bounded by 30 s, and not waited for when the operator
    /// stops) are counted, logged, and handed to `tell` as one Warning Event (none when there
    /// are none).
    pub async fn load_for_collecting(
        &self,
        metrics: Arc<Metrics>,
        owner: &Owner,
        run: &str,
        step: u32,
        expected: &BTreeMap<String, Role>,
        tell: impl FnOnce(Vec<PendingEvent>) + Send + 'static,
    ) -> Result<BTreeMap<String, FinalReport>, kube::Error> {
        let loaded = self.load(owner, run, step, expected).await?;
        let (store, owner, run) = (self.clone(), owner.clone(), run.to_string());
        tokio::spawn(async move {
            let look = store.forgery_events(&metrics, &owner, &run, &loaded.rejected);
            match tokio::time::timeout(LOOK_TIMEOUT, look).await {
                Ok(events) => tell(events),
                Err(_) => tracing::warn!(
                    namespace = owner.namespace,
                    "looking for forged reports took over {LOOK_TIMEOUT:?}; given up"
                ),
            }
        });
        Ok(loaded.reports)
    }

    /// Warning Events (counted in `netbench_reports_rejected_total`) for a step's forged report
    /// objects: those `load` rejected and impostors in the benchmark's namespace. Best effort:
    /// a failed look is logged, the result does not depend on it.
    async fn forgery_events(
        &self,
        metrics: &Metrics,
        owner: &Owner,
        run: &str,
        rejected: &[String],
    ) -> Vec<PendingEvent> {
        let impostors = match self.impostors(owner, run).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(
                    namespace = owner.namespace,
                    "looking for forged reports: {e}"
                );
                vec![]
            }
        };
        let forged = rejected.iter().map(|r| ("forged", r));
        let outside = impostors.iter().map(|r| ("outside", r));
        let found: Vec<&String> = forged
            .chain(outside)
            .map(|(reason, what)| {
                metrics
                    .family::<ReportMetrics>()
                    .rejected
                    .with_label_values(&[reason])
                    .inc();
                tracing::warn!(
                    benchmark = owner.name,
                    namespace = owner.namespace,
                    "ignored a forged report: {what}"
                );
                what
            })
            .collect();
        // One Event for all of them: Events of one reason about one object are aggregated
        // (the note of the first would hide the others).
        match found.as_slice() {
            [] => vec![],
            [one] => vec![(
                EventType::Warning,
                FORGED.to_string(),
                clip(&format!("ignored a forged report object: {one}"), 1000),
            )],
            many => {
                let list: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
                let note = format!(
                    "ignored {} forged report objects: {}",
                    many.len(),
                    list.join("; ")
                );
                vec![(EventType::Warning, FORGED.to_string(), clip(&note, 1000))]
            }
        }
    }
}
