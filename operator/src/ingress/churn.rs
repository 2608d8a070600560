//! Route changes under load (spec.routeChanges): while a controller's workers measure, the run
//! swaps the backend of the controller's route between `backend` and `swapTo`, one change per
//! `every` from the start of the measured window, each with a whole `every` before the end.
//! Each change's instant (when it was sent to the API server) goes to status first, so a
//! restarted operator goes on from there and the collection reads it.
//!
//! The clients record which answer (status, the backend named in X-Netbench-Backend) they saw
//! when (`--record-answers`). A change's propagation is the time from sending it to the first
//! 2xx answer from its backend, if that came before the next change (or the end of the
//! measurement); otherwise the change was not shown. The figures are read from the workers'
//! answers, never from the controller's status.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::ResourceExt;
use protocol::report::answers::{Answers, Sighting, MAX_SIGHTINGS};
use protocol::report::histogram::{self, new_latency_histogram, LATENCY_MAX_US};
use protocol::worker::FinalReport;
use serde_json::json;

use crds::ingress::{
    IngressBenchmark, IngressBenchmarkSpec, MadeChange, RouteBackend, RouteChangeLog,
    RouteChangeResult, MAX_ROUTE_CHANGES,
};

use super::{plan, result, routes};
use crate::base::error::Result;
use crate::base::outcome::{Reason, Step};
use crate::policy::samples::Slot;
use crate::run::Run;

type IngressRun<'a> = Run<'a, IngressBenchmark>;

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn now_unix_us() -> u64 {
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
    let changes = spec.route_changes.as_ref()?;
    let route = plan::controller(spec, step)?.route.as_ref()?;
    Some(if current == Some(changes.swap_to.name.as_str()) {
        &route.backend
    } else {
        &changes.swap_to
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

/// Makes the change that is due, if one is; says when the next one is.
pub async fn while_running(run: &mut IngressRun<'_>, step: u32) -> Result<Step> {
    let spec = &run.obj().spec;
    let (Some(changes), Some(controller)) = (&spec.route_changes, plan::controller(spec, step))
    else {
        return Ok(Step::Done);
    };
    let every = changes.every.as_std();
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
    let route = match api.get(&name).await {
        Ok(r) => r,
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
            let m = format!("HTTPRoute {name} is gone or out of reach: {}", s.message);
            return Ok(Step::fail(Reason::RouteRefused, m));
        }
        Err(e) => return Err(e.into()),
    };
    let uid = run.obj().uid().unwrap_or_default();
    if !crate::base::labels::controlled_by(&route.metadata, &uid) {
        let m = format!("HTTPRoute {name} is not this benchmark's: its backend is left alone");
        return Ok(Step::fail(Reason::RouteRefused, m));
    }
    let current = route.data["spec"]["rules"][0]["backendRefs"][0]["name"].as_str();
    let annotation = route
        .annotations()
        .get(CHANGE_ANNOTATION)
        .map(String::as_str);
    if let Some(at) = recorded_change(annotation, slot.sample, made.len(), anchor, now) {
        // Made already; only its log entry was lost.
        let backend = current.unwrap_or_default().to_string();
        log_of(run, slot).changes.push(MadeChange {
            at_unix_us: at,
            backend,
        });
        return Ok(Step::Wait {
            message: None,
            after: Duration::from_millis(10),
        });
    }
    let Some(backend) = swap_target(&run.obj().spec, step, current).cloned() else {
        return Ok(Step::Done);
    };
    let at = now_unix_us();
    let patch = json!({
        "metadata": {
            "resourceVersion": route.metadata.resource_version,
            "annotations": {CHANGE_ANNOTATION: format!("{}/{}/{at}", slot.sample, made.len())},
        },
        "spec": {"rules": [{"backendRefs": [{"name": backend.name, "port": backend.port}]}]},
    });
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 || s.code == 422 => {
            let m = format!(
                "HTTPRoute {name}: changing its backend to {} was refused: {}",
                backend.name, s.message
            );
            return Ok(Step::fail(Reason::RouteRefused, m));
        }
        Err(e) => return Err(e.into()),
    }
    let log = log_of(run, slot);
    log.changes.push(MadeChange {
        at_unix_us: at,
        backend: backend.name.clone(),
    });
    let n = log.changes.len();
    let what = run.describe(slot);
    run.say(format!(
        "{what}: route change {n}/{count}: backend {}",
        backend.name
    ));
    Ok(Step::Wait {
        message: None,
        after: every,
    })
}

/// One sample's changes against what its clients saw: each change's propagation in µs (until
/// 2xx answers of its backend began), None for a change not shown before the next one (or
/// `end_us`). A change back to the backend that never stopped answering (the change before it
/// was not applied, or coalesced with it) shows nothing.
pub fn propagation(made: &[MadeChange], answers: &Answers, end_us: u64) -> Vec<Option<u64>> {
    made.iter()
        .enumerate()
        .map(|(i, change)| {
            let until = made.get(i + 1).map_or(end_us, |next| next.at_unix_us);
            let from_backend = |s: &Sighting| {
                (200..300).contains(&s.status) && s.backend.as_deref() == Some(&change.backend)
            };
            let first = answers.first_begun_at_or_after(change.at_unix_us, from_backend)?;
            (first < until).then(|| first - change.at_unix_us)
        })
        .collect()
}

/// The answers of every worker of the sample, merged; Err when the workers recorded none or
/// no answer named its backend (the figures would mean nothing).
pub fn answers(
    reports: &BTreeMap<String, FinalReport>,
) -> std::result::Result<(Answers, u64), String> {
    let mut all = Answers::new();
    let mut end_ms = 0;
    for r in reports.values() {
        let h = result::http_of(r)?;
        let Some(a) = &h.answers else {
            return Err(format!(
                "worker {:.253} recorded no answers (its loadgen does not support --record-answers?)",
                r.worker
            ));
        };
        all.merge(a);
        end_ms = end_ms.max(h.end_unix_ms);
    }
    if !all.complete {
        return Err(format!(
            "the answers changed too often to record ({MAX_SIGHTINGS} sightings): fewer changes or connections"
        ));
    }
    if all.sightings.iter().all(|s| s.backend.is_none()) {
        return Err("no answer named its backend (header X-Netbench-Backend): routeChanges needs backends that name themselves, e.g. netbench-loadgen http-server --name <Service> (deploy/examples/target.yaml)".into());
    }
    Ok((all, end_ms.saturating_mul(1000)))
}

/// The step's route-change figures with this sample's added (once per sample).
pub fn add_sample(
    before: Option<&RouteChangeResult>,
    sample: u32,
    shown: &[Option<u64>],
) -> std::result::Result<RouteChangeResult, String> {
    let mut r = before.cloned().unwrap_or_default();
    if r.samples.contains(&sample) {
        return Ok(r);
    }
    let mut h: Histogram<u64> = if r.histogram.is_empty() {
        new_latency_histogram()
    } else {
        histogram::decode(&r.histogram)?
    };
    for us in shown.iter().flatten() {
        h.saturating_record((*us).clamp(1, LATENCY_MAX_US));
    }
    let made = u32::try_from(shown.len()).unwrap_or(u32::MAX);
    let seen = u32::try_from(shown.iter().flatten().count()).unwrap_or(u32::MAX);
    r.samples.push(sample);
    r.changes = r.changes.saturating_add(made);
    r.shown = r.shown.saturating_add(seen);
    let ms = |us: u64| us as f64 / 1000.0;
    if !h.is_empty() {
        r.p50_ms = ms(h.value_at_quantile(0.5));
        r.p99_ms = ms(h.value_at_quantile(0.99));
        r.max_ms = ms(h.max());
    }
    r.histogram = histogram::encode(&h)?;
    Ok(r)
}

/// The sample's figures into `step`'s result: Err (the run fails BadReport) when they
/// cannot be read.
pub fn collect(
    run: &IngressRun<'_>,
    slot: Slot,
    reports: &BTreeMap<String, FinalReport>,
    before: Option<&RouteChangeResult>,
) -> std::result::Result<Option<RouteChangeResult>, String> {
    if run.obj().spec.route_changes.is_none() {
        return Ok(None);
    }
    let made = run
        .status()
        .route_change_log
        .as_ref()
        .filter(|l| l.step == slot.measurement && l.sample == slot.sample)
        .map(|l| l.changes.as_slice())
        .unwrap_or_default();
    let (answers, end_us) = answers(reports)?;
    let first = plan::controller(&run.obj().spec, slot.measurement)
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
    add_sample(before, slot.sample, &shown).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(at: u64, backend: &str) -> MadeChange {
        MadeChange {
            at_unix_us: at,
            backend: backend.into(),
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

    #[test]
    fn figures_merge_over_samples_once_each() {
        let one = add_sample(None, 0, &[Some(10_000), Some(30_000), None]).unwrap();
        assert_eq!((one.changes, one.shown), (3, 2));
        assert!((one.max_ms - 30.0).abs() < 0.1, "{}", one.max_ms);
        // The same sample collected again changes nothing.
        assert_eq!(add_sample(Some(&one), 0, &[Some(1)]).unwrap(), one);
        let two = add_sample(Some(&one), 1, &[Some(50_000)]).unwrap();
        assert_eq!(
            (two.changes, two.shown, two.samples.clone()),
            (4, 3, vec![0, 1])
        );
        assert!((two.max_ms - 50.0).abs() < 0.1);
        assert!((two.p50_ms - 30.0).abs() < 0.1, "{}", two.p50_ms);
        // A hostile histogram in status is refused, not trusted.
        let forged = RouteChangeResult {
            histogram: "not base64".into(),
            ..Default::default()
        };
        assert!(add_sample(Some(&forged), 1, &[Some(1)]).is_err());
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
