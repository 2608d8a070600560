//! The IngressBenchmark kind (the Controller is crate::controller); `phases` moves a run
//! through Pending -> (Queued) -> Preparing -> Running -> Collecting -> Succeeded | Failed,
//! recording every step in status so a restarted operator resumes the same run.

pub mod phases;
pub mod plan;
pub mod restore;
pub mod result;
pub mod validate;
pub mod verdict;

use futures::future::BoxFuture;
use kube::api::Api;
use kube::runtime::controller::Action;

use crds::IngressBenchmark;

use crate::context::Context;
use crate::controller::Benchmark;
use crate::error::Result;

impl Benchmark for IngressBenchmark {
    fn apply<'a>(&'a self, ctx: &'a Context, api: &'a Api<Self>) -> BoxFuture<'a, Result<Action>> {
        Box::pin(phases::apply(self, ctx, api))
    }
    fn cleanup<'a>(
        &'a self,
        ctx: &'a Context,
        _api: &'a Api<Self>,
    ) -> BoxFuture<'a, Result<Action>> {
        Box::pin(phases::cleanup(self, ctx))
    }
}
