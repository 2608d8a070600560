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

/// Creates the slot's Service when the case asks for the Service path (idempotent).
pub async fn ensure(
    client: &kube::Client,
    eb: &EgressBenchmark,
    run: &str,
    slot: Slot,
    case: &Measured,
) -> Result<(), kube::Error> {
    if !case.spec.server.service {
        return Ok(());
    }
    let svc = build(eb, run, slot, case);
    let ns = eb.metadata.namespace.clone().unwrap_or_default();
    match Api::<Service>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &svc)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
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
}
