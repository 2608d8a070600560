//! Route scale (`controllers[].route.count` above 1): at the start of each of the controller's
//! measurements (when the workers' load and warm-up begin) the run creates `count` HTTPRoutes,
//! hostnames `r<i>.<hostname>`, all to the route's backend, and deletes them when the
//! measurement is collected. The workers spread their connections over the hostnames
//! (`netbench-loadgen http --host-count`) and report when each hostname first answered a 2xx
//! naming a backend; a route's figure is the time from sending its creation to that answer.
//! Nothing is read from the routes' status.
//!
//! Each creation's instant goes to `status.routeScaleLog` (the sample's record: a restarted
//! operator goes on from it, and the sample's figures read it). A route found created with no
//! instant (its record lost to a restart) counts as not answered. The log is hostile like all
//! status: sized to the spec's count, its instants held to the sample's time. Reading a
//! sample's figures is `reading.rs`.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

use crds::ingress::{Controller, IngressBenchmark, OwnedRoute, RouteScaleLog};

use super::churn::{now_unix_us, sample_log};
use super::{plan, routes};
use crate::base::error::Result;
use crate::base::labels;
use crate::base::outcome::{Reason, Step};
use crate::policy::samples::Slot;
use crate::run::Run;

mod reading;
pub mod terms;
pub use reading::{collect, made_in_sample, sample_figures};
pub use terms::{scaled, UNTIMED};

type IngressRun<'a> = Run<'a, IngressBenchmark>;

/// The label that numbers a scale's route (its hostname's `r<i>`).
const INDEX: &str = "netbench.io/route-index";
/// The label that names the sample a scale's route was created for.
const SAMPLE: &str = "netbench.io/route-sample";
/// Routes created per reconcile, and at once within it.
const BATCH: usize = 100;
const AT_ONCE: usize = 16;
/// Route `i`'s hostname.
pub fn hostname(route: &OwnedRoute, i: usize) -> String {
    format!("r{i}.{}", route.hostname)
}

/// Route `i`'s name: the run, the controller, the sample and the index (a DNS subdomain; the
/// dots keep it apart from any controller's own route, whose names have none).
pub fn name(run: &str, controller: &str, sample: u32, i: usize) -> String {
    format!("{}.s{sample}.r{i}", routes::name(run, controller))
}

/// The selector of the sample's routes.
fn selector(run: &IngressRun<'_>, controller: &str, sample: u32) -> String {
    format!(
        "{},{}={},{}={controller},{SAMPLE}={sample}",
        labels::benchmark_selector(plan::KIND, run.name()),
        labels::RUN,
        run.id(),
        routes::CONTROLLER,
    )
}

fn manifest(
    run: &IngressRun<'_>,
    controller: &Controller,
    route: &OwnedRoute,
    sample: u32,
    i: usize,
) -> serde_json::Value {
    let one = OwnedRoute {
        hostname: hostname(route, i),
        count: 1,
        ..route.clone()
    };
    let mut m = routes::manifest(run.obj(), run.id(), controller, &one);
    m["metadata"]["name"] = json!(name(run.id(), &controller.name, sample, i));
    m["metadata"]["labels"][SAMPLE] = json!(sample.to_string());
    m["metadata"]["labels"][INDEX] = json!(i.to_string());
    m
}

/// The sample's log in status, made anew for a new sample, sized to `count`.
fn log_of<'r>(run: &'r mut IngressRun<'_>, slot: Slot, count: usize) -> &'r mut RouteScaleLog {
    let log = sample_log!(run.status_mut().route_scale_log, RouteScaleLog, slot);
    log.created_unix_us.resize(count, None);
    log
}

/// The indices of the sample's routes that exist (this benchmark's, by uid).
async fn existing(run: &IngressRun<'_>, controller: &str, sample: u32) -> Result<BTreeSet<usize>> {
    let ours = ours(run, controller, sample).await?;
    Ok(ours
        .iter()
        .filter_map(|r| r.labels().get(INDEX)?.parse().ok())
        .collect())
}

/// The sample's routes that are this benchmark's (by uid, not only by labels).
async fn ours(
    run: &IngressRun<'_>,
    controller: &str,
    sample: u32,
) -> Result<Vec<kube::core::PartialObjectMeta<DynamicObject>>> {
    let uid = run.obj().uid().unwrap_or_default();
    let listed = routes::api(run)
        .list_metadata(&ListParams::default().labels(&selector(run, controller, sample)))
        .await?;
    Ok(listed
        .items
        .into_iter()
        .filter(|r| labels::controlled_by(&r.metadata, &uid))
        .collect())
}

/// Whether the API server's refusal is for good (the request is wrong or not allowed), not a
/// moment's trouble (throttling, a server error, the network) that the next pass retries.
fn for_good(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if matches!(s.code, 400 | 403 | 404 | 422))
}

/// Creates the sample's routes from the moment its load begins (the workers' barrier, kept in
/// the log for a restarted operator), [`BATCH`] per pass, each creation's instant into the
/// log. Done when every route exists; Fail when the API server refused one for good or a
/// route of that name is not this benchmark's.
pub async fn while_running(run: &mut IngressRun<'_>, step: u32) -> Result<Step> {
    let Some((controller, route)) = scaled(&run.obj().spec, step) else {
        return Ok(Step::Done);
    };
    let (controller, route) = (controller.clone(), route.clone());
    let slot = run.slot();
    let count = usize::try_from(route.count).unwrap_or(0);
    let started = run.ctx().runs.started_at(run.id(), slot.wire());
    let log = log_of(run, slot, count);
    if log.load_start_unix_us.is_none() {
        log.load_start_unix_us = started.map(|ms| ms.saturating_mul(1000));
    }
    let Some(load_start) = log.load_start_unix_us else {
        // The workers have not been released yet: the routes come with the load.
        return Ok(Step::Wait {
            message: None,
            after: crate::base::outcome::POLL,
        });
    };
    let now = now_unix_us();
    if now < load_start {
        // No route can answer before the first request: none is created before it.
        let after = Duration::from_micros(load_start - now).min(crate::base::outcome::POLL);
        return Ok(Step::Wait {
            message: None,
            after,
        });
    }
    let exist = existing(run, &controller.name, slot.sample).await?;
    let log = log_of(run, slot, count);
    for i in &exist {
        // Ours, with no record (a restart between its creation and the status write).
        if let Some(c @ None) = log.created_unix_us.get_mut(*i) {
            *c = Some(UNTIMED);
        }
    }
    // A route logged but gone was deleted by someone else: not made again (it would get
    // another instant).
    let missing: Vec<usize> = (0..count)
        .filter(|&i| log.created_unix_us.get(i).is_some_and(Option::is_none))
        .collect();
    if missing.is_empty() {
        return Ok(Step::Done);
    }
    let api = routes::api(run);
    let manifests: Vec<(usize, DynamicObject)> = missing
        .iter()
        .take(BATCH)
        .filter_map(|&i| {
            let m = manifest(run, &controller, &route, slot.sample, i);
            Some((i, serde_json::from_value(m).ok()?))
        })
        .collect();
    let uid = run.obj().uid().unwrap_or_default();
    let made: Vec<(usize, std::result::Result<u64, kube::Error>)> = futures::stream::iter(
        manifests,
    )
    .map(|(i, object)| {
        let (api, uid) = (api.clone(), uid.clone());
        async move {
            let at = now_unix_us();
            match api.create(&PostParams::default(), &object).await {
                Ok(_) => (i, Ok(at)),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    // Ours from a pass whose record was lost, or someone else's.
                    let found = api.get_opt(&object.name_any()).await;
                    let ours =
                        matches!(&found, Ok(Some(r)) if labels::controlled_by(&r.metadata, &uid));
                    (
                        i,
                        if ours {
                            Ok(UNTIMED)
                        } else {
                            Err(kube::Error::Api(s))
                        },
                    )
                }
                Err(e) => (i, Err(e)),
            }
        }
    })
    .buffer_unordered(AT_ONCE)
    .collect()
    .await;
    let mut refused = None;
    let mut troubled = None;
    let run_id = run.id().to_string();
    let log = log_of(run, slot, count);
    for (i, done) in made {
        let at = match done {
            Ok(at) => at,
            Err(e) => {
                let route_name = name(&run_id, &controller.name, slot.sample, i);
                let why = match &e {
                    kube::Error::Api(s) if s.code == 409 => {
                        "exists and is not this benchmark's: it is left alone".to_string()
                    }
                    kube::Error::Api(s) => s.message.clone(),
                    other => other.to_string(),
                };
                let m = format!(
                    "HTTPRoute {route_name} (route scale of controller {}): {why}",
                    controller.name
                );
                let conflict = matches!(&e, kube::Error::Api(s) if s.code == 409);
                if conflict || for_good(&e) {
                    refused.get_or_insert(m);
                } else {
                    troubled.get_or_insert(m);
                }
                continue;
            }
        };
        if let Some(slot) = log.created_unix_us.get_mut(i) {
            *slot = Some(at);
        }
    }
    if let Some(why) = refused {
        let cut: String = why.chars().take(1000).collect();
        log.refused = Some(cut.clone());
        return Ok(Step::fail(Reason::RouteRefused, cut));
    }
    if let Some(why) = troubled {
        // Throttled or a server error: the routes made so far are kept; the rest next pass.
        return Ok(Step::Wait {
            message: Some(why.chars().take(1000).collect()),
            after: Duration::from_secs(1),
        });
    }
    if missing.len() <= BATCH {
        let m = format!(
            "the {count} HTTPRoutes of the route scale exist for controller {}",
            controller.name
        );
        run.event(kube::runtime::events::EventType::Normal, "RoutesCreated", m);
        return Ok(Step::Done);
    }
    // The next batch soon, without spinning the reconcile.
    Ok(Step::Wait {
        message: None,
        after: Duration::from_millis(50),
    })
}

/// Deletes the sample's routes (after its collection, or when it is over).
pub async fn delete_sample(run: &IngressRun<'_>, slot: Slot) -> Result<()> {
    let Some((controller, _)) = scaled(&run.obj().spec, slot.measurement) else {
        return Ok(());
    };
    let names: Vec<String> = ours(run, &controller.name, slot.sample)
        .await?
        .iter()
        .map(|r| r.name_any())
        .collect();
    let api = routes::api(run);
    routes::delete_named(&api, names).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::reading::{add_sample, read_sample, reading_of, SampleReading, NOT_ALL_ANSWERED_MS};
    use super::*;
    use crds::ingress::IngressBenchmarkSpec;
    use protocol::worker::FinalReport;
    use std::collections::BTreeMap;

    fn reading(created: Vec<Option<u64>>, firsts: Vec<Option<u64>>, end_us: u64) -> SampleReading {
        reading_of(created, &firsts, end_us)
    }

    #[test]
    fn samples_merge_once_each_and_all_answered_is_the_longest() {
        // Routes created at 1.000 s, 1.010 s, 1.020 s; answered 120, 150 and 400 ms later.
        let s0 = reading(
            vec![Some(1_000_000), Some(1_010_000), Some(1_020_000)],
            vec![Some(1_120_000), Some(1_160_000), Some(1_420_000)],
            9_000_000,
        );
        let r = add_sample(None, 0, &s0).unwrap();
        assert_eq!((r.routes, r.created, r.answered), (3, 3, 3));
        assert_eq!(r.all_answered_ms, Some(420.0));
        assert_eq!(r.max_ms.map(f64::round), Some(400.0));
        assert_eq!(
            add_sample(Some(&r), 0, &s0).unwrap(),
            r,
            "a sample counts once"
        );
        // Another sample, all in 300 ms: the longest stays.
        let s1 = reading(
            vec![Some(2_000_000), Some(2_000_000), Some(2_000_000)],
            vec![Some(2_100_000), Some(2_300_000), Some(2_200_000)],
            9_000_000,
        );
        let r = add_sample(Some(&r), 1, &s1).unwrap();
        assert_eq!((r.created, r.answered), (6, 6));
        assert_eq!(r.all_answered_ms, Some(420.0));
        // A sample with a route that never answered: no all-answered figure any more.
        let s2 = reading(
            vec![Some(3_000_000), Some(3_000_000), None],
            vec![Some(3_100_000), None, None],
            5_000_000,
        );
        let r = add_sample(Some(&r), 2, &s2).unwrap();
        assert_eq!((r.created, r.answered), (8, 7));
        assert_eq!(r.all_answered_ms, None);
        assert!(r.note.unwrap().contains("1 route(s) not created"));
        // Its sample figure breaks every max gate (none may be above MAX_MS).
        assert_eq!(s2.all_answered_us(), None);
        assert_eq!(s2.all_answered_figure_ms(), NOT_ALL_ANSWERED_MS);
        const { assert!(NOT_ALL_ANSWERED_MS > crds::gates::MAX_MS) };
        assert_eq!(s0.all_answered_figure_ms(), 420.0);
    }

    #[test]
    fn a_hostname_answering_before_its_route_existed_is_not_a_figure() {
        let s = reading(
            vec![Some(5_000), Some(5_000)],
            vec![Some(4_000), Some(9_000)],
            10_000,
        );
        assert_eq!(s.times, vec![None, Some(4_000)]);
        assert_eq!(s.early, 1);
        let r = add_sample(None, 0, &s).unwrap();
        assert_eq!(r.answered, 1);
        assert!(r
            .note
            .unwrap()
            .contains("answered before their route was created"));
    }

    #[test]
    fn hostnames_and_names_are_dns_names() {
        let route: OwnedRoute = serde_json::from_value(serde_json::json!({
            "gateway": {"name": "gw"}, "hostname": "eg.bench.local",
            "backend": {"name": "web", "port": 80}, "count": 1000,
        }))
        .unwrap();
        assert_eq!(hostname(&route, 999), "r999.eg.bench.local");
        assert_eq!(
            name("a1b2c3d4", "envoy", 3, 999),
            "netbench-a1b2c3d4-envoy.s3.r999"
        );
    }

    /// One worker's report of one second from `start_ms`, whose hostnames first answered at
    /// `firsts` (Unix µs).
    fn report_with_firsts(
        start_ms: u64,
        firsts: Vec<Option<u64>>,
    ) -> BTreeMap<String, FinalReport> {
        let mut report = crate::testing::reports::http_report(&[1000], start_ms);
        report["answers"] =
            serde_json::json!({"sightings": [], "complete": true, "first_ok_by_host": firsts});
        let r = FinalReport::new("w0", None, 0, start_ms, report);
        BTreeMap::from([("w0".to_string(), r)])
    }

    /// Instants from status (a forged log) or from a worker outside the sample's load are no
    /// one's measurement: held as unknown, never turned into a time.
    #[test]
    fn instants_outside_the_sample_are_held_unknown() {
        let spec: IngressBenchmarkSpec = serde_yaml::from_str(
            "{target: {url: 'http://gw/'}, load: {connections: 3}, controllers: [{name: eg, route: {gateway: {name: bench}, hostname: s.example, backend: {name: web, port: 80}, count: 3}}]}",
        )
        .unwrap();
        let start_ms = 1_000_000;
        let (start_us, end_us) = (start_ms * 1000, (start_ms + 1000) * 1000);
        let log = RouteScaleLog {
            step: 0,
            sample: 0,
            load_start_unix_us: Some(start_us),
            // Route 0 honest; route 1 "created" before the load began; route 2 after its end.
            created_unix_us: vec![
                Some(start_us + 10_000),
                Some(start_us - 5_000_000),
                Some(end_us + 1_000_000),
            ],
            refused: None,
        };
        let firsts = vec![
            Some(start_us + 110_000),
            Some(start_us + 200_000),
            Some(start_us + 300_000),
        ];
        let slot = Slot {
            measurement: 0,
            sample: 0,
        };
        // The sample read from `log` and a report of the routes' first answers `firsts`.
        let read = |log: &RouteScaleLog, firsts: Vec<Option<u64>>| {
            read_sample(
                &spec,
                Some(log),
                slot,
                &report_with_firsts(start_ms, firsts),
            )
        };
        let r = read(&log, firsts).unwrap().unwrap();
        assert_eq!(r.times, vec![Some(100_000), None, None], "{r:?}");
        assert_eq!(r.all_answered_at, None, "not every route has a time");
        // A worker's first answer far after the sample (its clock, or a lie) is unknown too.
        let honest = RouteScaleLog {
            created_unix_us: vec![Some(start_us + 10_000); 3],
            ..log.clone()
        };
        let far = vec![
            Some(start_us + 50_000),
            Some(u64::MAX),
            Some(end_us + 60_000_000),
        ];
        let r = read(&honest, far).unwrap().unwrap();
        assert_eq!(r.times, vec![Some(40_000), None, None], "{r:?}");
        // A log of another sample is not this sample's record.
        let other = RouteScaleLog {
            sample: 1,
            ..honest
        };
        assert!(read(&other, vec![]).is_err());
    }
}
