//! Worker pod specs: pure functions from a benchmark's spec to the pods of one step.
//! Workers run non-root, read-only, with no capabilities and no Kubernetes API token; the image
//! comes from operator config, never from the benchmark. Each worker proves who it is to the
//! operator with a projected ServiceAccount token for the `netbench` audience only (which the
//! API server does not accept as an API credential), bound to its pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, EnvVar, EnvVarSource, NodeAffinity, NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm, ObjectFieldSelector, PodAffinityTerm,
    PodAntiAffinity, PodSecurityContext, PodSpec, ProjectedVolumeSource, ResourceRequirements,
    SeccompProfile, SecurityContext, ServiceAccountTokenProjection, Volume, VolumeMount,
    VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

use crate::admin::config::Config;
use crate::base::labels;

/// The audience worker tokens are issued for (and the only one the worker API accepts).
pub const AUDIENCE: &str = "netbench";
/// Where a worker finds its identity token (the kubelet rotates the file).
pub const TOKEN_DIR: &str = "/var/run/secrets/netbench";
const TOKEN_FILE: &str = "token";
/// Lifetime of a worker's token; the kubelet renews it at 80% of that.
const TOKEN_SECONDS: i64 = 600;

/// Everything one worker pod needs, independent of the benchmark kind.
#[derive(Clone, Debug)]
pub struct WorkerPlan {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub owner: OwnerReference,
    pub args: Vec<String>,
    pub step: u32,
    pub run: String,
    /// Pin to this node (by node name, like a DaemonSet pod).
    pub node_name: Option<String>,
    pub node_selector: BTreeMap<String, String>,
    pub affinity: Option<Affinity>,
    /// One worker per node among pods with the same run and step.
    pub spread: bool,
    pub cpu: Option<Quantity>,
    pub memory: Option<Quantity>,
    pub host_network: bool,
    /// How long the worker's step may take once it started (without the start timeout): the
    /// pod's activeDeadlineSeconds adds the start timeout and a margin, so a worker the
    /// operator lost track of (cleanup Never, a peer that holds it) still ends.
    pub active_deadline: std::time::Duration,
}

/// What the kubelet allows a worker pod beyond its step's deadline before it kills it (the
/// operator's own deadline fails the run first).
const ACTIVE_DEADLINE_MARGIN: std::time::Duration = std::time::Duration::from_secs(60);

/// The pod's activeDeadlineSeconds (saturating; at least 1).
fn active_deadline_seconds(plan: &WorkerPlan, config: &Config) -> i64 {
    let d = plan
        .active_deadline
        .saturating_add(config.worker_start_timeout())
        .saturating_add(ACTIVE_DEADLINE_MARGIN);
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX).max(1)
}

/// The worker pod of `plan`: the loadgen image the admin configured (never one from the CR),
/// non-root, no capabilities, a read-only root, and the worker's identity token.
pub fn pod(plan: &WorkerPlan, config: &Config) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(plan.name.clone()),
            labels: Some(plan.labels.clone()),
            owner_references: Some(vec![plan.owner.clone()]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![container(plan, config)],
            volumes: Some(vec![identity_token()]),
            restart_policy: Some("Never".into()),
            // The namespace's default ServiceAccount, whose token is mounted only for our
            // audience (above), never as a Kubernetes API credential.
            service_account_name: Some("default".into()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            host_network: plan.host_network.then_some(true),
            dns_policy: plan.host_network.then(|| "ClusterFirstWithHostNet".into()),
            node_selector: (!plan.node_selector.is_empty()).then(|| plan.node_selector.clone()),
            affinity: affinity(plan),
            tolerations: config.worker_tolerations.for_pod(),
            termination_grace_period_seconds: Some(5),
            active_deadline_seconds: Some(active_deadline_seconds(plan, config)),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                // The image's user (65532) unless the admin fixes one: a cluster may assign
                // its own (OpenShift's restricted-v2 refuses ids outside the namespace's range).
                run_as_user: config.worker_uid,
                run_as_group: config.worker_uid,
                ..runtime_default_seccomp()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn container(plan: &WorkerPlan, config: &Config) -> Container {
    Container {
        name: "loadgen".into(),
        image: Some(config.loadgen_image.clone()),
        image_pull_policy: Some(config.image_pull_policy.clone()),
        args: Some(plan.args.clone()),
        env: Some(env(plan, config)),
        volume_mounts: Some(vec![VolumeMount {
            name: "netbench-token".into(),
            mount_path: TOKEN_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        }]),
        resources: resources(plan),
        // With a read-only root, the log tail is the only place an error message can go.
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// What a worker learns from its environment: where the operator is, its run and step, and
/// (from the downward API) its own name, node and pod IP.
fn env(plan: &WorkerPlan, config: &Config) -> Vec<EnvVar> {
    let field_env = |name: &str, path: &str| EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let value_env = |name: &str, value: String| EnvVar {
        name: name.into(),
        value: Some(value),
        ..Default::default()
    };
    vec![
        value_env("NETBENCH_OPERATOR_URL", config.api_url.clone()),
        value_env("NETBENCH_RUN", plan.run.clone()),
        value_env("NETBENCH_STEP", plan.step.to_string()),
        field_env("NETBENCH_WORKER", "metadata.name"),
        field_env("NETBENCH_NODE", "spec.nodeName"),
        // A TCP server without a bind address registers this (the node's IP with hostNetwork).
        field_env("NETBENCH_POD_IP", "status.podIP"),
        value_env("NETBENCH_TOKEN_FILE", format!("{TOKEN_DIR}/{TOKEN_FILE}")),
    ]
}

/// The worker's identity: its pod's ServiceAccount token for the audience `netbench`.
fn identity_token() -> Volume {
    let token = ServiceAccountTokenProjection {
        audience: Some(AUDIENCE.into()),
        expiration_seconds: Some(TOKEN_SECONDS),
        path: TOKEN_FILE.into(),
        ..Default::default()
    };
    Volume {
        name: "netbench-token".into(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(vec![VolumeProjection {
                service_account_token: Some(token),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// CPU set: requests = limits for CPU and memory, so the pod gets Guaranteed QoS.
fn resources(plan: &WorkerPlan) -> Option<ResourceRequirements> {
    let cpu = plan.cpu.clone()?;
    let memory = plan
        .memory
        .clone()
        .unwrap_or_else(|| Quantity("256Mi".into()));
    let both = BTreeMap::from([("cpu".to_string(), cpu), ("memory".to_string(), memory)]);
    Some(ResourceRequirements {
        requests: Some(both.clone()),
        limits: Some(both),
        ..Default::default()
    })
}

/// The pod security context every pod of the operator starts from: the container runtime's
/// default seccomp profile, and nothing else.
pub fn runtime_default_seccomp() -> PodSecurityContext {
    PodSecurityContext {
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A node selector term on a node's name (matchFields on metadata.name): `operator` ("In",
/// "NotIn") the one node `node`.
pub fn name_term(operator: &str, node: &str) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_fields: Some(vec![NodeSelectorRequirement {
            key: "metadata.name".into(),
            operator: operator.into(),
            values: Some(vec![node.to_string()]),
        }]),
        ..Default::default()
    }
}

/// Pins to one node by name. matchFields on metadata.name keeps the scheduler in the loop, so
/// an unschedulable pod is reported instead of silently stuck (as with spec.nodeName).
pub fn pin(affinity: &mut Affinity, node: &str) {
    let term = name_term("In", node);
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    let required = node_affinity
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(|| NodeSelector {
            node_selector_terms: vec![],
        });
    if required.node_selector_terms.is_empty() {
        required.node_selector_terms.push(term);
    } else {
        // Terms are ORed; the pin must hold in every one of them.
        for t in &mut required.node_selector_terms {
            t.match_fields
                .get_or_insert_with(Vec::new)
                .extend(term.match_fields.clone().unwrap_or_default());
        }
    }
}

fn affinity(plan: &WorkerPlan) -> Option<Affinity> {
    let mut affinity = plan.affinity.clone().unwrap_or_default();
    if let Some(node) = &plan.node_name {
        pin(&mut affinity, node);
    }
    if plan.spread {
        let selector = LabelSelector {
            match_labels: Some(BTreeMap::from([
                (labels::RUN.to_string(), plan.run.clone()),
                (labels::STEP.to_string(), plan.step.to_string()),
            ])),
            ..Default::default()
        };
        affinity
            .pod_anti_affinity
            .get_or_insert_with(PodAntiAffinity::default)
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(PodAffinityTerm {
                label_selector: Some(selector),
                topology_key: "kubernetes.io/hostname".into(),
                ..Default::default()
            });
    }
    (affinity != Affinity::default()).then_some(affinity)
}

/// The names among `names` that no Node has (each looked up once).
pub async fn missing_nodes<'a>(
    client: &kube::Client,
    names: impl IntoIterator<Item = &'a String>,
) -> Result<Vec<String>, kube::Error> {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    let mut missing = vec![];
    let unique: std::collections::BTreeSet<&String> = names.into_iter().collect();
    for n in unique {
        if nodes.get_opt(n).await?.is_none() {
            missing.push(n.clone());
        }
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> WorkerPlan {
        WorkerPlan {
            name: "b-run-s0-w0".into(),
            labels: BTreeMap::from([("a".into(), "b".into())]),
            owner: OwnerReference::default(),
            args: vec!["http".into()],
            step: 0,
            run: "run".into(),
            node_name: None,
            node_selector: BTreeMap::new(),
            affinity: None,
            spread: false,
            cpu: None,
            memory: None,
            host_network: false,
            active_deadline: std::time::Duration::from_secs(40),
        }
    }

    #[test]
    fn a_worker_ends_even_when_the_operator_lost_track_of_it() {
        let config = Config::for_tests();
        let spec = pod(&plan(), &config).spec.unwrap();
        let expected = 40 + config.worker_start_timeout().as_secs() + 60;
        assert_eq!(spec.active_deadline_seconds, Some(expected as i64));
        let mut absurd = plan();
        absurd.active_deadline = std::time::Duration::MAX;
        let spec = pod(&absurd, &config).spec.unwrap();
        assert_eq!(spec.active_deadline_seconds, Some(i64::MAX));
    }

    #[test]
    fn workers_are_locked_down() {
        let pod = pod(&plan(), &Config::for_tests());
        let spec = pod.spec.unwrap();
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert_eq!(spec.host_network, None);
        // The only token a worker holds: for the operator, bound to the pod, short-lived.
        let volumes = spec.volumes.clone().unwrap();
        let sources = volumes[0].projected.clone().unwrap().sources.unwrap();
        let token = sources[0].service_account_token.clone().unwrap();
        assert_eq!(token.audience.as_deref(), Some("netbench"));
        assert_eq!(token.expiration_seconds, Some(600));
        let env = spec.containers[0].env.clone().unwrap();
        let file = env
            .iter()
            .find(|e| e.name == "NETBENCH_TOKEN_FILE")
            .unwrap();
        assert_eq!(
            file.value.as_deref(),
            Some("/var/run/secrets/netbench/token")
        );
        assert!(env.iter().all(|e| e.name != "NETBENCH_TOKEN"));
        let psc = spec.security_context.unwrap();
        assert_eq!(psc.run_as_non_root, Some(true));
        // No fixed id unless the admin asks (OpenShift assigns one from the namespace's range).
        assert_eq!((psc.run_as_user, psc.run_as_group), (None, None));
        let fixed = Config {
            worker_uid: Some(1_000_650_000),
            ..Config::for_tests()
        };
        let psc = super::pod(&plan(), &fixed)
            .spec
            .unwrap()
            .security_context
            .unwrap();
        assert_eq!(psc.run_as_user, Some(1_000_650_000));
        assert_eq!(psc.run_as_group, Some(1_000_650_000));
        let c = &spec.containers[0];
        assert_eq!(
            c.image.as_deref(),
            Some(crate::admin::config::DEFAULT_LOADGEN_IMAGE),
            "image from operator config"
        );
        let sc = c.security_context.clone().unwrap();
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(
            sc.capabilities.unwrap().drop.unwrap(),
            vec!["ALL".to_string()]
        );
        assert!(c.resources.is_none());
    }

    #[test]
    fn workers_carry_the_admin_s_tolerations_and_none_without() {
        assert_eq!(
            pod(&plan(), &Config::for_tests()).spec.unwrap().tolerations,
            None
        );
        let config = Config {
            worker_tolerations:
                r#"[{"key":"pool","operator":"Equal","value":"bench","effect":"NoSchedule"}]"#
                    .parse()
                    .unwrap(),
            ..Config::for_tests()
        };
        let tolerations = pod(&plan(), &config).spec.unwrap().tolerations.unwrap();
        assert_eq!(tolerations.len(), 1);
        assert_eq!(tolerations[0].key.as_deref(), Some("pool"));
        assert_eq!(tolerations[0].value.as_deref(), Some("bench"));
        assert_eq!(tolerations[0].effect.as_deref(), Some("NoSchedule"));
    }

    #[test]
    fn cpu_gives_guaranteed_qos() {
        let mut p = plan();
        p.cpu = Some(Quantity("2".into()));
        let pod = pod(&p, &Config::for_tests());
        let r = pod.spec.unwrap().containers[0].resources.clone().unwrap();
        assert_eq!(r.requests, r.limits);
        assert_eq!(r.limits.unwrap()["cpu"], Quantity("2".into()));
    }

    #[test]
    fn pinning_and_spread() {
        let mut p = plan();
        p.node_name = Some("node-a".into());
        p.spread = true;
        let a = pod(&p, &Config::for_tests())
            .spec
            .unwrap()
            .affinity
            .unwrap();
        let terms = a
            .node_affinity
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .unwrap()
            .node_selector_terms;
        assert_eq!(
            terms[0].match_fields.as_ref().unwrap()[0]
                .values
                .as_ref()
                .unwrap(),
            &vec!["node-a".to_string()]
        );
        let anti = a
            .pod_anti_affinity
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .unwrap();
        assert_eq!(anti[0].topology_key, "kubernetes.io/hostname");
    }
}
