//! What a reconcile reads of its benchmark: the controller's cached copy when it is the version
//! the operator last read or wrote (it then holds the operator's own last status write), a
//! fresh GET otherwise. Counted on the in-process fake API server (testing::FakeApi).

use kube::api::Api;
use serde_json::{json, Value};

use operator::admin::config::Config;
use operator::context::Context;
use operator::testing::FakeApi;

fn benchmark(version: &str) -> Value {
    json!({
        "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
        "metadata": {"name": "b", "namespace": "team-a", "uid": "u1", "resourceVersion": version},
        "spec": {"target": {"url": "http://x.team-a/"}}
    })
}

/// GETs of the benchmark itself (not its status, not other objects).
fn gets(api_server: &FakeApi) -> usize {
    api_server
        .requests()
        .iter()
        .filter(|l| {
            l.starts_with("GET /apis/netbench.io/v1alpha1/namespaces/team-a/ingressbenchmarks/b")
        })
        .filter(|l| !l.contains("/status"))
        .count()
}

/// A fake API server holding the benchmark at version 5, the operator's context on it, and the
/// benchmarks' API.
fn serving_version_5() -> (FakeApi, Context, Api<crds::IngressBenchmark>) {
    let api_server = FakeApi::default();
    let client = api_server.serving(benchmark("5"));
    let ctx = operator::testing::context(client.clone(), Config::for_tests());
    let api = Api::<crds::IngressBenchmark>::namespaced(client, "team-a");
    (api_server, ctx, api)
}

#[tokio::test]
async fn the_cached_copy_serves_when_it_is_the_version_last_seen_else_a_get() {
    // The server holds (and its status write answers with) version 5.
    let (api_server, ctx, api) = serving_version_5();
    let cached =
        |v: &str| -> crds::IngressBenchmark { serde_json::from_value(benchmark(v)).unwrap() };

    // (the cached copy's version, the reads made so far)
    for (version, reads) in [
        // The first reconcile knows no version: it reads.
        ("5", 1),
        // The cache now holds the version last seen: no read.
        ("5", 1),
        // A copy the cache has not caught up with (or a user's edit): read again.
        ("4", 2),
        ("6", 3),
    ] {
        operator::testing::fake_api::apply(&cached(version), &ctx, &api)
            .await
            .unwrap();
        let made = gets(&api_server);
        assert_eq!(made, reads, "{version}: {:#?}", api_server.requests());
    }
}

/// An IngressBenchmark's workers have no Services: deleting them lists none (here the run
/// fails at once: its target does not resolve).
#[tokio::test]
async fn an_ingress_run_lists_no_worker_services() {
    let (api_server, ctx, api) = serving_version_5();
    let ib: crds::IngressBenchmark = serde_json::from_value(benchmark("5")).unwrap();
    for _ in 0..3 {
        operator::testing::fake_api::apply(&ib, &ctx, &api)
            .await
            .unwrap();
    }
    let requests = api_server.requests();
    let asked = |part: &str| requests.iter().filter(|l| l.contains(part)).count();
    assert!(asked("InvalidSpec") > 0, "the run ended: {requests:#?}");
    assert_eq!(asked("/namespaces/team-a/services"), 0, "{requests:#?}");
}

#[tokio::test]
async fn a_new_benchmark_gets_the_finalizer_and_goes_on_without_reading_it_again() {
    // The API server answers the finalizer's patch with version 6 holding it (and any other
    // request as a server holding that version).
    let mut held = benchmark("6");
    held["metadata"]["finalizers"] = json!([operator::controller::FINALIZER]);
    let api_server = FakeApi::default();
    let client = api_server.serving(held);
    let ctx = operator::testing::context(client.clone(), Config::for_tests());
    let api = Api::<crds::IngressBenchmark>::namespaced(client, "team-a");
    let new: crds::IngressBenchmark = serde_json::from_value(benchmark("5")).unwrap();
    let with = operator::controller::add_finalizer::with_finalizer(
        &api,
        operator::controller::FINALIZER,
        std::sync::Arc::new(new),
        &ctx.versions,
    )
    .await
    .unwrap()
    .unwrap();
    let requests = api_server.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert!(
        requests[0]
            .starts_with("PATCH /apis/netbench.io/v1alpha1/namespaces/team-a/ingressbenchmarks/b ")
            && requests[0].contains(r#"{"op":"test","path":"/metadata/finalizers","value":null}"#),
        "{requests:#?}"
    );
    assert_eq!(
        with.metadata.finalizers,
        Some(vec![operator::controller::FINALIZER.into()])
    );
    // The reconcile goes on with the answer: no GET of the benchmark.
    operator::testing::fake_api::apply(with.as_ref(), &ctx, &api)
        .await
        .unwrap();
    assert_eq!(gets(&api_server), 0, "{:#?}", api_server.requests());
    // A benchmark that has it: nothing asked.
    let before = api_server.requests().len();
    let again = operator::controller::add_finalizer::with_finalizer(
        &api,
        operator::controller::FINALIZER,
        with.clone(),
        &ctx.versions,
    )
    .await
    .unwrap()
    .unwrap();
    assert!(std::sync::Arc::ptr_eq(&again, &with));
    assert_eq!(api_server.requests().len(), before);
    // The copy without it (version 5), handed over again before the watch showed the patch:
    // behind this process's own write, so nothing is asked and the reconcile waits.
    let stale: crds::IngressBenchmark = serde_json::from_value(benchmark("5")).unwrap();
    let behind = operator::controller::add_finalizer::with_finalizer(
        &api,
        operator::controller::FINALIZER,
        std::sync::Arc::new(stale),
        &ctx.versions,
    )
    .await
    .unwrap();
    assert!(behind.is_none());
    assert_eq!(api_server.requests().len(), before);
}

#[tokio::test]
async fn a_copy_behind_the_operators_own_write_waits_for_the_watch_without_asking() {
    // The operator wrote version 3, then 5; the watch hands over the copy at 3: the event of
    // 5 is still to come (and wakes the object again). Nothing is asked, nothing written.
    let (api_server, ctx, api) = serving_version_5();
    ctx.versions.note("u1", "3");
    ctx.versions.note("u1", "5");
    let behind: crds::IngressBenchmark = serde_json::from_value(benchmark("3")).unwrap();
    let action = operator::testing::fake_api::apply(&behind, &ctx, &api)
        .await
        .unwrap();
    assert!(
        api_server.requests().is_empty(),
        "{:#?}",
        api_server.requests()
    );
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(std::time::Duration::from_secs(2))
    );
    // A version that is not one of ours (a user's edit) is read.
    let edited: crds::IngressBenchmark = serde_json::from_value(benchmark("4")).unwrap();
    operator::testing::fake_api::apply(&edited, &ctx, &api)
        .await
        .unwrap();
    assert_eq!(gets(&api_server), 1, "{:#?}", api_server.requests());
}
