//! Offload tuning with privileged Jobs: one Job per node and case applies a profile's settings
//! (`netbench-loadgen offload set`, one container per interface) and writes what it found and
//! changed to its termination message; status.offload keeps that durably, and restore Jobs
//! write the changed kernel features back. Records are written before any Job is created, so
//! nothing that may have changed is ever forgotten.
//!
//! The Jobs live in the operator's own namespace, not the benchmark's: a restore must still run
//! while the benchmark's namespace is being deleted (no new objects are allowed there), the
//! privileged pods stay out of reach of whoever may create benchmarks, and one Role in one
//! namespace is all the RBAC they need. Labels tie them to their benchmark.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, Pod, PodSecurityContext, PodSpec, PodTemplateSpec,
    ResourceRequirements, SeccompProfile, SecurityContext, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;
use serde::Deserialize;

use crds::egress::{EgressBenchmark, EgressCase, OffloadRecord};

use super::{plan, validate};
use crate::config::Config;
use crate::labels;
use crate::workers::pin;

/// Where the loadgen writes its summary; Kubernetes keeps it as the termination message.
const SUMMARY_PATH: &str = "/dev/termination-log";
/// An offload change takes well under a second; a Job still running after this has a problem.
const JOB_DEADLINE_S: i64 = 120;

/// What `offload set --summary-file` writes.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Summary {
    #[serde(default)]
    pub interface: String,
    #[serde(default)]
    pub before: BTreeMap<String, bool>,
    #[serde(default)]
    pub applied: BTreeMap<String, bool>,
    #[serde(default)]
    pub restore: BTreeMap<String, bool>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action {
    Apply,
    Restore,
}

impl Action {
    fn role(self) -> &'static str {
        match self {
            Action::Apply => "offload-apply",
            Action::Restore => "offload-restore",
        }
    }
}

/// Where a stage stands.
#[derive(Debug, PartialEq)]
pub enum Stage {
    Done,
    /// Jobs are running (or were just created); the message says which.
    Waiting(String),
    /// The apply failed; the run must fail (and restore what did change).
    Failed(String),
}

/// The records a case needs: one per (setting, node), in spec order.
pub fn records_for(eb: &EgressBenchmark, case: &EgressCase) -> Vec<OffloadRecord> {
    let Some(profile) = validate::profile_of(&eb.spec, case) else {
        return vec![];
    };
    let mut out = vec![];
    for s in &profile.settings {
        for node in validate::offload_nodes(s, case) {
            out.push(OffloadRecord {
                case: case.name.clone(),
                node,
                interface: s.interface.clone(),
                profile: profile.name.clone(),
                ..Default::default()
            });
        }
    }
    out
}

fn features_args(features: &BTreeMap<String, bool>) -> Vec<String> {
    features
        .iter()
        .flat_map(|(name, on)| {
            [
                "--feature".to_string(),
                format!("{name}={}", if *on { "on" } else { "off" }),
            ]
        })
        .collect()
}

/// Labels of a benchmark's Jobs: its run's labels plus its namespace (the Jobs live elsewhere).
fn job_labels(eb: &EgressBenchmark, run: &str) -> BTreeMap<String, String> {
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

/// Deletes the Jobs of a benchmark (every run) from the operator's namespace; call only once
/// nothing is left to restore.
pub async fn delete_jobs(
    client: &Client,
    config: &Config,
    eb: &EgressBenchmark,
) -> Result<(), kube::Error> {
    let selector = format!(
        "{},{}={}",
        labels::benchmark_selector(plan::KIND, &eb.metadata.name.clone().unwrap_or_default()),
        labels::NAMESPACE,
        eb.metadata.namespace.clone().unwrap_or_default()
    );
    let jobs = Api::<Job>::namespaced(client.clone(), &config.namespace);
    for job in jobs.list(&ListParams::default().labels(&selector)).await? {
        delete(
            client,
            &config.namespace,
            &job.metadata.name.unwrap_or_default(),
        )
        .await?;
    }
    Ok(())
}

/// Job name: deterministic per benchmark, run, action, case and node.
pub fn job_name(eb: &EgressBenchmark, run: &str, action: Action, case: &str, node: &str) -> String {
    let a = match action {
        Action::Apply => "a",
        Action::Restore => "r",
    };
    // FNV-1a: short, stable across versions (std's hasher is not).
    let ns = eb.metadata.namespace.clone().unwrap_or_default();
    let hash = format!("{ns}/{case}/{node}")
        .bytes()
        .fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
        });
    let suffix = format!("-{run}-{a}{:08x}", hash as u32);
    let name = eb.metadata.name.clone().unwrap_or_default();
    let keep = 63 - suffix.len();
    format!(
        "{}{suffix}",
        name.chars()
            .take(keep)
            .collect::<String>()
            .trim_end_matches(['-', '.'])
    )
}

/// The privileged Job for one node: hostNetwork, root with only CAP_NET_ADMIN (what the
/// ethtool netlink API needs), read-only root, no service account token, the operator's image.
/// Container `s{k}` handles `interfaces[k]`.
pub fn job(
    eb: &EgressBenchmark,
    run: &str,
    action: Action,
    case: &str,
    node: &str,
    interfaces: &[(String, BTreeMap<String, bool>)],
    config: &Config,
) -> Job {
    let name = job_name(eb, run, action, case, node);
    let mut labels = job_labels(eb, run);
    labels.insert(labels::ROLE.into(), action.role().into());
    let containers = interfaces
        .iter()
        .enumerate()
        .map(|(k, (interface, features))| {
            let mut args = vec![
                "offload".to_string(),
                "set".into(),
                "--interface".into(),
                interface.clone(),
            ];
            args.extend(features_args(features));
            args.extend(["--summary-file".into(), SUMMARY_PATH.into()]);
            Container {
                name: format!("s{k}"),
                image: Some(config.loadgen_image.clone()),
                image_pull_policy: Some(config.image_pull_policy.clone()),
                args: Some(args),
                termination_message_path: Some(SUMMARY_PATH.into()),
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
        })
        .collect();
    let mut affinity = Affinity::default();
    pin(&mut affinity, node);
    Job {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(config.namespace.clone()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(JobSpec {
            // The operator retries a restore itself; an apply must never run twice (the second
            // would record the first one's changes as "before").
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
                    // Pinned to a node the benchmark names: run there whatever its taints.
                    tolerations: Some(vec![Toleration {
                        operator: Some("Exists".into()),
                        ..Default::default()
                    }]),
                    termination_grace_period_seconds: Some(5),
                    security_context: Some(PodSecurityContext {
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// One container's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerOutcome {
    pub summary: Option<Summary>,
    /// The termination message when it is not a summary (an error), or the exit code.
    pub error: Option<String>,
}

#[derive(Debug, PartialEq)]
pub enum JobState {
    Missing,
    Running,
    /// Finished (succeeded or not); per container `s{k}`.
    Finished(Vec<ContainerOutcome>),
}

/// Reads a Job's state and, once finished, its containers' termination messages.
pub async fn observe(
    client: &Client,
    ns: &str,
    name: &str,
    containers: usize,
) -> Result<JobState, kube::Error> {
    let Some(job) = Api::<Job>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await?
    else {
        return Ok(JobState::Missing);
    };
    let status = job.status.unwrap_or_default();
    let failed = status.failed.unwrap_or(0) > 0
        || status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Failed" && c.status == "True");
    if status.succeeded.unwrap_or(0) == 0 && !failed {
        return Ok(JobState::Running);
    }
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}")))
        .await?;
    let statuses = pods
        .items
        .iter()
        .filter_map(|p| p.status.as_ref()?.container_statuses.clone())
        .next_back()
        .unwrap_or_default();
    let outcomes = (0..containers)
        .map(|k| {
            let terminated = statuses
                .iter()
                .find(|c| c.name == format!("s{k}"))
                .and_then(|c| c.state.as_ref()?.terminated.clone());
            let Some(t) = terminated else {
                return ContainerOutcome {
                    summary: None,
                    error: Some(if failed {
                        format!("the Job failed before container s{k} ran (deadline or scheduling)")
                    } else {
                        "no termination state".into()
                    }),
                };
            };
            let message = t.message.unwrap_or_default();
            let summary = serde_json::from_str::<Summary>(message.trim()).ok();
            let error = match (t.exit_code, &summary) {
                (0, Some(_)) => None,
                (0, None) => Some(format!("unreadable summary: {}", message.trim())),
                (code, Some(_)) => Some(format!("exit code {code} (partly applied)")),
                (code, None) => Some(format!("exit code {code}: {}", message.trim())),
            };
            ContainerOutcome { summary, error }
        })
        .collect();
    Ok(JobState::Finished(outcomes))
}

async fn create(client: &Client, ns: &str, job: &Job) -> Result<(), kube::Error> {
    match Api::<Job>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), job)
        .await
    {
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        r => r.map(|_| ()),
    }
}

async fn delete(client: &Client, ns: &str, name: &str) -> Result<(), kube::Error> {
    match Api::<Job>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::background())
        .await
    {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        r => r.map(|_| ()),
    }
}

/// (case, node) groups of the records selected by `pick`, in record order.
fn groups(
    records: &[OffloadRecord],
    pick: impl Fn(&OffloadRecord) -> bool,
) -> Vec<(String, String)> {
    let mut seen = BTreeSet::new();
    records
        .iter()
        .filter(|r| pick(r))
        .map(|r| (r.case.clone(), r.node.clone()))
        .filter(|g| seen.insert(g.clone()))
        .collect()
}

fn indices(
    records: &[OffloadRecord],
    case: &str,
    node: &str,
    pick: impl Fn(&OffloadRecord) -> bool,
) -> Vec<usize> {
    (0..records.len())
        .filter(|&i| records[i].case == case && records[i].node == node && pick(&records[i]))
        .collect()
}

/// Copies an apply Job's outcome into its records; returns the errors.
fn record_apply(
    records: &mut [OffloadRecord],
    idx: &[usize],
    outcomes: &[ContainerOutcome],
) -> Vec<String> {
    let mut errors = vec![];
    for (k, &i) in idx.iter().enumerate() {
        let r = &mut records[i];
        let outcome = outcomes.get(k);
        if let Some(s) = outcome.and_then(|o| o.summary.clone()) {
            r.before = s.before;
            r.applied = s.applied;
            r.restore = s.restore;
        }
        // Without a summary the device was not changed: `offload set` checks everything first.
        r.recorded = true;
        r.restored = r.restore.is_empty();
        if let Some(e) = outcome.and_then(|o| o.error.clone()) {
            errors.push(format!("{}/{}: {e}", r.node, r.interface));
        }
    }
    errors
}

/// Applies case `case`'s profile: creates the records (the caller writes status before the
/// next call), then the Jobs, then copies their outcome.
pub async fn apply(
    client: &Client,
    config: &Config,
    eb: &EgressBenchmark,
    run: &str,
    case: &EgressCase,
    records: &mut Vec<OffloadRecord>,
) -> Result<Stage, kube::Error> {
    let ns = config.namespace.clone();
    if !records.iter().any(|r| r.case == case.name) {
        records.extend(records_for(eb, case));
        return Ok(Stage::Waiting(format!(
            "case {}: recording the offload settings to apply",
            case.name
        )));
    }
    let mut waiting = vec![];
    let mut errors = vec![];
    for (_, node) in groups(records, |r| r.case == case.name && !r.recorded) {
        let idx = indices(records, &case.name, &node, |r| !r.recorded);
        let name = job_name(eb, run, Action::Apply, &case.name, &node);
        match observe(client, &ns, &name, idx.len()).await? {
            JobState::Missing => {
                let interfaces: Vec<_> = idx
                    .iter()
                    .map(|&i| (records[i].interface.clone(), wanted(eb, case, &records[i])))
                    .collect();
                create(
                    client,
                    &ns,
                    &job(
                        eb,
                        run,
                        Action::Apply,
                        &case.name,
                        &node,
                        &interfaces,
                        config,
                    ),
                )
                .await?;
                waiting.push(node);
            }
            JobState::Running => waiting.push(node),
            JobState::Finished(outcomes) => errors.extend(record_apply(records, &idx, &outcomes)),
        }
    }
    Ok(if !errors.is_empty() {
        Stage::Failed(format!(
            "case {}: offload not applied: {}",
            case.name,
            errors.join("; ")
        ))
    } else if !waiting.is_empty() {
        Stage::Waiting(format!(
            "case {}: applying offload profile on {}",
            case.name,
            waiting.join(", ")
        ))
    } else {
        Stage::Done
    })
}

/// The features a record's setting asks for.
fn wanted(eb: &EgressBenchmark, case: &EgressCase, r: &OffloadRecord) -> BTreeMap<String, bool> {
    validate::profile_of(&eb.spec, case)
        .and_then(|p| p.settings.iter().find(|s| s.interface == r.interface))
        .map(|s| s.features.clone())
        .unwrap_or_default()
}

/// Writes back every record not yet restored, of any case but `skip_case` (the case being
/// prepared: its records exist before its apply Job does). Done when nothing is left; a failed
/// restore is kept in the record's restoreError and retried on the next call.
pub async fn restore(
    client: &Client,
    config: &Config,
    eb: &EgressBenchmark,
    run: &str,
    records: &mut [OffloadRecord],
    skip_case: Option<&str>,
) -> Result<Stage, kube::Error> {
    let ns = config.namespace.clone();
    let mut waiting = vec![];
    for (case_name, node) in groups(records, |r| {
        !r.restored && Some(r.case.as_str()) != skip_case
    }) {
        // An apply still in flight (deletion mid-apply) must finish before it can be undone.
        let unrecorded = indices(records, &case_name, &node, |r| !r.recorded);
        if !unrecorded.is_empty() {
            let name = job_name(eb, run, Action::Apply, &case_name, &node);
            match observe(client, &ns, &name, unrecorded.len()).await? {
                JobState::Running => {
                    waiting.push(format!("{node} (apply still running)"));
                    continue;
                }
                JobState::Finished(outcomes) => {
                    record_apply(records, &unrecorded, &outcomes);
                }
                // Records are written before the Job is created: no Job, no change.
                JobState::Missing => {
                    for i in unrecorded {
                        records[i].recorded = true;
                        records[i].restored = true;
                    }
                }
            }
        }
        let idx = indices(records, &case_name, &node, |r| !r.restored);
        if idx.is_empty() {
            continue;
        }
        if !crate::workers::missing_nodes(client, [&node])
            .await?
            .is_empty()
        {
            // A replacement node starts with its own defaults: there is nothing to write back.
            for &i in &idx {
                records[i].restore_error =
                    Some(format!("node {node} no longer exists; not restored"));
            }
            continue;
        }
        let name = job_name(eb, run, Action::Restore, &case_name, &node);
        match observe(client, &ns, &name, idx.len()).await? {
            JobState::Missing => {
                let interfaces: Vec<_> = idx
                    .iter()
                    .map(|&i| (records[i].interface.clone(), records[i].restore.clone()))
                    .collect();
                create(
                    client,
                    &ns,
                    &job(
                        eb,
                        run,
                        Action::Restore,
                        &case_name,
                        &node,
                        &interfaces,
                        config,
                    ),
                )
                .await?;
                waiting.push(node);
            }
            JobState::Running => waiting.push(node),
            JobState::Finished(outcomes) => {
                for (k, &i) in idx.iter().enumerate() {
                    match outcomes.get(k).and_then(|o| o.error.clone()) {
                        None => {
                            records[i].restored = true;
                            records[i].restore_error = None;
                        }
                        Some(e) => records[i].restore_error = Some(e),
                    }
                }
                // Finished either way; a failed one is created afresh on the next call.
                delete(client, &ns, &name).await?;
                if idx.iter().any(|&i| !records[i].restored) {
                    waiting.push(format!("{node} (retrying)"));
                }
            }
        }
    }
    Ok(if waiting.is_empty() {
        Stage::Done
    } else {
        Stage::Waiting(format!(
            "restoring offload settings on {}",
            waiting.join(", ")
        ))
    })
}

/// Records whose restore failed, for the OffloadRestored condition.
pub fn restore_problems(records: &[OffloadRecord]) -> Vec<String> {
    records
        .iter()
        .filter(|r| !r.restored)
        .filter_map(|r| {
            r.restore_error
                .as_ref()
                .map(|e| format!("{}/{}: {e}", r.node, r.interface))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eb() -> EgressBenchmark {
        serde_yaml::from_str(
            r#"
apiVersion: netbench.io/v1alpha1
kind: EgressBenchmark
metadata: {name: e, namespace: ns, uid: u-1}
spec:
  offload:
    profiles:
      - name: off
        settings:
          - {interface: vx0, features: {tx-checksumming: false}}
          - {interface: eth9, nodeNames: [n3], features: {tso: false}}
  cases:
    - name: vx
      client: {nodeName: n1, hostNetwork: true}
      server: {nodeName: n2, hostNetwork: true}
      offloadProfile: off
"#,
        )
        .unwrap()
    }

    #[test]
    fn records_cover_every_setting_and_node() {
        let b = eb();
        let r = records_for(&b, &b.spec.cases[0]);
        let got: Vec<_> = r
            .iter()
            .map(|r| format!("{}/{}", r.node, r.interface))
            .collect();
        assert_eq!(got, ["n1/vx0", "n2/vx0", "n3/eth9"]);
        assert!(r
            .iter()
            .all(|r| !r.recorded && !r.restored && r.case == "vx"));
    }

    #[test]
    fn the_job_is_privileged_only_as_far_as_needed() {
        let b = eb();
        let features = BTreeMap::from([("tx-checksumming".to_string(), false)]);
        let j = job(
            &b,
            "r1",
            Action::Apply,
            "vx",
            "n1",
            &[("vx0".into(), features)],
            &Config::for_tests(),
        );
        let name = j.metadata.name.clone().unwrap();
        assert!(name.starts_with("e-r1-a") && name.len() <= 63, "{name}");
        // In the operator's namespace, tied to the benchmark by labels (no cross-namespace owner).
        assert_eq!(j.metadata.namespace.as_deref(), Some("netbench-system"));
        assert!(j.metadata.owner_references.is_none());
        assert_eq!(j.metadata.labels.as_ref().unwrap()[labels::NAMESPACE], "ns");
        let spec = j.spec.unwrap();
        assert_eq!(spec.backoff_limit, Some(0));
        let pod = spec.template.spec.unwrap();
        assert_eq!(pod.host_network, Some(true));
        assert_eq!(pod.automount_service_account_token, Some(false));
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("netbench/loadgen:0.1.0"));
        assert_eq!(
            c.args.clone().unwrap().join(" "),
            "offload set --interface vx0 --feature tx-checksumming=off --summary-file /dev/termination-log"
        );
        let sc = c.security_context.clone().unwrap();
        assert_eq!(sc.privileged, Some(false));
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        let caps = sc.capabilities.unwrap();
        assert_eq!(caps.add.unwrap(), ["NET_ADMIN"]);
        assert_eq!(caps.drop.unwrap(), ["ALL"]);
        let terms = pod
            .affinity
            .unwrap()
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
            &["n1"]
        );
        assert_ne!(
            job_name(&b, "r1", Action::Apply, "vx", "n1"),
            job_name(&b, "r1", Action::Apply, "vx", "n2")
        );
        assert_ne!(
            job_name(&b, "r1", Action::Apply, "vx", "n1"),
            job_name(&b, "r1", Action::Restore, "vx", "n1")
        );
    }

    #[test]
    fn a_partial_apply_is_still_restorable() {
        let b = eb();
        let mut records = records_for(&b, &b.spec.cases[0]);
        let summary = Summary {
            interface: "vx0".into(),
            before: BTreeMap::from([("tx-checksumming".into(), true)]),
            applied: BTreeMap::from([("tx-checksumming".into(), false)]),
            restore: BTreeMap::from([("tx-checksum-ip-generic".into(), true)]),
        };
        let outcomes = vec![
            ContainerOutcome {
                summary: Some(summary),
                error: None,
            },
            ContainerOutcome {
                summary: None,
                error: Some("exit code 1: unknown feature".into()),
            },
        ];
        let errors = record_apply(&mut records, &[0, 1], &outcomes);
        assert_eq!(errors, ["n2/vx0: exit code 1: unknown feature"]);
        assert!(
            records[0].recorded && !records[0].restored,
            "changed: must be restored"
        );
        assert!(
            records[1].recorded && records[1].restored,
            "unchanged: nothing to restore"
        );
        // n1 must be written back; n3's apply never reported, so it is still open too.
        let open: Vec<_> = groups(&records, |r| !r.restored)
            .into_iter()
            .map(|(_, node)| node)
            .collect();
        assert_eq!(open, ["n1", "n3"]);
        records[0].restore_error = Some("boom".into());
        assert_eq!(restore_problems(&records), ["n1/vx0: boom"]);
    }
}
