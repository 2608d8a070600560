//! An EgressBenchmark against the admin's caps: every run's pods and streams (a swept case's
//! runs included; they run one after another), and the sum of their durations (see
//! admin::caps::limits for the rules every kind shares).

use std::time::Duration;

use crds::egress::{Direction, EgressBenchmarkSpec, EgressCase};

use super::topology;
use crate::admin::caps::limits::{at_most, run_duration, sampled};
use crate::admin::config::AdminCaps;

/// Worker pods a case runs at once: per pair the client, and a server pod unless the server is
/// external (a matrix's waves included: their pods exist together).
fn case_workers(case: &EgressCase) -> u64 {
    let per_pair = if case.server.address.is_some() { 1 } else { 2 };
    topology::count(case).saturating_mul(per_pair)
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

fn len(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// An EgressBenchmark: every run's pods and streams (a swept case's runs included; they run one
/// after another), and the sum of their durations.
pub fn check(spec: &EgressBenchmarkSpec, caps: &AdminCaps) -> Result<(), String> {
    let measured = spec.measured();
    for m in &measured {
        let (case, name) = (&m.spec, &m.name);
        at_most(
            &format!("case {name}: its worker pods (a client and a server per pair)"),
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
        let pairs = topology::count(case);
        let all = format!(
            "case {name}: the connections of its {pairs} client(s) (streams {} each)",
            case.streams
        );
        at_most(
            &all,
            connections.saturating_mul(pairs),
            caps.max_total_connections,
            "connections per benchmark",
            "caps.maxTotalConnections",
        )?;
    }
    // A matrix in waves takes a wave length (duration, answers in flight, the gap) per wave
    // before the last.
    let total = measured
        .iter()
        .map(|m| super::plan::measuring(&m.spec))
        .fold(Duration::ZERO, Duration::saturating_add);
    let waves: u64 = measured
        .iter()
        .map(|m| u64::from(topology::waves(&m.spec)))
        .sum();
    let how = if waves > len(measured.len()) {
        format!("the sum of {waves} case durations, one per wave of a matrix")
    } else {
        format!("the sum of {} case durations", measured.len())
    };
    let runs = u32::try_from(measured.len()).unwrap_or(u32::MAX);
    let (total, how) = sampled(total, how, &spec.repetition.samples(), runs);
    run_duration(total, &how, caps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::config::Config;

    fn caps() -> AdminCaps {
        Config::for_tests().caps
    }

    fn eb(yaml: &str) -> EgressBenchmarkSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn the_shipped_examples_are_within_the_default_caps() {
        for file in ["egress-pod-to-pod.yaml", "egress-vxlan-offload.yaml"] {
            let path = format!("{}/../deploy/examples/{file}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(path).unwrap();
            let eb: crds::EgressBenchmark = serde_yaml::from_str(&text).unwrap();
            assert_eq!(check(&eb.spec, &caps()), Ok(()), "{file}");
        }
    }

    #[test]
    fn workers_cap() {
        let mut c = caps();
        // An in-cluster server is a second pod; an external one is not.
        c.max_workers = 1;
        let pod_server = eb("{cases: [{name: p2p, client: {}, server: {}}]}");
        let err = check(&pod_server, &c).unwrap_err();
        assert!(err.starts_with("case p2p: its worker pods (a client and a server per pair) is 2, above the cluster admin's cap of 1"), "{err}");
        assert_eq!(
            check(
                &eb("{cases: [{name: out, client: {}, server: {address: 198.18.20.2}}]}"),
                &c
            ),
            Ok(())
        );
    }

    #[test]
    fn a_topology_counts_every_pair_before_any_pod_exists() {
        let mut c = caps();
        c.max_workers = 64;
        let names: Vec<String> = (0..9).map(|i| format!("n{i}")).collect();
        // 9 nodes: 72 ordered pairs, 144 pods (in waves of 4, but created together).
        let matrix = eb(&format!(
            "{{cases: [{{name: m, client: {{}}, server: {{}}, topology: {{matrix: {{concurrency: 4}}, clientNodes: {{names: [{}]}}}}}}]}}",
            names.join(", ")
        ));
        let err = check(&matrix, &c).unwrap_err();
        assert!(err.starts_with("case m: its worker pods (a client and a server per pair) is 144, above the cluster admin's cap of 64"), "{err}");
        let pairs =
            eb("{cases: [{name: p, streams: 8, client: {}, server: {}, topology: {pairs: 32}}]}");
        assert_eq!(check(&pairs, &c), Ok(()));
        let waves = eb("{cases: [{name: m, duration: 1h, client: {}, server: {}, topology: {matrix: {concurrency: 1}, clientNodes: {names: [a, b, c]}}}]}");
        let err = check(&waves, &c).unwrap_err();
        assert!(
            err.contains("21610s (the sum of 6 case durations, one per wave of a matrix)"),
            "6 pairs one after another measure 6 case durations: {err}"
        );
        c.max_total_connections = 100;
        let err = check(&pairs, &c).unwrap_err();
        assert!(
            err.starts_with("case p: the connections of its 32 client(s) (streams 8 each) is 256"),
            "{err}"
        );
    }

    #[test]
    fn connections_per_worker_cap() {
        let mut c = caps();
        c.max_connections_per_worker = 100;
        // Both directions open the streams twice.
        let both =
            eb("{cases: [{name: bidir, client: {}, server: {}, streams: 60, direction: Both}]}");
        let err = check(&both, &c).unwrap_err();
        assert!(err.starts_with("case bidir: the client's connections (streams 60) is 120, above the cluster admin's cap of 100 connections per worker"), "{err}");
        let send = eb("{cases: [{name: send, client: {}, server: {}, streams: 60}]}");
        assert_eq!(check(&send, &c), Ok(()));
    }

    #[test]
    fn run_duration_cap_sums_case_durations() {
        let mut c = caps();
        c.max_run_seconds = 300;
        let cases = eb("{cases: [{name: a, client: {}, server: {}, duration: 200s}, {name: b, client: {}, server: {}, duration: 101s}]}");
        let err = check(&cases, &c).unwrap_err();
        assert!(
            err.starts_with("the run would take 301s (the sum of 2 case durations)"),
            "{err}"
        );
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use crate::admin::caps::limits::strategies::{any_caps, any_duration, cap_nanos, nanos};
    use crds::egress::EgressCase;
    use proptest::prelude::*;

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
        fn egress_caps_hold_when_admitted(
            cases in proptest::collection::vec(any_case(), 1..20),
            caps in any_caps(),
        ) {
            let mut spec: EgressBenchmarkSpec =
                serde_yaml::from_str("{cases: [{name: c, client: {}, server: {}}]}").unwrap();
            spec.cases = cases;
            if check(&spec, &caps).is_ok() {
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
