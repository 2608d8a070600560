//! An IngressBenchmark's bounds: its load, workers and sweep, its controllers and who a sweep
//! scales, a route scale, route changes and the gates that need them.

use std::time::Duration as Std;

use super::{at_most, len, within, DAY, HOUR, MS, SEC};
use crate::gates::GateFigure;
use crate::ingress::{
    IngressBenchmarkSpec, RouteChangeAction, MAX_CONTROLLERS, MAX_ROUTE_CHANGES, MAX_ROUTE_COUNT,
};

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
    controllers(spec)?;
    route_changes(spec)?;
    route_gates(spec)?;
    route_scale(spec)?;
    super::gates::gates(&spec.gates, true)?;
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

/// A sweep's targets: sweep.targetRef alone, or every controller's sweepTarget.
pub const SWEEP_TARGETS: &str = "a sweep scales sweep.targetRef; with controllers, each controller's own sweepTarget instead (every controller names one, and sweep.targetRef is left out)";
/// More steps than a run holds.
pub const SWEEP_BESIDE_CONTROLLERS_STEPS: &str = "a sweep beside controllers measures each controller at each size: sweep.steps x controllers must be at most 64";
/// Two controllers scaling one workload.
pub const SHARED_SWEEP_TARGET: &str =
    "controllers must sweep distinct workloads (controllers[].sweepTarget)";
/// A controller's sweepTarget without a sweep.
pub const SWEEP_TARGET_WITHOUT_SWEEP: &str =
    "controllers[].sweepTarget needs spec.sweep (its steps say the sizes)";

/// The controllers' count, names and settle times; who a sweep scales.
fn controllers(spec: &IngressBenchmarkSpec) -> Result<(), String> {
    let controllers = &spec.controllers;
    at_most("controllers", len(controllers.len()), len(MAX_CONTROLLERS))?;
    if let Some(sweep) = &spec.sweep {
        let targets_ok = if controllers.is_empty() {
            sweep.target_ref.is_some()
        } else {
            sweep.target_ref.is_none() && controllers.iter().all(|c| c.sweep_target.is_some())
        };
        if !targets_ok {
            return Err(SWEEP_TARGETS.into());
        }
        if sweep.steps.len().saturating_mul(controllers.len()) > 64 {
            return Err(SWEEP_BESIDE_CONTROLLERS_STEPS.into());
        }
        let mut targets = std::collections::BTreeSet::new();
        for t in controllers.iter().filter_map(|c| c.sweep_target.as_ref()) {
            if !targets.insert((t.name.as_str(), t.namespace.as_deref().unwrap_or(""))) {
                return Err(SHARED_SWEEP_TARGET.into());
            }
        }
    } else if controllers.iter().any(|c| c.sweep_target.is_some()) {
        return Err(SWEEP_TARGET_WITHOUT_SWEEP.into());
    }
    let mut names = std::collections::BTreeSet::new();
    let mut hostnames = std::collections::BTreeSet::new();
    for c in controllers {
        let label = c.name.len() <= 40
            && !c.name.is_empty()
            && c.name
                .bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
            && !c.name.starts_with('-')
            && !c.name.ends_with('-');
        if !label {
            return Err(format!(
                "controllers[].name {:?} must be 1 to 40 lowercase letters, digits or '-', starting and ending with a letter or digit",
                c.name
            ));
        }
        if !names.insert(c.name.as_str()) {
            return Err("controllers' names must be unique".into());
        }
        if let Some(route) = &c.route {
            if !hostnames.insert(route.hostname.as_str()) {
                return Err("the routes of controllers must have distinct hostnames (a Gateway gives a hostname to the oldest route)".into());
            }
            within(
                route.settle,
                Std::ZERO,
                5 * 60 * SEC,
                "controllers[].route.settle must be at most 5m",
            )?;
        }
    }
    Ok(())
}

/// A route scale's routes fit the connections, the hostname's length and the schema's bound,
/// and are not changed under load as well.
fn route_scale(spec: &IngressBenchmarkSpec) -> Result<(), String> {
    for c in &spec.controllers {
        let Some(route) = &c.route else { continue };
        let count = route.count;
        if count == 0 || count > MAX_ROUTE_COUNT {
            return Err(format!(
                "controllers[{}].route.count must be between 1 and {MAX_ROUTE_COUNT} (got {count})",
                c.name
            ));
        }
        if count == 1 {
            continue;
        }
        if spec.route_changes.is_some() {
            return Err(ROUTE_SCALE_WITH_CHANGES.into());
        }
        if c.host_header.is_some() {
            return Err(format!(
                "controllers[{}].hostHeader cannot be set with a route scale: the workers ask the routes' own hostnames, r<i>.{}",
                c.name, route.hostname
            ));
        }
        let url = c.url.as_deref().unwrap_or(&spec.target.url);
        if url
            .get(..8)
            .is_some_and(|p| p.eq_ignore_ascii_case("https://"))
        {
            return Err(format!(
                "controllers[{}]: a route scale over https is not supported yet (the TLS server name would be {}, not each route's r<i>.{}): use an http:// listener",
                c.name, route.hostname, route.hostname
            ));
        }
        // No other controller's route may take one of this scale's hostnames.
        let taken = spec
            .controllers
            .iter()
            .filter_map(|o| o.route.as_ref())
            .filter_map(|o| o.hostname.strip_suffix(route.hostname.as_str()))
            .filter_map(|prefix| {
                prefix
                    .strip_prefix('r')?
                    .strip_suffix('.')?
                    .parse::<u32>()
                    .ok()
            })
            .any(|i| i < count);
        if taken {
            return Err(format!(
                "another controller's route hostname is one of controllers[{}]'s {count} routes' (r<i>.{})",
                c.name, route.hostname
            ));
        }
        if u64::from(spec.load.connections) < u64::from(count) {
            return Err(format!(
                "controllers[{}].route.count {count} needs load.connections at least {count} (each connection asks one of the routes' hostnames; got {})",
                c.name, spec.load.connections
            ));
        }
        // "r999." before the hostname, within a DNS name's 253.
        let longest = route.hostname.len() + format!("r{}.", count - 1).len();
        if longest > 253 {
            return Err(format!(
                "controllers[{}].route.hostname is too long for {count} routes: r{}.{} would be {longest} characters (at most 253)",
                c.name,
                count - 1,
                route.hostname
            ));
        }
    }
    Ok(())
}

/// A route scale creates and deletes its routes itself; changing one under load is another run.
pub const ROUTE_SCALE_WITH_CHANGES: &str = "a route scale (controllers[].route.count above 1) and routeChanges cannot be combined: measure the scale and the churn in two benchmarks";

/// The answers tell the two backends apart by name only.
pub const SWAP_TO_DIFFERS: &str = "routeChanges.swapTo must be another Service than every route's backend (answers name their backend)";

/// Gates on route-change figures need the changes that make them.
pub const ROUTE_GATES_NEED_CHANGES: &str = "gates on routeChangesShown or routeChangeP99Ms need routeChanges (action SwapBackend); on routeCreation* or routeDeletion* figures, routeChanges with action DeleteAndCreate";

/// Which action makes the figure a gate names, if it is a route-change figure.
fn route_figure_action(figure: GateFigure) -> Option<RouteChangeAction> {
    match figure {
        GateFigure::RouteChangesShown | GateFigure::RouteChangeP99Ms => {
            Some(RouteChangeAction::SwapBackend)
        }
        GateFigure::RouteCreationsShown
        | GateFigure::RouteCreationP99Ms
        | GateFigure::RouteDeletionsShown
        | GateFigure::RouteDeletionP99Ms => Some(RouteChangeAction::DeleteAndCreate),
        _ => None,
    }
}

/// Gates on a route scale's figures need a controller with one.
pub const SCALE_GATES_NEED_SCALE: &str = "gates on routesAnswered or routesAllAnsweredMs need a route scale: a controller whose route.count is above 1";

fn route_gates(spec: &IngressBenchmarkSpec) -> Result<(), String> {
    let scale_gate = spec.gates.iter().any(|g| {
        matches!(
            g.figure,
            GateFigure::RoutesAnswered | GateFigure::RoutesAllAnsweredMs
        )
    });
    let scaled = spec
        .controllers
        .iter()
        .any(|c| c.route.as_ref().is_some_and(|r| r.count > 1));
    if scale_gate && !scaled {
        return Err(SCALE_GATES_NEED_SCALE.into());
    }
    let action = spec.route_changes.as_ref().map(|c| c.action);
    let unmade = spec
        .gates
        .iter()
        .filter_map(|g| route_figure_action(g.figure))
        .any(|needed| action != Some(needed));
    if unmade {
        return Err(ROUTE_GATES_NEED_CHANGES.into());
    }
    Ok(())
}

/// An error rate would count the Gateway's 404s while the route is gone, which the run asks for.
pub const ERROR_RATE_WITH_DELETIONS: &str = "an errorRate gate or thresholds.maxErrorRate cannot judge routeChanges with action DeleteAndCreate: the Gateway's 404s while the route is gone would count as errors (the run fails on a backend's own 4xx, 5xx and connection failures above the operator's limit)";

/// swapTo goes with SwapBackend and only with it.
pub const SWAP_TO_NEEDED: &str = "routeChanges.swapTo is needed to swap backends (action SwapBackend) and has no use with action DeleteAndCreate";

/// Route changes need routes to change, at most MAX_ROUTE_CHANGES per sample.
fn route_changes(spec: &IngressBenchmarkSpec) -> Result<(), String> {
    let Some(changes) = &spec.route_changes else {
        return Ok(());
    };
    let routed = !spec.controllers.is_empty() && spec.controllers.iter().all(|c| c.route.is_some());
    if !routed {
        return Err("routeChanges needs controllers, each with a route (the run changes the routes it creates)".into());
    }
    within(
        changes.every,
        200 * MS,
        5 * 60 * SEC,
        "routeChanges.every must be between 200ms and 5m",
    )?;
    let swapping = changes.action == RouteChangeAction::SwapBackend;
    if swapping != changes.swap_to.is_some() {
        return Err(SWAP_TO_NEEDED.into());
    }
    let same = spec
        .controllers
        .iter()
        .filter_map(|c| c.route.as_ref())
        .any(|r| Some(&r.backend.name) == changes.swap_to.as_ref().map(|b| &b.name));
    if same {
        return Err(SWAP_TO_DIFFERS.into());
    }
    // In µs, as the operator counts them.
    let count = spec.load.duration.as_std().as_micros() / changes.every.as_std().as_micros().max(1);
    if count < 2 && !swapping {
        return Err(format!(
            "routeChanges with action DeleteAndCreate needs room for a deletion and a creation: load.duration at least twice routeChanges.every (got every {} for {})",
            changes.every, spec.load.duration
        ));
    }
    if !swapping {
        let error_gate = spec.gates.iter().any(|g| g.figure == GateFigure::ErrorRate);
        let error_threshold = spec
            .thresholds
            .as_ref()
            .is_some_and(|t| t.max_error_rate.is_some());
        if error_gate || error_threshold {
            return Err(ERROR_RATE_WITH_DELETIONS.into());
        }
    }
    if count == 0 {
        return Err(format!(
            "routeChanges.every must fit in load.duration (got every {} for {})",
            changes.every, spec.load.duration
        ));
    }
    if count > u128::from(MAX_ROUTE_CHANGES) {
        return Err(format!(
            "routeChanges: load.duration / routeChanges.every must be at most {MAX_ROUTE_CHANGES} changes per sample (got {count})"
        ));
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
}
