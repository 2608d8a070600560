//! An IngressBenchmark against the admin's caps: its workers, their connections, and every
//! step's time (see admin::caps::limits for the rules every kind shares).

use std::time::Duration;

use crds::ingress::IngressBenchmarkSpec;

use crate::admin::caps::limits::{at_most, count, run_duration, sampled};
use crate::admin::config::AdminCaps;

/// An IngressBenchmark: its workers, their connections, and every step's time.
pub fn check(spec: &IngressBenchmarkSpec, caps: &AdminCaps) -> Result<(), String> {
    let workers = match (spec.workers.replicas, spec.workers.node_names.len()) {
        (Some(n), _) => u64::from(n),
        (None, 0) => 1,
        (None, n) => count(n),
    };
    let field = if spec.workers.replicas.is_some() {
        "workers.replicas"
    } else {
        "the number of workers.nodeNames"
    };
    at_most(
        field,
        workers,
        caps.max_workers,
        "worker pods per benchmark",
        "caps.maxWorkers",
    )?;
    let connections = u64::from(spec.load.connections);
    at_most(
        "load.connections",
        connections,
        caps.max_connections_per_worker,
        "connections per worker",
        "caps.maxConnectionsPerWorker",
    )?;
    at_most(
        &format!("{workers} workers x load.connections {connections}"),
        workers.saturating_mul(connections),
        caps.max_total_connections,
        "connections per benchmark",
        "caps.maxTotalConnections",
    )?;
    let (total, how) = ingress_duration(spec);
    let (total, how) = sampled(
        total,
        how,
        &spec.repetition.samples(),
        super::plan::step_count(spec),
    );
    run_duration(total, &how, caps)
}

/// The time an IngressBenchmark's steps take (every controller in every sweep step), and how
/// it was summed.
fn ingress_duration(spec: &IngressBenchmarkSpec) -> (Duration, String) {
    let load = &spec.load;
    let warmup = Duration::from(load.warmup);
    let measure = Duration::from(load.duration);
    let mut per_step = warmup.saturating_add(measure);
    let mut how = format!("load.warmup {warmup:?} + load.duration {measure:?}");
    let mut times = String::new();
    if let Some(sweep) = &spec.sweep {
        let settle = Duration::from(sweep.settle);
        per_step = per_step.saturating_add(settle);
        how = format!("({how} + sweep.settle {settle:?})");
        times = format!("{} sweep step(s) x ", sweep.steps.len());
    }
    if !spec.controllers.is_empty() {
        if !how.starts_with('(') {
            how = format!("({how})");
        }
        times = format!("{times}{} controller(s) x ", spec.controllers.len());
    }
    let steps = super::plan::step_count(spec);
    (per_step.saturating_mul(steps), format!("{times}{how}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::config::Config;

    fn caps() -> AdminCaps {
        Config::for_tests().caps
    }

    fn ib(yaml: &str) -> IngressBenchmarkSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn the_shipped_examples_are_within_the_default_caps() {
        for file in [
            "ingress-simple.yaml",
            "ingress-cpu-sweep.yaml",
            "ingress-controllers-sweep.yaml",
        ] {
            let path = format!("{}/../deploy/examples/{file}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(path).unwrap();
            let ib: crds::IngressBenchmark = serde_yaml::from_str(&text).unwrap();
            assert_eq!(check(&ib.spec, &caps()), Ok(()), "{file}");
        }
    }

    #[test]
    fn workers_cap() {
        let mut c = caps();
        c.max_workers = 4;
        let err = check(
            &ib("{target: {url: 'http://x/'}, workers: {replicas: 5}}"),
            &c,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "workers.replicas is 5, above the cluster admin's cap of 4 worker pods per benchmark (Helm value caps.maxWorkers)"
        );
        let pinned = ib("{target: {url: 'http://x/'}, workers: {nodeNames: [a, b, c, d, e]}}");
        assert!(check(&pinned, &c)
            .unwrap_err()
            .starts_with("the number of workers.nodeNames is 5"));
        assert_eq!(
            check(
                &ib("{target: {url: 'http://x/'}, workers: {replicas: 4}}"),
                &c
            ),
            Ok(())
        );
    }

    #[test]
    fn connections_per_worker_cap() {
        let mut c = caps();
        c.max_connections_per_worker = 100;
        let err = check(
            &ib("{target: {url: 'http://x/'}, load: {connections: 101}}"),
            &c,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "load.connections is 101, above the cluster admin's cap of 100 connections per worker (Helm value caps.maxConnectionsPerWorker)"
        );
    }

    #[test]
    fn samples_count_against_the_run_time_cap() {
        let mut c = caps();
        c.max_run_seconds = 300;
        let spec = ib(
            "{target: {url: 'http://x/'}, load: {duration: 60s}, samples: {count: 20, pause: 10m}}",
        );
        let err = check(&spec, &c).unwrap_err();
        assert!(err.contains("x 20 samples (spec.samples)"), "{err}");
        let mut once = spec.clone();
        once.repetition.samples = None;
        assert!(check(&once, &c).is_ok());
    }

    #[test]
    fn total_connections_cap() {
        let mut c = caps();
        c.max_total_connections = 1000;
        let err = check(
            &ib("{target: {url: 'http://x/'}, workers: {replicas: 3}, load: {connections: 400}}"),
            &c,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "3 workers x load.connections 400 is 1200, above the cluster admin's cap of 1000 connections per benchmark (Helm value caps.maxTotalConnections)"
        );
        assert_eq!(check(&ib("{target: {url: 'http://x/'}, workers: {replicas: 2}, load: {connections: 500}}"), &c), Ok(()));
    }

    #[test]
    fn run_duration_cap_sums_steps_with_warmup_and_settle() {
        let mut c = caps();
        c.max_run_seconds = 300;
        let sweep = "{target: {url: 'http://x/'}, load: {duration: 60s, warmup: 10s}, sweep: {targetRef: {name: t}, settle: 10s, steps: [{cpu: '1'}, {cpu: '2'}, {cpu: '4'}, {cpu: '8'}]}}";
        let err = check(&ib(sweep), &c).unwrap_err();
        assert_eq!(
            err,
            "the run would take 320s (4 sweep step(s) x (load.warmup 10s + load.duration 60s + sweep.settle 10s)), above the cluster admin's cap of 300s per run (Helm value caps.maxRunSeconds)"
        );
        c.max_run_seconds = 320;
        assert_eq!(check(&ib(sweep), &c), Ok(()));
        c.max_run_seconds = 300;
        // Every controller in every sweep step.
        c.max_run_seconds = 200;
        let both = "{target: {url: 'http://x/'}, load: {duration: 20s, warmup: 5s}, controllers: [{name: a}, {name: b}, {name: c}], sweep: {settle: 10s, steps: [{cpu: '1'}, {cpu: '2'}]}}";
        let err = check(&ib(both), &c).unwrap_err();
        assert!(
            err.contains("210s (2 sweep step(s) x 3 controller(s) x (load.warmup 5s + load.duration 20s + sweep.settle 10s))"),
            "{err}"
        );
        let three = "{target: {url: 'http://x/'}, load: {duration: 60s, warmup: 10s}, controllers: [{name: a}, {name: b}, {name: c}]}";
        let err = check(&ib(three), &c).unwrap_err();
        assert!(
            err.contains("210s (3 controller(s) x (load.warmup 10s + load.duration 60s))"),
            "{err}"
        );
        c.max_run_seconds = 300;
        let single = ib("{target: {url: 'http://x/'}, load: {duration: 5m, warmup: 1s}}");
        assert!(check(&single, &c)
            .unwrap_err()
            .contains("301s (load.warmup 1s + load.duration 300s)"));
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use crate::admin::caps::limits::strategies::{any_caps, any_duration, cap_nanos, nanos};
    use proptest::prelude::*;

    fn any_ingress() -> impl Strategy<Value = IngressBenchmarkSpec> {
        (
            proptest::option::of(any::<u32>()),
            0usize..80,
            any::<u32>(),
            (any_duration(), any_duration(), any_duration()),
            (proptest::option::of(0usize..40), 0usize..=8),
        )
            .prop_map(
                |(
                    replicas,
                    nodes,
                    connections,
                    (warmup, duration, settle),
                    (steps, controllers),
                )| {
                    let mut s: IngressBenchmarkSpec =
                        serde_yaml::from_str("{target: {url: 'http://x/'}}").unwrap();
                    s.workers.replicas = replicas;
                    s.workers.node_names = (0..nodes).map(|i| format!("n{i}")).collect();
                    s.load.connections = connections;
                    s.load.warmup = warmup;
                    s.load.duration = duration;
                    s.sweep = steps.map(|n| {
                        let mut sweep: crds::ingress::SweepSpec =
                            serde_yaml::from_str("{targetRef: {name: t}, steps: []}").unwrap();
                        sweep.settle = settle;
                        sweep.steps = vec![serde_yaml::from_str("{replicas: 1}").unwrap(); n];
                        sweep
                    });
                    s.controllers = (0..controllers)
                        .map(|i| serde_yaml::from_str(&format!("{{name: c{i}}}")).unwrap())
                        .collect();
                    s
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Never panics, and Ok means every cap holds when recomputed without saturation.
        #[test]
        fn ingress_caps_hold_when_admitted(spec in any_ingress(), caps in any_caps()) {
            if check(&spec, &caps).is_ok() {
                let w = u128::from(spec.workers.effective_replicas());
                let conns = u128::from(spec.load.connections);
                prop_assert!(w <= u128::from(caps.max_workers));
                prop_assert!(conns <= u128::from(caps.max_connections_per_worker));
                prop_assert!(w * conns <= u128::from(caps.max_total_connections));
                let per_step = nanos(spec.load.warmup) + nanos(spec.load.duration);
                let controllers = u128::try_from(spec.controllers.len().max(1)).unwrap();
                let total = controllers * match &spec.sweep {
                    None => per_step,
                    Some(s) => (per_step + nanos(s.settle)) * u128::try_from(s.steps.len()).unwrap(),
                };
                prop_assert!(total <= cap_nanos(&caps));
            }
        }
    }
}
