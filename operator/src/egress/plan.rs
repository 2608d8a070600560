//! Pure planning: a case becomes its server and client worker plans and their loadgen
//! arguments. Case index = the run's step (labels, registry, report ConfigMaps).

use crate::driver::Slot;
use std::collections::BTreeMap;

use protocol::worker::Role;

use crds::egress::{Direction, EgressBenchmark, EgressCase};

use crate::labels;
use crate::workers::WorkerPlan;

pub const KIND: &str = "EgressBenchmark";
/// Index of the client and the server among a case's workers (worker name suffix -wN).
const CLIENT: u32 = 0;
const SERVER: u32 = 1;

/// The operator runs the server unless the case names an external `address`.
pub fn server_in_cluster(case: &EgressCase) -> bool {
    case.server.address.is_none()
}

pub fn client_name(eb: &EgressBenchmark, run: &str, case: u32) -> String {
    labels::worker_name(
        &eb.metadata.name.clone().unwrap_or_default(),
        run,
        case,
        CLIENT,
    )
}

pub fn server_name(eb: &EgressBenchmark, run: &str, case: u32) -> String {
    labels::worker_name(
        &eb.metadata.name.clone().unwrap_or_default(),
        run,
        case,
        SERVER,
    )
}

/// Workers of a case with their roles, for the registry (the server registers its address and
/// the client gets it at the barrier).
pub fn worker_roles(eb: &EgressBenchmark, run: &str, slot: Slot) -> BTreeMap<String, Role> {
    let wire = slot.wire();
    let mut roles = BTreeMap::from([(client_name(eb, run, wire), Role::Client)]);
    if case_at(eb, slot.measurement).is_some_and(server_in_cluster) {
        roles.insert(server_name(eb, run, wire), Role::Server);
    }
    roles
}

/// `netbench-loadgen tcp-client ...`: an external server is named here; an in-cluster one
/// comes from the barrier.
pub fn client_args(case: &EgressCase) -> Vec<String> {
    let mut args = vec![
        "tcp-client".to_string(),
        "-t".into(),
        format!("{}", std::time::Duration::from(case.duration).as_secs_f64()),
        "-P".into(),
        case.streams.to_string(),
        "-l".into(),
        case.message_size.to_string(),
        "--direction".into(),
        match case.direction {
            Direction::Send => "send",
            Direction::Receive => "receive",
            Direction::Both => "both",
        }
        .into(),
        "--output".into(),
        "json".into(),
    ];
    if let Some(address) = &case.server.address {
        args.extend([
            "-c".into(),
            address.clone(),
            "-p".into(),
            case.server.port.to_string(),
        ]);
    }
    if let Some(dev) = &case.client.bind_interface {
        args.extend(["--bind-dev".into(), dev.clone()]);
    }
    if let Some(addr) = &case.client.bind_address {
        args.extend(["-B".into(), addr.clone()]);
    }
    args
}

/// `netbench-loadgen tcp-server ...`: serves the one test of this case, then exits.
pub fn server_args(case: &EgressCase) -> Vec<String> {
    let mut args = vec![
        "tcp-server".to_string(),
        "-p".into(),
        case.server.port.to_string(),
    ];
    if let Some(dev) = &case.server.bind_interface {
        args.extend(["--bind-dev".into(), dev.clone()]);
    }
    if let Some(addr) = &case.server.bind_address {
        args.extend(["-B".into(), addr.clone()]);
    }
    args
}

/// The pods of one sample of a case: the client, and the server unless it is external.
pub fn workers(eb: &EgressBenchmark, run: &str, slot: Slot) -> Vec<WorkerPlan> {
    let name = eb.metadata.name.clone().unwrap_or_default();
    let Some(case) = case_at(eb, slot.measurement) else {
        return vec![];
    };
    let index = slot.wire();
    let mut labels = labels::run_labels(KIND, &name, run);
    labels.insert(labels::STEP.into(), index.to_string());
    let resources = eb.spec.workers.as_ref();
    let plan = |worker: String, role: &str, args, node: &Option<String>, host_network| {
        let mut labels = labels.clone();
        labels.insert(labels::ROLE.into(), role.into());
        WorkerPlan {
            name: worker,
            labels,
            owner: labels::owner(eb),
            args,
            step: index,
            run: run.to_string(),
            node_name: node.clone(),
            node_selector: BTreeMap::new(),
            affinity: None,
            spread: false,
            cpu: resources.and_then(|r| r.cpu.clone()),
            memory: resources.and_then(|r| r.memory.clone()),
            host_network,
        }
    };
    let mut plans = vec![plan(
        client_name(eb, run, index),
        "client",
        client_args(case),
        &case.client.node_name,
        case.client.host_network,
    )];
    if server_in_cluster(case) {
        plans.push(plan(
            server_name(eb, run, index),
            "server",
            server_args(case),
            &case.server.node_name,
            case.server.host_network,
        ));
    }
    plans
}

/// How long after its pods were created a case may take: scheduling and start, the
/// measurement, and reporting.
pub fn case_deadline(case: &EgressCase, start_timeout: std::time::Duration) -> std::time::Duration {
    crate::deadline::egress_case(case, start_timeout)
}

/// The baseline case's name: `baselineCase`, or the first case.
pub fn baseline(eb: &EgressBenchmark) -> &str {
    match (&eb.spec.baseline_case, eb.spec.cases.first()) {
        (Some(b), _) => b,
        (None, Some(first)) => &first.name,
        (None, None) => "",
    }
}

/// The case at `index` (a case index read from status, so possibly out of range).
pub fn case_at(eb: &EgressBenchmark, index: u32) -> Option<&EgressCase> {
    eb.spec.cases.get(usize::try_from(index).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn eb(yaml: &str) -> EgressBenchmark {
        serde_yaml::from_str(yaml).unwrap()
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
            "tcp-client -t 2.5 -P 2 -l 131072 --direction receive --output json --bind-dev vx0"
        );
        assert_eq!(server.args.join(" "), "tcp-server -p 5301 --bind-dev vx0");
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
