//! A run whose worker pods are still being created (a slow API server) stops that creation
//! when it ends (its status says Failed), when a new run begins (a new generation), and when
//! the benchmark is deleted: no creation of its pods is left under way. Against the in-process
//! fake API server (testing::FakeApi), answering after a delay on tokio's paused clock.

use std::time::Duration;

use kube::api::Api;
use serde_json::{json, Value};

use operator::admin::config::Config;
use operator::context::Context;
use operator::testing::FakeApi;

const UID: &str = "5c2a9e10-0000-4c1d-9e3f-1234567890ab";
const RUN: &str = "5c2a9e10-g1";

/// An IngressBenchmark of 4 workers at `generation`, its run `RUN` in `phase` at step 0.
fn benchmark(generation: i64, phase: &str) -> Value {
    let now = jiff::Timestamp::now().to_string();
    json!({
        "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
        "metadata": {"name": "b", "namespace": "team-a", "uid": UID, "generation": generation,
                     "resourceVersion": "5", "finalizers": ["netbench.io/cleanup"]},
        "spec": {"target": {"url": "http://x.team-a/"}, "workers": {"replicas": 4},
                 "load": {"duration": "10s"}},
        "status": {"runId": RUN, "phase": phase, "currentStep": 0, "observedGeneration": 1,
                   "phaseSince": now, "startTime": now}
    })
}

/// A fake API server holding `bm` whose every answer takes a second, and the operator's
/// context on it.
fn slow(bm: &Value) -> (FakeApi, Context, Api<crds::IngressBenchmark>) {
    let api_server = FakeApi::default();
    let held = bm.clone();
    let client = api_server.client_after(Duration::from_secs(1), move |seen| {
        operator::testing::fake_api::holding(&held, seen)
    });
    let ctx = operator::testing::context(client.clone(), Config::for_tests());
    let api = Api::<crds::IngressBenchmark>::namespaced(client, "team-a");
    (api_server, ctx, api)
}

async fn apply(ctx: &Context, api: &Api<crds::IngressBenchmark>, bm: &Value) {
    let obj: crds::IngressBenchmark = serde_json::from_value(bm.clone()).unwrap();
    operator::testing::fake_api::apply(&obj, ctx, api)
        .await
        .unwrap();
}

/// Run `RUN`'s creation is under way after a Preparing reconcile.
async fn creating(ctx: &Context, api: &Api<crds::IngressBenchmark>, api_server: &FakeApi) {
    apply(ctx, api, &benchmark(1, "Preparing")).await;
    assert_eq!(
        ctx.creations.runs_of(UID),
        vec![RUN.to_string()],
        "{:#?}",
        api_server.requests()
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_that_ends_stops_its_creation() {
    let (api_server, ctx, api) = slow(&benchmark(1, "Preparing"));
    creating(&ctx, &api, &api_server).await;
    apply(&ctx, &api, &benchmark(1, "Failed")).await;
    assert!(ctx.creations.runs_of(UID).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_new_run_stops_the_old_runs_creation() {
    let (api_server, ctx, api) = slow(&benchmark(1, "Preparing"));
    creating(&ctx, &api, &api_server).await;
    apply(&ctx, &api, &benchmark(2, "Preparing")).await;
    assert!(
        !ctx.creations.runs_of(UID).contains(&RUN.to_string()),
        "{:?}",
        ctx.creations.runs_of(UID)
    );
}

#[tokio::test(start_paused = true)]
async fn a_deleted_benchmark_stops_its_creation() {
    let (api_server, ctx, api) = slow(&benchmark(1, "Preparing"));
    creating(&ctx, &api, &api_server).await;
    let obj: crds::IngressBenchmark = serde_json::from_value(benchmark(1, "Preparing")).unwrap();
    operator::driver::cleanup(&obj, &ctx, &api).await.unwrap();
    assert!(ctx.creations.runs_of(UID).is_empty());
}
