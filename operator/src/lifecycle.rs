//! What every kind's phase machine shares: status writes by server-side apply under one field
//! manager, Events, and time spent in a phase.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;

use crate::context::Context;
use crate::error::Result;

pub const FIELD_MANAGER: &str = "netbench-operator";

/// An Event to publish once the reconcile's status is written: (type, reason, note).
pub type PendingEvent = (EventType, String, String);

/// Writes `status`; returns the object as the API server stored it.
pub async fn write_status<K>(api: &Api<K>, name: &str, status: &impl Serialize) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    Ok(api
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await?)
}

/// Deletes the report objects of `run` once `persisted` (the status as the API server returned
/// it on the last write, or as it was read) shows the run finished: only then is every result
/// they hold safe in status, whatever fails or crashes in between.
pub async fn release_reports<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    run: &str,
    persisted: &crds::RunStatus,
) -> Result<()> {
    // A run that measured keeps its reports until its BenchmarkResult, built from them, is
    // written.
    let name = obj.meta().name.clone().unwrap_or_default();
    let result = crate::results::result_name(&name, run);
    let written = persisted.start_time.is_none()
        || persisted.latest_result.as_deref() == Some(result.as_str());
    if is_stored_finished(persisted, run) && written {
        let owner = crate::reports::Owner::of(obj);
        crate::reports::Store::of(ctx)
            .delete(&owner, Some(run))
            .await?;
    }
    Ok(())
}

/// Publishes and clears `events`; a failed publish is logged, never fatal.
pub async fn publish_events(
    ctx: &Context,
    reference: &ObjectReference,
    events: &mut Vec<PendingEvent>,
) {
    if events.is_empty() {
        return;
    }
    let recorder = Recorder::new(ctx.client.clone(), ctx.reporter.clone());
    for (type_, reason, note) in events.drain(..) {
        let ev = Event {
            type_,
            reason,
            note: Some(note),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&ev, reference).await {
            tracing::debug!("publishing an event failed: {e}");
        }
    }
}

/// Moves a run to `phase` (an Event and a new phaseSince when it changes) with `message`.
pub fn set_phase(
    run: &mut crds::RunStatus,
    events: &mut Vec<PendingEvent>,
    phase: crds::Phase,
    message: impl Into<String>,
) {
    let message = message.into();
    if run.phase != Some(phase) {
        let kind = if phase == crds::Phase::Failed {
            EventType::Warning
        } else {
            EventType::Normal
        };
        events.push((kind, format!("{phase:?}"), message.clone()));
        run.phase_since = Some(crate::conditions::now());
    }
    run.phase = Some(phase);
    run.message = Some(message);
    if phase != crds::Phase::Queued {
        // Where it stood in the queue is news only while it waits there.
        run.queue = None;
    }
}

/// Tells the registry who may register for `step` of `run`: the worker pods it names (each
/// proves it is one with its pod's ServiceAccount token, see `api::pod_tokens`).
pub async fn announce<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    run: &str,
    step: u32,
    workers: std::collections::BTreeMap<String, protocol::worker::Role>,
    report_kind: &'static str,
) -> Result<()> {
    let kind = K::kind(&()).into_owned();
    let namespace = obj.meta().namespace.clone().unwrap_or_default();
    let benchmark = obj.meta().name.clone().unwrap_or_default();
    ctx.runs.announce(
        run,
        crate::runs::RunSpec {
            kind,
            namespace,
            benchmark,
            uid: obj.meta().uid.clone().unwrap_or_default(),
            step,
            workers,
            report_kind,
        },
    );
    Ok(())
}

/// Whether a stored status shows `run` finished (so its results are in it).
fn is_stored_finished(persisted: &crds::RunStatus, run: &str) -> bool {
    persisted.run_id.as_deref() == Some(run)
        && persisted.phase.is_some_and(crds::Phase::is_finished)
}

/// Time since `t` (zero when unset or in the future).
pub fn elapsed_since(t: &Option<Time>) -> Duration {
    t.as_ref()
        .map(|t| jiff::Timestamp::now().duration_since(t.0))
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

/// `text` made fit for status and Events: control characters become spaces and it is cut to at
/// most `max` characters (it may come from a worker or the API server).
pub fn clip(text: &str, max: usize) -> String {
    let mut out: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect();
    if text.trim().chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// Condition and Event reason of a worker whose check before the barrier failed.
pub const PREFLIGHT_FAILED: &str = "PreflightFailed";

/// Some(message) when a worker of `run` reported that it cannot start (its target does not
/// resolve or accept a connection, ...): the run ends with that cause before the measurement.
pub fn preflight_failure(ctx: &Context, run: &str) -> Option<String> {
    let failures = ctx.runs.preflight_failures(run);
    let (worker, why) = failures.first()?;
    Some(format!(
        "worker {worker} failed its check before the measurement: {}",
        clip(why, 1000)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::{Phase, RunStatus};

    fn stored(run: &str, phase: Option<Phase>) -> RunStatus {
        RunStatus {
            run_id: Some(run.into()),
            phase,
            ..Default::default()
        }
    }

    #[test]
    fn reports_go_only_with_a_stored_final_status_of_their_run() {
        for phase in [Phase::Succeeded, Phase::Failed] {
            assert!(is_stored_finished(&stored("r1", Some(phase)), "r1"));
            assert!(!is_stored_finished(&stored("r0", Some(phase)), "r1"));
        }
        for phase in [Phase::Pending, Phase::Running, Phase::Collecting] {
            assert!(!is_stored_finished(&stored("r1", Some(phase)), "r1"));
        }
        assert!(!is_stored_finished(&stored("r1", None), "r1"));
        assert!(!is_stored_finished(&RunStatus::default(), "r1"));
    }

    /// `status.queue` is there while the run is Queued (each new reading replaces it) and gone
    /// with any other phase, whichever way the run leaves the queue.
    #[test]
    fn the_queue_place_lasts_only_while_queued() {
        let place = crds::QueueStatus {
            position: 2,
            waits_for: "node n1".into(),
            blocked_by: None,
        };
        for next in [Phase::Preparing, Phase::Failed, Phase::Pending] {
            let mut run = stored("r1", Some(Phase::Pending));
            let mut events = vec![];
            run.queue = Some(place.clone());
            set_phase(&mut run, &mut events, Phase::Queued, "waiting");
            assert_eq!(run.queue.as_ref(), Some(&place));
            set_phase(&mut run, &mut events, next, "moved on");
            assert_eq!(run.queue, None, "{next:?}");
        }
    }
}
