//! Offload in an EgressBenchmark run: a case's profile applied before its workers start, every
//! other change written back before (and after) it, the OffloadRestored condition kept true to
//! what the records say, and the restore a deletion waits for.

use std::time::Duration;

use kube::api::Api;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};

use crds::egress::EgressBenchmark;

use super::{restore_problems, Offload, Stage};
use crate::admin::config::Config;
use crate::base::conditions::{INVALID, OFFLOAD_RESTORED};
use crate::base::error::Result;
use crate::base::outcome::{Failure, Reason, Step};
use crate::context::Context;
use crate::k8s::status;
use crate::run::Run;

type EgressRun<'a> = Run<'a, EgressBenchmark>;

/// How often a deletion looks at the restore Jobs it waits for.
const DELETE_POLL: Duration = Duration::from_secs(5);

pub fn offload_of<'a>(ctx: &'a Context, eb: &'a EgressBenchmark, run: &'a str) -> Offload<'a> {
    Offload {
        client: &ctx.client,
        config: &ctx.config,
        eb,
        run,
    }
}

/// Offload Jobs exist only for benchmarks with profiles in namespaces allowed them (and only
/// then does the operator hold its Role for Jobs).
pub fn manages_jobs(eb: &EgressBenchmark, config: &Config) -> bool {
    eb.spec.offload.is_some()
        && config
            .offload_namespaces
            .allows(&eb.namespace().unwrap_or_default())
}

/// Restores the other cases' offload changes, then applies case `case`'s profile.
pub async fn prepare(run: &mut EgressRun<'_>, case: u32) -> Result<Step> {
    let Some(measured) = super::super::plan::case_at(run.obj(), case) else {
        return Ok(Step::Fail(Failure::invalid(format!("no case {case}"))));
    };
    let spec = &measured.spec;
    // Other cases' changes only: this case's records exist before its apply Job does.
    if let Some(m) = restore_open(run, Some(&spec.name)).await? {
        return Ok(Step::wait(m));
    }
    if spec.offload_profile.is_none() {
        return Ok(Step::Done);
    }
    let (ctx, eb, id) = (run.ctx(), run.obj(), run.id().to_string());
    let stage = offload_of(ctx, eb, &id)
        .apply(spec, &mut run.extra_mut().offload)
        .await?;
    Ok(match stage {
        Stage::Done => Step::Done,
        Stage::Waiting(m) => {
            let why = "offload settings are changed for a case";
            run.condition(OFFLOAD_RESTORED, false, "Applied", why);
            Step::wait(m)
        }
        Stage::Failed(m) => Step::fail(Reason::OffloadFailed, m),
        Stage::Refused(m) => {
            run.condition(INVALID, true, "NotPermitted", m.clone());
            Step::Fail(Failure::not_permitted(m))
        }
    })
}

/// Writes back the offload changes still open, except `skip`'s (the case being prepared: its
/// records exist before its apply Job does), and keeps OffloadRestored current. Some(what it
/// waits for) while restore Jobs are at work.
pub async fn restore_open(run: &mut EgressRun<'_>, skip: Option<&str>) -> Result<Option<String>> {
    if !run.extra().offload.open() {
        return Ok(None);
    }
    let (ctx, eb, id) = (run.ctx(), run.obj(), run.id().to_string());
    let stage = offload_of(ctx, eb, &id)
        .restore(&mut run.extra_mut().offload, skip)
        .await?;
    note_restore(run, &stage);
    Ok(match stage {
        Stage::Waiting(m) => Some(m),
        _ => None,
    })
}

/// OffloadRestored from what the records say after a restore stage: refused, failing, or every
/// change written back (and verified).
pub fn note_restore(run: &mut EgressRun<'_>, stage: &Stage) {
    let problems = restore_problems(run.extra().offload.records());
    if let Stage::Refused(m) = stage {
        let m = format!("not restored: {m}");
        run.condition(OFFLOAD_RESTORED, false, "NotPermitted", m.clone());
        run.event(EventType::Warning, "NotPermitted", m);
    } else if !problems.is_empty() {
        let m = format!("restore failed, retrying: {}", problems.join("; "));
        run.condition(OFFLOAD_RESTORED, false, "RestoreFailed", m);
    } else if *stage == Stage::Done
        && !run.extra().offload.records().is_empty()
        && !run.extra().offload.open()
    {
        let m = "every offload change was written back";
        run.condition(OFFLOAD_RESTORED, true, "Restored", m);
    }
}

/// Deletion: every open change written back, driven by the records in the operator's namespace
/// only (never by status.offload). Wait while restore Jobs are at work (status shows their
/// progress; the object and its finalizer stay); a refusal leaves the record for the admin and
/// says so in an Event.
pub async fn restore_on_delete(
    ctx: &Context,
    eb: &EgressBenchmark,
    api: &Api<EgressBenchmark>,
    run: &str,
) -> Result<Step> {
    let mut book = super::Book::load(ctx, eb).await?;
    if book.open() {
        match offload_of(ctx, eb, run).restore(&mut book, None).await? {
            Stage::Waiting(m) => {
                show_progress(api, eb, &book).await?;
                let (ns, name) = (eb.namespace().unwrap_or_default(), eb.name_any());
                return Ok(Step::Wait {
                    message: Some(format!("deleting {ns}/{name}: {m}")),
                    after: DELETE_POLL,
                });
            }
            // Nothing was run.
            Stage::Refused(m) | Stage::Failed(m) => {
                let m = format!("offload settings not restored: {m}");
                let mut events = vec![(EventType::Warning, "NotPermitted".to_string(), m)];
                ctx.publish(&eb.object_ref(&()), &mut events);
            }
            Stage::Done => {}
        }
    }
    book.delete_if_resolved().await?;
    Ok(Step::Done)
}

/// The restore's progress into status.offload while a deletion waits for it.
async fn show_progress(
    api: &Api<EgressBenchmark>,
    eb: &EgressBenchmark,
    book: &super::Book,
) -> Result<()> {
    let Some(report) = book.report() else {
        return Ok(());
    };
    let mut status = eb.status.clone().unwrap_or_default();
    status.offload = report;
    if Some(&status) != eb.status.as_ref() {
        status::write(api, &eb.name_any(), &status).await?;
    }
    Ok(())
}
