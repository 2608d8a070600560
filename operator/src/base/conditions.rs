//! Status conditions: set one by type, keeping lastTransitionTime when the status is unchanged.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub const READY: &str = "Ready";
pub const INVALID: &str = "Invalid";
/// True while the run waits in the queue (reason SharedClaim or NamespaceCap), False once it left.
pub const QUEUED: &str = "Queued";
pub const WORKERS_SCHEDULED: &str = "WorkersScheduled";
pub const THRESHOLDS_MET: &str = "ThresholdsMet";
/// True when every SLO gate (`spec.gates`) held; False (reason GateFailed) when one broke,
/// False (reason GateNotJudged) when one found no figure to judge.
pub const GATES_PASSED: &str = "GatesPassed";
pub const TARGET_RESTORED: &str = "TargetRestored";
pub const OFFLOAD_RESTORED: &str = "OffloadRestored";
/// True when a run regressed against the benchmark's baseline; Unknown without a baseline to
/// compare with.
pub const REGRESSED: &str = "Regressed";
/// True when the newest runs of a benchmark start a new regime (a change point over its
/// history of succeeded results of the same spec, at most a few runs back); False when there
/// is none recently; Unknown with too few results or after a failed run.
pub const NEW_REGIME: &str = "NewRegime";
/// True once the finished run's BenchmarkResult was created (reason ResultWritten); False while
/// writing it fails (ResultWritePending, retried) and once the operator gave up
/// (ResultWriteFailed: the run's reports are kept and a later reconcile tries again).
pub const RESULT_RECORDED: &str = "ResultRecorded";

pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    ok: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) {
    let status = if ok { "True" } else { "False" };
    set_status(conditions, type_, status, reason, message, generation);
}

/// Like `set`, with the status as written: "True", "False" or "Unknown".
pub fn set_status(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) {
    let status = status.to_string();
    let message = message.into();
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if c.status != status {
            c.last_transition_time = now();
        }
        c.status = status;
        c.reason = reason.to_string();
        c.message = message;
        c.observed_generation = generation;
        return;
    }
    conditions.push(Condition {
        type_: type_.to_string(),
        status,
        reason: reason.to_string(),
        message,
        observed_generation: generation,
        last_transition_time: now(),
    });
}

pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

pub fn now() -> Time {
    Time(jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_replaces_by_type_and_keeps_transition_time() {
        let mut cs = vec![];
        set(&mut cs, READY, false, "Running", "step 1", Some(1));
        let t0 = cs[0].last_transition_time.clone();
        set(&mut cs, READY, false, "Running", "step 2", Some(1));
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0].message, "step 2");
        assert_eq!(cs[0].last_transition_time, t0);
        set(&mut cs, READY, true, "Succeeded", "done", Some(1));
        assert_eq!(cs[0].status, "True");
    }
}
