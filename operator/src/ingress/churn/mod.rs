//! Route changes under load (spec.routeChanges): while a controller's workers measure, the run
//! changes the controller's route, one change per `every` from the start of the measured
//! window: it swaps the route's backend between `backend` and `swapTo` (SwapBackend), or
//! deletes the route and creates it again, in turn (DeleteAndCreate). Each change's instant
//! (when it was sent to the API server) goes to status, and to the route itself with the same
//! request, so a restarted operator goes on from there and the collection reads it.
//!
//! The clients record which answer (status, the backend named in X-Netbench-Backend) they saw
//! when (`--record-answers`). A change's propagation is the time from sending it to the first
//! answer that shows it (a 2xx from the backend swapped to or created; a 404 from the Gateway
//! itself, naming no backend, for a deletion), if that came before the next change (or the end
//! of the measurement); otherwise the change was not shown. The figures are read from the
//! workers' answers, never from the controller's status.
//!
//! Here the changes are made; `schedule.rs` says when, `reading.rs` reads what they did.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::ResourceExt;
use serde_json::json;

use crds::ingress::{
    Controller, IngressBenchmark, IngressBenchmarkSpec, Made, MadeChange, OwnedRoute, RouteBackend,
    RouteChangeAction, RouteChangeLog,
};

use super::{plan, routes, validate};
use crate::base::error::Result;
use crate::base::outcome::{Reason, Step};
use crate::policy::samples::Slot;
use crate::run::Run;

mod reading;
mod schedule;
#[cfg(test)]
pub use reading::all_figure_names;
pub use reading::{collect, sample_figures};
pub(super) use schedule::now_unix_us;
use schedule::{count, micros, next_due};

type IngressRun<'a> = Run<'a, IngressBenchmark>;

/// The backend a change swaps to: the other one than the route sends to now (`current`), so
/// every change is a change, whatever an earlier sample or a retry left behind.
pub fn swap_target<'a>(
    spec: &'a IngressBenchmarkSpec,
    step: u32,
    current: Option<&str>,
) -> Option<&'a RouteBackend> {
    let swap_to = spec.route_changes.as_ref()?.swap_to.as_ref()?;
    let route = plan::controller(spec, step)?.route.as_ref()?;
    Some(if current == Some(swap_to.name.as_str()) {
        &route.backend
    } else {
        swap_to
    })
}

/// `$log` (an `Option` of a sample's log of type `$ty`, in status) as a `&mut $ty`: a fresh
/// one for `$slot` when it belongs to another sample. Route churn's and route scale's logs.
macro_rules! sample_log {
    ($log:expr, $ty:ident, $slot:expr) => {{
        let (log, slot) = (&mut $log, $slot);
        let stale = log
            .as_ref()
            .is_none_or(|l| l.step != slot.measurement || l.sample != slot.sample);
        if stale {
            *log = Some($ty {
                step: slot.measurement,
                sample: slot.sample,
                ..Default::default()
            });
        }
        log.get_or_insert_with(Default::default)
    }};
}
pub(super) use sample_log;

/// The sample's log in status, a fresh one when it belongs to another sample.
fn log_of<'r>(run: &'r mut IngressRun<'_>, slot: Slot) -> &'r mut RouteChangeLog {
    sample_log!(run.status_mut().route_change_log, RouteChangeLog, slot)
}

/// The annotation a change leaves on the route with the same patch: "<sample>/<n>/<Unix µs>".
/// A change whose patch went through but whose log entry was lost (an error later in the
/// reconcile, a restart) is found there instead of being made again with a later instant.
const CHANGE_ANNOTATION: &str = "netbench.io/route-change";

/// The change `n` of `sample` a route's annotation records, with its instant, if it is that
/// one and its instant is plausible (not before `since`, not after `now`).
pub fn recorded_change(
    value: Option<&str>,
    sample: u32,
    n: usize,
    since: u64,
    now: u64,
) -> Option<u64> {
    let mut parts = value?.splitn(3, '/');
    let (s, k, at) = (parts.next()?, parts.next()?, parts.next()?);
    let ours = s.parse::<u32>().ok()? == sample && k.parse::<usize>().ok()? == n;
    let at = at.parse::<u64>().ok()?;
    (ours && (since..=now).contains(&at)).then_some(at)
}

/// Whether the run deletes and creates its routes (their 404s while gone are the point).
pub fn deletes_routes(spec: &IngressBenchmarkSpec) -> bool {
    spec.route_changes
        .as_ref()
        .is_some_and(|c| c.action == RouteChangeAction::DeleteAndCreate)
}

/// Makes the change that is due, if one is; says when the next one is.
pub async fn while_running(run: &mut IngressRun<'_>, step: u32) -> Result<Step> {
    let spec = &run.obj().spec;
    let (Some(changes), Some(controller)) = (&spec.route_changes, plan::controller(spec, step))
    else {
        return Ok(Step::Done);
    };
    let (every, action) = (changes.every.as_std(), changes.action);
    let (every_us, warmup_us) = (micros(every), micros(spec.load.warmup.as_std()));
    let (count, name) = (count(spec), routes::name(run.id(), &controller.name));
    let slot = run.slot();
    let started = run.ctx().runs.started_at(run.id(), slot.wire());
    // The measured window starts after the barrier and the warm-up; kept in the log, as an
    // operator restarted after the barrier does not see it again.
    let log = log_of(run, slot);
    if log.anchor_unix_us.is_none() {
        log.anchor_unix_us = started.map(|ms| ms.saturating_mul(1000).saturating_add(warmup_us));
    }
    let (anchor, made) = (log.anchor_unix_us, log.changes.clone());
    let Some(anchor) = anchor else {
        return Ok(Step::Wait {
            message: None,
            after: every.min(crate::base::outcome::POLL),
        });
    };
    let Some(due) = next_due(anchor, every_us, &made, count) else {
        return Ok(Step::Done);
    };
    let now = now_unix_us();
    if now < due {
        let after = Duration::from_micros(due - now);
        return Ok(Step::Wait {
            message: None,
            after,
        });
    }
    let api: Api<DynamicObject> = routes::api(run);
    let route = match api.get_opt(&name).await {
        Ok(r) => r,
        Err(kube::Error::Api(s)) if s.code == 403 => {
            let m = format!("HTTPRoute {name} is out of reach: {}", s.message);
            return Ok(Step::fail(Reason::RouteRefused, m));
        }
        Err(e) => return Err(e.into()),
    };
    let uid = run.obj().uid().unwrap_or_default();
    let Some(own) = &controller.route else {
        return Ok(Step::Done);
    };
    let expected = routes::manifest(run.obj(), run.id(), controller, own);
    if let Some(route) = &route {
        if !crate::base::labels::controlled_by(&route.metadata, &uid) {
            let m = format!("HTTPRoute {name} is not this benchmark's: it is left alone");
            return Ok(Step::fail(Reason::RouteRefused, m));
        }
        // Only the route as the run made it (its Gateway, its hostname) is changed.
        let spec_of = |v: &serde_json::Value, field: &str| v["spec"][field].clone();
        let moved = ["parentRefs", "hostnames"]
            .iter()
            .any(|f| spec_of(&route.data, f) != spec_of(&expected, f));
        if moved {
            let m = format!(
                "HTTPRoute {name} no longer attaches as the run made it (parentRefs or hostnames changed): it is left alone"
            );
            return Ok(Step::fail(Reason::RouteRefused, m));
        }
        if route.metadata.deletion_timestamp.is_some() {
            // Deleted, not gone yet (a finalizer): the deletion is not made again.
            return Ok(Step::Wait {
                message: None,
                after: retry(every),
            });
        }
        if let Some(change) = recovered(run, step, route, &made, anchor, now) {
            // Made already; only its log entry was lost.
            log_of(run, slot).changes.push(change);
            return Ok(Step::Wait {
                message: None,
                after: Duration::from_millis(10),
            });
        }
    }
    let tag = format!("{}/{}", slot.sample, made.len());
    let change = match (action, route) {
        (RouteChangeAction::SwapBackend, Some(route)) => {
            swap(run, step, &api, &route, &tag).await?
        }
        (RouteChangeAction::SwapBackend, None) => {
            let m = format!("HTTPRoute {name} is gone: its backend cannot be swapped");
            return Ok(Step::fail(Reason::RouteRefused, m));
        }
        (RouteChangeAction::DeleteAndCreate, Some(route)) => {
            remove(&api, &route, &own.backend.name).await?
        }
        (RouteChangeAction::DeleteAndCreate, None) => {
            if made.last().is_some_and(|m| m.made == Made::Deleted) {
                create(run, &api, controller, own, &tag).await?
            } else {
                // Gone with no record of when: a restart between the deletion and its record,
                // or someone else deleted it. Made, but not timed; created again next.
                Outcome::Made(MadeChange {
                    at_unix_us: now_unix_us(),
                    backend: own.backend.name.clone(),
                    made: Made::Deleted,
                    untimed: true,
                })
            }
        }
    };
    let change = match change {
        Outcome::Made(c) => c,
        Outcome::Again => {
            return Ok(Step::Wait {
                message: None,
                after: retry(every),
            })
        }
        Outcome::Refused(why) => {
            return Ok(Step::fail(
                Reason::RouteRefused,
                format!("HTTPRoute {name}: {why}"),
            ))
        }
    };
    let what = format!("{:?} {}", change.made, change.backend).to_lowercase();
    let log = log_of(run, slot);
    log.changes.push(change);
    let n = log.changes.len();
    let slot_name = run.describe(slot);
    run.say(format!("{slot_name}: route change {n}/{count}: {what}"));
    Ok(Step::Wait {
        message: None,
        after: every,
    })
}

/// How soon a change that met a race or a route still terminating is tried again.
fn retry(every: Duration) -> Duration {
    (every / 4).clamp(Duration::from_millis(50), Duration::from_millis(500))
}

/// The change `made.len()` found on the route (its annotation, written with the change) when
/// its log entry was lost: only a change this action makes at this point (a creation only
/// after a deletion), not before the last logged one, and with a backend of the spec's, never
/// a name read from the route.
fn recovered(
    run: &IngressRun<'_>,
    step: u32,
    route: &DynamicObject,
    made: &[MadeChange],
    anchor: u64,
    now: u64,
) -> Option<MadeChange> {
    let spec = &run.obj().spec;
    let action = spec.route_changes.as_ref()?.action;
    let own = plan::controller(spec, step)?.route.as_ref()?;
    let since = made
        .last()
        .map_or(anchor, |m| m.at_unix_us.saturating_add(1))
        .max(anchor);
    let annotation = route.annotations().get(CHANGE_ANNOTATION);
    let at = recorded_change(
        annotation.map(String::as_str),
        run.slot().sample,
        made.len(),
        since,
        now,
    )?;
    let (kind, backend) = match action {
        RouteChangeAction::SwapBackend => {
            let current = backend_of(route)?;
            let swap_to = spec.route_changes.as_ref()?.swap_to.as_ref()?;
            let known = [own.backend.name.as_str(), swap_to.name.as_str()];
            (Made::Swapped, known.into_iter().find(|b| *b == current)?)
        }
        RouteChangeAction::DeleteAndCreate => {
            made.last().filter(|m| m.made == Made::Deleted)?;
            (Made::Created, own.backend.name.as_str())
        }
    };
    Some(MadeChange {
        at_unix_us: at,
        backend: backend.to_string(),
        made: kind,
        untimed: false,
    })
}

/// What a change request came to.
enum Outcome {
    Made(MadeChange),
    /// Nothing changed (a race with someone else's write): try again.
    Again,
    /// The API server refused it: the run fails with this reason.
    Refused(String),
}

/// The backend a route sends to (its first rule's first backend).
fn backend_of(route: &DynamicObject) -> Option<&str> {
    route.data["spec"]["rules"][0]["backendRefs"][0]["name"].as_str()
}

/// The refusals that end the run; anything else is retried.
fn refusal(e: kube::Error, what: &str) -> Result<Outcome> {
    match e {
        kube::Error::Api(s) if s.code == 403 || s.code == 422 => Ok(Outcome::Refused(format!(
            "{what} was refused: {}",
            s.message
        ))),
        kube::Error::Api(s) if s.code == 404 || s.code == 409 => Ok(Outcome::Again),
        e => Err(e.into()),
    }
}

/// Swaps the route's backend (the one it does not send to now), guarded by its resourceVersion;
/// the same patch leaves the change's tag and instant on the route.
async fn swap(
    run: &IngressRun<'_>,
    step: u32,
    api: &Api<DynamicObject>,
    route: &DynamicObject,
    tag: &str,
) -> Result<Outcome> {
    let Some(backend) = swap_target(&run.obj().spec, step, backend_of(route)).cloned() else {
        return Ok(Outcome::Refused("no backend to swap to".into()));
    };
    let at = now_unix_us();
    let patch = json!({
        "metadata": {
            "resourceVersion": route.metadata.resource_version,
            "annotations": {CHANGE_ANNOTATION: format!("{tag}/{at}")},
        },
        "spec": {"rules": [{"backendRefs": [{"name": backend.name, "port": backend.port}]}]},
    });
    let what = format!("changing its backend to {}", backend.name);
    match api
        .patch(
            &route.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(Outcome::Made(MadeChange {
            at_unix_us: at,
            backend: backend.name,
            made: Made::Swapped,
            untimed: false,
        })),
        Err(e) => refusal(e, &what),
    }
}

/// Deletes the route, the one read (uid and resourceVersion as preconditions); `backend` is
/// the spec's (a name read from the route is not trusted into status).
async fn remove(api: &Api<DynamicObject>, route: &DynamicObject, backend: &str) -> Result<Outcome> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: route.metadata.uid.clone(),
            resource_version: route.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    let at = now_unix_us();
    match api.delete(&route.name_any(), &params).await {
        Ok(_) => Ok(Outcome::Made(MadeChange {
            at_unix_us: at,
            backend: backend.to_string(),
            made: Made::Deleted,
            untimed: false,
        })),
        Err(e) => refusal(e, "deleting it"),
    }
}

/// Creates `controller`'s route again as the run first did, with the change's tag and instant.
async fn create(
    run: &IngressRun<'_>,
    api: &Api<DynamicObject>,
    controller: &Controller,
    route: &OwnedRoute,
    tag: &str,
) -> Result<Outcome> {
    // The admin's limits hold for every creation, not only the run's first.
    if let Err(why) = validate::route_allowed(&run.ctx().config, run.ns(), route) {
        return Ok(Outcome::Refused(format!("creating it again: {why}")));
    }
    let at = now_unix_us();
    let mut manifest = routes::manifest(run.obj(), run.id(), controller, route);
    manifest["metadata"]["annotations"] = json!({CHANGE_ANNOTATION: format!("{tag}/{at}")});
    let object: DynamicObject = match serde_json::from_value(manifest) {
        Ok(o) => o,
        Err(e) => return Ok(Outcome::Refused(e.to_string())),
    };
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(Outcome::Made(MadeChange {
            at_unix_us: at,
            backend: route.backend.name.clone(),
            made: Made::Created,
            untimed: false,
        })),
        Err(e) => refusal(e, "creating it again"),
    }
}

#[cfg(test)]
mod tests;
