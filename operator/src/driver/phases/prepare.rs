//! Preparing: the pause after a sample, the kind's preparation of the measurement (a sweep
//! target scaled, an offload profile applied), then the sample's workers: announced to the
//! registry and their pods created (a refusal fails the run, transient errors retry until the
//! worker start timeout; see k8s::creation).

use crds::Phase;

use super::super::transition::{fail, set_phase, Next};
use super::{after_hook, announce, clients, wake_again};
use crate::base::clock::elapsed_since;
use crate::base::error::Result;
use crate::base::outcome::POLL;
use crate::k8s::creation::{self, Started};
use crate::policy::samples::{self, Slot};
use crate::run::{Hooks, Run, RunState};

pub(in crate::driver) async fn handle<K: Hooks>(run: &mut Run<'_, K>, index: u32) -> Result<Next> {
    let slot = run.slot();
    let what = run.describe(slot);
    let plan = run.obj().outline().repetition.samples();
    let since = elapsed_since(&run.status().run().phase_since);
    if let Some(left) = samples::pause_left(&plan, slot.sample, since) {
        run.say(format!(
            "{what}: pausing {}s between samples",
            left.as_secs().max(1)
        ));
        return Ok(Next::after(left.min(POLL)));
    }
    let prepared = K::prepare(run, index).await?;
    if let Some(next) = after_hook(run, prepared) {
        return Ok(next);
    }
    match create_workers(run, slot).await? {
        Started::Yes => {}
        // Woken once the pods exist (or their creation failed); looked at again after POLL
        // should that wake be lost.
        Started::Creating => return Ok(Next::after(POLL)),
        Started::Retrying(m) => {
            run.say(format!("{what}: {m}"));
            return Ok(Next::after(POLL));
        }
        Started::Failed(f) => {
            fail(run, f.about(&what));
            return Ok(Next::Continue);
        }
    }
    let workers = run.obj().sample(run.id(), slot).workers;
    run.set_progress(0, clients(&workers));
    let m = format!("{what}: {} worker(s) started", workers.len());
    set_phase(run, Phase::Running, m);
    Ok(Next::after(POLL))
}

/// The registry entry for the barrier, then the pods (both idempotent).
async fn create_workers<K: Hooks>(run: &mut Run<'_, K>, slot: Slot) -> Result<Started> {
    announce(run, slot);
    let ctx = run.ctx();
    let obj = run.obj();
    let id = run.id().to_string();
    let pods = || obj.pods(&id, slot, &ctx.config);
    let selector = run.slot_selector(slot);
    let ns = run.ns().to_string();
    let kind = K::kind(&());
    let step_pods = creation::StepPods {
        kind: &kind,
        services: run.obj().outline().services,
        namespace: &ns,
        selector: &selector,
        pods: &pods,
        owner: (run.uid(), &id),
        creations: &ctx.creations,
        woken: Box::new(wake_again(run)),
    };
    let generation = run.generation();
    let timeout = ctx.config.worker_start_timeout();
    let mut events = vec![];
    let started = creation::start(
        &ctx.client,
        timeout,
        step_pods,
        run.status_mut().run_mut(),
        &mut events,
        generation,
    )
    .await?;
    run.events(events);
    Ok(started)
}
