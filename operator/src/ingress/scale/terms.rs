//! What creating a route scale and reading it share: which step scales routes, the names of its
//! sample figures, and the instant of a route whose creation time was lost.

use crds::ingress::{Controller, IngressBenchmarkSpec, OwnedRoute};

use crate::ingress::plan;

/// The sample figures' names.
pub const ANSWERED: &str = "routesAnswered";
pub const ALL_ANSWERED_MS: &str = "routesAllAnsweredMs";

/// The controller of `step` and its route, when the route is a scale (count above 1).
pub fn scaled(spec: &IngressBenchmarkSpec, step: u32) -> Option<(&Controller, &OwnedRoute)> {
    let c = plan::controller(spec, step)?;
    let r = c.route.as_ref()?;
    (r.count > 1).then_some((c, r))
}

/// A route found created with no record of when (its instant lost to a restart).
pub const UNTIMED: u64 = 0;
