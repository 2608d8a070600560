//! Sweep targets: save a workload's scaled fields, set them for a step, wait for the rollout,
//! and restore them exactly. Only the named object is touched, through JSON patches that
//! replace just the container's resources and the replica count.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};

use crds::ingress::{SavedTarget, SweepStep, TargetKind, TargetRef};

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("{kind} {namespace}/{name} not found")]
    NotFound {
        kind: String,
        namespace: String,
        name: String,
    },
    #[error("{kind} {namespace}/{name} has no container named {container}")]
    NoContainer {
        kind: String,
        namespace: String,
        name: String,
        container: String,
    },
    #[error("a DaemonSet has no replicas to sweep; set cpu only")]
    DaemonSetReplicas,
    #[error("not allowed to {verb} {kind} {namespace}/{name}: {message}")]
    Forbidden {
        verb: &'static str,
        kind: String,
        namespace: String,
        name: String,
        message: String,
    },
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

impl From<TargetError> for crate::base::error::Error {
    fn from(e: TargetError) -> Self {
        crate::base::error::Error::Internal(Box::new(e))
    }
}

pub fn kind_name(kind: TargetKind) -> &'static str {
    match kind {
        TargetKind::Deployment => "Deployment",
        TargetKind::DaemonSet => "DaemonSet",
    }
}

/// Whether `saved` is the workload `tref` names for a benchmark in `benchmark_ns` (a namespace
/// left out is the benchmark's).
pub fn is_saved_of(saved: &SavedTarget, tref: &TargetRef, benchmark_ns: &str) -> bool {
    let ns = tref.namespace.as_deref().unwrap_or(benchmark_ns);
    saved.namespace == ns && saved.name == tref.name && saved.kind == kind_name(tref.kind)
}

/// The fields a sweep reads: containers, replicas, and rollout state.
struct Workload {
    containers: Vec<Container>,
    replicas: Option<i32>,
    rolled_out: bool,
}

async fn read(
    client: &Client,
    kind: TargetKind,
    namespace: &str,
    name: &str,
) -> Result<Option<Workload>, kube::Error> {
    Ok(match kind {
        TargetKind::Deployment => {
            let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
            api.get_opt(name).await?.map(|d| {
                let spec = d.spec;
                let want = spec.replicas.unwrap_or(1);
                let st = d.status.unwrap_or_default();
                let rolled_out = st.observed_generation >= d.metadata.generation
                    && st.updated_replicas.unwrap_or(0) == want
                    && st.available_replicas.unwrap_or(0) == want
                    && st.replicas.unwrap_or(0) == want;
                Workload {
                    containers: spec.template.spec.unwrap_or_default().containers,
                    replicas: spec.replicas,
                    rolled_out,
                }
            })
        }
        TargetKind::DaemonSet => {
            let api: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
            api.get_opt(name).await?.map(|d| {
                let spec = d.spec;
                let st = d.status.unwrap_or_default();
                let rolled_out = st.observed_generation >= d.metadata.generation
                    && st.updated_number_scheduled.unwrap_or(0) == st.desired_number_scheduled
                    && st.number_available.unwrap_or(0) == st.desired_number_scheduled;
                Workload {
                    containers: spec.template.spec.unwrap_or_default().containers,
                    replicas: None,
                    rolled_out,
                }
            })
        }
    })
}

/// The image of the target's swept container (the named one, else the first); None when the
/// workload or container is not there.
pub async fn image(
    client: &Client,
    tref: &TargetRef,
    namespace: &str,
) -> Result<Option<String>, kube::Error> {
    let Some(w) = read(client, tref.kind, namespace, &tref.name).await? else {
        return Ok(None);
    };
    let container = match &tref.container {
        None => w.containers.first(),
        Some(c) => w.containers.iter().find(|x| &x.name == c),
    };
    Ok(container.and_then(|c| c.image.clone()))
}

/// Reads the target and records what a sweep will change. Call once, before the first patch.
pub async fn save(
    client: &Client,
    tref: &TargetRef,
    default_namespace: &str,
) -> Result<SavedTarget, TargetError> {
    let namespace = tref
        .namespace
        .clone()
        .unwrap_or_else(|| default_namespace.to_string());
    let kind = kind_name(tref.kind).to_string();
    let w = read(client, tref.kind, &namespace, &tref.name)
        .await?
        .ok_or_else(|| TargetError::NotFound {
            kind: kind.clone(),
            namespace: namespace.clone(),
            name: tref.name.clone(),
        })?;
    let index = match &tref.container {
        None if !w.containers.is_empty() => 0,
        None => usize::MAX,
        Some(c) => w
            .containers
            .iter()
            .position(|x| &x.name == c)
            .unwrap_or(usize::MAX),
    };
    let container = w
        .containers
        .get(index)
        .ok_or_else(|| TargetError::NoContainer {
            kind: kind.clone(),
            namespace: namespace.clone(),
            name: tref.name.clone(),
            container: tref.container.clone().unwrap_or_else(|| "(first)".into()),
        })?;
    Ok(SavedTarget {
        kind,
        namespace,
        name: tref.name.clone(),
        container: container.name.clone(),
        container_index: index as u32,
        replicas: w.replicas,
        resources_json: serde_json::to_string(&container.resources).expect("resources serialize"),
        restored: false,
    })
}

fn kind_of(saved: &SavedTarget) -> TargetKind {
    if saved.kind == "DaemonSet" {
        TargetKind::DaemonSet
    } else {
        TargetKind::Deployment
    }
}

/// The JSON patch that sets one step's CPU and replicas, keeping the rest of the container's
/// resources (memory, other resources) as saved.
pub fn step_patch(saved: &SavedTarget, step: &SweepStep) -> Result<Vec<Value>, TargetError> {
    let mut ops = vec![];
    if let Some(cpu) = &step.cpu {
        let mut res: ResourceRequirements =
            serde_json::from_str::<Option<ResourceRequirements>>(&saved.resources_json)
                .ok()
                .flatten()
                .unwrap_or_default();
        res.requests
            .get_or_insert_with(Default::default)
            .insert("cpu".into(), cpu.clone());
        res.limits
            .get_or_insert_with(Default::default)
            .insert("cpu".into(), cpu.clone());
        ops.push(json!({"op": "add", "path": resources_path(saved), "value": res}));
    }
    if let Some(replicas) = step.replicas {
        if kind_of(saved) == TargetKind::DaemonSet {
            return Err(TargetError::DaemonSetReplicas);
        }
        ops.push(json!({"op": "add", "path": "/spec/replicas", "value": replicas}));
    }
    Ok(ops)
}

/// The JSON patch that writes back exactly what was saved.
pub fn restore_patch(saved: &SavedTarget) -> Vec<Value> {
    let mut ops = vec![];
    match serde_json::from_str::<Value>(&saved.resources_json) {
        Ok(Value::Null) | Err(_) => {
            ops.push(json!({"op": "add", "path": resources_path(saved), "value": {}}))
        }
        Ok(v) => ops.push(json!({"op": "add", "path": resources_path(saved), "value": v})),
    }
    if let Some(r) = saved.replicas {
        ops.push(json!({"op": "add", "path": "/spec/replicas", "value": r}));
    }
    ops
}

fn resources_path(saved: &SavedTarget) -> String {
    format!(
        "/spec/template/spec/containers/{}/resources",
        saved.container_index
    )
}

async fn patch(
    client: &Client,
    saved: &SavedTarget,
    ops: Vec<Value>,
    verb: &'static str,
) -> Result<(), TargetError> {
    let patch: json_patch::Patch =
        serde_json::from_value(Value::Array(ops)).expect("valid JSON patch");
    let pp = PatchParams::apply("netbench-operator");
    let result = match kind_of(saved) {
        TargetKind::Deployment => Api::<Deployment>::namespaced(client.clone(), &saved.namespace)
            .patch(&saved.name, &pp, &Patch::<()>::Json(patch))
            .await
            .map(drop),
        TargetKind::DaemonSet => Api::<DaemonSet>::namespaced(client.clone(), &saved.namespace)
            .patch(&saved.name, &pp, &Patch::<()>::Json(patch))
            .await
            .map(drop),
    };
    result.map_err(|e| match e {
        kube::Error::Api(ae) if ae.code == 403 => TargetError::Forbidden {
            verb,
            kind: saved.kind.clone(),
            namespace: saved.namespace.clone(),
            name: saved.name.clone(),
            message: ae.message,
        },
        kube::Error::Api(ae) if ae.code == 404 => TargetError::NotFound {
            kind: saved.kind.clone(),
            namespace: saved.namespace.clone(),
            name: saved.name.clone(),
        },
        e => TargetError::Kube(e),
    })
}

pub async fn apply_step(
    client: &Client,
    saved: &SavedTarget,
    step: &SweepStep,
) -> Result<(), TargetError> {
    patch(client, saved, step_patch(saved, step)?, "patch").await
}

/// Restores the saved fields. A target that no longer exists counts as restored.
pub async fn restore(client: &Client, saved: &SavedTarget) -> Result<(), TargetError> {
    match patch(client, saved, restore_patch(saved), "restore").await {
        Err(TargetError::NotFound { .. }) => Ok(()),
        other => other,
    }
}

/// True when the target's container resources and replicas read back as saved (a target that
/// no longer exists counts as restored, as in [`restore`]).
pub async fn is_restored(client: &Client, saved: &SavedTarget) -> Result<bool, TargetError> {
    let Some(w) = read(client, kind_of(saved), &saved.namespace, &saved.name).await? else {
        return Ok(true);
    };
    let index = usize::try_from(saved.container_index).unwrap_or(usize::MAX);
    let Some(container) = w.containers.get(index) else {
        return Ok(false);
    };
    let normal = |v: Value| if v.is_null() { json!({}) } else { v };
    let want = normal(serde_json::from_str(&saved.resources_json).unwrap_or(Value::Null));
    let have = normal(serde_json::to_value(&container.resources).unwrap_or(Value::Null));
    let replicas_ok = saved.replicas.is_none() || saved.replicas == w.replicas;
    Ok(want == have && replicas_ok)
}

/// True once the target runs the patched spec everywhere.
pub async fn rolled_out(client: &Client, saved: &SavedTarget) -> Result<bool, TargetError> {
    let w = read(client, kind_of(saved), &saved.namespace, &saved.name)
        .await?
        .ok_or_else(|| TargetError::NotFound {
            kind: saved.kind.clone(),
            namespace: saved.namespace.clone(),
            name: saved.name.clone(),
        })?;
    Ok(w.rolled_out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn saved(resources: &str) -> SavedTarget {
        SavedTarget {
            kind: "Deployment".into(),
            namespace: "ns".into(),
            name: "nginx".into(),
            container: "nginx".into(),
            container_index: 1,
            replicas: Some(3),
            resources_json: resources.into(),
            restored: false,
        }
    }

    #[test]
    fn step_patch_sets_cpu_and_keeps_memory() {
        let s = saved(r#"{"limits":{"memory":"1Gi"},"requests":{"cpu":"100m","memory":"512Mi"}}"#);
        let ops = step_patch(
            &s,
            &SweepStep {
                cpu: Some(Quantity("2".into())),
                replicas: Some(2),
            },
        )
        .unwrap();
        assert_eq!(ops[0]["path"], "/spec/template/spec/containers/1/resources");
        assert_eq!(ops[0]["value"]["requests"]["cpu"], "2");
        assert_eq!(ops[0]["value"]["limits"]["cpu"], "2");
        assert_eq!(ops[0]["value"]["limits"]["memory"], "1Gi");
        assert_eq!(ops[0]["value"]["requests"]["memory"], "512Mi");
        assert_eq!(
            ops[1],
            json!({"op": "add", "path": "/spec/replicas", "value": 2})
        );
    }

    #[test]
    fn restore_patch_writes_back_what_was_saved() {
        let original = r#"{"requests":{"cpu":"100m"}}"#;
        let ops = restore_patch(&saved(original));
        assert_eq!(
            ops[0]["value"],
            serde_json::from_str::<Value>(original).unwrap()
        );
        assert_eq!(ops[1]["value"], 3);
        let ops = restore_patch(&saved("{}"));
        assert_eq!(ops[0]["value"], json!({}));
    }

    #[test]
    fn daemonsets_cannot_sweep_replicas() {
        let mut s = saved("{}");
        s.kind = "DaemonSet".into();
        assert!(matches!(
            step_patch(
                &s,
                &SweepStep {
                    cpu: None,
                    replicas: Some(2)
                }
            ),
            Err(TargetError::DaemonSetReplicas)
        ));
    }
}
