//! The Gateway API HTTPRoutes a run creates for its controllers (`controllers[].route`): one
//! per controller, in the benchmark's namespace, owned by the benchmark (gone with it) and
//! labelled with the run. Before the controller's measurement the run waits until its Gateway
//! accepted the route and the route's settle time passed; when the run ends (or a new run
//! replaces it) its routes are deleted.
//!
//! The route's status is written by the controller, or by anyone who may write the benchmark's
//! namespace: it only decides when the run goes on measuring, never a figure or a permission.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::ResourceExt;
use serde_json::{json, Value};

use crds::ingress::{Controller, IngressBenchmark, OwnedRoute};

use super::plan::{self, KIND};
use crate::base::clock::elapsed_since;
use crate::base::error::Result;
use crate::base::labels;
use crate::base::outcome::{Reason, Step};
use crate::run::Run;

type IngressRun<'a> = Run<'a, IngressBenchmark>;

/// The label that names the controller a route was created for.
pub(super) const CONTROLLER: &str = "netbench.io/controller";

fn resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute");
    ApiResource::from_gvk_with_plural(&gvk, "httproutes")
}

/// The routes' API. Whoever asks for it may create routes: the benchmark is no longer known to
/// have none (see [`delete`]).
pub(super) fn api(run: &IngressRun<'_>) -> Api<DynamicObject> {
    note_none(run, false);
    Api::namespaced_with(run.ctx().client.clone(), run.ns(), &resource())
}

/// The key under which the operator's memory of absent objects (base::memo::Absent) holds that
/// the benchmark has no route: only this process creates them, through [`api`].
fn none_key(run: &IngressRun<'_>) -> Option<String> {
    run.obj().uid().map(|uid| format!("httproutes/{uid}"))
}

/// Remembers that the benchmark has no route (`true`), or forgets it.
fn note_none(run: &IngressRun<'_>, none: bool) {
    if let Some(key) = none_key(run) {
        run.ctx().absent.note(&key, none);
    }
}

/// The route's name: the run and the controller (a DNS subdomain: both are DNS labels).
pub fn name(run: &str, controller: &str) -> String {
    format!("netbench-{run}-{controller}")
}

/// The HTTPRoute for `controller` of run `run`: one hostname, one rule to one backend.
pub fn manifest(
    ib: &IngressBenchmark,
    run: &str,
    controller: &Controller,
    route: &OwnedRoute,
) -> Value {
    let ns = ib.namespace().unwrap_or_default();
    let mut labels = labels::run_labels(KIND, &ib.name_any(), run);
    labels.insert(CONTROLLER.into(), controller.name.clone());
    let gateway = &route.gateway;
    let mut parent = json!({
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "name": gateway.name,
        "namespace": gateway.namespace.as_deref().unwrap_or(&ns),
    });
    if let Some(section) = &gateway.section_name {
        parent["sectionName"] = json!(section);
    }
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {
            "name": name(run, &controller.name),
            "namespace": ns,
            "labels": labels,
            "ownerReferences": [labels::owner(ib)],
        },
        "spec": {
            "parentRefs": [parent],
            "hostnames": [route.hostname],
            "rules": [{
                "backendRefs": [{"name": route.backend.name, "port": route.backend.port}],
            }],
        },
    })
}

/// What the Gateway said of a route, from its status.
#[derive(Debug, PartialEq)]
pub enum Acceptance {
    /// Accepted (and its backend resolved) since this instant.
    Accepted(jiff::Timestamp),
    /// Refused: the condition's reason and message.
    Refused(String),
    /// Not said yet (for this generation of the route).
    Pending,
}

/// The Gateway `gateway_ns/gateway`'s verdict on `route` (its status.parents entry); any
/// shape the status may have is read without trusting it.
pub fn acceptance(route: &Value, gateway_ns: &str, gateway: &str, route_ns: &str) -> Acceptance {
    let generation = route["metadata"]["generation"].as_i64().unwrap_or(0);
    let parents = route["status"]["parents"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let ours = parents.iter().find(|p| {
        let r = &p["parentRef"];
        r["name"].as_str() == Some(gateway)
            && r["namespace"].as_str().unwrap_or(route_ns) == gateway_ns
    });
    let Some(parent) = ours else {
        return Acceptance::Pending;
    };
    let conditions = parent["conditions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let current = |kind: &str| {
        conditions.iter().find(|c| {
            c["type"].as_str() == Some(kind)
                && c["observedGeneration"].as_i64().unwrap_or(generation) >= generation
        })
    };
    let mut since = None;
    for kind in ["Accepted", "ResolvedRefs"] {
        let Some(c) = current(kind) else {
            return Acceptance::Pending;
        };
        match c["status"].as_str() {
            Some("True") => {}
            Some("False") => {
                let reason = c["reason"].as_str().unwrap_or("");
                let message = c["message"].as_str().unwrap_or("");
                return Acceptance::Refused(format!(
                    "{kind} is False: {:.64}: {:.512}",
                    reason, message
                ));
            }
            _ => return Acceptance::Pending,
        }
        let at = c["lastTransitionTime"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok());
        since = since.max(at);
    }
    Acceptance::Accepted(since.unwrap_or_else(jiff::Timestamp::now))
}

/// Creates the route of `step`'s controller if it has one and the run has not, and waits until
/// its Gateway accepted it and it settled. Done when the step has no route.
pub async fn prepare(run: &mut IngressRun<'_>, step: u32) -> Result<Step> {
    let spec = &run.obj().spec;
    let Some(controller) = plan::controller(spec, step) else {
        return Ok(Step::Done);
    };
    let Some(route) = &controller.route else {
        return Ok(Step::Done);
    };
    if route.count > 1 {
        // A route scale: its routes come with each measurement's load (scale.rs).
        return Ok(Step::Done);
    }
    let (controller, route) = (controller.clone(), route.clone());
    let name = name(run.id(), &controller.name);
    let api = api(run);
    let existing = match api.get_opt(&name).await {
        Ok(found) => found,
        Err(e) => return Ok(refused(&name, e)),
    };
    let uid = run.obj().uid().unwrap_or_default();
    let object = match existing {
        Some(o)
            if labels::controlled_by(&o.metadata, &uid)
                && run_of(&o.metadata) == Some(run.id()) =>
        {
            o
        }
        Some(_) => {
            let m = format!("HTTPRoute {}/{name} exists and is not this run's", run.ns());
            return Ok(Step::fail(Reason::RouteRefused, m));
        }
        None => {
            let manifest = manifest(run.obj(), run.id(), &controller, &route);
            let object: DynamicObject = match serde_json::from_value(manifest) {
                Ok(o) => o,
                Err(e) => return Ok(Step::fail(Reason::RouteRefused, format!("{name}: {e}"))),
            };
            match api.create(&PostParams::default(), &object).await {
                Ok(created) => {
                    let m = format!(
                        "HTTPRoute {name} created for controller {}",
                        controller.name
                    );
                    run.event(kube::runtime::events::EventType::Normal, "RouteCreated", m);
                    created
                }
                Err(e) => return Ok(refused(&name, e)),
            }
        }
    };
    if let Some(deleted) = &object.metadata.deletion_timestamp {
        // Deleted by a route change of the sample before, and held by a finalizer: a new one
        // is created once it is gone.
        if elapsed_since(&Some(deleted.clone())) > run.ctx().config.rollout_timeout() {
            let m = format!("HTTPRoute {name} was deleted and is still not gone after the rollout timeout (a finalizer?)");
            return Ok(Step::fail(Reason::RouteTimeout, m));
        }
        return Ok(Step::wait(format!(
            "waiting for HTTPRoute {name} to be gone"
        )));
    }
    let gateway_ns = route
        .gateway
        .namespace
        .as_deref()
        .unwrap_or(run.ns())
        .to_string();
    let gateway = format!("Gateway {gateway_ns}/{}", route.gateway.name);
    let status = json!({
        "metadata": {"generation": object.metadata.generation},
        "status": object.data.get("status"),
    });
    match acceptance(&status, &gateway_ns, &route.gateway.name, run.ns()) {
        Acceptance::Refused(why) => {
            let m = format!(
                "HTTPRoute {name} (controller {}): {gateway}: {why}",
                controller.name
            );
            Ok(Step::fail(Reason::RouteRefused, m))
        }
        Acceptance::Pending => {
            // From the route's creation: a pause between samples is not the Gateway's time.
            let since = object
                .creation_timestamp()
                .or_else(|| run.status().run.phase_since.clone());
            if elapsed_since(&since) > run.ctx().config.rollout_timeout() {
                let m = format!(
                    "{gateway} did not accept HTTPRoute {name} (controller {}) within the rollout timeout",
                    controller.name
                );
                return Ok(Step::fail(Reason::RouteTimeout, m));
            }
            Ok(Step::wait(format!(
                "waiting for {gateway} to accept HTTPRoute {name}"
            )))
        }
        Acceptance::Accepted(since) => {
            // The Gateway's transition time is hostile (or from a clock ahead of ours): never
            // later than now, and the wait ends at the latest `settle` plus the rollout timeout
            // after the route was created.
            let now = jiff::Timestamp::now();
            let created = object.creation_timestamp();
            let ready_at = created.as_ref().map_or(now, |t| t.0).max(since.min(now));
            let waited = elapsed_since(&Some(Time(ready_at)));
            let settle = Duration::from(route.settle);
            let gave_up =
                elapsed_since(&created) > settle.saturating_add(run.ctx().config.rollout_timeout());
            if gave_up {
                return Ok(Step::Done);
            }
            Ok(Step::settling(
                waited,
                settle,
                format!("HTTPRoute {name} accepted; settling"),
            ))
        }
    }
}

/// A refused request for the route: permissions, a missing Gateway API, an invalid object.
fn refused(name: &str, e: kube::Error) -> Step {
    let why = match &e {
        kube::Error::Api(s) if s.code == 404 => {
            "the Gateway API (gateway.networking.k8s.io/v1 HTTPRoute) is not installed".to_string()
        }
        kube::Error::Api(s) if s.code == 403 => format!(
            "the operator may not manage HTTPRoutes here ({}); the cluster admin grants it with the Helm value security.routeNamespaces",
            s.message
        ),
        other => other.to_string(),
    };
    Step::fail(Reason::RouteRefused, format!("HTTPRoute {name}: {why}"))
}

fn run_of(meta: &kube::api::ObjectMeta) -> Option<&str> {
    meta.labels.as_ref()?.get(labels::RUN).map(String::as_str)
}

/// Deletes this benchmark's routes of every run but `keep` (all of them with None), whatever
/// its spec says now (an earlier generation's spec may have had routes). One LIST; none on a
/// cluster without the Gateway API or without the permission, nor once this process knows the
/// benchmark has none left (it listed or deleted them, and created none since). Returns how
/// many were deleted.
pub async fn delete(run: &IngressRun<'_>, keep: Option<&str>) -> Result<usize> {
    if none_key(run).is_some_and(|key| run.ctx().absent.knows(&key)) {
        return Ok(0);
    }
    let uid = run.obj().uid().unwrap_or_default();
    let api = api(run);
    let selector = labels::benchmark_selector(KIND, run.name());
    let listed = match api
        .list_metadata(&ListParams::default().labels(&selector))
        .await
    {
        Ok(l) => l,
        // No Gateway API (none can exist: remembered), or no permission (nothing of ours can
        // be created there now; one made before stays until the permission is back).
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
            note_none(run, s.code == 404);
            return Ok(0);
        }
        Err(e) => return Err(e.into()),
    };
    let kept_any = keep.is_some_and(|keep| {
        listed
            .items
            .iter()
            .any(|r| labels::controlled_by(&r.metadata, &uid) && run_of(&r.metadata) == Some(keep))
    });
    // By uid: a benchmark whose name shares the first 63 characters (the label's length)
    // labels its routes the same.
    let names: Vec<String> = listed
        .items
        .iter()
        .filter(|r| labels::controlled_by(&r.metadata, &uid))
        .filter(|r| keep.is_none() || run_of(&r.metadata) != keep)
        .map(|r| r.name_any())
        .collect();
    let deleted = delete_named(&api, names).await?;
    note_none(run, !kept_any);
    Ok(deleted)
}

/// Deletes the routes `names` of `api`, several at once (a route scale leaves up to 1000);
/// one already gone is not an error. Returns how many were deleted.
pub(super) async fn delete_named(api: &Api<DynamicObject>, names: Vec<String>) -> Result<usize> {
    use futures::StreamExt;
    let results: Vec<std::result::Result<(), kube::Error>> = futures::stream::iter(names)
        .map(|n| {
            let api = api.clone();
            async move { api.delete(&n, &DeleteParams::default()).await.map(drop) }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let mut deleted = 0;
    for r in results {
        match r {
            Ok(()) => deleted += 1,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(gateway: &str, ns: Option<&str>, conditions: Value) -> Value {
        let mut r = json!({"name": gateway});
        if let Some(ns) = ns {
            r["namespace"] = json!(ns);
        }
        json!({"parentRef": r, "conditions": conditions})
    }

    fn route(generation: i64, parents: Value) -> Value {
        json!({"metadata": {"generation": generation}, "status": {"parents": parents}})
    }

    fn cond(kind: &str, status: &str, generation: i64, at: &str) -> Value {
        json!({"type": kind, "status": status, "observedGeneration": generation,
               "lastTransitionTime": at, "reason": "R", "message": "m"})
    }

    #[test]
    fn accepted_only_when_both_conditions_hold_for_this_generation() {
        let ok = json!([
            cond("Accepted", "True", 2, "2026-12-04T10:00:00Z"),
            cond("ResolvedRefs", "True", 2, "2026-12-04T10:00:01Z")
        ]);
        let r = route(2, json!([parent("bench", Some("gw"), ok.clone())]));
        let at: jiff::Timestamp = "2026-12-04T10:00:01Z".parse().unwrap();
        assert_eq!(
            acceptance(&r, "gw", "bench", "team"),
            Acceptance::Accepted(at)
        );
        // Another Gateway's verdict, or one for an older generation, says nothing.
        assert_eq!(acceptance(&r, "gw", "other", "team"), Acceptance::Pending);
        let stale = route(3, json!([parent("bench", Some("gw"), ok)]));
        assert_eq!(
            acceptance(&stale, "gw", "bench", "team"),
            Acceptance::Pending
        );
        // A parentRef without a namespace is the route's own.
        let local = route(
            1,
            json!([parent(
                "bench",
                None,
                json!([
                    cond("Accepted", "True", 1, "2026-12-04T10:00:00Z"),
                    cond("ResolvedRefs", "True", 1, "2026-12-04T10:00:00Z")
                ])
            )]),
        );
        assert!(matches!(
            acceptance(&local, "team", "bench", "team"),
            Acceptance::Accepted(_)
        ));
    }

    #[test]
    fn a_refusal_is_named_with_its_reason() {
        let r = route(
            1,
            json!([parent(
                "bench",
                Some("gw"),
                json!([cond("Accepted", "False", 1, "2026-12-04T10:00:00Z")])
            )]),
        );
        let Acceptance::Refused(why) = acceptance(&r, "gw", "bench", "team") else {
            panic!("not refused");
        };
        assert_eq!(why, "Accepted is False: R: m");
    }

    #[test]
    fn any_shape_of_status_is_pending_or_refused_never_a_panic() {
        for status in [
            json!(null),
            json!({"parents": 7}),
            json!({"parents": [{"parentRef": "x"}]}),
            json!({"parents": [{"parentRef": {"name": "bench", "namespace": "gw"}, "conditions": [{"type": "Accepted", "status": 1}]}]}),
            json!({"parents": [{"parentRef": {"name": "bench", "namespace": "gw"}, "conditions": [{"type": "Accepted", "status": "True", "lastTransitionTime": "not a time"}]}]}),
        ] {
            let r = json!({"metadata": {"generation": "x"}, "status": status});
            assert_ne!(
                std::mem::discriminant(&acceptance(&r, "gw", "bench", "team")),
                std::mem::discriminant(&Acceptance::Accepted(jiff::Timestamp::now())),
                "{r}"
            );
        }
        let long = "x".repeat(100_000);
        let r = route(
            1,
            json!([parent(
                "bench",
                Some("gw"),
                json!([
                    {"type": "Accepted", "status": "False", "reason": long, "message": long}
                ])
            )]),
        );
        let Acceptance::Refused(why) = acceptance(&r, "gw", "bench", "team") else {
            panic!("not refused");
        };
        assert!(why.len() < 700, "cut: {}", why.len());
    }

    #[test]
    fn the_manifest_attaches_one_hostname_to_the_gateway_and_is_owned() {
        let ib: IngressBenchmark = serde_yaml::from_str(
            r#"
apiVersion: netbench.io/v1alpha1
kind: IngressBenchmark
metadata: {name: cmp, namespace: team, uid: u-1}
spec:
  target: {url: "http://gw.example/"}
  controllers:
    - name: traefik-gw
      route: {gateway: {name: bench, namespace: gw, sectionName: web}, hostname: a.example, backend: {name: web, port: 80}}
"#,
        )
        .unwrap();
        let c = &ib.spec.controllers[0];
        let m = manifest(&ib, "abc-g1", c, c.route.as_ref().unwrap());
        assert_eq!(m["metadata"]["name"], "netbench-abc-g1-traefik-gw");
        assert_eq!(m["metadata"]["namespace"], "team");
        assert_eq!(m["metadata"]["labels"][labels::RUN], "abc-g1");
        assert_eq!(m["metadata"]["labels"][CONTROLLER], "traefik-gw");
        assert_eq!(m["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(
            m["spec"]["parentRefs"][0],
            json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "bench", "namespace": "gw", "sectionName": "web"})
        );
        assert_eq!(m["spec"]["hostnames"], json!(["a.example"]));
        assert_eq!(
            m["spec"]["rules"][0]["backendRefs"],
            json!([{"name": "web", "port": 80}])
        );
        let _: DynamicObject = serde_json::from_value(m).expect("a valid object");
    }

    /// How often `delete` listed routes on an API server answering every request with
    /// `listing` (with its `code`, if it has one: a Status), for each of `keeps` in turn
    /// (Some("api"): a use of `api` in between).
    async fn route_lists(listing: Value, keeps: &[Option<&str>]) -> usize {
        use crate::admin::config::Config;
        use crate::policy::schedule::Decision;
        use crate::testing::fake_api::{context, FakeApi};
        let fake = FakeApi::default();
        let ctx = context(
            fake.client(move |_| {
                let code = listing["code"].as_u64().and_then(|c| u16::try_from(c).ok());
                (code.unwrap_or(200), listing.clone())
            }),
            Config::for_tests(),
        );
        let ib: crds::IngressBenchmark = serde_json::from_value(json!({
            "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
            "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1"},
            "spec": {"target": {"url": "http://x/"}}
        }))
        .unwrap();
        let run = IngressRun::new(
            &ib,
            &ctx,
            "r1".into(),
            Default::default(),
            Decision::Unscheduled,
            (),
        );
        for keep in keeps {
            match keep {
                Some("api") => drop(api(&run)),
                keep => drop(delete(&run, *keep).await.unwrap()),
            }
        }
        let requests = fake.requests();
        requests
            .iter()
            .filter(|r| r.contains("/httproutes "))
            .count()
    }

    /// A benchmark's routes are listed until this process saw none left; once it may have
    /// created one (a use of `api`), or while the run's own route is kept, they are listed again.
    #[tokio::test]
    async fn routes_known_gone_are_not_listed_again() {
        use crate::testing::fake_api::empty_list;
        // At a new run's start (keeping its own) and at its end: listed once.
        assert_eq!(route_lists(empty_list(), &[Some("r1"), None]).await, 1);
        assert_eq!(
            route_lists(empty_list(), &[None, Some("api"), None]).await,
            2
        );
        let route = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "netbench-r1-c", "namespace": "team-a",
                         "labels": {labels::RUN: "r1"},
                         "ownerReferences": [{"apiVersion": "netbench.io/v1alpha1",
                             "kind": "IngressBenchmark", "name": "web", "uid": "u-1",
                             "controller": true}]}});
        let listing = json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": [route]});
        assert_eq!(route_lists(listing, &[Some("r1"), Some("r1")]).await, 2);
        // No Gateway API: none can exist (listed once); no permission: listed again.
        let answered = |code| json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": "x", "message": "x"});
        assert_eq!(route_lists(answered(404), &[None, None]).await, 1);
        assert_eq!(route_lists(answered(403), &[None, None]).await, 2);
    }
}
