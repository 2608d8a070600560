//! Creating, observing and deleting offload Jobs. A finished Job's outcome per container is
//! the device state the loadgen printed as its last log line (read through the API: a log has
//! no size limit, unlike a termination message, which keeps 4 KiB shared by all containers, so
//! a profile touching many features on many interfaces could be cut silently). A state line
//! that does not parse as a whole is an error, never a partial record.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use kube::Client;

use crds::egress::EgressBenchmark;
use protocol::offload::{parse_state_line, DeviceState};

use super::super::plan;
use crate::admin::config::Config;
use crate::base::labels;

/// The state line is the last one; a little slack for stderr lines after it.
const LOG_TAIL_LINES: i64 = 8;
/// A device state is a few KiB; anything much larger is not ours.
const LOG_LIMIT_BYTES: i64 = 1 << 20;

/// One container's outcome: the state it read (before, or after its change) or why not.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub state: Option<DeviceState>,
    pub error: Option<String>,
}

#[derive(Debug, PartialEq)]
pub enum JobState {
    Missing,
    Running,
    /// Finished (succeeded or not): the outcome per container name.
    Finished(BTreeMap<String, Outcome>),
}

/// Reads a Job's state and, once finished, each container's state line and exit.
pub async fn observe(
    client: &Client,
    ns: &str,
    name: &str,
    containers: &[String],
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
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let list = pods
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}")))
        .await?;
    let pod = list.items.into_iter().next_back();
    let pod_name = pod.as_ref().and_then(|p| p.metadata.name.clone());
    let statuses = pod
        .and_then(|p| p.status?.container_statuses)
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    for c in containers {
        let outcome = match (&pod_name, statuses.iter().find(|s| &s.name == c)) {
            (Some(pod_name), Some(s)) => outcome(&pods, pod_name, s).await,
            _ => Outcome {
                state: None,
                error: Some(format!(
                    "the Job failed before container {c} ran (deadline or scheduling)"
                )),
            },
        };
        out.insert(c.clone(), outcome);
    }
    Ok(JobState::Finished(out))
}

async fn outcome(pods: &Api<Pod>, pod_name: &str, s: &ContainerStatus) -> Outcome {
    let Some(t) = s.state.as_ref().and_then(|st| st.terminated.clone()) else {
        return Outcome {
            state: None,
            error: Some(format!("container {} did not terminate", s.name)),
        };
    };
    let params = LogParams {
        container: Some(s.name.clone()),
        tail_lines: Some(LOG_TAIL_LINES),
        limit_bytes: Some(LOG_LIMIT_BYTES),
        ..Default::default()
    };
    let state = match pods.logs(pod_name, &params).await {
        Ok(log) => parse_state_line(&log),
        Err(e) => Err(format!("reading the log of {pod_name}/{}: {e}", s.name)),
    };
    let message = t.message.unwrap_or_default();
    let message = message.trim();
    let error = match (t.exit_code, &state) {
        (0, Ok(_)) => None,
        (0, Err(e)) => Some(e.clone()),
        (code, _) => Some(format!("exit code {code}: {message}")),
    };
    Outcome {
        state: state.ok(),
        error,
    }
}

pub async fn create(client: &Client, ns: &str, job: &Job) -> Result<(), kube::Error> {
    match Api::<Job>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), job)
        .await
    {
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        r => r.map(|_| ()),
    }
}

pub async fn delete(client: &Client, ns: &str, name: &str) -> Result<(), kube::Error> {
    match Api::<Job>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::background())
        .await
    {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        r => r.map(|_| ()),
    }
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
