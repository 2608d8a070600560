//! Pure planning: a spec and a step become the loadgen arguments and worker pod plans, the
//! step's deadline and the run's budget, and what the run claims in the queue.

use std::collections::BTreeMap;
use std::time::Duration;

use crds::ingress::{Controller, IngressBenchmark, IngressBenchmarkSpec, SweepStep, TargetRef};
use kube::ResourceExt;

use crate::base::labels;
use crate::k8s::workers::WorkerPlan;
use crate::policy::deadline::{sum, with_margin, Timeouts, REPORTING};
use crate::policy::queue::Contender;
use crate::policy::samples::Slot;

pub const KIND: &str = "IngressBenchmark";

/// Steps come in rounds of one per controller (one round without controllers), a round per
/// sweep step: step = sweep step x controllers + controller.
fn per_round(spec: &IngressBenchmarkSpec) -> usize {
    spec.controllers.len().max(1)
}

/// The controller measured in `step`, None without controllers (or past the last step).
pub fn controller(spec: &IngressBenchmarkSpec, step: u32) -> Option<&Controller> {
    if step >= step_count(spec) {
        return None;
    }
    let step = usize::try_from(step).ok()?;
    spec.controllers.get(step % per_round(spec))
}

/// The sweep step (the size) of `step`, None without a sweep.
pub fn sweep_step(spec: &IngressBenchmarkSpec, step: u32) -> Option<&SweepStep> {
    let step = usize::try_from(step).ok()?;
    spec.sweep.as_ref()?.steps.get(step / per_round(spec))
}

/// The workload a sweep scales for `step`: its controller's sweepTarget, else sweep.targetRef.
pub fn sweep_target(spec: &IngressBenchmarkSpec, step: u32) -> Option<&TargetRef> {
    let sweep = spec.sweep.as_ref()?;
    match controller(spec, step) {
        Some(c) => c.sweep_target.as_ref(),
        None => sweep.target_ref.as_ref(),
    }
}

/// Every workload the sweep scales, each once, in the controllers' order.
pub fn sweep_targets(spec: &IngressBenchmarkSpec) -> Vec<&TargetRef> {
    let mut targets: Vec<&TargetRef> = vec![];
    for step in 0..u32::try_from(per_round(spec)).unwrap_or(1) {
        if let Some(t) = sweep_target(spec, step) {
            if !targets.iter().any(|seen| same_target(seen, t)) {
                targets.push(t);
            }
        }
    }
    targets
}

/// The same workload (an absent namespace is the benchmark's, the same for both).
pub fn same_target(a: &TargetRef, b: &TargetRef) -> bool {
    a.kind == b.kind && a.name == b.name && a.namespace == b.namespace
}

/// The steps thresholds judge: the last sweep step's (the largest size), of every controller.
pub fn judged_steps(spec: &IngressBenchmarkSpec) -> std::ops::Range<u32> {
    let count = step_count(spec);
    let round = u32::try_from(per_round(spec)).unwrap_or(1);
    count.saturating_sub(round)..count
}

/// Where `step`'s load goes: its controller's URL and Host header (the route's hostname when
/// the run creates one), else target's.
pub fn destination(spec: &IngressBenchmarkSpec, step: u32) -> (&str, Option<&str>) {
    let target = &spec.target;
    let Some(c) = controller(spec, step) else {
        return (&target.url, target.host_header.as_deref());
    };
    let url = c.url.as_deref().unwrap_or(&target.url);
    let host = c
        .host_header
        .as_deref()
        .or(c.route.as_ref().map(|r| r.hostname.as_str()))
        .or(target.host_header.as_deref());
    (url, host)
}

/// `netbench-loadgen http ...` arguments for one worker of `step`. A rate is split evenly over
/// workers.
pub fn loadgen_args(spec: &IngressBenchmarkSpec, step: u32) -> Vec<String> {
    let load = &spec.load;
    let replicas = spec.workers.effective_replicas();
    let mut args = vec![
        "http".to_string(),
        "-c".into(),
        load.connections.to_string(),
        "-t".into(),
        load.threads.to_string(),
        "-d".into(),
        millis(load.duration),
        "--warmup".into(),
        millis(load.warmup),
        "--timeout".into(),
        millis(load.timeout),
        "--method".into(),
        spec.target.method.clone(),
        "--output".into(),
        "json".into(),
    ];
    if let Some(rate) = load.rate {
        args.extend(["-R".into(), format!("{}", rate as f64 / replicas as f64)]);
    }
    if !load.keep_alive {
        args.push("--no-keepalive".into());
    }
    if load.http2 {
        args.push("--http2".into());
    }
    let scaled = controller(spec, step)
        .and_then(|c| c.route.as_ref())
        .filter(|r| r.count > 1);
    if spec.route_changes.is_some() || scaled.is_some() {
        args.push("--record-answers".into());
    }
    if let Some(route) = scaled {
        // Each connection asks one of the routes' hostnames, r<i>.<hostname>, and only the
        // route's own backend answering dates it.
        args.extend(["--host-count".into(), route.count.to_string()]);
        args.extend(["--host-backend".into(), route.backend.name.clone()]);
    }
    for h in &spec.target.headers {
        args.extend(["-H".into(), format!("{}: {}", h.name, h.value)]);
    }
    let (url, host) = destination(spec, step);
    if let Some(host) = host {
        args.extend(["--host".into(), host.to_string()]);
    }
    if let Some(body) = &spec.target.body {
        args.extend(["--body".into(), body.clone()]);
    }
    if spec
        .target
        .tls
        .as_ref()
        .is_some_and(|t| t.insecure_skip_verify)
    {
        args.push("--insecure".into());
    }
    args.push(url.to_string());
    args
}

/// Durations go to loadgen as whole milliseconds, a form every parser agrees on.
fn millis(d: crds::Duration) -> String {
    format!("{}ms", std::time::Duration::from(d).as_millis())
}

/// The worker pods of one sample of one step.
pub fn workers(
    ib: &IngressBenchmark,
    run: &str,
    slot: Slot,
    host_network: bool,
) -> Vec<WorkerPlan> {
    let name = ib.metadata.name.clone().unwrap_or_default();
    let spec = &ib.spec;
    let args = loadgen_args(spec, slot.measurement);
    let step = slot.wire();
    let mut base_labels = labels::run_labels(KIND, &name, run);
    base_labels.insert(labels::STEP.into(), step.to_string());
    base_labels.insert(labels::ROLE.into(), "client".into());
    (0..spec.workers.effective_replicas())
        .map(|i| WorkerPlan {
            name: labels::worker_name(&name, run, step, i),
            labels: base_labels.clone(),
            owner: labels::owner(ib),
            args: args.clone(),
            step,
            run: run.to_string(),
            node_name: spec.workers.node_names.get(i as usize).cloned(),
            node_selector: spec.workers.node_selector.clone(),
            affinity: spec.workers.affinity.clone(),
            spread: spec.workers.spread,
            cpu: spec.workers.cpu.clone(),
            memory: spec.workers.memory.clone(),
            host_network,
            active_deadline: step_deadline(spec, std::time::Duration::ZERO),
        })
        .collect()
}

/// Number of steps of a run: one per controller (or one) in each sweep step (or once).
pub fn step_count(spec: &IngressBenchmarkSpec) -> u32 {
    let sizes = spec.sweep.as_ref().map_or(1, |s| s.steps.len().max(1));
    u32::try_from(sizes.saturating_mul(per_round(spec))).unwrap_or(u32::MAX)
}

/// How far ahead of step `step`'s last registration its workers' common start is set. A step
/// that creates or changes routes keeps 1.5 s: a route scale's hostnames (`r<i>.<hostname>`)
/// are the same in every sample, and the earlier sample's routes, deleted as it was collected,
/// must be gone from the data plane before the next sample's load asks for them (with 0.5 s
/// Traefik still answered some: "answered before their route was created").
pub fn start_lead(spec: &IngressBenchmarkSpec, step: u32) -> Duration {
    let routes = spec.route_changes.is_some()
        || controller(spec, step)
            .and_then(|c| c.route.as_ref())
            .is_some_and(|r| r.count > 1);
    if routes {
        ROUTES_START_LEAD
    } else {
        crate::store::registry::START_LEAD
    }
}

/// [`start_lead`] of a step with a route scale or route changes.
pub const ROUTES_START_LEAD: Duration = Duration::from_millis(1500);

/// How long one step may run once its workers exist (before it is declared failed):
/// scheduling and start, warm-up, the measurement, the last requests' timeout, reporting.
pub fn step_deadline(spec: &IngressBenchmarkSpec, worker_start: Duration) -> Duration {
    let load = &spec.load;
    sum([
        worker_start,
        load.warmup.into(),
        load.duration.into(),
        load.timeout.into(),
        REPORTING,
    ])
}

/// The whole run's budget: every step, with a sweep's rollout and settle time per step.
pub fn budget(spec: &IngressBenchmarkSpec, t: Timeouts) -> Duration {
    let step = step_deadline(spec, t.worker_start);
    // A created route is waited for (up to the rollout timeout) and settles, once per step.
    let route = spec
        .controllers
        .iter()
        .filter_map(|c| c.route.as_ref())
        .map(|r| sum([t.rollout, r.settle.into()]))
        .max()
        .unwrap_or_default();
    let per_step = match &spec.sweep {
        Some(s) => sum([step, t.rollout, s.settle.into(), route]),
        None => sum([step, route]),
    };
    with_margin(per_step.saturating_mul(step_count(spec)))
}

/// The run as the queue sees it: its sweep target, its target's host and port, its nodes.
pub fn contender(ib: &IngressBenchmark) -> Contender {
    let ns = ib.namespace().unwrap_or_default();
    let mut claims = vec![];
    for t in sweep_targets(&ib.spec) {
        let target_ns = t.namespace.as_deref().unwrap_or(&ns);
        claims.push(format!("sweep target {target_ns}/{}", t.name));
    }
    for step in 0..step_count(&ib.spec) {
        let (url, _) = destination(&ib.spec, step);
        if let Ok(u) = url::Url::parse(url) {
            let claim = format!(
                "target {}:{}",
                u.host_str().unwrap_or(""),
                u.port_or_known_default().unwrap_or(0)
            );
            if !claims.contains(&claim) {
                claims.push(claim);
            }
        }
    }
    claims.extend(
        ib.spec
            .workers
            .node_names
            .iter()
            .map(|n| format!("node {n}")),
    );
    Contender::of(
        "IngressBenchmark",
        ib,
        ib.status.as_ref().map(|s| &s.run),
        claims,
    )
}

/// Worker names of a step, for the registry.
pub fn worker_names(
    ib: &IngressBenchmark,
    run: &str,
    step: u32,
) -> BTreeMap<String, protocol::worker::Role> {
    let name = ib.metadata.name.clone().unwrap_or_default();
    (0..ib.spec.workers.effective_replicas())
        .map(|i| {
            (
                labels::worker_name(&name, run, step, i),
                protocol::worker::Role::Client,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ib(yaml: &str) -> IngressBenchmark {
        serde_yaml::from_str(yaml).unwrap()
    }

    const T: Timeouts = Timeouts {
        worker_start: Duration::from_secs(120),
        rollout: Duration::from_secs(300),
    };

    fn ingress_spec(yaml: &str) -> IngressBenchmarkSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn a_step_with_a_route_scale_keeps_the_longer_start_lead() {
        let spec = ingress_spec(
            "{target: {url: 'http://gw/'}, controllers: [{name: plain, url: 'http://p/'},
              {name: one, route: {gateway: {name: bench}, hostname: o.example, backend: {name: web, port: 80}}},
              {name: eg, route: {gateway: {name: bench}, hostname: s.example, backend: {name: web, port: 80}, count: 3}}]}",
        );
        let leads: Vec<Duration> = (0..3).map(|step| start_lead(&spec, step)).collect();
        let short = crate::store::registry::START_LEAD;
        assert_eq!(leads, [short, short, ROUTES_START_LEAD]);
        assert!(short < ROUTES_START_LEAD);
    }

    #[test]
    fn a_sweep_beside_controllers_measures_every_controller_at_every_size() {
        let b = ib("{apiVersion: netbench.io/v1alpha1, kind: IngressBenchmark, metadata: {name: b, namespace: team-a},
            spec: {target: {url: 'http://t/'},
              controllers: [{name: a, url: 'http://a/', sweepTarget: {name: web-a}}, {name: b, url: 'http://b/', sweepTarget: {name: web-b, namespace: gw}}],
              sweep: {steps: [{cpu: '1'}, {cpu: '2'}, {cpu: '4'}]}}}");
        let spec = &b.spec;
        assert_eq!(step_count(spec), 6);
        let layout: Vec<(String, String, String)> = (0..6)
            .map(|step| {
                (
                    controller(spec, step).unwrap().name.clone(),
                    sweep_step(spec, step)
                        .unwrap()
                        .cpu
                        .as_ref()
                        .unwrap()
                        .0
                        .clone(),
                    sweep_target(spec, step).unwrap().name.clone(),
                )
            })
            .collect();
        let want = |c: &str, cpu: &str, t: &str| (c.to_string(), cpu.to_string(), t.to_string());
        assert_eq!(
            layout,
            [
                want("a", "1", "web-a"),
                want("b", "1", "web-b"),
                want("a", "2", "web-a"),
                want("b", "2", "web-b"),
                want("a", "4", "web-a"),
                want("b", "4", "web-b")
            ]
        );
        assert!(controller(spec, 6).is_none() && sweep_step(spec, 6).is_none());
        assert_eq!(
            judged_steps(spec),
            4..6,
            "every controller at the largest size"
        );
        assert_eq!(destination(spec, 3).0, "http://b/");
        // Both targets are claimed in the queue: no other run scales them meanwhile.
        let claims = contender(&b).claims;
        assert!(
            claims.contains(&"sweep target team-a/web-a".to_string()),
            "{claims:?}"
        );
        assert!(
            claims.contains(&"sweep target gw/web-b".to_string()),
            "{claims:?}"
        );
        // Without controllers, a step per size; without a sweep, a step per controller.
        let plain = ingress_spec("{target: {url: 'http://t/'}, sweep: {targetRef: {name: w}, steps: [{cpu: '1'}, {cpu: '2'}]}}");
        assert_eq!((step_count(&plain), judged_steps(&plain)), (2, 1..2));
        assert_eq!(sweep_target(&plain, 1).unwrap().name, "w");
        let side = ingress_spec(
            "{target: {url: 'http://t/'}, controllers: [{name: a}, {name: b}, {name: c}]}",
        );
        assert_eq!((step_count(&side), judged_steps(&side)), (3, 0..3));
        assert!(sweep_target(&side, 0).is_none());
    }

    #[test]
    fn budget_sums_steps_with_a_margin() {
        let spec = ingress_spec(
            "{target: {url: 'http://t/'}, load: {duration: 30s, warmup: 5s, timeout: 2s}}",
        );
        // 120 + 5 + 30 + 2 + 30 = 187s, margin max(46s, 300s).
        assert_eq!(budget(&spec, T), Duration::from_secs(187 + 300));
        let sweep = ingress_spec(
            "{target: {url: 'http://t/'}, load: {duration: 30s, warmup: 5s, timeout: 2s},
              sweep: {targetRef: {name: web}, settle: 10s, steps: [{cpu: '1'}, {cpu: '2'}, {cpu: '4'}, {cpu: '8'}]}}",
        );
        // 4 x (187 + 300 rollout + 10 settle) = 1988s, margin 497s.
        assert_eq!(budget(&sweep, T), Duration::from_secs(1988 + 497));
    }

    #[test]
    fn absurd_durations_saturate_instead_of_overflowing() {
        // What a duration parser may hand over for "99999999999999999h" (or a far-off value
        // the schema let through): the largest Duration.
        let huge = crds::Duration::from(Duration::MAX);
        let mut spec = ingress_spec(
            "{target: {url: 'http://t/'}, sweep: {targetRef: {name: web}, steps: [{cpu: '1'}, {cpu: '2'}]}}",
        );
        spec.load.duration = huge;
        spec.load.warmup = huge;
        spec.load.timeout = huge;
        if let Some(s) = spec.sweep.as_mut() {
            s.settle = huge;
        }
        let t = Timeouts {
            worker_start: Duration::MAX,
            rollout: Duration::MAX,
        };
        assert_eq!(budget(&spec, t), Duration::MAX);
        assert_eq!(step_deadline(&spec, Duration::MAX), Duration::MAX);
    }

    #[test]
    fn args_follow_the_spec() {
        let b = ib(r#"
apiVersion: netbench.io/v1alpha1
kind: IngressBenchmark
metadata: {name: b, uid: u-1}
spec:
  target: {url: "http://svc/", hostHeader: h.example, headers: [{name: X-A, value: "1"}]}
  load: {connections: 20, threads: 2, duration: 10s, warmup: 1s, keepAlive: false, rate: 1000}
  workers: {replicas: 2}
"#);
        let args = loadgen_args(&b.spec, 0);
        let joined = args.join(" ");
        assert!(joined.starts_with("http -c 20 -t 2 -d 10000ms --warmup 1000ms --timeout 2000ms --method GET --output json"), "{joined}");
        assert!(
            joined.contains("-R 500"),
            "rate split over 2 workers: {joined}"
        );
        assert!(joined.contains("--no-keepalive"));
        assert!(joined.contains("-H X-A: 1"));
        assert!(joined.contains("--host h.example"));
        assert_eq!(args.last().unwrap(), "http://svc/");
        let plans = workers(&b, "run-1", Slot::first(0), false);
        assert_eq!(plans.len(), 2);
        assert_eq!(plans[1].name, "b-run-1-s0-w1");
    }

    #[test]
    fn node_names_pin_one_worker_each() {
        let b = ib(r#"
apiVersion: netbench.io/v1alpha1
kind: IngressBenchmark
metadata: {name: b}
spec:
  target: {url: "http://svc/"}
  workers: {nodeNames: [n1, n2, n3]}
"#);
        let plans = workers(&b, "r", Slot::first(0), false);
        let nodes: Vec<_> = plans.iter().map(|p| p.node_name.clone().unwrap()).collect();
        assert_eq!(nodes, ["n1", "n2", "n3"]);
    }
}
