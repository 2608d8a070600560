//! The run record's two writes (`store::run_record`): the start when the run leaves the queue
//! (`admit`), the end once the machine ended the run (the finish handler, and again before
//! status is written if that failed). A write that fails never holds the run up: it is logged,
//! the end is still used for this reconcile's result, and a `RunRecordFailed` Warning Event
//! says what the result may lack (the start: it is then taken from the reports; the end: a
//! result written in a later reconcile says the operator holds no record of it).

use kube::runtime::events::EventType;

use crate::base::text::clip;
use crate::run::{Hooks, Run, RunState};
use crate::store::records::Owner;
use crate::store::run_record::{self, WRITE_FAILED};

/// Records that the run left the queue now (`status.startTime` is the report of it).
pub(in crate::driver) async fn start<K: Hooks>(run: &mut Run<'_, K>) {
    let Some(at) = run.status().run().start_time.clone() else {
        return;
    };
    let ctx = run.ctx();
    let owner = Owner::of(run.obj());
    let written = run_record::start(
        &ctx.client,
        &ctx.config.namespace,
        &ctx.run_records,
        &owner,
        run.id(),
        at,
    )
    .await;
    if let Err(e) = written {
        let m = format!(
            "could not record the start of run {} in the operator's namespace ({}); its result \
             takes the start from the workers' reports",
            run.id(),
            clip(&e.to_string(), 500)
        );
        tracing::warn!(benchmark = run.name(), "{m}");
        run.event(EventType::Warning, WRITE_FAILED, m);
    }
}

/// Records how the run ended, if the machine ended it this reconcile and it is not recorded
/// yet. `warn`: a failure gets a Warning Event (the last try of the reconcile), else it is
/// only logged.
pub(in crate::driver) async fn end<K: Hooks>(run: &mut Run<'_, K>, warn: bool) {
    let Some(ended) = run.ended().cloned() else {
        return;
    };
    let ctx = run.ctx();
    let owner = Owner::of(run.obj());
    let ns = &ctx.config.namespace;
    match run_record::end(&ctx.client, ns, &ctx.run_records, &owner, run.id(), &ended).await {
        Ok(()) => run.end_recorded(),
        Err(e) => {
            let m = format!(
                "could not record the end of run {} ({:?}) in the operator's namespace ({}); a \
                 result written after this reconcile says the run's end is unknown",
                run.id(),
                ended.phase,
                clip(&e.to_string(), 500)
            );
            tracing::warn!(benchmark = run.name(), "{m}");
            if warn {
                run.event(EventType::Warning, WRITE_FAILED, m);
            }
        }
    }
}
