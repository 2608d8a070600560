//! Worker reports are stored in ConfigMaps owned by the benchmark the moment they arrive, so a
//! result survives the worker pod's deletion and an operator restart.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, ListParams, PostParams};
use kube::Client;
use loadgen::worker::protocol::FinalReport;

use crate::labels;
use crate::runs::RunSpec;

const KEY: &str = "report.json";

/// Stores a report; storing the same worker's report twice is a no-op (retries are safe).
pub async fn store(
    client: &Client,
    run: &str,
    spec: &RunSpec,
    report: &FinalReport,
) -> Result<(), kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &spec.namespace);
    let mut labels = labels::run_labels(&spec.kind, &spec.benchmark, run);
    labels.insert(labels::STEP.into(), report.step.to_string());
    labels.insert(labels::REPORT.into(), "true".into());
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(labels::report_name(&report.worker)),
            labels: Some(labels),
            owner_references: Some(vec![OwnerReference {
                api_version: "netbench.io/v1alpha1".into(),
                kind: spec.kind.clone(),
                name: spec.benchmark.clone(),
                uid: spec.uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            KEY.to_string(),
            serde_json::to_string(report).expect("report serializes"),
        )])),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &cm).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// The stored reports of one step of a run, by worker name.
pub async fn load(
    client: &Client,
    namespace: &str,
    run: &str,
    step: u32,
) -> Result<BTreeMap<String, FinalReport>, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let selector = format!(
        "{}={run},{}={step},{}=true",
        labels::RUN,
        labels::STEP,
        labels::REPORT
    );
    let mut out = BTreeMap::new();
    for cm in api.list(&ListParams::default().labels(&selector)).await? {
        let Some(text) = cm.data.as_ref().and_then(|d| d.get(KEY)) else {
            continue;
        };
        match serde_json::from_str::<FinalReport>(text) {
            Ok(r) => {
                out.insert(r.worker.clone(), r);
            }
            Err(e) => {
                tracing::warn!(configmap = ?cm.metadata.name, "unreadable stored report: {e}")
            }
        }
    }
    Ok(out)
}
