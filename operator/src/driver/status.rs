//! The end of a reconcile: one status write (server-side apply, only when something changed)
//! and, once the stored status shows the run finished with its result written, the run's
//! report objects released.

use kube::api::Api;

use crate::base::error::Result;
use crate::context::Context;
use crate::k8s::status;
use crate::run::{Hooks, Plan};
use crate::store::reports::Owner;

/// Writes `status` when it differs from `before` (as read); returns the status as the API server
/// stored it (or as it was read).
pub async fn write<K: Plan>(
    api: &Api<K>,
    name: &str,
    status: &K::Status,
    before: K::Status,
) -> Result<K::Status> {
    if *status == before {
        return Ok(before);
    }
    let written = status::write(api, name, status).await?;
    Ok(written.status_of().cloned().unwrap_or_default())
}

/// Deletes the report objects of `run` once `persisted` (the status as the API server returned
/// it on the last write, or as it was read) shows the run finished: only then is every result
/// they hold safe in status, whatever fails or crashes in between.
pub async fn release_reports<K: Hooks>(
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
        ctx.reports().delete(&Owner::of(obj), Some(run)).await?;
    }
    Ok(())
}

/// Whether a stored status shows `run` finished (so its results are in it).
fn is_stored_finished(persisted: &crds::RunStatus, run: &str) -> bool {
    persisted.run_id.as_deref() == Some(run)
        && persisted.phase.is_some_and(crds::Phase::is_finished)
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
}
