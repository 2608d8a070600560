//! The privileged Job spec: one Job per (run, case, node, action, attempt); container `d{i}`
//! works on the device of record `i`. hostNetwork, root with only CAP_NET_ADMIN (what the
//! ethtool netlink API needs), read-only root, no service account token, the operator's image.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, PodSpec, PodTemplateSpec, ResourceRequirements,
    SecurityContext, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crds::egress::EgressBenchmark;

use super::super::plan;
use crate::admin::config::Config;
use crate::base::labels;
use crate::k8s::workers::{pin, runtime_default_seccomp};

/// An offload change takes well under a second; a Job still running after this has a problem.
const JOB_DEADLINE_S: i64 = 120;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action {
    /// Records the device's whole state before anything changes (`offload get --state`).
    Read,
    /// Applies the profile (`offload set --state`).
    Apply,
    /// Writes the state before back (`offload set --state`; the operator compares).
    Restore,
}

impl Action {
    fn role(self) -> &'static str {
        match self {
            Action::Read => "offload-read",
            Action::Apply => "offload-apply",
            Action::Restore => "offload-restore",
        }
    }
    fn letter(self) -> char {
        match self {
            Action::Read => 'b',
            Action::Apply => 'a',
            Action::Restore => 'r',
        }
    }
}

/// Which Job: the run and case its records belong to, the node, the action and the attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct JobKey<'a> {
    pub run: &'a str,
    pub case: &'a str,
    pub node: &'a str,
    pub action: Action,
    pub attempt: u32,
}

/// What one container does: record index (container `d{index}`), interface, features to set
/// (ignored for Read).
pub type Device = (usize, String, BTreeMap<String, bool>);

/// Labels of a benchmark's Jobs: its run's labels plus its namespace (the Jobs live elsewhere).
pub fn job_labels(eb: &EgressBenchmark, run: &str) -> BTreeMap<String, String> {
    let mut l = labels::run_labels(
        plan::KIND,
        &eb.metadata.name.clone().unwrap_or_default(),
        run,
    );
    l.insert(
        labels::NAMESPACE.into(),
        eb.metadata.namespace.clone().unwrap_or_default(),
    );
    l
}

/// Job name: deterministic per benchmark and key.
pub fn job_name(eb: &EgressBenchmark, key: &JobKey<'_>) -> String {
    // FNV-1a: short, stable across versions (std's hasher is not).
    let ns = eb.metadata.namespace.clone().unwrap_or_default();
    let hash = format!("{ns}/{}/{}/{}", key.case, key.node, key.attempt)
        .bytes()
        .fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
        });
    let short = u32::try_from(hash & 0xffff_ffff).unwrap_or_default();
    let suffix = format!("-{}-{}{short:08x}", key.run, key.action.letter());
    let name = eb.metadata.name.clone().unwrap_or_default();
    format!(
        "{}{suffix}",
        labels::truncate(&name, 63usize.saturating_sub(suffix.len()))
    )
}

pub fn container_name(index: usize) -> String {
    format!("d{index}")
}

fn args(action: Action, interface: &str, features: &BTreeMap<String, bool>) -> Vec<String> {
    let verb = if action == Action::Read { "get" } else { "set" };
    let mut args = vec![
        "offload".to_string(),
        verb.into(),
        "--interface".into(),
        interface.into(),
    ];
    if action != Action::Read {
        for (name, on) in features {
            args.push("--feature".into());
            args.push(format!("{name}={}", if *on { "on" } else { "off" }));
        }
    }
    args.push("--state".into());
    args
}

fn container(config: &Config, action: Action, device: &Device) -> Container {
    let (index, interface, features) = device;
    Container {
        name: container_name(*index),
        image: Some(config.loadgen_image.clone()),
        image_pull_policy: Some(config.image_pull_policy.clone()),
        args: Some(args(action, interface, features)),
        // The state travels in the pod's log (no size limit); the termination message only
        // carries an error for the status.
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".into(), Quantity("10m".into())),
                ("memory".into(), Quantity("16Mi".into())),
            ])),
            limits: Some(BTreeMap::from([("memory".into(), Quantity("64Mi".into()))])),
            ..Default::default()
        }),
        security_context: Some(SecurityContext {
            run_as_user: Some(0),
            run_as_non_root: Some(false),
            privileged: Some(false),
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: Some(vec!["NET_ADMIN".into()]),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn job(eb: &EgressBenchmark, key: &JobKey<'_>, devices: &[Device], config: &Config) -> Job {
    let mut labels = job_labels(eb, key.run);
    labels.insert(labels::ROLE.into(), key.action.role().into());
    let containers = devices
        .iter()
        .map(|d| container(config, key.action, d))
        .collect();
    let mut affinity = Affinity::default();
    pin(&mut affinity, key.node);
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(eb, key)),
            namespace: Some(config.namespace.clone()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(JobSpec {
            // The operator retries itself, with a new Job per attempt.
            backoff_limit: Some(0),
            active_deadline_seconds: Some(JOB_DEADLINE_S),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers,
                    restart_policy: Some("Never".into()),
                    host_network: Some(true),
                    automount_service_account_token: Some(false),
                    enable_service_links: Some(false),
                    affinity: Some(affinity),
                    // Pinned to a node the admin's selector allows: run there whatever its taints.
                    tolerations: Some(vec![Toleration {
                        operator: Some("Exists".into()),
                        ..Default::default()
                    }]),
                    termination_grace_period_seconds: Some(5),
                    security_context: Some(runtime_default_seccomp()),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eb() -> EgressBenchmark {
        serde_yaml::from_str(
            "{apiVersion: netbench.io/v1alpha1, kind: EgressBenchmark, metadata: {name: e, namespace: ns, uid: u-1}, spec: {cases: [{name: vx, client: {}, server: {}}]}}",
        )
        .unwrap()
    }

    fn key(action: Action, node: &str, attempt: u32) -> JobKey<'_> {
        JobKey {
            run: "r1",
            case: "vx",
            node,
            action,
            attempt,
        }
    }

    #[test]
    fn the_job_is_privileged_only_as_far_as_needed() {
        let b = eb();
        let features = BTreeMap::from([("tx-checksumming".to_string(), false)]);
        let j = job(
            &b,
            &key(Action::Apply, "n1", 0),
            &[(3, "vx0".into(), features)],
            &Config::for_tests(),
        );
        let name = j.metadata.name.clone().unwrap();
        assert!(name.starts_with("e-r1-a") && name.len() <= 63, "{name}");
        // In the operator's namespace, tied to the benchmark by labels (no cross-namespace owner).
        assert_eq!(j.metadata.namespace.as_deref(), Some("netbench-system"));
        assert!(j.metadata.owner_references.is_none());
        assert_eq!(j.metadata.labels.as_ref().unwrap()[labels::NAMESPACE], "ns");
        let spec = j.spec.unwrap();
        // Not a worker's role: the chart's NetworkPolicy admits pods with role client or server
        // to the operator's port, and the Job's pod has no business there.
        let pod_labels = spec
            .template
            .metadata
            .as_ref()
            .unwrap()
            .labels
            .as_ref()
            .unwrap();
        assert_eq!(pod_labels[labels::ROLE], "offload-apply");
        for action in [Action::Read, Action::Apply, Action::Restore] {
            assert!(!["client", "server"].contains(&action.role()), "{action:?}");
        }
        assert_eq!(spec.backoff_limit, Some(0));
        let pod = spec.template.spec.unwrap();
        assert_eq!(pod.host_network, Some(true));
        assert_eq!(pod.automount_service_account_token, Some(false));
        let c = &pod.containers[0];
        assert_eq!(c.name, "d3");
        assert_eq!(
            c.image.as_deref(),
            Some(crate::admin::config::DEFAULT_LOADGEN_IMAGE)
        );
        assert_eq!(
            c.args.clone().unwrap().join(" "),
            "offload set --interface vx0 --feature tx-checksumming=off --state"
        );
        let sc = c.security_context.clone().unwrap();
        assert_eq!(sc.privileged, Some(false));
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        let caps = sc.capabilities.unwrap();
        assert_eq!(caps.add.unwrap(), ["NET_ADMIN"]);
        assert_eq!(caps.drop.unwrap(), ["ALL"]);
        let read = job(
            &b,
            &key(Action::Read, "n1", 0),
            &[(0, "vx0".into(), BTreeMap::new())],
            &Config::for_tests(),
        );
        let args = read.spec.unwrap().template.spec.unwrap().containers[0]
            .args
            .clone()
            .unwrap();
        assert_eq!(args.join(" "), "offload get --interface vx0 --state");
    }

    #[test]
    fn names_differ_per_node_action_and_attempt() {
        let b = eb();
        let names: std::collections::BTreeSet<String> = [
            key(Action::Apply, "n1", 0),
            key(Action::Apply, "n2", 0),
            key(Action::Restore, "n1", 0),
            key(Action::Restore, "n1", 1),
            key(Action::Read, "n1", 0),
        ]
        .iter()
        .map(|k| job_name(&b, k))
        .collect();
        assert_eq!(names.len(), 5, "{names:?}");
        let mut long = eb();
        long.metadata.name = Some("x".repeat(80));
        assert!(job_name(&long, &key(Action::Read, "n1", 9)).len() <= 63);
    }
}
