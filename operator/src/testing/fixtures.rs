//! What the worker API, registry and store tests start from: a run, a registration, an owner;
//! and a pod the scheduler could not place.

use protocol::worker::{RegisterRequest, Role, PROTOCOL_VERSION};
use protocol::ReportKind;

use crate::store::owner::Owner;
use crate::store::registry::{Pairing, RunSpec};

/// Step 0 of IngressBenchmark ns/b (uid "u"), taking http reports from `workers`, unpaired. A
/// test changes what it needs with `RunSpec { field, ..run_spec(workers) }`.
pub fn run_spec(workers: &[(&str, Role)]) -> RunSpec {
    RunSpec {
        kind: "IngressBenchmark".into(),
        namespace: "ns".into(),
        benchmark: "b".into(),
        uid: "u".into(),
        step: 0,
        workers: workers.iter().map(|(w, r)| (w.to_string(), *r)).collect(),
        report_kind: ReportKind::Http,
        pairing: Pairing::default(),
        start_lead: crate::store::registry::START_LEAD,
    }
}

/// `worker` registering as a client of step 0, with no listen address and no preflight error.
pub fn register_request(worker: &str) -> RegisterRequest {
    RegisterRequest {
        version: PROTOCOL_VERSION,
        worker: worker.into(),
        node: None,
        step: 0,
        role: Role::Client,
        listen: None,
        preflight_error: None,
    }
}

/// Benchmark team-a/`name` of `kind`, uid `uid`: the owner of the objects a store test writes.
pub fn owner(kind: &str, name: &str, uid: &str) -> Owner {
    Owner {
        kind: kind.into(),
        namespace: "team-a".into(),
        name: name.into(),
        uid: uid.into(),
    }
}

/// Pod `name`, not scheduled, with the scheduler's reason `why`.
pub fn unscheduled_pod(name: &str, why: &str) -> k8s_openapi::api::core::v1::Pod {
    use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
    Pod {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        status: Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                message: Some(why.into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}
