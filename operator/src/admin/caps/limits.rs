//! Sizes and durations against the admin's caps. Pure: a spec and the caps become Ok or the
//! refusal's message, naming the field, the value and the cap. Every count and sum saturates,
//! so an absurd spec (from an object the schema did not check) is refused, never a panic.

use std::time::Duration;

use crds::egress::{Direction, EgressBenchmarkSpec, EgressCase};
use crds::ingress::IngressBenchmarkSpec;

use crate::admin::config::AdminCaps;

/// `value` of `what` must not exceed `cap` (Helm value `helm`).
fn at_most(what: &str, value: u64, cap: u64, unit: &str, helm: &str) -> Result<(), String> {
    if value <= cap {
        return Ok(());
    }
    Err(format!(
        "{what} is {value}, above the cluster admin's cap of {cap} {unit} (Helm value {helm})"
    ))
}

fn run_duration(total: Duration, how: &str, caps: &AdminCaps) -> Result<(), String> {
    let cap = caps.max_run_duration();
    if total <= cap {
        return Ok(());
    }
    Err(format!(
        "the run would take {total:?} ({how}), above the cluster admin's cap of {cap:?} per run (Helm value caps.maxRunSeconds)"
    ))
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// An IngressBenchmark: its workers, their connections, and every step's time.
pub fn ingress(spec: &IngressBenchmarkSpec, caps: &AdminCaps) -> Result<(), String> {
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
    let (total, how) = sampled(total, how, &spec.repetition.samples());
    run_duration(total, &how, caps)
}

/// A run's time with every step or case sampled `spec.samples` times, pauses included.
fn sampled(once: Duration, how: String, plan: &crds::history::Samples) -> (Duration, String) {
    if plan.max() <= 1 {
        return (once, how);
    }
    let total = crate::policy::samples::budget(once, plan);
    let pause = Duration::from(plan.pause).as_secs();
    let how = format!(
        "{how}, x {} samples (spec.samples) with {pause}s pauses",
        plan.max()
    );
    (total, how)
}

/// The time an IngressBenchmark's steps take, and how it was summed.
fn ingress_duration(spec: &IngressBenchmarkSpec) -> (Duration, String) {
    let load = &spec.load;
    let warmup = Duration::from(load.warmup);
    let measure = Duration::from(load.duration);
    let per_step = warmup.saturating_add(measure);
    let Some(sweep) = &spec.sweep else {
        return (
            per_step,
            format!("load.warmup {warmup:?} + load.duration {measure:?}"),
        );
    };
    let settle = Duration::from(sweep.settle);
    let steps = u32::try_from(sweep.steps.len()).unwrap_or(u32::MAX);
    (
        per_step.saturating_add(settle).saturating_mul(steps),
        format!(
            "{steps} sweep step(s) x (load.warmup {warmup:?} + load.duration {measure:?} + sweep.settle {settle:?})"
        ),
    )
}

/// Worker pods a case runs at once: the client, and a server pod unless the server is external.
fn case_workers(case: &EgressCase) -> u64 {
    if case.server.address.is_some() {
        1
    } else {
        2
    }
}

/// Connections (or UDP sockets) a case's client holds open at once: its streams, each way for
/// Both, and the latency probe's.
fn case_connections(case: &EgressCase) -> u64 {
    let streams = u64::from(case.streams);
    let flows = match case.direction {
        Direction::Both => streams.saturating_mul(2),
        Direction::Send | Direction::Receive => streams,
    };
    flows.saturating_add(u64::from(case.latency_probe.is_some()))
}

/// An EgressBenchmark: every run's pods and streams (a swept case's runs included; they run one
/// after another), and the sum of their durations.
pub fn egress(spec: &EgressBenchmarkSpec, caps: &AdminCaps) -> Result<(), String> {
    let measured = spec.measured();
    for m in &measured {
        let (case, name) = (&m.spec, &m.name);
        at_most(
            &format!("case {name}: its worker pods (client and server)"),
            case_workers(case),
            caps.max_workers,
            "worker pods per benchmark",
            "caps.maxWorkers",
        )?;
        let connections = case_connections(case);
        let what = format!(
            "case {name}: the client's connections (streams {})",
            case.streams
        );
        at_most(
            &what,
            connections,
            caps.max_connections_per_worker,
            "connections per worker",
            "caps.maxConnectionsPerWorker",
        )?;
        at_most(
            &what,
            connections,
            caps.max_total_connections,
            "connections per benchmark",
            "caps.maxTotalConnections",
        )?;
    }
    let total = measured
        .iter()
        .map(|m| Duration::from(m.spec.duration))
        .fold(Duration::ZERO, Duration::saturating_add);
    let how = format!("the sum of {} case durations", measured.len());
    let (total, how) = sampled(total, how, &spec.repetition.samples());
    run_duration(total, &how, caps)
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

    fn eb(yaml: &str) -> EgressBenchmarkSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn example<T: serde::de::DeserializeOwned>(file: &str) -> T {
        let path = format!("{}/../deploy/examples/{file}", env!("CARGO_MANIFEST_DIR"));
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_shipped_examples_are_within_the_default_caps() {
        for file in ["ingress-simple.yaml", "ingress-cpu-sweep.yaml"] {
            let ib: crds::IngressBenchmark = example(file);
            assert_eq!(ingress(&ib.spec, &caps()), Ok(()), "{file}");
        }
        for file in ["egress-pod-to-pod.yaml", "egress-vxlan-offload.yaml"] {
            let eb: crds::EgressBenchmark = example(file);
            assert_eq!(egress(&eb.spec, &caps()), Ok(()), "{file}");
        }
    }

    #[test]
    fn workers_cap() {
        let mut c = caps();
        c.max_workers = 4;
        let err = ingress(
            &ib("{target: {url: 'http://x/'}, workers: {replicas: 5}}"),
            &c,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "workers.replicas is 5, above the cluster admin's cap of 4 worker pods per benchmark (Helm value caps.maxWorkers)"
        );
        let pinned = ib("{target: {url: 'http://x/'}, workers: {nodeNames: [a, b, c, d, e]}}");
        assert!(ingress(&pinned, &c)
            .unwrap_err()
            .starts_with("the number of workers.nodeNames is 5"));
        assert_eq!(
            ingress(
                &ib("{target: {url: 'http://x/'}, workers: {replicas: 4}}"),
                &c
            ),
            Ok(())
        );
        // An in-cluster server is a second pod; an external one is not.
        c.max_workers = 1;
        let pod_server = eb("{cases: [{name: p2p, client: {}, server: {}}]}");
        let err = egress(&pod_server, &c).unwrap_err();
        assert!(err.starts_with("case p2p: its worker pods (client and server) is 2, above the cluster admin's cap of 1"), "{err}");
        assert_eq!(
            egress(
                &eb("{cases: [{name: out, client: {}, server: {address: 198.18.20.2}}]}"),
                &c
            ),
            Ok(())
        );
    }

    #[test]
    fn connections_per_worker_cap() {
        let mut c = caps();
        c.max_connections_per_worker = 100;
        let err = ingress(
            &ib("{target: {url: 'http://x/'}, load: {connections: 101}}"),
            &c,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "load.connections is 101, above the cluster admin's cap of 100 connections per worker (Helm value caps.maxConnectionsPerWorker)"
        );
        // Both directions open the streams twice.
        let both =
            eb("{cases: [{name: bidir, client: {}, server: {}, streams: 60, direction: Both}]}");
        let err = egress(&both, &c).unwrap_err();
        assert!(err.starts_with("case bidir: the client's connections (streams 60) is 120, above the cluster admin's cap of 100 connections per worker"), "{err}");
        let send = eb("{cases: [{name: send, client: {}, server: {}, streams: 60}]}");
        assert_eq!(egress(&send, &c), Ok(()));
    }

    #[test]
    fn samples_count_against_the_run_time_cap() {
        let mut c = caps();
        c.max_run_seconds = 300;
        let spec = ib(
            "{target: {url: 'http://x/'}, load: {duration: 60s}, samples: {count: 20, pause: 10m}}",
        );
        let err = ingress(&spec, &c).unwrap_err();
        assert!(err.contains("x 20 samples (spec.samples)"), "{err}");
        let mut once = spec.clone();
        once.repetition.samples = None;
        assert!(ingress(&once, &c).is_ok());
    }

    #[test]
    fn total_connections_cap() {
        let mut c = caps();
        c.max_total_connections = 1000;
        let err = ingress(
            &ib("{target: {url: 'http://x/'}, workers: {replicas: 3}, load: {connections: 400}}"),
            &c,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "3 workers x load.connections 400 is 1200, above the cluster admin's cap of 1000 connections per benchmark (Helm value caps.maxTotalConnections)"
        );
        assert_eq!(ingress(&ib("{target: {url: 'http://x/'}, workers: {replicas: 2}, load: {connections: 500}}"), &c), Ok(()));
    }

    #[test]
    fn run_duration_cap_sums_steps_with_warmup_and_settle() {
        let mut c = caps();
        c.max_run_seconds = 300;
        let sweep = "{target: {url: 'http://x/'}, load: {duration: 60s, warmup: 10s}, sweep: {targetRef: {name: t}, settle: 10s, steps: [{cpu: '1'}, {cpu: '2'}, {cpu: '4'}, {cpu: '8'}]}}";
        let err = ingress(&ib(sweep), &c).unwrap_err();
        assert_eq!(
            err,
            "the run would take 320s (4 sweep step(s) x (load.warmup 10s + load.duration 60s + sweep.settle 10s)), above the cluster admin's cap of 300s per run (Helm value caps.maxRunSeconds)"
        );
        c.max_run_seconds = 320;
        assert_eq!(ingress(&ib(sweep), &c), Ok(()));
        c.max_run_seconds = 300;
        let single = ib("{target: {url: 'http://x/'}, load: {duration: 5m, warmup: 1s}}");
        assert!(ingress(&single, &c)
            .unwrap_err()
            .contains("301s (load.warmup 1s + load.duration 300s)"));
        let cases = eb("{cases: [{name: a, client: {}, server: {}, duration: 200s}, {name: b, client: {}, server: {}, duration: 101s}]}");
        let err = egress(&cases, &c).unwrap_err();
        assert!(
            err.starts_with("the run would take 301s (the sum of 2 case durations)"),
            "{err}"
        );
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use crate::admin::config::Config;
    use crds::egress::EgressCase;
    use proptest::prelude::*;

    fn any_duration() -> impl Strategy<Value = crds::Duration> {
        prop_oneof![
            (0u64..100_000, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
            (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        ]
        .prop_map(crds::Duration::from)
    }

    fn any_caps() -> impl Strategy<Value = AdminCaps> {
        let small_or_any = || prop_oneof![1u64..100_000, 1u64..=u64::MAX];
        (
            small_or_any(),
            small_or_any(),
            small_or_any(),
            small_or_any(),
        )
            .prop_map(|(workers, per_worker, total, seconds)| {
                let mut c = Config::for_tests().caps;
                c.max_workers = workers;
                c.max_connections_per_worker = per_worker;
                c.max_total_connections = total;
                c.max_run_seconds = seconds;
                c
            })
    }

    fn nanos(d: crds::Duration) -> u128 {
        Duration::from(d).as_nanos()
    }

    fn cap_nanos(c: &AdminCaps) -> u128 {
        c.max_run_duration().as_nanos()
    }

    fn any_ingress() -> impl Strategy<Value = IngressBenchmarkSpec> {
        (
            proptest::option::of(any::<u32>()),
            0usize..80,
            any::<u32>(),
            (any_duration(), any_duration(), any_duration()),
            proptest::option::of(0usize..40),
        )
            .prop_map(
                |(replicas, nodes, connections, (warmup, duration, settle), steps)| {
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
                    s
                },
            )
    }

    fn any_case() -> impl Strategy<Value = EgressCase> {
        (any::<u32>(), 0u8..3, any::<bool>(), any_duration()).prop_map(
            |(streams, dir, external, duration)| {
                let mut c: EgressCase =
                    serde_yaml::from_str("{name: c, client: {}, server: {}}").unwrap();
                c.streams = streams;
                c.direction =
                    [Direction::Send, Direction::Receive, Direction::Both][usize::from(dir)];
                c.server.address = external.then(|| "198.18.20.2".to_string());
                c.duration = duration;
                c
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Never panics, and Ok means every cap holds when recomputed without saturation.
        #[test]
        fn ingress_caps_hold_when_admitted(spec in any_ingress(), caps in any_caps()) {
            if ingress(&spec, &caps).is_ok() {
                let w = u128::from(spec.workers.effective_replicas());
                let conns = u128::from(spec.load.connections);
                prop_assert!(w <= u128::from(caps.max_workers));
                prop_assert!(conns <= u128::from(caps.max_connections_per_worker));
                prop_assert!(w * conns <= u128::from(caps.max_total_connections));
                let per_step = nanos(spec.load.warmup) + nanos(spec.load.duration);
                let total = match &spec.sweep {
                    None => per_step,
                    Some(s) => (per_step + nanos(s.settle)) * u128::try_from(s.steps.len()).unwrap(),
                };
                prop_assert!(total <= cap_nanos(&caps));
            }
        }

        #[test]
        fn egress_caps_hold_when_admitted(
            cases in proptest::collection::vec(any_case(), 1..20),
            caps in any_caps(),
        ) {
            let mut spec: EgressBenchmarkSpec =
                serde_yaml::from_str("{cases: [{name: c, client: {}, server: {}}]}").unwrap();
            spec.cases = cases;
            if egress(&spec, &caps).is_ok() {
                let mut total = 0u128;
                for c in &spec.cases {
                    let ways = if c.direction == Direction::Both { 2 } else { 1 };
                    let conns = u128::from(c.streams) * ways;
                    prop_assert!(conns <= u128::from(caps.max_connections_per_worker));
                    prop_assert!(conns <= u128::from(caps.max_total_connections));
                    prop_assert!(case_workers(c) <= caps.max_workers);
                    total += nanos(c.duration);
                }
                prop_assert!(total <= cap_nanos(&caps));
            }
        }
    }
}
