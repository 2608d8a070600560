//! Pure planning: a case becomes its server and client worker plans and their loadgen
//! arguments. The run steps through the cases with their sweeps expanded
//! (`EgressBenchmarkSpec::measured`); that list's index = the run's step (labels, registry,
//! report ConfigMaps), and "case" below means one entry of it. The loadgen arguments of a
//! case's workers are `args.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use protocol::worker::Role;

use crds::cases::Measured;
use crds::egress::{EgressBenchmark, EgressBenchmarkSpec, EgressCase};

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, PodAffinityTerm, PodAntiAffinity,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::topology::{self, PairPlan, Place};
use crate::base::labels;
use crate::k8s::workers::{name_term, WorkerPlan};
use crate::policy::deadline::{sum, with_margin, Timeouts, REPORTING};
use crate::policy::queue::{self, Contender};
use crate::policy::samples::Slot;
use crate::store::registry::Pairing;

mod args;
pub use args::{client_args, server_args, server_listen, server_port};

pub const KIND: &str = "EgressBenchmark";
/// Index of pair i's client and server among a case's workers (worker name suffix -wN).
fn client_index(pair: u32) -> u32 {
    pair.saturating_mul(2)
}
fn server_index(pair: u32) -> u32 {
    pair.saturating_mul(2).saturating_add(1)
}

/// The operator runs the server unless the case names an external `address`.
pub fn server_in_cluster(case: &EgressCase) -> bool {
    case.server.address.is_none()
}

/// Pair `pair`'s client in step `case` (pair 0 without a topology).
pub fn client_name(eb: &EgressBenchmark, run: &str, case: u32, pair: u32) -> String {
    let name = eb.metadata.name.clone().unwrap_or_default();
    labels::worker_name(&name, run, case, client_index(pair))
}

/// Pair `pair`'s server in step `case`.
pub fn server_name(eb: &EgressBenchmark, run: &str, case: u32, pair: u32) -> String {
    let name = eb.metadata.name.clone().unwrap_or_default();
    labels::worker_name(&name, run, case, server_index(pair))
}

/// The pairs of the case at `slot` (none when the case is unknown or cannot be placed: the
/// run was refused before any pod for it, see `validate`).
pub fn pairs_at(eb: &EgressBenchmark, slot: Slot) -> Vec<PairPlan> {
    case_at(eb, slot.measurement)
        .and_then(|m| topology::pairs(&m.spec).ok())
        .unwrap_or_default()
}

/// Workers of a case with their roles, for the registry (each server registers its address
/// and its pair's client gets it at the barrier).
pub fn worker_roles(eb: &EgressBenchmark, run: &str, slot: Slot) -> BTreeMap<String, Role> {
    let wire = slot.wire();
    let external = case_at(eb, slot.measurement).is_some_and(|m| !server_in_cluster(&m.spec));
    let mut roles = BTreeMap::new();
    for p in pairs_at(eb, slot) {
        roles.insert(client_name(eb, run, wire, p.index), Role::Client);
        if !external {
            roles.insert(server_name(eb, run, wire, p.index), Role::Server);
        }
    }
    roles
}

/// Who each client connects to (its pair's server) and when each worker starts after the
/// barrier opens (its pair's wave).
pub fn pairing(eb: &EgressBenchmark, run: &str, slot: Slot) -> Pairing {
    let wire = slot.wire();
    let Some(measured) = case_at(eb, slot.measurement) else {
        return Pairing::default();
    };
    let wave = wave_length(&measured.spec);
    let service = measured
        .spec
        .server
        .service
        .then(|| service_name(eb, run, slot));
    let mut pairing = Pairing::default();
    for p in pairs_at(eb, slot) {
        let (client, server) = (
            client_name(eb, run, wire, p.index),
            server_name(eb, run, wire, p.index),
        );
        let offset = wave.saturating_mul(p.wave);
        let ms = u64::try_from(offset.as_millis()).unwrap_or(u64::MAX);
        if ms > 0 {
            pairing.offsets_ms.insert(client.clone(), ms);
            pairing.offsets_ms.insert(server.clone(), ms);
        }
        if server_in_cluster(&measured.spec) {
            let listen = server_listen(&measured.spec, service.as_deref(), p.index);
            pairing.listen.insert(server.clone(), listen);
            pairing.peers.insert(client, server);
        }
    }
    pairing
}

/// One wave of a matrix: the measurement, the answers still in flight, and a gap.
fn wave_length(case: &EgressCase) -> Duration {
    sum([case.duration.into(), answers(case), topology::WAVE_GAP])
}

/// The Service of a case's server on the Service path: a DNS label that starts with a letter
/// (a Service name must), unique per run and slot like the server pod it selects.
pub fn service_name(eb: &EgressBenchmark, run: &str, slot: Slot) -> String {
    labels::service_name(&server_name(eb, run, slot.wire(), 0))
}

/// The labels of a sample's worker pod in `role` ("client" or "server").
fn pod_labels(eb: &EgressBenchmark, run: &str, slot: Slot, role: &str) -> BTreeMap<String, String> {
    let name = eb.metadata.name.clone().unwrap_or_default();
    let mut labels = labels::run_labels(KIND, &name, run);
    labels.insert(labels::STEP.into(), slot.wire().to_string());
    labels.insert(labels::ROLE.into(), role.into());
    labels
}

/// The labels of a sample's server pod (what its Service selects).
pub fn server_labels(eb: &EgressBenchmark, run: &str, slot: Slot) -> BTreeMap<String, String> {
    pod_labels(eb, run, slot, "server")
}

/// The pods of one sample of a case: per pair a client, and a server unless it is external.
pub fn workers(eb: &EgressBenchmark, run: &str, slot: Slot) -> Vec<WorkerPlan> {
    let Some(measured) = case_at(eb, slot.measurement) else {
        return vec![];
    };
    let case = &measured.spec;
    let service = case.server.service.then(|| service_name(eb, run, slot));
    let index = slot.wire();
    let resources = eb.spec.workers.as_ref();
    // Once, not per worker: a matrix's waves are counted from all of its pairs.
    let active_deadline = case_deadline(case, std::time::Duration::ZERO);
    let plan = |worker: String, role: &str, pair: u32, args, place: &Place, host_network| {
        let mut labels = pod_labels(eb, run, slot, role);
        labels.insert(labels::PAIR.into(), pair.to_string());
        WorkerPlan {
            name: worker,
            labels,
            owner: labels::owner(eb),
            args,
            step: index,
            run: run.to_string(),
            node_name: place.node.clone(),
            node_selector: place.selector.clone(),
            affinity: placement_affinity(place, run, index, pair),
            spread: false,
            cpu: resources.and_then(|r| r.cpu.clone()),
            memory: resources.and_then(|r| r.memory.clone()),
            host_network,
            active_deadline,
        }
    };
    let mut plans = vec![];
    for p in pairs_at(eb, slot) {
        plans.push(plan(
            client_name(eb, run, index, p.index),
            "client",
            p.index,
            client_args(case),
            &p.client,
            case.client.host_network,
        ));
        if server_in_cluster(case) {
            plans.push(plan(
                server_name(eb, run, index, p.index),
                "server",
                p.index,
                server_args(case, service.as_deref(), p.index),
                &p.server,
                case.server.host_network,
            ));
        }
    }
    plans
}

/// What the scheduler is told beyond a pinned node: never the node to avoid, and never the
/// node of the other worker of the pair.
fn placement_affinity(place: &Place, run: &str, step: u32, pair: u32) -> Option<Affinity> {
    let mut affinity = Affinity::default();
    if let Some(node) = &place.avoid {
        affinity.node_affinity = Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![name_term("NotIn", node)],
            }),
            ..Default::default()
        });
    }
    if place.apart_from_peer {
        let peer = LabelSelector {
            match_labels: Some(BTreeMap::from([
                (labels::RUN.to_string(), run.to_string()),
                (labels::STEP.to_string(), step.to_string()),
                (labels::PAIR.to_string(), pair.to_string()),
            ])),
            ..Default::default()
        };
        affinity.pod_anti_affinity = Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                label_selector: Some(peer),
                topology_key: "kubernetes.io/hostname".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
    }
    (affinity != Affinity::default()).then_some(affinity)
}

/// How long one case may run once its pods exist: scheduling and start, the measurement, the
/// answers still in flight, and reporting.
pub fn case_deadline(case: &EgressCase, worker_start: Duration) -> Duration {
    sum([worker_start, measuring(case), answers(case), REPORTING])
}

/// How long a case measures: its duration, and in a matrix in waves a wave length (the
/// duration, the answers in flight and the gap) for every wave before the last.
pub fn measuring(case: &EgressCase) -> Duration {
    let earlier = wave_length(case).saturating_mul(topology::waves(case).saturating_sub(1));
    earlier.saturating_add(case.duration.into())
}

/// Request/response tests wait for the answers still in flight at the end, up to their
/// timeout (udp-rr's, else the engine's 10 s for TCP).
fn answers(case: &EgressCase) -> Duration {
    match case.protocol {
        p if p.is_request_response() => case.timeout.map_or(RR_TCP_TIMEOUT, Duration::from),
        _ => Duration::ZERO,
    }
}

/// How long netbench-loadgen waits for a TCP request/response answer.
const RR_TCP_TIMEOUT: Duration = Duration::from_secs(10);

/// An offload Job's activeDeadlineSeconds (egress::offload), on top of its pod's start.
const OFFLOAD_JOB: Duration = Duration::from_secs(120);

/// The whole run's budget: every run of every case (a swept case runs once per value), with
/// an apply and a restore Job around each that names an offload profile, and one more restore
/// at the end.
pub fn budget(spec: &EgressBenchmarkSpec, t: Timeouts) -> Duration {
    let job = sum([t.worker_start, OFFLOAD_JOB]);
    let cases = spec.measured().into_iter().map(|m| {
        let offload = if m.spec.offload_profile.is_some() {
            job.saturating_mul(2)
        } else {
            Duration::ZERO
        };
        sum([case_deadline(&m.spec, t.worker_start), offload])
    });
    with_margin(sum(cases).saturating_add(job))
}

/// The run as the queue sees it: every case's external server and nodes, and the nodes of its
/// offload settings.
pub fn contender(eb: &EgressBenchmark) -> Contender {
    let mut claims = vec![];
    for case in &eb.spec.cases {
        if let Some(a) = &case.server.address {
            claims.push(format!("target {a}:{}", case.server.port));
        }
        for n in [&case.client.node_name, &case.server.node_name]
            .into_iter()
            .flatten()
            .chain(&topology::named_nodes(case))
        {
            claims.push(format!("node {n}"));
        }
        if topology::selects_nodes_at_start(case) {
            claims.push(queue::ANY_NODE.to_string());
        }
    }
    for p in eb.spec.offload.iter().flat_map(|o| &o.profiles) {
        for s in &p.settings {
            claims.extend(s.node_names.iter().map(|n| format!("node {n}")));
        }
    }
    claims.dedup();
    Contender::of(
        "EgressBenchmark",
        eb,
        eb.status.as_ref().map(|s| &s.run),
        claims,
    )
}

/// The baseline case's name: `baselineCase`, or the first case. A swept baseline case is
/// compared run by run (same message size and streams).
pub fn baseline(eb: &EgressBenchmark) -> &str {
    match (&eb.spec.baseline_case, eb.spec.cases.first()) {
        (Some(b), _) => b,
        (None, Some(first)) => &first.name,
        (None, None) => "",
    }
}

/// Runs of the benchmark (its cases with their sweeps expanded).
pub fn count(eb: &EgressBenchmark) -> u32 {
    u32::try_from(eb.spec.measured_count()).unwrap_or(u32::MAX)
}

/// The run at `index` (a case index read from status, so possibly out of range).
pub fn case_at(eb: &EgressBenchmark, index: u32) -> Option<Measured> {
    let index = usize::try_from(index).ok()?;
    if index >= eb.spec.measured_count() {
        return None;
    }
    eb.spec.measured().into_iter().nth(index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::registry::{Listen, ListenHost};

    const T: Timeouts = Timeouts {
        worker_start: Duration::from_secs(120),
        rollout: Duration::from_secs(300),
    };

    #[test]
    fn budget_counts_offload_jobs() {
        let spec: EgressBenchmarkSpec = serde_yaml::from_str(
            "{cases: [{name: a, client: {}, server: {}, duration: 10s},
                      {name: b, client: {}, server: {}, duration: 10s, offloadProfile: off}]}",
        )
        .unwrap();
        // Cases: 2 x (120 + 10 + 30) = 320; b's apply and restore 2 x 240; the last restore 240.
        let budget_s = 320 + 480 + 240;
        assert_eq!(budget(&spec, T), Duration::from_secs(budget_s + 300));
    }

    #[test]
    fn absurd_durations_saturate_instead_of_overflowing() {
        let huge = crds::Duration::from(Duration::MAX);
        let t = Timeouts {
            worker_start: Duration::MAX,
            rollout: Duration::MAX,
        };
        let mut eg: EgressBenchmarkSpec = serde_yaml::from_str(
            "{cases: [{name: a, client: {}, server: {}, offloadProfile: p}, {name: b, client: {}, server: {}}]}",
        )
        .unwrap();
        for c in &mut eg.cases {
            c.duration = huge;
        }
        assert_eq!(case_deadline(&eg.cases[0], t.worker_start), Duration::MAX);
        assert_eq!(budget(&eg, t), Duration::MAX);
    }

    pub fn eb(yaml: &str) -> EgressBenchmark {
        serde_yaml::from_str(yaml).unwrap()
    }

    /// Benchmark "e" with `cases` (YAML list items under `spec.cases`).
    fn with_cases(cases: &str) -> EgressBenchmark {
        let head = "apiVersion: netbench.io/v1alpha1\nkind: EgressBenchmark\nmetadata: {name: e, uid: u-1}";
        eb(&format!("{head}\nspec:\n  cases:{cases}"))
    }

    const SEED: &str = r#"
apiVersion: netbench.io/v1alpha1
kind: EgressBenchmark
metadata: {name: e, uid: u-1}
spec:
  workers: {cpu: "2"}
  cases:
    - name: vxlan
      client: {nodeName: a, hostNetwork: true, bindInterface: vx0}
      server: {nodeName: b, hostNetwork: true, bindInterface: vx0, port: 5301}
      streams: 2
      duration: 2500ms
      direction: Receive
    - name: target
      client: {nodeName: a}
      server: {address: 198.18.20.2}
"#;

    #[test]
    fn in_cluster_server_and_client() {
        let b = eb(SEED);
        let plans = workers(&b, "r1", Slot::first(0));
        assert_eq!(plans.len(), 2);
        let (client, server) = (&plans[0], &plans[1]);
        assert_eq!(client.name, "e-r1-s0-w0");
        assert_eq!(server.name, "e-r1-s0-w1");
        assert_eq!(
            client.args.join(" "),
            "tcp-client --protocol tcp-stream -t 2.5 -P 2 -l 131072 --direction receive --output json --bind-dev vx0"
        );
        assert_eq!(server.args.join(" "), "server -p 5301 --bind-dev vx0");
        assert!(client.host_network && server.host_network);
        assert_eq!(client.node_name.as_deref(), Some("a"));
        assert_eq!(server.node_name.as_deref(), Some("b"));
        assert_eq!(server.labels[labels::ROLE], "server");
        let cpu = Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
            "2".into(),
        ));
        assert_eq!(
            (&client.cpu, &server.cpu),
            (&cpu, &cpu),
            "Guaranteed QoS on both ends"
        );
        let roles = worker_roles(&b, "r1", Slot::first(0));
        assert_eq!(roles["e-r1-s0-w1"], Role::Server);
        assert_eq!(roles["e-r1-s0-w0"], Role::Client);
        // On the host network, bound to vx0 (an address the API server does not know).
        let listen = &pairing(&b, "r1", Slot::first(0)).listen;
        assert_eq!(
            listen["e-r1-s0-w1"],
            Listen {
                host: ListenHost::NodeInterface,
                port: 5301
            }
        );
        assert!(
            pairing(&b, "r1", Slot::first(1)).listen.is_empty(),
            "external"
        );
    }

    #[test]
    fn each_server_may_register_what_its_arguments_advertise() {
        let b = with_cases(
            r#"
    - {name: pod, client: {}, server: {port: 5301}}
    - {name: svc, client: {}, server: {service: true}}
    - {name: bound, client: {}, server: {bindAddress: "fd00::7", bindInterface: eth1}}
    - {name: hosts, client: {hostNetwork: true}, server: {hostNetwork: true, port: 6000}, topology: {pairs: 3}}
"#,
        );
        let rule = |case: u32, pair: u32| {
            let p = pairing(&b, "r1", Slot::first(case));
            p.listen[&server_name(&b, "r1", case, pair)].clone()
        };
        let listen = |host, port| Listen { host, port };
        assert_eq!(rule(0, 0), listen(ListenHost::Own, 5301));
        assert_eq!(
            rule(1, 0),
            listen(ListenHost::Service("nb-e-r1-s1-w1".into()), 5201)
        );
        assert_eq!(
            rule(2, 0),
            listen(ListenHost::OwnOr("fd00::7".parse().unwrap()), 5201)
        );
        // hostNetwork servers of a topology: the port plus the pair's index.
        for pair in 0..3u16 {
            assert_eq!(
                rule(3, u32::from(pair)),
                listen(ListenHost::Own, 6000 + pair)
            );
        }
        assert_eq!(
            workers(&b, "r1", Slot::first(3))[5].args.join(" "),
            "server -p 6002"
        );
    }

    #[test]
    fn a_udp_rr_timeout_goes_as_whole_milliseconds_rounded_up() {
        for (timeout, flag) in [
            ("1500us", "--timeout 2ms"),
            ("1ms", "--timeout 1ms"),
            ("2.5s", "--timeout 2500ms"),
        ] {
            let b = eb(&format!(
                "{{apiVersion: netbench.io/v1alpha1, kind: EgressBenchmark, metadata: {{name: e, uid: u-1}},
                  spec: {{cases: [{{name: u, protocol: udp-rr, timeout: '{timeout}', client: {{nodeName: a}}, server: {{nodeName: b}}}}]}}}}"
            ));
            let args = workers(&b, "r1", Slot::first(0))[0].args.join(" ");
            assert!(args.contains(flag), "{timeout}: {args}");
        }
    }

    #[test]
    fn each_protocol_gets_its_flags_and_a_sweep_its_runs() {
        let b = eb(r#"
apiVersion: netbench.io/v1alpha1
kind: EgressBenchmark
metadata: {name: e, uid: u-1}
spec:
  cases:
    - {name: rr, protocol: tcp-rr, burst: 4, rate: 1000, client: {nodeName: a}, server: {nodeName: b}, sweep: {messageSizes: [64, 1024]}}
    - {name: crr, protocol: tcp-crr, client: {nodeName: a}, server: {nodeName: b, service: true}}
    - {name: urr, protocol: udp-rr, timeout: 50ms, client: {nodeName: a}, server: {nodeName: b}}
    - {name: us, protocol: udp-stream, bitrate: 500M, messageSize: 1400, client: {nodeName: a}, server: {nodeName: b}}
    - {name: probe, latencyProbe: 10, client: {nodeName: a}, server: {nodeName: b}, sweep: {streams: [1, 4]}}
"#);
        let args = |i: u32| workers(&b, "r1", Slot::first(i))[0].args.join(" ");
        assert_eq!(count(&b), 7);
        assert_eq!(
            args(0),
            "tcp-client --protocol tcp-rr -t 10 -P 1 --request-size 64 --response-size 64 --burst 4 --rate 1000 --output json"
        );
        assert!(args(1).contains("--request-size 1024 --response-size 1024"));
        assert_eq!(
            args(2),
            "tcp-client --protocol tcp-crr -t 10 -P 1 --request-size 1 --response-size 1 --output json"
        );
        assert!(args(3).contains("--protocol udp-rr") && args(3).contains("--timeout 50ms"));
        assert!(
            args(4).ends_with("-l 1400 --direction send -b 500M --output json"),
            "{}",
            args(4)
        );
        assert!(
            args(6).contains("-P 4 -l 131072 --direction send --latency-probe 10"),
            "{}",
            args(6)
        );
        // The Service path: the server advertises its Service's name.
        let crr = workers(&b, "r1", Slot::first(2));
        assert_eq!(
            crr[1].args.join(" "),
            "server -p 5201 --advertise nb-e-r1-s2-w1"
        );
        assert_eq!(case_at(&b, 1).unwrap().name, "rr/messageSize=1024");
        assert_eq!(case_at(&b, 7), None);
        assert_eq!(case_at(&b, u32::MAX), None);
    }

    #[test]
    fn external_server_has_no_pod() {
        let b = eb(SEED);
        let plans = workers(&b, "r1", Slot::first(1));
        assert_eq!(plans.len(), 1, "only the client");
        assert!(!plans[0].host_network, "pod -> egress node -> target");
        assert!(plans[0].args.join(" ").ends_with("-c 198.18.20.2 -p 5201"));
        assert_eq!(worker_roles(&b, "r1", Slot::first(1)).len(), 1);
        assert_eq!(baseline(&b), "vxlan");
    }
}
