//! The end of a reconcile: one status write (server-side apply, only when something changed)
//! and, once the stored status shows the run finished and its result object exists (or the run
//! record says none is due), the run's report objects released (by a task of their own when
//! this process created the result: no reconcile waits for their deletion).

use std::time::Duration;

use kube::api::Api;

use crate::base::error::Result;
use crate::context::Context;
use crate::k8s::status;
use crate::run::{Hooks, Plan};
use crate::store::reports::{Owner, Store};
use crate::store::run_record;
use crds::BenchmarkResult;

/// What a status write left: the status as read (nothing changed), or the object as the API
/// server stored it.
pub enum Written<K: Plan> {
    Unchanged(K::Status),
    Stored(K),
}

/// Writes `status` when it differs from `before` (as read).
pub async fn write<K: Plan>(
    api: &Api<K>,
    name: &str,
    status: &K::Status,
    before: K::Status,
) -> Result<Written<K>> {
    if *status == before {
        return Ok(Written::Unchanged(before));
    }
    Ok(Written::Stored(status::write(api, name, status).await?))
}

/// Deletes the report objects of `run` once `persisted` (the status as the API server returned
/// it on the last write, or as it was read) shows the run finished and its result no longer
/// needs them: only then is every result they hold safe in status, whatever fails or crashes
/// in between. Whether it released them.
pub async fn release_reports<K: Hooks>(
    ctx: &Context,
    obj: &K,
    run: &str,
    persisted: &crds::RunStatus,
) -> Result<bool> {
    if !is_stored_finished(persisted, run) {
        return Ok(false);
    }
    // Nothing left to release (the watch holds none: released already, or never stored): no
    // need to ask whether the result still needs them.
    let (store, owner) = (ctx.reports(), Owner::of(obj));
    if store.holds_none(&owner, Some(run)) {
        return Ok(true);
    }
    // This process created the result itself and saw the run through: no need to ask, nor
    // to wait for the deletion (handed over once).
    let key = crate::store::registry::ending_key(&owner.uid, run);
    if ctx.runs.ends.created_result(&key) {
        if ctx.runs.ends.begin_release(&key) {
            delete_soon::<K>(ctx, store, owner, run, key);
        }
        return Ok(true);
    }
    if result_settled(ctx, obj, run, persisted).await? {
        store.delete(&owner, Some(run)).await?;
        return Ok(true);
    }
    Ok(false)
}

/// How long one try of a report deletion in the background may take.
const DELETE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long after a deletion failed for good the benchmark is woken to try again.
const DELETE_AGAIN_AFTER: Duration = Duration::from_secs(30);

/// Deletes `run`'s reports in a task of its own (base::soon); should that fail for good, the
/// registry hands it over again and the benchmark is reconciled [`DELETE_AGAIN_AFTER`] later to
/// do so (a deletion that keeps failing is tried every half minute, not in a tight loop).
fn delete_soon<K: Hooks>(ctx: &Context, store: Store, owner: Owner, run: &str, key: String) {
    let what = format!(
        "deleting the reports of run {run} of {}/{}",
        owner.namespace, owner.name
    );
    let runs = ctx.runs.clone();
    let again = ctx.waker(&K::kind(&()), &owner.namespace, &owner.name);
    let run = run.to_string();
    let attempt = move || {
        let (store, owner, run) = (store.clone(), owner.clone(), run.clone());
        async move { store.delete(&owner, Some(&run)).await }
    };
    crate::base::soon::spawn(what, DELETE_TIMEOUT, attempt, move || {
        runs.ends.release_failed(&key);
        tokio::spawn(async move {
            tokio::time::sleep(DELETE_AGAIN_AFTER).await;
            again();
        });
    });
}

/// Whether `run`'s result no longer needs its reports, asked of what benchmark authors cannot
/// forge: the result object of this very run exists (status.latestResult naming it only
/// saves the look when it does not), or the run record says no result is due (the run never
/// left the queue). A run with no record keeps its reports until the next run or the
/// benchmark's deletion.
async fn result_settled<K: Hooks>(
    ctx: &Context,
    obj: &K,
    run: &str,
    persisted: &crds::RunStatus,
) -> Result<bool> {
    let owner = Owner::of(obj);
    let name = crate::results::result_name(&owner.name, run);
    if persisted.latest_result.as_deref() == Some(name.as_str()) {
        let api: Api<BenchmarkResult> = Api::namespaced(ctx.client.clone(), &owner.namespace);
        let ours = |r: &BenchmarkResult| r.spec.run_id == run && r.spec.benchmark_uid == owner.uid;
        if api.get_opt(&name).await?.is_some_and(|r| ours(&r)) {
            return Ok(true);
        }
    }
    let ns = &ctx.config.namespace;
    let record = run_record::load(&ctx.client, ns, &ctx.run_records, &owner, run).await?;
    Ok(record.is_some_and(|r| !r.result_due()))
}

/// Whether a stored status shows `run` finished (so its results are in it).
pub(in crate::driver) fn is_stored_finished(persisted: &crds::RunStatus, run: &str) -> bool {
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
