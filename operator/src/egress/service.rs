//! The Service path: a case with `server.service` reaches its server pod through a ClusterIP
//! Service the operator creates in front of it (so the client's traffic takes the kube-proxy or
//! eBPF Service path), instead of the pod's own address. The server registers the Service's
//! name (`--advertise`), which the client resolves in its own namespace.
//!
//! One Service per sample's server pod, named like it (labels::service_name), selecting exactly
//! that pod, with the pod's labels: it is deleted with the worker pods (pods::delete_workers,
//! per the cleanup policy) and owned by the benchmark. Its TCP port carries the control and
//! the TCP data connections, its UDP port of the same number the datagrams of udp-rr and
//! udp-stream.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use crds::cases::Measured;
use crds::EgressBenchmark;

use super::plan;
use crate::base::labels;
use crate::base::outcome::{Failure, Reason};
use crate::base::text::clip;
use crate::policy::samples::Slot;

/// The Service in front of the slot's server pod (pure).
pub fn build(eb: &EgressBenchmark, run: &str, slot: Slot, case: &Measured) -> Service {
    let selector = plan::server_labels(eb, run, slot);
    let port = |protocol: &str| ServicePort {
        name: Some(protocol.to_lowercase()),
        protocol: Some(protocol.into()),
        port: i32::from(case.spec.server.port),
        target_port: Some(
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(i32::from(
                case.spec.server.port,
            )),
        ),
        ..Default::default()
    };
    Service {
        metadata: ObjectMeta {
            name: Some(plan::service_name(eb, run, slot)),
            namespace: eb.metadata.namespace.clone(),
            labels: Some(selector.clone()),
            owner_references: Some(vec![labels::owner(eb)]),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(selector),
            ports: Some(vec![port("TCP"), port("UDP")]),
            // The client reaches the one server pod even before it is Ready (it has no probe).
            publish_not_ready_addresses: Some(true),
            ..Default::default()
        }),
        status: None,
    }
}

/// Creates the slot's Service when the case asks for the Service path (idempotent). `Ok(Some)`
/// is a refusal the run ends Failed with: the API server refused the
/// Service (quota, admission policy, RBAC), or a Service of that name exists that this
/// benchmark does not own or that selects other pods (someone else's Service would carry the
/// client's traffic elsewhere; it is never used, never deleted).
pub async fn ensure(
    client: &kube::Client,
    eb: &EgressBenchmark,
    run: &str,
    slot: Slot,
    case: &Measured,
) -> Result<Option<Failure>, kube::Error> {
    if !case.spec.server.service {
        return Ok(None);
    }
    let svc = build(eb, run, slot, case);
    let name = svc.metadata.name.clone().unwrap_or_default();
    let ns = eb.metadata.namespace.clone().unwrap_or_default();
    let api = Api::<Service>::namespaced(client.clone(), &ns);
    match api.create(&PostParams::default(), &svc).await {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let existing = api.get(&name).await?;
            Ok(conflict(&svc, &existing).map(|why| {
                Failure::new(
                    Reason::ServiceConflict,
                    format!("Service {name} already exists and {why}; delete it or rename the benchmark"),
                )
            }))
        }
        Err(kube::Error::Api(e)) if matches!(e.code, 400 | 403 | 422) => Ok(Some(Failure::new(
            Reason::ServiceRefused,
            format!(
                "creating Service {name} was refused ({}): {}",
                e.code,
                clip(&e.message, 256)
            ),
        ))),
        Err(e) => Err(e),
    }
}

/// Why an existing Service of the wanted name is not the one `wanted` describes (pure): it
/// must be owned (as controller) by this benchmark's uid, select exactly the server pod, and
/// be a plain ClusterIP Service.
pub fn conflict(wanted: &Service, existing: &Service) -> Option<&'static str> {
    let owner = wanted
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.first())
        .map(|o| o.uid.as_str())
        .filter(|uid| !uid.is_empty());
    let owned = owner.is_some_and(|uid| labels::controlled_by(&existing.metadata, uid));
    if !owned {
        return Some("is not owned by this benchmark");
    }
    let spec = |s: &Service| {
        s.spec
            .as_ref()
            .map(|s| (s.type_.clone(), s.selector.clone(), s.external_name.clone()))
    };
    if spec(wanted) != spec(existing) {
        return Some("does not select the server pod the way the operator builds it");
    }
    None
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn selects_exactly_the_slots_server_pod_on_both_protocols() {
        let eb: EgressBenchmark = serde_yaml::from_str(
            "{apiVersion: netbench.io/v1alpha1, kind: EgressBenchmark, metadata: {name: e, namespace: team, uid: u-1},
              spec: {cases: [{name: svc, protocol: udp-rr, client: {nodeName: a}, server: {nodeName: b, service: true, port: 5301}}]}}",
        )
        .unwrap();
        let case = &eb.spec.measured()[0];
        let slot = Slot::first(0);
        let svc = build(&eb, "r1", slot, case);
        assert_eq!(svc.metadata.name.as_deref(), Some("nb-e-r1-s0-w1"));
        let spec = svc.spec.unwrap();
        let pods = plan::workers(&eb, "r1", slot);
        let server = pods
            .iter()
            .find(|p| p.labels[labels::ROLE] == "server")
            .unwrap();
        let client = pods
            .iter()
            .find(|p| p.labels[labels::ROLE] == "client")
            .unwrap();
        let selector = spec.selector.unwrap();
        let selects =
            |l: &BTreeMap<String, String>| selector.iter().all(|(k, v)| l.get(k) == Some(v));
        assert!(selects(&server.labels) && !selects(&client.labels));
        let ports: Vec<_> = spec
            .ports
            .unwrap()
            .iter()
            .map(|p| (p.protocol.clone().unwrap(), p.port))
            .collect();
        assert_eq!(
            ports,
            [("TCP".to_string(), 5301), ("UDP".to_string(), 5301)]
        );
        assert_eq!(svc.metadata.owner_references.unwrap()[0].uid, "u-1");
        // The server advertises the Service's name; the client takes it from the barrier.
        assert!(
            server.args.join(" ").ends_with("--advertise nb-e-r1-s0-w1"),
            "{:?}",
            server.args
        );
        assert!(!client.args.contains(&"-c".to_string()));
    }

    #[test]
    fn only_the_benchmarks_own_service_is_used() {
        let eb: EgressBenchmark = serde_yaml::from_str(
            "{apiVersion: netbench.io/v1alpha1, kind: EgressBenchmark, metadata: {name: e, namespace: team, uid: u-1},
              spec: {cases: [{name: svc, protocol: tcp-rr, client: {}, server: {service: true}}]}}",
        )
        .unwrap();
        let case = &eb.spec.measured()[0];
        let wanted = build(&eb, "r1", Slot::first(0), case);
        assert_eq!(
            conflict(&wanted, &wanted),
            None,
            "our own, from before a restart"
        );
        let mut unowned = wanted.clone();
        unowned.metadata.owner_references = None;
        assert_eq!(
            conflict(&wanted, &unowned),
            Some("is not owned by this benchmark")
        );
        let mut other = wanted.clone();
        other.metadata.owner_references.as_mut().unwrap()[0].uid = "u-2".into();
        assert!(
            conflict(&wanted, &other).is_some(),
            "another benchmark's uid"
        );
        let mut not_controller = wanted.clone();
        not_controller.metadata.owner_references.as_mut().unwrap()[0].controller = None;
        assert!(conflict(&wanted, &not_controller).is_some());
        let mut external = wanted.clone();
        let spec = external.spec.as_mut().unwrap();
        spec.type_ = Some("ExternalName".into());
        spec.external_name = Some("elsewhere.example".into());
        assert!(conflict(&wanted, &external).unwrap().contains("select"));
        let mut elsewhere = wanted.clone();
        elsewhere.spec.as_mut().unwrap().selector =
            Some(BTreeMap::from([("app".into(), "mine".into())]));
        assert!(conflict(&wanted, &elsewhere).is_some());
        // A benchmark without a uid (never from the API server) owns nothing.
        let mut no_uid = eb.clone();
        no_uid.metadata.uid = None;
        let wanted = build(&no_uid, "r1", Slot::first(0), case);
        assert!(conflict(&wanted, &wanted).is_some());
    }
}
