//! Time spent since a moment stored in status.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Time since `t` (zero when unset or in the future).
pub fn elapsed_since(t: &Option<Time>) -> Duration {
    t.as_ref()
        .map(|t| jiff::Timestamp::now().duration_since(t.0))
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}
