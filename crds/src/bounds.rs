//! The bounds the CRD schema's CEL rules enforce, checked again in Rust. The API server refuses
//! objects outside them on create and update, but objects stored before a rule existed (or
//! written around it) still reach the operator, which then refuses them with the same message
//! instead of acting on them. crds/tests/cel_rules.rs proves the two agree at the edges.

use std::time::Duration as Std;

use crate::egress::EgressBenchmarkSpec;
use crate::ingress::IngressBenchmarkSpec;
use crate::Duration;

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

pub fn ingress(spec: &IngressBenchmarkSpec) -> Result<(), String> {
    let load = &spec.load;
    // The sizes that drive loops and allocations in the operator and the workers.
    at_most("load.connections", load.connections.into(), 20_000)?;
    at_most("load.threads", load.threads.into(), 64)?;
    if load.threads == 0 || load.connections < load.threads {
        return Err(
            "load.connections must be at least load.threads (each thread needs a connection)"
                .into(),
        );
    }
    let workers = &spec.workers;
    at_most("workers.replicas", workers.replicas.unwrap_or(1).into(), 64)?;
    at_most("workers.nodeNames", len(workers.node_names.len()), 64)?;
    if let Some(sweep) = &spec.sweep {
        at_most("sweep.steps", len(sweep.steps.len()), 16)?;
    }
    within(
        load.duration,
        SEC,
        DAY,
        "load.duration must be between 1s and 24h",
    )?;
    within(
        load.warmup,
        Std::ZERO,
        HOUR,
        "load.warmup must be at most 1h",
    )?;
    within(
        load.timeout,
        MS,
        5 * 60 * SEC,
        "load.timeout must be between 1ms and 5m",
    )?;
    if load.duration <= load.warmup {
        return Err("load.duration must be longer than load.warmup".into());
    }
    if let Some(sweep) = &spec.sweep {
        within(
            sweep.settle,
            Std::ZERO,
            HOUR,
            "sweep.settle must be at most 1h",
        )?;
    }
    if let Some(max) = spec.thresholds.as_ref().and_then(|t| t.max_p99) {
        if max.as_std().is_zero() {
            return Err("thresholds.maxP99 must be more than 0s and at most 1h (got 0s)".into());
        }
        within(
            max,
            Std::ZERO,
            HOUR,
            "thresholds.maxP99 must be more than 0s and at most 1h",
        )?;
    }
    Ok(())
}

pub fn egress(spec: &EgressBenchmarkSpec) -> Result<(), String> {
    if spec.cases.is_empty() {
        return Err("cases must list at least one case".into());
    }
    at_most("cases", len(spec.cases.len()), 16)?;
    for case in &spec.cases {
        at_most("streams", case.streams.into(), 128)
            .and_then(|()| at_most("messageSize", case.message_size.into(), 16_777_216))
            .map_err(|e| format!("case {}: {e}", case.name))?;
        within(
            case.duration,
            SEC,
            DAY,
            "case duration must be between 1s and 24h",
        )
        .map_err(|e| format!("case {}: {e}", case.name))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ib(load: &str) -> IngressBenchmarkSpec {
        serde_yaml::from_str(&format!("{{target: {{url: 'http://x/'}}, load: {load}}}")).unwrap()
    }

    #[test]
    fn ingress_durations() {
        assert!(ingress(&ib("{duration: 10s}")).is_ok());
        let err = ingress(&ib("{duration: 99999999999999999999h}")).unwrap_err();
        assert!(
            err.starts_with("load.duration must be between 1s and 24h"),
            "{err}"
        );
        let err = ingress(&ib("{duration: 1ns}")).unwrap_err();
        assert!(err.contains("(got 1ns)"), "{err}");
        let err = ingress(&ib("{duration: 10s, timeout: 0s}")).unwrap_err();
        assert!(err.starts_with("load.timeout"), "{err}");
        let err = ingress(&ib("{duration: 10s, warmup: 10s}")).unwrap_err();
        assert_eq!(err, "load.duration must be longer than load.warmup");
    }

    #[test]
    fn sizes_that_drive_loops_are_bounded() {
        let err = ingress(&ib("{connections: 4000000000, threads: 1}")).unwrap_err();
        assert_eq!(
            err,
            "load.connections must be at most 20000 (got 4000000000)"
        );
        let s: IngressBenchmarkSpec =
            serde_yaml::from_str("{target: {url: 'http://x/'}, workers: {replicas: 100000}}")
                .unwrap();
        assert!(ingress(&s)
            .unwrap_err()
            .starts_with("workers.replicas must be at most 64"));
        let err = ingress(&ib("{connections: 1, threads: 2}")).unwrap_err();
        assert!(err.starts_with("load.connections must be at least load.threads"));
    }

    #[test]
    fn egress_durations_name_the_case() {
        let spec: EgressBenchmarkSpec =
            serde_yaml::from_str("{cases: [{name: a, client: {}, server: {}, duration: 100000h}]}")
                .unwrap();
        let err = egress(&spec).unwrap_err();
        assert!(
            err.starts_with("case a: case duration must be between 1s and 24h"),
            "{err}"
        );
    }
}
