//! Pure planning: a spec and a step become the loadgen arguments and worker pod plans.

use std::collections::BTreeMap;

use crds::ingress::{IngressBenchmark, IngressBenchmarkSpec};

use crate::base::labels;
use crate::k8s::workers::WorkerPlan;

pub const KIND: &str = "IngressBenchmark";

/// `netbench-loadgen http ...` arguments for one worker. A rate is split evenly over workers.
pub fn loadgen_args(spec: &IngressBenchmarkSpec) -> Vec<String> {
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
    for h in &spec.target.headers {
        args.extend(["-H".into(), format!("{}: {}", h.name, h.value)]);
    }
    if let Some(host) = &spec.target.host_header {
        args.extend(["--host".into(), host.clone()]);
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
    args.push(spec.target.url.clone());
    args
}

/// Durations go to loadgen as whole milliseconds, a form every parser agrees on.
fn millis(d: crds::Duration) -> String {
    format!("{}ms", std::time::Duration::from(d).as_millis())
}

/// The worker pods of one step.
pub fn workers(ib: &IngressBenchmark, run: &str, step: u32, host_network: bool) -> Vec<WorkerPlan> {
    let name = ib.metadata.name.clone().unwrap_or_default();
    let spec = &ib.spec;
    let args = loadgen_args(spec);
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
        })
        .collect()
}

/// Number of steps of a run (1 without a sweep).
pub fn step_count(spec: &IngressBenchmarkSpec) -> u32 {
    spec.sweep.as_ref().map_or(1, |s| s.steps.len() as u32)
}

/// How long after the workers were created a step may take before it is declared failed:
/// scheduling and start, warm-up, the measurement, the request timeout, and reporting.
pub fn step_deadline(
    spec: &IngressBenchmarkSpec,
    start_timeout: std::time::Duration,
) -> std::time::Duration {
    crate::policy::deadline::ingress_step(spec, start_timeout)
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
        let args = loadgen_args(&b.spec);
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
        let plans = workers(&b, "run-1", 0, false);
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
        let plans = workers(&b, "r", 0, false);
        let nodes: Vec<_> = plans.iter().map(|p| p.node_name.clone().unwrap()).collect();
        assert_eq!(nodes, ["n1", "n2", "n3"]);
    }
}
