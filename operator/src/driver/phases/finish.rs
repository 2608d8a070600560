//! Succeeded or Failed: the pods go per policy (their deletion is sent first, so they no
//! longer load what is being restored; not waited for), the BenchmarkResult is written from the stored reports (results::record returns
//! what it recorded; it goes into the run here), then the kind writes back what the run
//! changed. Once all of it is done and the status saying the run ended is stored
//! (driver::apply), the registry forgets the run and remembers it as done: later reconciles
//! of the benchmark then do nothing here, until a measuring phase runs for it again (a status
//! taken back) or its pods' deletion failed for good.
//!
//! A result that cannot be written is tried again every few seconds (ResultRecorded=False,
//! ResultWritePending) until --result-write-timeout has passed since the first failure; then the
//! run gives up (ResultWriteFailed, a Warning Event) and stays as it ended. Its reports stay
//! (status::release_reports waits for the result), so any later reconcile of the benchmark tries
//! once more, quietly; ResultRecorded turns True only once the result was created.

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use crds::{CleanupPolicy, Phase};

use super::super::record;
use super::super::transition::{fail, Next};
use super::wake_again;
use crate::base::conditions::{self, NEW_REGIME, REGRESSED, RESULT_RECORDED};
use crate::base::error::{Error, Result};
use crate::base::outcome::Step;
use crate::base::text::clip;
use crate::context::Wake;
use crate::k8s::pods;
use crate::policy::{queue, result_write};
use crate::results;
use crate::run::{Hooks, Run, RunState};
use crate::store::registry::ending_key as ending_key_of;

/// ResultRecorded reasons.
const WRITTEN: &str = "ResultWritten";
const WRITE_PENDING: &str = "ResultWritePending";
const WRITE_FAILED: &str = "ResultWriteFailed";

pub(in crate::driver) async fn handle<K: Hooks>(run: &mut Run<'_, K>) -> Result<Next> {
    // Seen through to its end by this process already: nothing is left to do (the pods are
    // gone, the result is written, the kind has written back what it changed).
    let key = ending_key(run);
    if run.ctx().runs.ends.is_finished(&key) {
        // The first look after the end was written (its own status write coming back): the
        // queue's caches now show it ended, so the runs it held up look at the queue now.
        if run.ctx().runs.ends.take_queue_wake(&key) {
            wake_held_up(run).await?;
        }
        return Ok(Next::Wait(Action::await_change()));
    }
    // Pods still being created for the run are not created any more (those already asked for
    // exist before the deletion below is sent).
    run.ctx().creations.stop(run.uid(), Some(run.id())).await;
    let failed = run.status().run().phase == Some(Phase::Failed);
    let keep_pods = match run.obj().outline().cleanup {
        CleanupPolicy::Always => false,
        CleanupPolicy::OnSuccess => failed,
        CleanupPolicy::Never => true,
    };
    if !keep_pods {
        let selector = run.selector();
        // Should the deletion fail for good, the run owes its end again, and its benchmark is
        // reconciled at once to finish it (and so delete its pods) once more.
        let ctx = run.ctx();
        let runs = ctx.runs.clone();
        let again = wake_again(run);
        let owed = key.clone();
        let services = run.obj().outline().services;
        pods::delete_workers_soon(
            &ctx.client,
            &K::kind(&()),
            services,
            run.ns(),
            &selector,
            move || {
                runs.ends.owe_again(&owed);
                again();
            },
        );
    }
    // The run's end in its record and the result at once: the result takes the end from the
    // run itself (`Run::ended`) until it is recorded, and is built from the reports, which stay
    // until it is written (see `apply`).
    let (end, (recorded, outcome)) = futures::join!(record::end_write(run), results::record(run));
    record::end_written(run, end, false);
    let created_result = recorded.created;
    if let Some((status, reason, message)) = recorded.regressed {
        run.condition_status(REGRESSED, &status, reason, message);
    }
    if let Some((status, reason, message)) = recorded.new_regime {
        run.condition_status(NEW_REGIME, status, reason, message);
    }
    if let Some(name) = recorded.written {
        let m = format!("BenchmarkResult {name} was created");
        run.condition(RESULT_RECORDED, true, WRITTEN, m);
        run.status_mut().run_mut().latest_result = Some(name);
    }
    run.events(recorded.events);
    let retry_soon = match &outcome {
        Ok(()) => false,
        Err(e) => result_failed(run, e),
    };
    match K::wrap_up(run).await? {
        Step::Done if retry_soon => Ok(Next::after(result_write::RETRY)),
        // Written: the run is over for good. A result given up on is not: any later
        // reconcile tries it once more.
        Step::Done if outcome.is_ok() => {
            // Done once the status saying so is stored (driver::apply).
            run.ctx().runs.ends.finishing(&key, created_result);
            Ok(Next::Wait(Action::await_change()))
        }
        Step::Done => {
            run.ctx().runs.forget(run.id());
            Ok(Next::Wait(Action::await_change()))
        }
        Step::Wait { message, after } => {
            if let Some(m) = message {
                run.say(m);
            }
            Ok(Next::after(after))
        }
        // Nothing the kinds do today: a finished run whose wrap-up fails ends Failed.
        Step::Fail(f) => {
            fail(run, f);
            Ok(Next::after(result_write::RETRY))
        }
    }
}

/// The key of `run`'s end in the registry (its benchmark's uid and the run id).
pub(in crate::driver) fn ending_key<K: Hooks>(run: &Run<'_, K>) -> String {
    ending_key_of(run.uid(), run.id())
}

/// Held-up runs woken when a run ends, at most.
const WAKE_AT_MOST: usize = 8;

/// Wakes the waiting runs this one held up (its namespace's, those sharing its claims).
async fn wake_held_up<K: Hooks>(run: &Run<'_, K>) -> Result<()> {
    let ctx = run.ctx();
    let all = ctx
        .kinds
        .contenders(&ctx.client, &ctx.config.watch_namespaces)
        .await?;
    // The oldest few only: waking every queued run of a busy namespace on every end would be
    // a status write each (their positions); the others look at the queue at their next poll.
    let mut held_up = queue::held_up_by(&run.obj().contender(), &all);
    held_up.sort_by_key(|c| c.created);
    for c in held_up.into_iter().take(WAKE_AT_MOST) {
        let _ = ctx.wake.send(Wake {
            kind: c.kind.to_string(),
            namespace: c.namespace.clone(),
            name: c.name.clone(),
        });
    }
    Ok(())
}

/// The result could not be written: ResultRecorded=False, retried (true) until the bound has
/// passed since the first failure, then given up (false) with a Warning Event. Once given up,
/// a failure changes nothing (no new Event, no new message): only a success is news.
fn result_failed<K: Hooks>(run: &mut Run<'_, K>, e: &Error) -> bool {
    let name = results::result_name(run.name(), run.id());
    let error = clip(&e.to_string(), 1000);
    let current = conditions::get(&run.status().run().conditions, RESULT_RECORDED)
        .filter(|c| c.status == "False");
    if current.is_some_and(|c| c.reason == WRITE_FAILED) {
        tracing::debug!(
            benchmark = run.name(),
            "writing {name} failed again: {error}"
        );
        return false;
    }
    let since = current.map(|c| c.last_transition_time.0);
    let bound = run.ctx().config.result_write_timeout();
    if result_write::gives_up(since, jiff::Timestamp::now(), bound) {
        let m = format!(
            "gave up writing BenchmarkResult {name} after {}s: {error}; the run's reports are \
             kept, and it is written once the benchmark is reconciled again and the write is \
             allowed",
            bound.as_secs()
        );
        tracing::warn!(benchmark = run.name(), "{m}");
        run.condition(RESULT_RECORDED, false, WRITE_FAILED, m.clone());
        run.event(EventType::Warning, WRITE_FAILED, m);
        return false;
    }
    let m = format!(
        "writing BenchmarkResult {name} failed (tried again every {}s for up to {}s): {error}",
        result_write::RETRY.as_secs(),
        bound.as_secs()
    );
    tracing::warn!(benchmark = run.name(), "{m}");
    if since.is_none() {
        run.event(EventType::Warning, WRITE_PENDING, m.clone());
    }
    run.condition(RESULT_RECORDED, false, WRITE_PENDING, m);
    true
}
