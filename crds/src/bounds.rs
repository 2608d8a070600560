//! The bounds the CRD schema's CEL rules enforce, checked again in Rust. The API server refuses
//! objects outside them on create and update, but objects stored before a rule existed (or
//! written around it) still reach the operator, which then refuses them with the same message
//! instead of acting on them. crds/tests/cel_rules.rs proves the two agree at the edges.

use std::time::Duration as Std;

use crate::cases::MAX_MEASURED;
use crate::egress::{Direction, EgressBenchmarkSpec, EgressCase, Protocol};
use crate::gates::GateFigure;
use crate::ingress::{
    IngressBenchmarkSpec, RouteChangeAction, MAX_CONTROLLERS, MAX_ROUTE_CHANGES, MAX_ROUTE_COUNT,
};
use crate::topology::{NodeSet, Topology};
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
    controllers(spec)?;
    route_changes(spec)?;
    route_gates(spec)?;
    route_scale(spec)?;
    crate::gates::bounds(&spec.gates, true)?;
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

pub fn egress(spec: &EgressBenchmarkSpec) -> Result<(), String> {
    if spec.cases.is_empty() {
        return Err("cases must list at least one case".into());
    }
    at_most("cases", len(spec.cases.len()), 16)?;
    for case in &spec.cases {
        egress_case(case).map_err(|e| format!("case {}: {e}", case.name))?;
    }
    crate::gates::bounds(&spec.gates, false)?;
    // Across cases, which no CEL rule can sum up.
    let runs = spec.measured_count();
    if runs > MAX_MEASURED {
        return Err(format!(
            "the cases and their sweeps make {runs} runs; at most {MAX_MEASURED} (the measurements one BenchmarkResult holds)"
        ));
    }
    Ok(())
}

/// One case: the schema's bounds and its CEL rules on which fields go with which protocol.
fn egress_case(case: &EgressCase) -> Result<(), String> {
    let p = case.protocol;
    at_most("streams", case.streams.into(), 128)?;
    within(
        case.duration,
        SEC,
        DAY,
        "case duration must be between 1s and 24h",
    )?;
    let rr_only = [&case.request_size, &case.response_size, &case.rate];
    if !p.is_request_response() && rr_only.iter().any(|f| f.is_some()) {
        return Err(
            "requestSize, responseSize and rate apply to protocols tcp-rr, tcp-crr and udp-rr only"
                .into(),
        );
    }
    if !p.takes_burst() && case.burst.is_some() {
        let taking: Vec<_> = Protocol::ALL
            .into_iter()
            .filter(|p| p.takes_burst())
            .map(Protocol::as_str)
            .collect();
        return Err(format!(
            "burst applies to protocols {} only",
            taking.join(" and ")
        ));
    }
    if p != Protocol::UdpRr && case.timeout.is_some() {
        return Err("timeout applies to protocol udp-rr only".into());
    }
    if p != Protocol::UdpStream && (case.bitrate.is_some() || case.packets_per_second.is_some()) {
        return Err("bitrate and packetsPerSecond apply to protocol udp-stream only".into());
    }
    if case.bitrate.is_some() && case.packets_per_second.is_some() {
        return Err("set bitrate or packetsPerSecond, not both".into());
    }
    if p != Protocol::TcpStream && case.latency_probe.is_some() {
        return Err("latencyProbe applies to protocol tcp-stream only".into());
    }
    if p.is_request_response() && case.message_size.is_some() {
        return Err("messageSize applies to tcp-stream and udp-stream; request/response protocols take requestSize and responseSize".into());
    }
    if p.is_request_response() && case.direction != Direction::Send {
        return Err("direction applies to tcp-stream and udp-stream only".into());
    }
    // The message sizes the sweep runs, besides the case's own.
    let swept = || {
        case.sweep
            .iter()
            .flat_map(|s| s.message_sizes.iter().copied())
    };
    let sizes = [case.message_size, case.request_size, case.response_size];
    let max_size = sizes.into_iter().flatten().chain(swept()).max();
    let rr_sizes = [case.request_size, case.response_size];
    let udp_rr_min = rr_sizes.into_iter().flatten().chain(swept()).min();
    if p == Protocol::UdpRr && udp_rr_min.is_some_and(|m| m < 8) {
        return Err("udp-rr carries an 8-byte sequence number in every datagram: requestSize, responseSize and sweep.messageSizes must be at least 8".into());
    }
    let limit = if p.is_udp() { 65_507 } else { 16_777_216 };
    if max_size.is_some_and(|m| m > limit) {
        return Err(if p.is_udp() {
            "a UDP datagram carries at most 65507 bytes: messageSize, requestSize, responseSize and sweep.messageSizes of udp protocols must be at most 65507".into()
        } else {
            format!("message sizes must be at most {limit}")
        });
    }
    if p == Protocol::UdpStream && case.message_size.into_iter().chain(swept()).any(|m| m < 32) {
        return Err("udp-stream datagrams carry a 32-byte header: messageSize and sweep.messageSizes must be at least 32".into());
    }
    if p.is_request_response() && max_size.is_some_and(|m| m > 1_048_576) {
        return Err("request/response messages are at most 1048576 bytes (1 MiB): sweep.messageSizes of tcp-rr, tcp-crr and udp-rr must be at most 1048576".into());
    }
    let burst = u64::from(case.burst.unwrap_or(0));
    if p == Protocol::TcpRr
        && burst > 0
        && max_size.is_some_and(|m| (burst + 1).saturating_mul(u64::from(m)) > 65_536)
    {
        return Err("tcp-rr with burst keeps (burst + 1) requests in flight each way: (burst + 1) times requestSize, responseSize and every sweep.messageSizes must be at most 65536 bytes, or both ends could block on full socket buffers".into());
    }
    // The schema's lower bounds, again (a spec that did not come through the API server).
    let positive = [
        ("streams", Some(case.streams)),
        ("messageSize", case.message_size),
        ("requestSize", case.request_size),
        ("responseSize", case.response_size),
        ("rate", case.rate),
        ("packetsPerSecond", case.packets_per_second),
        ("latencyProbe", case.latency_probe),
        ("server.port", Some(u32::from(case.server.port))),
    ];
    if let Some((field, _)) = positive.iter().find(|(_, v)| *v == Some(0)) {
        return Err(format!("{field} must be at least 1"));
    }
    at_most("burst", case.burst.unwrap_or(0).into(), 256)?;
    at_most("rate", case.rate.unwrap_or(0).into(), 1_000_000)?;
    at_most(
        "packetsPerSecond",
        case.packets_per_second.unwrap_or(0).into(),
        10_000_000,
    )?;
    at_most("latencyProbe", case.latency_probe.unwrap_or(0).into(), 1000)?;
    if let Some(t) = case.timeout {
        within(t, MS, 10 * SEC, "timeout must be between 1ms and 10s")?;
    }
    if let Some(b) = &case.bitrate {
        if !crate::cases::bitrate_bits(b).is_some_and(|bits| bits == 0.0 || bits >= 1000.0) {
            return Err(format!(
                "bitrate must be bits per second with an optional k, M or G suffix, 0 or at least 1k, at most 100G (got {b:.32})"
            ));
        }
    }
    if let Some(s) = &case.sweep {
        if s.message_sizes.is_empty() && s.streams.is_empty() {
            return Err("sweep must list messageSizes or streams".into());
        }
        at_most(
            "sweep.streams",
            s.streams.iter().copied().max().unwrap_or(1).into(),
            128,
        )?;
        if case.runs() > 16 {
            return Err("a sweep runs a case at most 16 times: the number of messageSizes times the number of streams must be at most 16".into());
        }
        for (field, values) in [("messageSizes", &s.message_sizes), ("streams", &s.streams)] {
            let mut sorted = values.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted.len() != values.len() {
                return Err(format!("sweep.{field} must not repeat a value"));
            }
            if values.contains(&0) {
                return Err(format!("sweep.{field} must be at least 1"));
            }
        }
    }
    let server = &case.server;
    if server.service
        && (server.address.is_some()
            || server.host_network
            || server.bind_interface.is_some()
            || server.bind_address.is_some())
    {
        return Err("server.service reaches a server pod the operator runs on its pod address: it cannot be combined with server.address, hostNetwork, bindInterface or bindAddress".into());
    }
    if let Some(t) = &case.topology {
        if case.client.node_name.is_some() || server.node_name.is_some() {
            return Err("a case with a topology places its workers with topology.clientNodes and topology.serverNodes, not client.nodeName or server.nodeName".into());
        }
        if server.address.is_some() || server.service {
            return Err("a topology runs a server pod per pair on its pod or host address: server.address and server.service do not go with it".into());
        }
        if case.sweep.is_some() {
            return Err(
                "a case with a topology cannot also have a sweep: make one case per value".into(),
            );
        }
        topology(t)?;
    }
    Ok(())
}

/// A case's topology: the CEL rules of `crate::topology` and its schema's bounds.
fn topology(t: &Topology) -> Result<(), String> {
    let set = [
        t.pairs.is_some(),
        t.fan_in.is_some(),
        t.fan_out.is_some(),
        t.matrix.is_some(),
    ];
    if set.iter().filter(|s| **s).count() != 1 {
        return Err("topology: set exactly one of pairs, fanIn, fanOut and matrix".into());
    }
    for nodes in [&t.client_nodes, &t.server_nodes].into_iter().flatten() {
        if nodes.names.is_empty() == nodes.selector.is_empty() {
            return Err("a node set lists names or a selector, one of the two".into());
        }
        at_most("node names", len(nodes.names.len()), 64)?;
        at_most("selector labels", len(nodes.selector.len()), 16)?;
        let mut sorted: Vec<&String> = nodes.names.iter().collect();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != nodes.names.len() {
            return Err("node names must not repeat".into());
        }
        if nodes.names.iter().any(|n| n.is_empty() || n.len() > 253) {
            return Err("node names are 1 to 253 characters".into());
        }
        if nodes
            .selector
            .iter()
            .any(|(k, v)| k.len() > 317 || v.len() > 63)
        {
            return Err("selector keys are at most 317 and values at most 63 characters".into());
        }
    }
    let one_name = |set: &Option<NodeSet>| set.as_ref().is_some_and(|s| s.names.len() == 1);
    if t.fan_in.is_some() && !one_name(&t.server_nodes) {
        return Err("topology.fanIn runs every server on one node: name it in serverNodes.names (exactly one name)".into());
    }
    if t.fan_out.is_some() && !one_name(&t.client_nodes) {
        return Err("topology.fanOut runs every client on one node: name it in clientNodes.names (exactly one name)".into());
    }
    if t.matrix.is_some() && t.client_nodes.is_none() {
        return Err("topology.matrix pairs the nodes of clientNodes (names or a selector) with those of serverNodes, or with each other when serverNodes is absent: set clientNodes".into());
    }
    let (min, max): (u64, u64) = (
        if t.fan_in.or(t.fan_out).is_some() {
            2
        } else {
            1
        },
        128,
    );
    let count = t.pairs.or(t.fan_in).or(t.fan_out).map(u64::from);
    if count.is_some_and(|n| n < min || n > max) {
        return Err(format!(
            "topology: pairs is 1 to 128, fanIn and fanOut 2 to 128 (got {})",
            count.unwrap_or(0)
        ));
    }
    if let Some(m) = &t.matrix {
        for (field, v) in [("sample", m.sample), ("concurrency", m.concurrency)] {
            if v.is_some_and(|v| v == 0 || v > 128) {
                return Err(format!("topology.matrix.{field} is 1 to 128"));
            }
        }
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
