//! The IngressBenchmark kind: what it adds to the shared run driver (`kind`, see
//! crate::driver), its plan (`plan`), checks (`validate`), the sweep target in a run (`sweep`,
//! with its saved spec in `restore`), and the step results (`result`, `verdict`).

pub mod kind;
pub mod plan;
pub mod restore;
pub mod result;
pub mod sweep;
pub mod validate;
pub mod verdict;

use futures::future::BoxFuture;
use kube::api::Api;
use kube::runtime::controller::Action;

use crds::IngressBenchmark;

use crate::context::Context;
use crate::controller::Benchmark;
use crate::driver;
use crate::error::Result;

impl Benchmark for IngressBenchmark {
    fn apply<'a>(&'a self, ctx: &'a Context, api: &'a Api<Self>) -> BoxFuture<'a, Result<Action>> {
        Box::pin(driver::apply(self, ctx, api))
    }
    fn cleanup<'a>(
        &'a self,
        ctx: &'a Context,
        api: &'a Api<Self>,
    ) -> BoxFuture<'a, Result<Action>> {
        Box::pin(driver::cleanup(self, ctx, api))
    }
}
