//! What every kind's phase machine shares: the phase, the worker registry, released reports.

use kube::runtime::events::EventType;
use kube::Resource;

use crate::base::error::Result;
use crate::base::events::PendingEvent;
use crate::base::text::clip;
use crate::context::Context;

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
        let owner = crate::store::reports::Owner::of(obj);
        ctx.reports().delete(&owner, Some(run)).await?;
    }
    Ok(())
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
        run.phase_since = Some(crate::base::conditions::now());
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
        crate::store::registry::RunSpec {
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
