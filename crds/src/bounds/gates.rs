//! The gates' bounds (`spec.gates`, both kinds): how many, one limit each within the figure's
//! ceiling, abortAfter's range, abortOnFail's scope, and (IngressBenchmark) only the figures a
//! step produces.

use crate::gates::{Gate, GateScope, INGRESS_RULE_MESSAGE, MAX_GATES};

/// The gates as the CEL rules bound them, checked again by the operator (crds::bounds).
pub(super) fn gates(gates: &[Gate], ingress: bool) -> Result<(), String> {
    if gates.len() > MAX_GATES {
        return Err(format!(
            "gates must list at most {MAX_GATES} (got {})",
            gates.len()
        ));
    }
    for g in gates {
        gate_bounds(g, ingress).map_err(|e| format!("gate {}: {e}", g.display_name()))?;
    }
    Ok(())
}

fn gate_bounds(g: &Gate, ingress: bool) -> Result<(), String> {
    if ingress && !g.figure.of_ingress() {
        return Err(INGRESS_RULE_MESSAGE.into());
    }
    let Some((limit, _)) = g.limit() else {
        return Err("a gate sets exactly one of max and min".into());
    };
    if limit.is_nan() || limit < 0.0 {
        return Err("a gate's limit must not be negative".into());
    }
    if limit > g.figure.ceiling() {
        return Err(g.figure.ceiling_rule().into());
    }
    let after = g.abort_after.as_std();
    if after < std::time::Duration::from_secs(1) || after > std::time::Duration::from_secs(3600) {
        return Err(format!(
            "a gate's abortAfter must be between 1s and 1h (got {})",
            g.abort_after
        ));
    }
    if g.abort_on_fail && g.scope != GateScope::Each {
        return Err("abortOnFail needs scope Each".into());
    }
    Ok(())
}
