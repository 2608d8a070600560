//! Pending and Queued: the kind checks the spec (a refusal fails the run, Invalid=True), then
//! the run waits in the queue; leaving it starts the run's deadline and is recorded in the run
//! record (`driver::record`).

use std::time::Duration;

use crds::Phase;

use super::super::transition::{set_phase, Next};
use super::after_hook;
use crate::base::conditions::{self, INVALID, QUEUED};
use crate::base::error::Result;
use crate::base::outcome::Step;
use crate::policy::queue;
use crate::run::{Hooks, Run, RunState};

/// How often a queued run looks at the queue again.
const QUEUE_POLL: Duration = Duration::from_secs(5);

pub(in crate::driver) async fn handle<K: Hooks>(run: &mut Run<'_, K>) -> Result<Next> {
    let checked = K::check(run).await?;
    if let Step::Fail(refusal) = &checked {
        let reason = refusal.reason.as_str();
        run.condition(INVALID, true, reason, refusal.message.clone());
    }
    if let Some(next) = after_hook(run, checked) {
        return Ok(next);
    }
    run.condition(INVALID, false, "Valid", "the spec is valid");
    let ctx = run.ctx();
    let all = ctx
        .kinds
        .contenders(&ctx.client, &ctx.config.watch_namespaces)
        .await?;
    let me = run.obj().contender();
    let cap = ctx.config.caps.max_runs_per_namespace;
    if let Some(wait) = queue::wait(&me, &all, cap) {
        run.condition(QUEUED, true, wait.reason, wait.message.clone());
        run.status_mut().run_mut().queue = Some(wait.status);
        set_phase(run, Phase::Queued, wait.message);
        return Ok(Next::after(QUEUE_POLL));
    }
    run.condition(QUEUED, false, "Admitted", "the run left the queue");
    run.status_mut().set_current(0);
    // The run's deadline counts from here (see policy::deadline).
    run.status_mut().run_mut().start_time = Some(conditions::now());
    super::super::record::start(run).await;
    let m = format!("preparing {}", run.obj().measurement(0).name);
    set_phase(run, Phase::Preparing, m);
    Ok(Next::Continue)
}
