//! Succeeded or Failed: the pods go per policy (first, so they no longer load what is being
//! restored), the BenchmarkResult is written from the stored reports (results::record returns
//! what it recorded; it goes into the run here), then the kind writes back what the run
//! changed. The registry forgets the run once all of it is done.

use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use crds::{CleanupPolicy, Phase};

use super::super::machine::{fail, Next};
use crate::base::conditions::{NEW_REGIME, REGRESSED};
use crate::base::error::Result;
use crate::base::outcome::Step;
use crate::k8s::pods;
use crate::results;
use crate::run::{Hooks, Run, RunState};

/// How soon a result that could not be written is tried again.
const RESULT_RETRY: Duration = Duration::from_secs(15);

pub(in crate::driver) async fn handle<K: Hooks>(run: &mut Run<'_, K>) -> Result<Next> {
    let failed = run.status().run().phase == Some(Phase::Failed);
    let keep_pods = match run.obj().cleanup_policy() {
        CleanupPolicy::Always => false,
        CleanupPolicy::OnSuccess => failed,
        CleanupPolicy::Never => true,
    };
    if !keep_pods {
        let selector = run.selector();
        pods::delete_workers(&run.ctx().client, &K::kind(&()), run.ns(), &selector).await?;
    }
    // The result is built from the reports, which stay until it is written (see `apply`).
    let (recorded, outcome) = results::record(run).await;
    if let Some((status, reason, message)) = recorded.regressed {
        run.condition_status(REGRESSED, &status, reason, message);
    }
    if let Some((status, reason, message)) = recorded.new_regime {
        run.condition_status(NEW_REGIME, status, reason, message);
    }
    if let Some(name) = recorded.written {
        run.status_mut().run_mut().latest_result = Some(name);
    }
    run.events(recorded.events);
    if let Err(e) = &outcome {
        tracing::warn!(benchmark = run.name(), "writing the BenchmarkResult: {e}");
        let m = format!("writing the BenchmarkResult failed (retried): {e}");
        run.event(EventType::Warning, "ResultFailed", m);
    }
    match K::wrap_up(run).await? {
        Step::Done if outcome.is_err() => Ok(Next::after(RESULT_RETRY)),
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
            Ok(Next::after(RESULT_RETRY))
        }
    }
}
