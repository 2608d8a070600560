//! Report objects as data: their names, labels and selectors, the ConfigMap a worker's report
//! is stored as, and the checks an object read back must pass (name, labels and content all
//! agree). No API request is made here (see `store.rs`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use protocol::worker::{FinalReport, Role};

use crate::base::labels;
use crate::store::owner::Owner;

pub(super) const KEY: &str = "report.json";

/// Selects `owner`'s report objects: all, one run's (folded samples included), or one step's
/// worker reports (folded samples not).
pub(super) fn selector(owner: &Owner, run: Option<&str>, step: Option<u32>) -> String {
    let mut s: Vec<String> = selected_labels(owner, run, step)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if step.is_some() {
        s.push(format!("!{}", labels::SAMPLE));
    }
    s.join(",")
}

/// The labels [`selector`] asks for (its `!sample` term aside).
pub(super) fn selected_labels(
    owner: &Owner,
    run: Option<&str>,
    step: Option<u32>,
) -> Vec<(&'static str, String)> {
    let mut l = vec![
        (labels::MANAGED_BY, labels::OPERATOR.to_string()),
        (labels::REPORT, "true".to_string()),
        (labels::NAMESPACE, owner.namespace.clone()),
        (labels::BENCHMARK_UID, owner.uid.clone()),
    ];
    if let Some(run) = run {
        l.push((labels::RUN, run.to_string()));
    }
    if let Some(step) = step {
        l.push((labels::STEP, step.to_string()));
    }
    l
}

/// The labels every report object of step `step` of `run` carries (a worker's report adds its
/// worker, a folded sample its mark).
pub(super) fn step_labels(owner: &Owner, run: &str, step: u32) -> BTreeMap<String, String> {
    let mut l = labels::run_labels(&owner.kind, &owner.name, run);
    for (k, v) in [
        (labels::NAMESPACE, owner.namespace.clone()),
        (labels::BENCHMARK_UID, owner.uid.clone()),
        (labels::STEP, step.to_string()),
        (labels::REPORT, "true".to_string()),
    ] {
        l.insert(k.to_string(), v);
    }
    l
}

/// Every label a report object of `worker` (step `step` of `run`) carries.
fn report_labels(owner: &Owner, run: &str, step: u32, worker: &str) -> BTreeMap<String, String> {
    let mut l = step_labels(owner, run, step);
    l.insert(labels::WORKER.to_string(), worker.to_string());
    l
}

/// A hash of everything that identifies an object of step `step` of `run` (`what`: the worker,
/// or "sample"), so benchmarks of the same name in two namespaces never meet. FNV-1a: stable
/// across versions and platforms (std's hasher is not).
pub(super) fn identity_hash(owner: &Owner, run: &str, step: u32, what: &str) -> u64 {
    let identity = format!(
        "{}/{}/{}/{run}/{step}/{what}",
        owner.kind, owner.namespace, owner.uid
    );
    identity.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The object's name: the worker pod's (which holds run and step) and the identity's hash.
pub fn object_name(owner: &Owner, run: &str, step: u32, worker: &str) -> String {
    let hash = identity_hash(owner, run, step, worker);
    format!("{worker}-report-{hash:016x}")
}

/// The object holding `report` of a worker of `run`, in `namespace`.
pub(crate) fn report_object(
    namespace: &str,
    owner: &Owner,
    run: &str,
    report: &FinalReport,
) -> Result<ConfigMap, serde_json::Error> {
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(object_name(owner, run, report.step, &report.worker)),
            namespace: Some(namespace.to_string()),
            labels: Some(report_labels(owner, run, report.step, &report.worker)),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            KEY.to_string(),
            serde_json::to_string(report)?,
        )])),
        ..Default::default()
    })
}

/// Whether `cm`'s name and labels are exactly what
/// [`Store::store`](super::store::Store::store) writes for a worker of step `step` accepted by
/// `expected`; the worker if so, what is wrong otherwise.
pub(super) fn verify_name(
    cm: &ConfigMap,
    owner: &Owner,
    run: &str,
    step: u32,
    expected: impl Fn(&str) -> bool,
) -> Result<String, String> {
    let empty = BTreeMap::new();
    let have = cm.metadata.labels.as_ref().unwrap_or(&empty);
    let worker = have
        .get(labels::WORKER)
        .ok_or_else(|| format!("it has no {} label", labels::WORKER))?;
    if !expected(worker) {
        return Err(format!(
            "{worker} is not a worker of step {step} of run {run}"
        ));
    }
    for (k, v) in report_labels(owner, run, step, worker) {
        if have.get(&k) != Some(&v) {
            return Err(format!("label {k} is not {v:?}"));
        }
    }
    let name = object_name(owner, run, step, worker);
    if cm.metadata.name.as_deref() != Some(name.as_str()) {
        return Err(format!("a report of {worker} is named {name}"));
    }
    Ok(worker.clone())
}

/// Whether `cm` is exactly what [`Store::store`](super::store::Store::store) writes for a
/// worker of step `step` accepted by `expected`; its report if so, what is wrong otherwise.
pub(super) fn verify(
    cm: &ConfigMap,
    owner: &Owner,
    run: &str,
    step: u32,
    expected: impl Fn(&str) -> bool,
) -> Result<FinalReport, String> {
    let worker = verify_name(cm, owner, run, step, expected)?;
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(KEY))
        .ok_or_else(|| format!("it has no {KEY}"))?;
    let report: FinalReport =
        serde_json::from_str(text).map_err(|e| format!("unreadable report: {e}"))?;
    if report.worker != worker || report.step != step {
        return Err(format!(
            "its report claims worker {} step {}, its labels worker {worker} step {step}",
            report.worker, report.step
        ));
    }
    Ok(report)
}

/// Whether every client of a sample (there is at least one) has a report in `reports`.
pub fn every_client_reported(
    expected: &BTreeMap<String, Role>,
    reports: &BTreeMap<String, FinalReport>,
) -> bool {
    let mut clients = expected
        .iter()
        .filter(|(_, r)| **r == Role::Client)
        .peekable();
    clients.peek().is_some() && clients.all(|(w, _)| reports.contains_key(w))
}

/// Whether labels `have` are those `wanted` (as [`selected_labels`] gives them), their sample
/// mark passing `sample`: what the API server's list with the same selector would return.
pub(super) fn selects(
    have: Option<&BTreeMap<String, String>>,
    wanted: &[(&str, String)],
    sample: impl Fn(bool) -> bool,
) -> bool {
    have.is_some_and(|have| {
        sample(have.contains_key(labels::SAMPLE))
            && wanted.iter().all(|(k, v)| have.get(*k) == Some(v))
    })
}
