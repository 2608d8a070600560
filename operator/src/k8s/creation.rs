//! Starting a step's worker pods. A refusal by the API server (a ResourceQuota, PodSecurity
//! admission, an invalid quantity) ends the run at once with the server's message; other
//! errors (5xx, 429, timeouts) are retried until the worker start timeout, then end the run
//! naming the last one. Either way the pods already created go, and nothing blocks the queue.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::events::EventType;
use kube::Client;

use crate::base::clock::elapsed_since;
use crate::base::conditions::{self, WORKERS_SCHEDULED};
use crate::base::error::Result;
use crate::base::events::PendingEvent;
use crate::base::outcome::{Failure, Reason};
use crate::base::text::clip;
use crate::k8s::pods::{self, PodCreateError};

/// Condition reason (WorkersScheduled=False) and Event reason while creation is retried (its
/// failures are Reason::PodCreationRefused and Reason::PodCreationTimeout).
pub const RETRYING: &str = "PodCreationRetrying";

/// Longest API server message kept in status.
const MAX_MESSAGE: usize = 1024;

#[derive(Debug, PartialEq)]
pub enum Started {
    /// Every pod exists.
    Yes,
    /// A transient error; try again shortly. The message says what failed.
    Retrying(String),
    /// The run must end.
    Failed(Failure),
}

/// What one creation attempt means, given how long creation has already been failing. Pure.
pub fn judge(
    result: std::result::Result<(), PodCreateError>,
    failing_for: Duration,
    timeout: Duration,
) -> Started {
    let e = match result {
        Ok(()) => return Started::Yes,
        Err(e) => e,
    };
    let message = clip(&e.message, MAX_MESSAGE);
    if e.refused {
        return Started::Failed(Failure::new(
            Reason::PodCreationRefused,
            format!("the API server refused worker pod {}: {message}", e.pod),
        ));
    }
    if failing_for >= timeout {
        return Started::Failed(Failure::new(
            Reason::PodCreationTimeout,
            format!(
                "worker pod {} could not be created within the worker start timeout ({}s); last error: {message}",
                e.pod,
                timeout.as_secs()
            ),
        ));
    }
    Started::Retrying(format!(
        "creating worker pod {} failed, retrying: {message}",
        e.pod
    ))
}

/// One step's pods, for [`start`].
pub struct StepPods<'a> {
    /// The kind of their benchmark.
    pub kind: &'a str,
    pub namespace: &'a str,
    /// Selects the step's pods (to remove them when the run cannot start).
    pub selector: &'a str,
    pub pods: &'a [Pod],
}

/// Creates the pods and records the outcome in the WorkersScheduled condition (whose
/// lastTransitionTime while it says PodCreationRetrying is when the failures began) and, on
/// failure, in a Warning Event. The caller ends the run on `Started::Failed`.
pub async fn start(
    client: &Client,
    timeout: Duration,
    step: StepPods<'_>,
    run: &mut crds::RunStatus,
    events: &mut Vec<PendingEvent>,
    generation: i64,
) -> Result<Started> {
    let result = pods::create_pods(client, step.namespace, step.pods).await;
    let retrying = conditions::get(&run.conditions, WORKERS_SCHEDULED)
        .filter(|c| c.reason == RETRYING)
        .map(|c| c.last_transition_time.clone());
    let failing_for = elapsed_since(&retrying);
    let outcome = judge(result, failing_for, timeout);
    let generation = Some(generation);
    match &outcome {
        Started::Yes => {
            if retrying.is_some() {
                let m = format!("{} worker pod(s) created", step.pods.len());
                conditions::set(
                    &mut run.conditions,
                    WORKERS_SCHEDULED,
                    false,
                    "Scheduling",
                    m,
                    generation,
                );
            }
        }
        Started::Retrying(m) => {
            if retrying.is_none() {
                // A fresh clock: the condition's transition time marks the first failure.
                run.conditions.retain(|c| c.type_ != WORKERS_SCHEDULED);
                events.push((EventType::Warning, RETRYING.into(), m.clone()));
            }
            conditions::set(
                &mut run.conditions,
                WORKERS_SCHEDULED,
                false,
                RETRYING,
                m.clone(),
                generation,
            );
        }
        Started::Failed(f) => {
            pods::delete_workers(client, step.kind, step.namespace, step.selector).await?;
            let reason = f.reason.as_str();
            conditions::set(
                &mut run.conditions,
                WORKERS_SCHEDULED,
                false,
                reason,
                f.message.clone(),
                generation,
            );
            events.push((EventType::Warning, reason.into(), f.message.clone()));
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(refused: bool) -> std::result::Result<(), PodCreateError> {
        Err(PodCreateError {
            pod: "b-r-s0-w0".into(),
            refused,
            message: "pods \"b-r-s0-w0\" is forbidden: exceeded quota: q".into(),
        })
    }

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn a_refusal_fails_at_once_with_the_servers_message() {
        let Started::Failed(Failure { reason, message: m }) =
            judge(err(true), Duration::ZERO, MINUTE)
        else {
            panic!("a refusal must end the run");
        };
        assert_eq!(reason, Reason::PodCreationRefused);
        assert!(
            m.contains("b-r-s0-w0") && m.contains("exceeded quota: q"),
            "{m}"
        );
    }

    #[test]
    fn transient_errors_retry_until_the_start_timeout() {
        assert!(matches!(
            judge(err(false), Duration::from_secs(59), MINUTE),
            Started::Retrying(m) if m.contains("retrying")
        ));
        let Started::Failed(Failure { reason, message: m }) = judge(err(false), MINUTE, MINUTE)
        else {
            panic!("past the start timeout the run must end");
        };
        assert_eq!(reason, Reason::PodCreationTimeout);
        assert!(m.contains("60s") && m.contains("exceeded quota"), "{m}");
        assert_eq!(judge(Ok(()), MINUTE, MINUTE), Started::Yes);
    }

    #[test]
    fn only_final_api_answers_count_as_refusals() {
        let api = |code: u16| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..Default::default()
            }))
        };
        for code in [400, 403, 404, 422] {
            assert!(pods::is_refusal(&api(code)), "{code}");
        }
        for code in [409, 429, 500, 503] {
            assert!(!pods::is_refusal(&api(code)), "{code}");
        }
    }
}
