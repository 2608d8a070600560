//! Creating and deleting a run's children: the token Secret and the worker pods. Creation is
//! idempotent (deterministic names; AlreadyExists is success).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;
use rand::distr::{Alphanumeric, SampleString};

use crate::labels;
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
    pub reports: bool,
}

impl Sweep {
    pub const ALL: Sweep = Sweep {
        pods: true,
        secrets: true,
        reports: true,
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
    if what.reports {
        let lp = ListParams::default().labels(&format!("{selector},{}=true", labels::REPORT));
        let _ = Api::<ConfigMap>::namespaced(client.clone(), namespace)
            .delete_collection(&dp, &lp)
            .await?;
    }
    Ok(())
}
