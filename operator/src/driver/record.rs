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
    let written = end_write(run).await;
    end_written(run, written, warn);
}

/// [`end`]'s write alone: a future that holds no borrow of the run, so that the caller can do
/// something else meanwhile (the finish handler writes the result, which takes the end from
/// the run itself); [`end_written`] takes its outcome. None: no end to record.
pub(in crate::driver) fn end_write<'a, K: Hooks>(
    run: &Run<'a, K>,
) -> impl std::future::Future<Output = Option<crate::base::error::Result<()>>> + 'a {
    let ctx = run.ctx();
    let owner = Owner::of(run.obj());
    let id = run.id().to_string();
    let ended = run.ended().cloned();
    async move {
        let ended = ended?;
        let ns = &ctx.config.namespace;
        Some(run_record::end(&ctx.client, ns, &ctx.run_records, &owner, &id, &ended).await)
    }
}

/// What [`end_write`] came to, into the run (see [`end`]).
pub(in crate::driver) fn end_written<K: Hooks>(
    run: &mut Run<'_, K>,
    written: Option<crate::base::error::Result<()>>,
    warn: bool,
) {
    match written {
        None => {}
        Some(Ok(())) => run.end_recorded(),
        Some(Err(e)) => {
            let phase = run.ended().map(|e| format!("{:?}", e.phase));
            let m = format!(
                "could not record the end of run {} ({}) in the operator's namespace ({}); a \
                 result written after this reconcile says the run's end is unknown",
                run.id(),
                phase.unwrap_or_default(),
                clip(&e.to_string(), 500)
            );
            tracing::warn!(benchmark = run.name(), "{m}");
            if warn {
                run.event(EventType::Warning, WRITE_FAILED, m);
            }
        }
    }
}
