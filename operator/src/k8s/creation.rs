//! Starting a step's worker pods. A refusal by the API server (a ResourceQuota, PodSecurity
//! admission, an invalid quantity) ends the run at once with the server's message; other
//! errors (5xx, 429, timeouts) are retried until the worker start timeout, then end the run
//! naming the last one. Either way the pods already created go, and nothing blocks the queue.
//!
//! A reconcile creates at most [`BATCH`] pods and comes back at once for the next ones, so a
//! 256-worker step is 16 short reconciles instead of one that holds a controller worker for
//! seconds. How far creation got is kept in memory ([`Batches`]); after a restart it starts
//! again from the first pod (AlreadyExists is success).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
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

/// Pods one reconcile creates (all at once: `pods::create_pods` sends 16 at a time).
pub const BATCH: usize = 16;

/// Steps whose creation is under way at most: beyond it the oldest progress is forgotten (that
/// step's next reconcile starts again from its first pod, harmlessly).
const STEPS_AT_MOST: usize = 4096;

/// How many pods of each step the operator has created so far, by step (namespace and
/// selector): where the next reconcile's batch starts.
#[derive(Default)]
pub struct Batches {
    done: Mutex<HashMap<String, usize>>,
}

impl Batches {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.done.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where step `key`'s next batch starts.
    fn next(&self, key: &str) -> usize {
        self.lock().get(key).copied().unwrap_or(0)
    }

    /// Step `key` has its first `created` pods; None: it is over (every pod, or given up).
    fn set(&self, key: &str, created: Option<usize>) {
        let mut done = self.lock();
        match created {
            Some(n) => {
                if done.len() >= STEPS_AT_MOST && !done.contains_key(key) {
                    done.clear();
                }
                done.insert(key.to_string(), n);
            }
            None => {
                done.remove(key);
            }
        }
    }
}

#[derive(Debug, PartialEq)]
pub enum Started {
    /// Every pod exists.
    Yes,
    /// A batch was created and more pods remain: come back at once.
    More { created: usize, of: usize },
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
    /// Whether Services may stand in front of them (`pods::delete_workers`).
    pub services: bool,
    pub namespace: &'a str,
    /// Selects the step's pods (to remove them when the run cannot start).
    pub selector: &'a str,
    pub pods: &'a [Pod],
    /// How far creation got in earlier reconciles.
    pub batches: &'a Batches,
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
    let key = format!("{}/{}", step.namespace, step.selector);
    let from = step.batches.next(&key).min(step.pods.len());
    let to = from.saturating_add(BATCH).min(step.pods.len());
    let batch = step.pods.get(from..to).unwrap_or_default();
    let result = pods::create_pods(client, step.namespace, batch).await;
    let retrying = conditions::get(&run.conditions, WORKERS_SCHEDULED)
        .filter(|c| c.reason == RETRYING)
        .map(|c| c.last_transition_time.clone());
    let failing_for = elapsed_since(&retrying);
    let mut outcome = judge(result, failing_for, timeout);
    match outcome {
        Started::Yes if to < step.pods.len() => {
            step.batches.set(&key, Some(to));
            outcome = Started::More {
                created: to,
                of: step.pods.len(),
            };
        }
        Started::Yes | Started::Failed(_) => step.batches.set(&key, None),
        Started::Retrying(_) | Started::More { .. } => {}
    }
    let generation = Some(generation);
    match &outcome {
        Started::More { .. } => {}
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
            pods::delete_workers(
                client,
                step.kind,
                step.services,
                step.namespace,
                step.selector,
            )
            .await?;
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

    fn pod(name: String) -> Pod {
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Runs `start` on `pods` against a fake API server answering pod creations with `code`;
    /// the outcome and the pods it posted, in name order.
    async fn start_once(pods: &[Pod], batches: &Batches, code: u16) -> (Started, Vec<String>) {
        let api_server = crate::testing::FakeApi::default();
        let client = api_server.client(move |seen| match seen.method.as_str() {
            "POST" => (code, serde_json::json!({"code": code})),
            _ => (200, crate::testing::fake_api::empty_list()),
        });
        let step = StepPods {
            kind: "IngressBenchmark",
            services: false,
            namespace: "team-a",
            selector: "netbench.io/run=r1,netbench.io/step=0",
            pods,
            batches,
        };
        let mut status = crds::RunStatus::default();
        let outcome = start(&client, MINUTE, step, &mut status, &mut vec![], 1)
            .await
            .unwrap();
        let mut posted: Vec<String> = api_server
            .requests()
            .into_iter()
            .filter(|l| l.starts_with("POST "))
            .filter_map(|l| {
                let body = l.split_once('{')?.1;
                let v: serde_json::Value = serde_json::from_str(&format!("{{{body}")).ok()?;
                Some(v["metadata"]["name"].as_str()?.to_string())
            })
            .collect();
        posted.sort();
        (outcome, posted)
    }

    #[tokio::test]
    async fn a_reconcile_creates_one_batch_and_the_next_goes_on_from_there() {
        let pods: Vec<Pod> = (0..40).map(|i| pod(format!("w{i:02}"))).collect();
        let names =
            |r: std::ops::Range<usize>| -> Vec<String> { r.map(|i| format!("w{i:02}")).collect() };
        let batches = Batches::default();
        let more = |created| Started::More { created, of: 40 };
        for (want, batch) in [
            (more(16), 0..16),
            (more(32), 16..32),
            (Started::Yes, 32..40),
        ] {
            let (started, posted) = start_once(&pods, &batches, 201).await;
            assert_eq!(started, want);
            assert_eq!(posted, names(batch));
        }
        // Over: a later start (a restart, another sample) begins with the first pod again.
        let (_, posted) = start_once(&pods, &batches, 201).await;
        assert_eq!(posted, names(0..16));
    }

    #[tokio::test]
    async fn a_failed_batch_is_tried_again_and_a_refusal_forgets_the_step() {
        let pods: Vec<Pod> = (0..20).map(|i| pod(format!("w{i:02}"))).collect();
        let batches = Batches::default();
        let (first, _) = start_once(&pods, &batches, 201).await;
        assert_eq!(
            first,
            Started::More {
                created: 16,
                of: 20
            }
        );
        let (retry, posted) = start_once(&pods, &batches, 503).await;
        assert!(matches!(retry, Started::Retrying(_)), "{retry:?}");
        assert_eq!(posted.len(), 4, "the same batch: {posted:?}");
        let (refused, _) = start_once(&pods, &batches, 403).await;
        assert!(matches!(refused, Started::Failed(_)), "{refused:?}");
        let (_, posted) = start_once(&pods, &batches, 201).await;
        assert_eq!(posted.len(), 16, "from the first pod again: {posted:?}");
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
