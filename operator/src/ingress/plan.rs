//! Pure planning: a spec and a step become the loadgen arguments and worker pod plans, the
//! step's deadline and the run's budget, and what the run claims in the queue.

use std::collections::BTreeMap;
use std::time::Duration;

use crds::ingress::{Controller, IngressBenchmark, IngressBenchmarkSpec};
use kube::ResourceExt;

use crate::base::labels;
use crate::k8s::workers::WorkerPlan;
use crate::policy::deadline::{sum, with_margin, Timeouts, REPORTING};
use crate::policy::queue::Contender;
use crate::policy::samples::Slot;

pub const KIND: &str = "IngressBenchmark";

/// The controller measured in `step` (spec.controllers, one per step), None without
/// controllers.
pub fn controller(spec: &IngressBenchmarkSpec, step: u32) -> Option<&Controller> {
    spec.controllers.get(usize::try_from(step).ok()?)
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

/// Number of steps of a run: one per sweep step, or per controller (a sweep and controllers
/// are never combined), else 1.
pub fn step_count(spec: &IngressBenchmarkSpec) -> u32 {
    let steps = match &spec.sweep {
        Some(s) => s.steps.len(),
        None => spec.controllers.len(),
    };
    u32::try_from(steps.max(1)).unwrap_or(u32::MAX)
}

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
        Some(s) => sum([step, t.rollout, s.settle.into()]),
        None => sum([step, route]),
    };
    with_margin(per_step.saturating_mul(step_count(spec)))
}

/// The run as the queue sees it: its sweep target, its target's host and port, its nodes.
pub fn contender(ib: &IngressBenchmark) -> Contender {
    let ns = ib.namespace().unwrap_or_default();
    let mut claims = vec![];
    if let Some(s) = &ib.spec.sweep {
        let target_ns = s.target_ref.namespace.as_deref().unwrap_or(&ns);
        claims.push(format!("sweep target {target_ns}/{}", s.target_ref.name));
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
