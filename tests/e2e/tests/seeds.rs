//! The seed ingress experiment on the 3-node test cluster, from its example
//! (deploy/examples/ingress-controller-sweep.yaml, shortened): a real ingress controller
//! (Traefik on nb-node1, backends on nb-node2; tests/cluster/traefik/deploy.sh via setup.sh)
//! swept over its CPUs by a load generator on nb-node0, then restored. The egress seed runs in
//! egress.rs. Figures are printed for the log; docs/reproducing-the-seeds.md has full runs.

use std::time::Duration;

use e2e::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::json;

async fn traefik(client: &kube::Client) -> Deployment {
    Api::<Deployment>::namespaced(client.clone(), "ingress-traefik")
        .get("traefik")
        .await
        .unwrap()
}

#[tokio::test]
async fn ingress_controller_sweep_scales_traefik_across_nodes_and_restores_it() {
    let client = client().await;
    let ns = TestNs::new(&client, "seed").await;
    let before = traefik(&client).await;
    let ib = example(
        "ingress-controller-sweep.yaml",
        &ns.name,
        &[
            ("/spec/load/duration", json!("3s")),
            ("/spec/load/warmup", json!("1s")),
            ("/spec/sweep/settle", json!("1s")),
        ],
    );
    let done = create_and_wait(&client, &ib, FINISHED, Duration::from_secs(480)).await;
    let st = &done["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    let steps = st["steps"].as_array().unwrap();
    let cpus: Vec<&str> = steps.iter().map(|s| s["cpu"].as_str().unwrap()).collect();
    assert_eq!(cpus, ["250m", "500m", "1", "2"]);
    for s in steps {
        eprintln!(
            "traefik at {:>4} CPU: {:>8.0} RPS, p99 {} ms, errors {}",
            s["cpu"].as_str().unwrap(),
            s["rps"].as_f64().unwrap_or_default(),
            s["latencyMs"]["p99"],
            s["errors"]
        );
        assert!(s["rps"].as_f64().unwrap_or_default() > 0.0, "{s:#}");
    }
    let rows = st["scaling"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{st:#}");
    assert_eq!(rows[3]["sizeFactor"], 8.0, "2 CPUs against 250m");
    eprintln!("{}", st["scaling"]["summary"].as_str().unwrap_or_default());

    // Restored, and the controller still on its node: the sweep patched only the CPUs.
    assert_eq!(st["savedTarget"]["restored"], true, "{st:#}");
    let after = traefik(&client).await;
    assert_eq!(
        serde_json::to_value(&after.spec.template).unwrap(),
        serde_json::to_value(&before.spec.template).unwrap(),
        "Traefik's pod template is restored"
    );
    rolled_out("ingress-traefik", "traefik");
    let pods = Api::<Pod>::namespaced(client.clone(), "ingress-traefik")
        .list(&ListParams::default().labels("app.kubernetes.io/name=traefik"))
        .await
        .unwrap();
    for p in &pods.items {
        if p.metadata.deletion_timestamp.is_none() {
            assert_eq!(
                p.spec.as_ref().unwrap().node_name.as_deref(),
                Some("nb-node1"),
                "Traefik stays on nb-node1"
            );
        }
    }
    wait_no_children(&client, &ns.name, Duration::from_secs(60)).await;
}
