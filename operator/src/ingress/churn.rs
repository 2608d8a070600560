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

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::ResourceExt;
use protocol::report::answers::{Answers, Sighting, MAX_SIGHTINGS};
use protocol::worker::FinalReport;
use serde_json::json;

use crds::history::Better;
use crds::ingress::{
    Controller, IngressBenchmark, IngressBenchmarkSpec, Made, MadeChange, OwnedRoute, RouteBackend,
    RouteChangeAction, RouteChangeLog, RouteChangeResult, StepResult, MAX_ROUTE_CHANGES,
};

use super::{plan, result, routes, validate};
use crate::base::error::Result;
use crate::base::outcome::{Reason, Step};
use crate::policy::samples::{Figure, Slot};
use crate::run::Run;

type IngressRun<'a> = Run<'a, IngressBenchmark>;

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

pub(super) fn now_unix_us() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    micros(now)
}

/// How many changes one sample makes: one per `every` of load.duration (the measured time,
/// after the warm-up).
pub fn count(spec: &IngressBenchmarkSpec) -> u64 {
    let Some(changes) = &spec.route_changes else {
        return 0;
    };
    let every = micros(changes.every.as_std()).max(1);
    (micros(spec.load.duration.as_std()) / every).min(MAX_ROUTE_CHANGES)
}

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

/// When the next change is due (Unix µs), or None when the sample has made all it can: change
/// `n` at the window's start + n·every (a few late milliseconds of one reconcile do not add up
/// over the next ones), at least every/2 after the one before (a late operator does not squeeze
/// them together), and with at least every/2 left before the changes' share of the window
/// ends (start + count·every).
pub fn next_due(anchor_us: u64, every_us: u64, made: &[MadeChange], count: u64) -> Option<u64> {
    let n = u64::try_from(made.len()).unwrap_or(u64::MAX);
    if n >= count {
        return None;
    }
    let half = every_us / 2;
    let scheduled = anchor_us.saturating_add(n.saturating_mul(every_us));
    let after_last = made.last().map_or(0, |m| m.at_unix_us.saturating_add(half));
    let due = scheduled.max(after_last);
    let window_end = anchor_us.saturating_add(count.saturating_mul(every_us));
    (due.saturating_add(half) <= window_end).then_some(due)
}

/// The sample's log in status, a fresh one when it belongs to another sample.
fn log_of<'r>(run: &'r mut IngressRun<'_>, slot: Slot) -> &'r mut RouteChangeLog {
    let status = run.status_mut();
    let stale = status
        .route_change_log
        .as_ref()
        .is_none_or(|l| l.step != slot.measurement || l.sample != slot.sample);
    if stale {
        status.route_change_log = Some(RouteChangeLog {
            step: slot.measurement,
            sample: slot.sample,
            ..Default::default()
        });
    }
    status.route_change_log.get_or_insert_with(Default::default)
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

/// One sample's changes against what its clients saw: each change's propagation in µs (until
/// answers that show it began: 2xx of its backend, or for a deletion a 404 from the Gateway
/// itself), None for a change not shown before the next one (or `end_us`) and for an untimed
/// one. A change back to the backend that never stopped answering (the change before it was
/// not applied, or coalesced with it) shows nothing.
pub fn propagation(made: &[MadeChange], answers: &Answers, end_us: u64) -> Vec<Option<u64>> {
    made.iter()
        .enumerate()
        .map(|(i, change)| {
            if change.untimed {
                return None;
            }
            let until = made.get(i + 1).map_or(end_us, |next| next.at_unix_us);
            let shows = |s: &Sighting| match change.made {
                Made::Deleted => s.status == 404 && s.backend.is_none(),
                Made::Swapped | Made::Created => {
                    (200..300).contains(&s.status) && s.backend.as_deref() == Some(&change.backend)
                }
            };
            let first = answers.first_begun_at_or_after(change.at_unix_us, shows)?;
            (first < until).then(|| first - change.at_unix_us)
        })
        .collect()
}

/// Each change's time to show, for the sample's figures: the propagation of a shown change;
/// for one not shown, the time it was given (until the next change or `end_us`), so the figure
/// is at least what the data plane took and a change it never applied is not left out as if it
/// were fast. None for an untimed change (its instant is not known).
pub fn given(made: &[MadeChange], shown: &[Option<u64>], end_us: u64) -> Vec<Option<u64>> {
    made.iter()
        .zip(shown)
        .enumerate()
        .map(|(i, (change, shown))| {
            if change.untimed {
                return None;
            }
            let until = made.get(i + 1).map_or(end_us, |next| next.at_unix_us);
            Some(shown.unwrap_or_else(|| until.saturating_sub(change.at_unix_us)))
        })
        .collect()
}

/// The 99th percentile (nearest rank) of `values` in ms; None when empty.
fn p99_ms(values: &[u64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = (v.len() * 99).div_ceil(100).max(1);
    v.get(rank - 1).map(|us| *us as f64 / 1000.0)
}

/// The figure names of one kind of change: (shown share, p99).
fn figure_names(made: Made) -> (&'static str, &'static str) {
    match made {
        Made::Swapped => ("routeChangesShown", "routeChangeP99Ms"),
        Made::Created => ("routeCreationsShown", "routeCreationP99Ms"),
        Made::Deleted => ("routeDeletionsShown", "routeDeletionP99Ms"),
    }
}

/// Every route-change figure a sample can have (the gates' list is checked against it).
#[cfg(test)]
pub fn all_figure_names() -> impl Iterator<Item = &'static str> {
    [Made::Swapped, Made::Created, Made::Deleted]
        .into_iter()
        .flat_map(|m| {
            let (shown, p99) = figure_names(m);
            [shown, p99]
        })
}

/// The kinds of change an action makes.
fn kinds(action: RouteChangeAction) -> &'static [Made] {
    match action {
        RouteChangeAction::SwapBackend => &[Made::Swapped],
        RouteChangeAction::DeleteAndCreate => &[Made::Deleted, Made::Created],
    }
}

/// What one sample's changes came to: its log checked, and each change's propagation read
/// from the workers' answers.
#[derive(Debug)]
pub struct SampleReading {
    action: RouteChangeAction,
    changes: Vec<MadeChange>,
    shown: Vec<Option<u64>>,
    /// The end of the sample: the workers' last instant, or the changes' window on the
    /// operator's clock if that ends later.
    end_us: u64,
    /// A backend itself answered 4xx (not only the Gateway, naming no backend).
    pub backend_4xx: bool,
}

/// The log of `slot` in status, checked: Err when it is not there, empty, not in the order the
/// operator writes it, or lacks a kind of change the action makes (the schedule was missed: an
/// operator that was not running at its time).
pub fn checked_log(
    log: Option<&RouteChangeLog>,
    slot: Slot,
    action: RouteChangeAction,
) -> std::result::Result<(&[MadeChange], u64), String> {
    let log = log
        .filter(|l| l.step == slot.measurement && l.sample == slot.sample)
        .ok_or("no route change of this sample is in status (the operator was not running when they were due?)")?;
    let anchor = log
        .anchor_unix_us
        .ok_or("the sample's route changes have no start")?;
    let ordered = log
        .changes
        .iter()
        .try_fold(anchor, |last, c| {
            (c.at_unix_us >= last).then_some(c.at_unix_us.saturating_add(1))
        })
        .is_some();
    if !ordered {
        return Err(
            "the route change log in status is not the operator's: its instants are out of order"
                .into(),
        );
    }
    for kind in kinds(action) {
        if !log.changes.iter().any(|c| c.made == *kind) {
            return Err(format!(
                "this sample made no route change of kind {kind:?} (the operator was not running when it was due?)"
            ));
        }
    }
    Ok((&log.changes, anchor))
}

/// Reads the sample `slot`: None without routeChanges; Err (the run fails BadReport) when its
/// log or its workers' answers cannot say what the changes did.
pub fn read_sample(
    spec: &IngressBenchmarkSpec,
    log: Option<&RouteChangeLog>,
    slot: Slot,
    reports: &BTreeMap<String, FinalReport>,
) -> std::result::Result<Option<SampleReading>, String> {
    let Some(changes) = &spec.route_changes else {
        return Ok(None);
    };
    let (made, anchor) = checked_log(log, slot, changes.action)?;
    let (answers, end_us) = answers(reports)?;
    let first = plan::controller(spec, slot.measurement)
        .and_then(|c| c.route.as_ref())
        .map(|r| r.backend.name.as_str());
    if let Some(first) = first {
        if !answers
            .sightings
            .iter()
            .any(|s| s.backend.as_deref() == Some(first))
        {
            return Err(format!(
                "no answer came from {first}, the route's backend, by name: the backends must answer with X-Netbench-Backend: <their Service's name> (netbench-loadgen http-server --name)"
            ));
        }
    }
    let shown = propagation(made, &answers, end_us);
    let every_us = micros(changes.every.as_std());
    let window_end = anchor.saturating_add(count(spec).saturating_mul(every_us));
    let backend_4xx = answers
        .sightings
        .iter()
        .any(|s| (400..500).contains(&s.status) && s.backend.is_some());
    Ok(Some(SampleReading {
        action: changes.action,
        changes: made.to_vec(),
        shown,
        end_us: end_us.max(window_end),
        backend_4xx,
    }))
}

/// The sample's route-change figures (statistics, gates, results, history), per kind of change
/// the action makes: the share of its changes shown (0 to 1), and the 99th percentile of their
/// time to show, a change not shown counted at the time it was given (see [`given`]; untimed
/// changes count as not shown and are left out of the percentile). Err (BadReport) when they
/// cannot be read, so that every sample has the same figures.
pub fn sample_figures(
    ib: &IngressBenchmark,
    slot: Slot,
    reports: &BTreeMap<String, FinalReport>,
) -> std::result::Result<Vec<Figure>, String> {
    let log = ib.status.as_ref().and_then(|s| s.route_change_log.as_ref());
    let Some(r) = read_sample(&ib.spec, log, slot, reports)? else {
        return Ok(vec![]);
    };
    let given = given(&r.changes, &r.shown, r.end_us);
    let mut figures = vec![];
    for &kind in kinds(r.action) {
        let mine: Vec<usize> = (0..r.changes.len())
            .filter(|&i| r.changes.get(i).is_some_and(|c| c.made == kind))
            .collect();
        let times: Vec<u64> = mine
            .iter()
            .filter_map(|&i| given.get(i).copied().flatten())
            .collect();
        let seen = mine
            .iter()
            .filter(|&&i| r.shown.get(i).is_some_and(Option::is_some))
            .count();
        let p99 = p99_ms(&times).ok_or_else(|| {
            format!("every route change of kind {kind:?} of this sample is untimed")
        })?;
        let share = seen as f64 / mine.len().max(1) as f64;
        let (shown_name, p99_name) = figure_names(kind);
        figures.push(Figure {
            name: shown_name.into(),
            unit: "ratio".into(),
            better: Better::Higher,
            value: share,
        });
        figures.push(Figure {
            name: p99_name.into(),
            unit: "ms".into(),
            better: Better::Lower,
            value: p99,
        });
    }
    Ok(figures)
}

/// The answers of every worker of the sample, merged; Err when the workers recorded none or
/// no answer named its backend (the figures would mean nothing).
pub fn answers(
    reports: &BTreeMap<String, FinalReport>,
) -> std::result::Result<(Answers, u64), String> {
    let (all, end_us) = result::merged_answers(reports, "--record-answers")?;
    if !all.complete {
        return Err(format!(
            "the answers changed too often to record ({MAX_SIGHTINGS} sightings): fewer changes or connections"
        ));
    }
    if all.sightings.iter().all(|s| s.backend.is_none()) {
        return Err("no answer named its backend (header X-Netbench-Backend): routeChanges needs backends that name themselves, e.g. netbench-loadgen http-server --name <Service> (deploy/examples/target.yaml)".into());
    }
    Ok((all, end_us))
}

/// The step's route-change figures with this sample's added (once per sample).
pub fn add_sample(
    before: Option<&RouteChangeResult>,
    sample: u32,
    shown: &[Option<u64>],
    untimed: u32,
) -> std::result::Result<RouteChangeResult, String> {
    let mut r = before.cloned().unwrap_or_default();
    if r.samples.contains(&sample) {
        return Ok(r);
    }
    let (histogram, figures) = result::record_times(&r.histogram, shown.iter().flatten().copied())?;
    let made = u32::try_from(shown.len()).unwrap_or(u32::MAX);
    let seen = u32::try_from(shown.iter().flatten().count()).unwrap_or(u32::MAX);
    r.samples.push(sample);
    r.changes = r.changes.saturating_add(made);
    r.shown = r.shown.saturating_add(seen);
    r.untimed = r.untimed.saturating_add(untimed);
    // From the histogram alone (a percentile in status that it does not hold is not kept).
    [r.p50_ms, r.p99_ms, r.max_ms] = figures.map_or([None; 3], |f| f.map(Some));
    r.histogram = histogram;
    Ok(r)
}

/// One step's route-change figures: swaps, or creations and deletions.
#[derive(Debug, Default, PartialEq)]
pub struct Figures {
    pub swaps: Option<RouteChangeResult>,
    pub creations: Option<RouteChangeResult>,
    pub deletions: Option<RouteChangeResult>,
    /// A backend itself answered 4xx in this sample (not only the Gateway while the route
    /// was gone).
    pub backend_4xx: bool,
}

impl Figures {
    /// Into the step's result.
    pub fn fill(self, result: &mut StepResult) {
        result.route_changes = self.swaps;
        result.route_creations = self.creations;
        result.route_deletions = self.deletions;
    }
}

/// The figures of the changes of kind `made` with this sample's added.
fn figures_of(
    made: Made,
    changes: &[MadeChange],
    shown: &[Option<u64>],
    before: Option<&RouteChangeResult>,
    sample: u32,
) -> std::result::Result<Option<RouteChangeResult>, String> {
    let mine: Vec<_> = changes
        .iter()
        .zip(shown)
        .filter(|(c, _)| c.made == made)
        .collect();
    let times: Vec<Option<u64>> = mine.iter().map(|(_, s)| **s).collect();
    let untimed = mine.iter().filter(|(c, _)| c.untimed).count();
    let untimed = u32::try_from(untimed).unwrap_or(u32::MAX);
    add_sample(before, sample, &times, untimed).map(Some)
}

/// The sample's figures into `step`'s result (`before`: the step's result so far): Err (the
/// run fails BadReport) when they cannot be read.
pub fn collect(
    run: &IngressRun<'_>,
    slot: Slot,
    reports: &BTreeMap<String, FinalReport>,
    before: Option<&StepResult>,
) -> std::result::Result<Figures, String> {
    let log = run.status().route_change_log.as_ref();
    let Some(r) = read_sample(&run.obj().spec, log, slot, reports)? else {
        return Ok(Figures::default());
    };
    let (changes, shown, sample) = (&r.changes, &r.shown, slot.sample);
    let before_of = |f: fn(&StepResult) -> Option<&RouteChangeResult>| before.and_then(f);
    Ok(match r.action {
        RouteChangeAction::SwapBackend => Figures {
            swaps: figures_of(
                Made::Swapped,
                changes,
                shown,
                before_of(|s| s.route_changes.as_ref()),
                sample,
            )?,
            backend_4xx: r.backend_4xx,
            ..Figures::default()
        },
        RouteChangeAction::DeleteAndCreate => Figures {
            swaps: None,
            creations: figures_of(
                Made::Created,
                changes,
                shown,
                before_of(|s| s.route_creations.as_ref()),
                sample,
            )?,
            deletions: figures_of(
                Made::Deleted,
                changes,
                shown,
                before_of(|s| s.route_deletions.as_ref()),
                sample,
            )?,
            backend_4xx: r.backend_4xx,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(at: u64, backend: &str) -> MadeChange {
        MadeChange {
            at_unix_us: at,
            backend: backend.into(),
            ..Default::default()
        }
    }

    fn seen(status: u16, backend: &str, from: u64, to: u64) -> Sighting {
        Sighting {
            status,
            backend: Some(backend.into()),
            from_unix_us: from,
            to_unix_us: to,
        }
    }

    #[test]
    fn changes_are_due_on_the_schedule_never_squeezed_and_stop_at_the_window() {
        assert_eq!(next_due(1_000, 500, &[], 3), Some(1_000));
        // A few late µs do not add up: the next is still on the schedule.
        assert_eq!(next_due(1_000, 500, &[made(1_010, "b")], 3), Some(1_500));
        let late = [made(1_000, "b"), made(1_510, "a")];
        assert_eq!(next_due(1_000, 500, &late, 3), Some(2_000));
        // A very late change: the next keeps every/2 after it...
        assert_eq!(next_due(1_000, 500, &[made(1_400, "b")], 3), Some(1_650));
        // ...and none comes with less than every/2 before the window's end (1000 + 3·500).
        assert_eq!(
            next_due(1_000, 500, &[made(1_000, "b"), made(2_100, "a")], 3),
            None
        );
        let three = [made(1_000, "b"), made(1_500, "a"), made(2_000, "b")];
        assert_eq!(next_due(1_000, 500, &three, 3), None);
        assert_eq!(next_due(1_000, 500, &[], 0), None);
    }

    #[test]
    fn a_change_left_on_the_route_is_found_once_and_only_if_plausible() {
        let v = Some("1/3/5000");
        assert_eq!(recorded_change(v, 1, 3, 4_000, 6_000), Some(5_000));
        assert_eq!(
            recorded_change(v, 0, 3, 4_000, 6_000),
            None,
            "another sample"
        );
        assert_eq!(
            recorded_change(v, 1, 4, 4_000, 6_000),
            None,
            "another change"
        );
        assert_eq!(
            recorded_change(v, 1, 3, 5_001, 6_000),
            None,
            "before the window"
        );
        assert_eq!(
            recorded_change(v, 1, 3, 4_000, 4_999),
            None,
            "in the future"
        );
        for hostile in [
            "",
            "1/3",
            "x/3/5000",
            "1/3/-1",
            "1/3/5000/7",
            "99999999999/3/5000",
        ] {
            assert_eq!(
                recorded_change(Some(hostile), 1, 3, 0, u64::MAX),
                None,
                "{hostile}"
            );
        }
        assert_eq!(recorded_change(None, 1, 3, 0, u64::MAX), None);
    }

    #[test]
    fn propagation_is_to_the_first_2xx_of_the_new_backend_before_the_next_change() {
        let mut a = Answers::new();
        a.add(seen(200, "web-a", 0, 1_120));
        a.add(seen(503, "web-b", 1_050, 1_060)); // a 503 of the new backend does not count
        a.add(seen(200, "web-b", 1_100, 2_030));
        a.add(seen(200, "web-a", 2_040, 3_000));
        let changes = [
            made(1_000, "web-b"),
            made(2_000, "web-a"),
            made(2_500, "web-b"), // never answered: not shown
        ];
        assert_eq!(
            propagation(&changes, &a, 3_000),
            vec![Some(100), Some(40), None]
        );
        // A data plane that coalesced a change: web-a went on answering through the swap to
        // web-b and back, so neither change shows (not a propagation of 0).
        let mut steady = Answers::new();
        steady.add(seen(200, "web-a", 0, 3_000));
        let coalesced = [made(1_000, "web-b"), made(1_500, "web-a")];
        assert_eq!(propagation(&coalesced, &steady, 3_000), vec![None, None]);
    }

    fn of(kind: Made, at: u64, backend: &str) -> MadeChange {
        MadeChange {
            made: kind,
            ..made(at, backend)
        }
    }

    fn gateway_404(from: u64, to: u64) -> Sighting {
        Sighting {
            status: 404,
            backend: None,
            from_unix_us: from,
            to_unix_us: to,
        }
    }

    #[test]
    fn a_deletion_shows_at_the_gateways_own_404_and_a_creation_at_the_backends_2xx() {
        let mut a = Answers::new();
        a.add(seen(200, "web-a", 0, 1_030));
        a.add(seen(404, "web-a", 1_010, 1_020)); // the backend's own 404 is not the Gateway's
        a.add(gateway_404(1_040, 2_070));
        a.add(seen(200, "web-a", 2_080, 3_000));
        let changes = [
            of(Made::Deleted, 1_000, "web-a"),
            of(Made::Created, 2_000, "web-a"),
        ];
        assert_eq!(propagation(&changes, &a, 3_000), vec![Some(40), Some(80)]);
        // A deletion the data plane never applied before the route came back shows nothing,
        // and so does the creation of a route that never stopped answering.
        let mut steady = Answers::new();
        steady.add(seen(200, "web-a", 0, 3_000));
        assert_eq!(propagation(&changes, &steady, 3_000), vec![None, None]);
        // An untimed deletion is never shown, even when a 404 followed it.
        let lost = [MadeChange {
            untimed: true,
            ..of(Made::Deleted, 1_000, "web-a")
        }];
        assert_eq!(propagation(&lost, &a, 3_000), vec![None]);
    }

    #[test]
    fn creations_and_deletions_are_counted_apart_with_the_untimed_ones() {
        let changes = [
            of(Made::Deleted, 1_000, "web-a"),
            of(Made::Created, 2_000, "web-a"),
            MadeChange {
                untimed: true,
                ..of(Made::Deleted, 3_000, "web-a")
            },
            of(Made::Created, 4_000, "web-a"),
        ];
        let shown = [Some(40), Some(80), None, None];
        let deleted = figures_of(Made::Deleted, &changes, &shown, None, 0)
            .unwrap()
            .unwrap();
        assert_eq!((deleted.changes, deleted.shown, deleted.untimed), (2, 1, 1));
        let created = figures_of(Made::Created, &changes, &shown, None, 0)
            .unwrap()
            .unwrap();
        assert_eq!((created.changes, created.shown, created.untimed), (2, 1, 0));
        assert!(
            (created.max_ms.unwrap() - 0.08).abs() < 0.001,
            "{:?}",
            created.max_ms
        );
        let swapped = figures_of(Made::Swapped, &changes, &shown, None, 0)
            .unwrap()
            .unwrap();
        assert_eq!((swapped.changes, swapped.samples.clone()), (0, vec![0]));
        // None shown: no percentile, rather than a 0 ms that would read as instant.
        assert_eq!(
            (swapped.p50_ms, swapped.p99_ms, swapped.max_ms),
            (None, None, None)
        );
    }

    #[test]
    fn a_change_not_shown_counts_in_the_sample_figure_at_the_time_it_was_given() {
        let changes = [
            made(1_000, "web-b"),
            made(2_000, "web-a"),
            made(2_500, "web-b"),
        ];
        let shown = [Some(100), None, None];
        // Shown: its propagation; not shown: until the next change, or the end.
        assert_eq!(
            given(&changes, &shown, 3_200),
            vec![Some(100), Some(500), Some(700)]
        );
        assert_eq!(p99_ms(&[100, 500, 700]), Some(0.7));
        assert_eq!(p99_ms(&[]), None);
        // Nearest rank: of 200 values the 198th.
        let many: Vec<u64> = (1..=200).map(|ms| ms * 1000).collect();
        assert_eq!(p99_ms(&many), Some(198.0));
        // An untimed change has no time to count.
        let lost = [MadeChange {
            untimed: true,
            ..of(Made::Deleted, 1_000, "web-a")
        }];
        assert_eq!(given(&lost, &[None], 3_000), vec![None]);
    }

    fn log(anchor: u64, changes: Vec<MadeChange>) -> RouteChangeLog {
        RouteChangeLog {
            step: 0,
            sample: 1,
            anchor_unix_us: Some(anchor),
            changes,
        }
    }

    #[test]
    fn a_log_out_of_order_missing_or_without_a_kind_of_change_is_refused() {
        let slot = Slot {
            measurement: 0,
            sample: 1,
        };
        let swap = RouteChangeAction::SwapBackend;
        let recreate = RouteChangeAction::DeleteAndCreate;
        let good = log(1_000, vec![made(1_000, "web-b"), made(2_000, "web-a")]);
        assert_eq!(checked_log(Some(&good), slot, swap).unwrap().1, 1_000);
        let refused =
            |l: Option<&RouteChangeLog>, action| checked_log(l, slot, action).unwrap_err();
        assert!(refused(None, swap).contains("no route change of this sample"));
        let other = RouteChangeLog {
            sample: 0,
            ..good.clone()
        };
        assert!(refused(Some(&other), swap).contains("no route change of this sample"));
        // Forged: a change before the one before it, or before the window's start (a 0 ms
        // "time given" otherwise).
        let back = log(1_000, vec![made(2_000, "web-b"), made(1_500, "web-a")]);
        assert!(refused(Some(&back), swap).contains("out of order"));
        let early = log(1_000, vec![made(500, "web-b")]);
        assert!(refused(Some(&early), swap).contains("out of order"));
        let twice = log(1_000, vec![made(1_500, "web-b"), made(1_500, "web-a")]);
        assert!(refused(Some(&twice), swap).contains("out of order"));
        // A sample of DeleteAndCreate that made no creation has no creation figures: refused,
        // so that every sample has the same figures.
        let deleted = log(1_000, vec![of(Made::Deleted, 1_000, "web-a")]);
        assert!(refused(Some(&deleted), recreate).contains("Created"));
        assert!(refused(Some(&log(1_000, vec![])), swap).contains("Swapped"));
    }

    #[test]
    fn figures_merge_over_samples_once_each() {
        let one = add_sample(None, 0, &[Some(10_000), Some(30_000), None], 0).unwrap();
        assert_eq!((one.changes, one.shown), (3, 2));
        assert!((one.max_ms.unwrap() - 30.0).abs() < 0.1, "{:?}", one.max_ms);
        // The same sample collected again changes nothing.
        assert_eq!(add_sample(Some(&one), 0, &[Some(1)], 0).unwrap(), one);
        let two = add_sample(Some(&one), 1, &[Some(50_000)], 0).unwrap();
        assert_eq!(
            (two.changes, two.shown, two.samples.clone()),
            (4, 3, vec![0, 1])
        );
        assert!((two.max_ms.unwrap() - 50.0).abs() < 0.1);
        assert!((two.p50_ms.unwrap() - 30.0).abs() < 0.1, "{:?}", two.p50_ms);
        // Percentiles come from the histogram alone: a forged one beside an empty histogram
        // does not survive.
        let forged = RouteChangeResult {
            p99_ms: Some(1.0),
            ..Default::default()
        };
        let none = add_sample(Some(&forged), 0, &[None], 0).unwrap();
        assert_eq!(none.p99_ms, None);
        // A hostile histogram in status is refused, not trusted.
        let forged = RouteChangeResult {
            histogram: "not base64".into(),
            ..Default::default()
        };
        assert!(add_sample(Some(&forged), 1, &[Some(1)], 0).is_err());
    }

    #[test]
    fn the_count_fits_the_measured_window_and_each_change_is_a_change() {
        let spec: IngressBenchmarkSpec = serde_yaml::from_str(
            r#"
target: {url: "http://gw/"}
load: {duration: 30s, warmup: 5s}
controllers:
  - name: eg
    route: {gateway: {name: bench}, hostname: a.example, backend: {name: web-a, port: 80}}
routeChanges: {every: 2s, swapTo: {name: web-b, port: 80}}
"#,
        )
        .unwrap();
        assert!(!deletes_routes(&spec));
        // load.duration is the measured time, after the warm-up.
        assert_eq!(count(&spec), 15);
        let to = |current| swap_target(&spec, 0, current).map(|b| b.name.as_str());
        assert_eq!(to(Some("web-a")), Some("web-b"));
        assert_eq!(to(Some("web-b")), Some("web-a"));
        // Anything else on the route (someone edited it): back to a backend of the spec.
        assert_eq!(to(Some("elsewhere")), Some("web-b"));
        assert_eq!(to(None), Some("web-b"));
        assert_eq!(swap_target(&spec, 1, None), None);
    }
}
