//! Creating, inspecting and deleting a run's children in the benchmark's namespace: the token
//! Secret and worker pods (offload Jobs: egress::offload; report objects, kept in the
//! operator's namespace: reports). Creation is idempotent (deterministic names; AlreadyExists
//! is success).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;
use loadgen::worker::protocol::FinalReport;
use rand::distr::{Alphanumeric, SampleString};

use crate::workers::TOKEN_KEY;

fn ignore_conflict<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Returns the run's token, creating its Secret the first time.
pub async fn ensure_token(
    client: &Client,
    namespace: &str,
    name: &str,
    labels: BTreeMap<String, String>,
    owner: OwnerReference,
) -> Result<String, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    if let Some(existing) = api.get_opt(name).await? {
        if let Some(token) = existing.data.as_ref().and_then(|d| d.get(TOKEN_KEY)) {
            return Ok(String::from_utf8_lossy(&token.0).into_owned());
        }
    }
    let token = Alphanumeric.sample_string(&mut rand::rng(), 40);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            TOKEN_KEY.to_string(),
            ByteString(token.clone().into_bytes()),
        )])),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(token),
        // Lost a race with ourselves (stale cache): read the winner's token.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let s = api.get(name).await?;
            let t = s
                .data
                .and_then(|d| d.get(TOKEN_KEY).cloned())
                .map(|b| String::from_utf8_lossy(&b.0).into_owned());
            Ok(t.unwrap_or_default())
        }
        Err(e) => Err(e),
    }
}

pub async fn create_pods(
    client: &Client,
    namespace: &str,
    pods: &[Pod],
) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    for pod in pods {
        ignore_conflict(api.create(&PostParams::default(), pod).await)?;
    }
    Ok(())
}

pub async fn list_pods(
    client: &Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<Pod>, kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    Ok(api
        .list(&ListParams::default().labels(selector))
        .await?
        .items)
}

/// What to delete when a run's children go.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sweep {
    pub pods: bool,
    pub secrets: bool,
}

impl Sweep {
    /// Pods and Secrets: every child a benchmark has in its own namespace.
    pub const ALL: Sweep = Sweep {
        pods: true,
        secrets: true,
    };
    pub const PODS: Sweep = Sweep {
        pods: true,
        secrets: false,
    };
}

/// Deletes the children matching `selector` (a run, a step, or the whole benchmark).
pub async fn delete(
    client: &Client,
    namespace: &str,
    selector: &str,
    what: Sweep,
) -> Result<(), kube::Error> {
    let lp = ListParams::default().labels(selector);
    let dp = DeleteParams::background();
    if what.pods {
        let _ = Api::<Pod>::namespaced(client.clone(), namespace)
            .delete_collection(&dp, &lp)
            .await?;
    }
    if what.secrets {
        let _ = Api::<Secret>::namespaced(client.clone(), namespace)
            .delete_collection(&dp, &lp)
            .await?;
    }
    Ok(())
}

/// A worker that can no longer report: deleted, failed, or finished without a stored report.
pub fn worker_problem(
    expected: &std::collections::BTreeMap<String, loadgen::worker::protocol::Role>,
    pods: &[Pod],
    reports: &std::collections::BTreeMap<String, FinalReport>,
) -> Option<String> {
    for w in expected.keys().filter(|w| !reports.contains_key(*w)) {
        let Some(pod) = pods.iter().find(|p| p.metadata.name.as_deref() == Some(w)) else {
            return Some(format!("worker pod {w} was deleted before it reported"));
        };
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("");
        if phase == "Failed" || phase == "Succeeded" {
            let why = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.terminated.as_ref())
                .map(|t| {
                    format!(
                        "exit code {}{}",
                        t.exit_code,
                        t.message
                            .as_deref()
                            .map(|m| format!(": {}", m.trim()))
                            .unwrap_or_default()
                    )
                })
                .unwrap_or_else(|| "no report".into());
            return Some(format!(
                "{} ended without a report ({why})",
                describe_pod(w, pods)
            ));
        }
    }
    None
}

pub fn describe_pod(name: &str, pods: &[Pod]) -> String {
    let node = pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))
        .and_then(|p| p.spec.as_ref())
        .and_then(|s| s.node_name.clone());
    match node {
        Some(n) => format!("worker pod {name} on node {n}"),
        None => format!("worker pod {name} (not scheduled)"),
    }
}
