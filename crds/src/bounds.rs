//! The bounds the CRD schema's CEL rules enforce, checked again in Rust. The API server refuses
//! objects outside them on create and update, but objects stored before a rule existed (or
//! written around it) still reach the operator, which then refuses them with the same message
//! instead of acting on them. crds/tests/cel_rules.rs proves the two agree at the edges.

use std::time::Duration as Std;

use crate::Duration;

mod egress;
mod gates;
mod ingress;
mod topology;

pub use egress::egress;
pub use ingress::{
    ingress, ERROR_RATE_WITH_DELETIONS, ROUTE_GATES_NEED_CHANGES, ROUTE_SCALE_WITH_CHANGES,
    SCALE_GATES_NEED_SCALE, SHARED_SWEEP_TARGET, SWAP_TO_DIFFERS, SWAP_TO_NEEDED,
    SWEEP_BESIDE_CONTROLLERS_STEPS, SWEEP_TARGETS, SWEEP_TARGET_WITHOUT_SWEEP,
};

const SEC: Std = Std::from_secs(1);
const MS: Std = Std::from_millis(1);
const HOUR: Std = Std::from_secs(3600);
const DAY: Std = Std::from_secs(24 * 3600);

/// Err names the field and the allowed range, as the CEL rule's message does.
fn within(value: Duration, min: Std, max: Std, message: &str) -> Result<(), String> {
    let v = value.as_std();
    if v < min || v > max {
        return Err(format!("{message} (got {value})"));
    }
    Ok(())
}

/// Err when `value` is above the schema's maximum for `field`.
fn at_most(field: &str, value: u64, max: u64) -> Result<(), String> {
    if value > max {
        return Err(format!("{field} must be at most {max} (got {value})"));
    }
    Ok(())
}

fn len(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}
