//! The EgressBenchmark kind: cases one after another, each a server and a client pinned to the
//! case's nodes, with the case's offload profile applied by privileged Jobs before and restored
//! after (also on failure and deletion). `kind` is what it adds to the shared run driver
//! (crate::driver); `offload` the Jobs and their records; `plan`, `validate`, `result`.

pub mod kind;
pub mod offload;
pub mod plan;
pub mod result;
pub mod validate;

use futures::future::BoxFuture;
use kube::api::Api;
use kube::runtime::controller::Action;

use crds::EgressBenchmark;

use crate::context::Context;
use crate::controller::Benchmark;
use crate::driver;
use crate::error::Result;

impl Benchmark for EgressBenchmark {
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
