//! Status is a report, never an authority, and offload restores are truthful, on the real test
//! cluster's nodes and devices (tests/e2e/egress-net.sh; never the machine's own interfaces).
//! Needs `eval "$(tests/e2e/setup.sh)"`: offload Jobs are allowed in e2e-egpriv-* namespaces,
//! on eth0 and nb-vxlan0 of nodes nb-node0 and nb-node1 only; sweeps within a benchmark's own
//! namespace only.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};

const NODE: &str = "nb-node0";
/// Namespace prefix where setup.sh allows offload Jobs (and hostNetwork workers).
const ALLOWED: &str = "egpriv";

fn assert_not_permitted(done: &Value, wanted: &str) {
    let st = &done["status"];
    assert_eq!(st["phase"], "Failed", "{st:#}");
    let invalid = condition(done, "Invalid");
    assert_eq!(invalid["status"], "True", "{invalid:#}");
    assert_eq!(invalid["reason"], "NotPermitted", "{invalid:#}");
    let message = invalid["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(wanted),
        "the message names {wanted}: {message}"
    );
}

/// Records the name of every Job (and pod) the operator runs for `ns` in its namespace, polled
/// every 100 ms until dropped: for "no Job was ever created" checks.
struct JobSpy {
    seen: Arc<Mutex<BTreeSet<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl JobSpy {
    fn start(client: &Client, ns: &str) -> JobSpy {
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let (client, ns, out) = (client.clone(), ns.to_string(), seen.clone());
        let task = tokio::spawn(async move {
            loop {
                if let Ok(found) = offload_jobs_and_pods(&client, &ns).await {
                    out.lock().unwrap().extend(found);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        JobSpy { seen, task }
    }

    fn seen(&self) -> BTreeSet<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for JobSpy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every Job in the operator's namespace (any label): none may appear for a forged status.
async fn operator_jobs(client: &Client) -> BTreeSet<String> {
    Api::<Job>::namespaced(client.clone(), OPERATOR_NAMESPACE)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|j| j.metadata.name)
        .collect()
}

async fn patch_status(client: &Client, kind: &str, ns: &str, name: &str, status: Value) {
    let pp = PatchParams::default();
    let patch = Patch::Merge(json!({ "status": status }));
    match kind {
        EB => {
            Api::<crds::EgressBenchmark>::namespaced(client.clone(), ns)
                .patch_status(name, &pp, &patch)
                .await
                .unwrap();
        }
        _ => {
            Api::<crds::IngressBenchmark>::namespaced(client.clone(), ns)
                .patch_status(name, &pp, &patch)
                .await
                .unwrap();
        }
    }
}

/// (a) From a namespace without the opt-in, a forged status.offload (the test bed's vxlan device
/// on the node) and a forged status.savedTarget (a Deployment in another namespace), then
/// deletion: no Job anywhere, the Deployment untouched, the device untouched.
#[tokio::test]
async fn forged_status_gets_no_job_and_no_patch() {
    let net = EgressNet::up().unwrap();
    let device_before = net.features(NODE, &net.vxlan).unwrap();
    let client = client().await;
    let ns = TestNs::new(&client, "sadeny").await;
    let victim_ns = TestNs::new(&client, "savictim").await;
    let (deploy, _) = nginx("victim", "100m");
    create(&client, &victim_ns.name, &deploy).await.unwrap();
    let deployments = Api::<Deployment>::namespaced(client.clone(), &victim_ns.name);
    let victim_before = deployments.get("victim").await.unwrap();
    let jobs_before = operator_jobs(&client).await;
    let spy = JobSpy::start(&client, &ns.name);

    // Both ask for what this namespace may not do, and are refused.
    let eb = benchmark(
        EB,
        &ns.name,
        "forged",
        json!({
            "offload": {"profiles": [{"name": "off", "settings": [{
                "nodeNames": [NODE], "interface": net.vxlan,
                "features": {"tx-checksumming": false}}]}]},
            "cases": [{"name": "c", "client": {"nodeName": NODE},
                       "server": {"address": net.target_ip}, "duration": "2s",
                       "offloadProfile": "off"}],
        }),
    );
    let ib = benchmark(
        IB,
        &ns.name,
        "forged",
        json!({
            "target": {"url": "http://victim.example/"},
            "load": {"duration": "2s"},
            "sweep": {"targetRef": {"name": "victim", "namespace": victim_ns.name},
                      "steps": [{"cpu": "3"}]},
        }),
    );
    create(&client, &ns.name, &eb).await.unwrap();
    create(&client, &ns.name, &ib).await.unwrap();
    let timeout = Duration::from_secs(60);
    let done = wait_phase(&client, EB, &ns.name, "forged", FINISHED, timeout).await;
    assert_not_permitted(&done, "offload");
    let done = wait_phase(&client, IB, &ns.name, "forged", FINISHED, timeout).await;
    assert_not_permitted(&done, &format!("{}/victim", victim_ns.name));

    // The forgeries, through the status subresource (what `*/status` writers can do).
    let offload = json!([{
        "case": "c", "node": NODE, "interface": net.vxlan, "profile": "off",
        "before": {"tx-checksumming": false}, "applied": {"tx-checksumming": true},
        "restore": {"tx-checksum-ip-generic": false},
        "recorded": true, "restored": false,
    }]);
    let saved = json!({
        "kind": "Deployment", "namespace": victim_ns.name, "name": "victim",
        "container": "nginx", "containerIndex": 0, "replicas": 5,
        "resourcesJson": "{\"requests\":{\"cpu\":\"3\"},\"limits\":{\"cpu\":\"3\"}}",
        "restored": false,
    });
    for (kind, status) in [
        (EB, json!({ "offload": offload })),
        (IB, json!({ "savedTarget": saved })),
    ] {
        patch_status(&client, kind, &ns.name, "forged", status).await;
    }
    let forged = get_benchmark(&client, EB, &ns.name, "forged")
        .await
        .unwrap();
    assert_eq!(
        forged["status"]["offload"][0]["restored"], false,
        "the forgery took"
    );

    kubectl(&["-n", &ns.name, "delete", "eb,ib", "forged", "--timeout=90s"]).unwrap();
    let left = kubectl(&["-n", &ns.name, "get", "eb,ib", "--no-headers"]).unwrap();
    assert!(left.trim().is_empty(), "both are gone: {left}");

    assert_eq!(
        spy.seen(),
        BTreeSet::new(),
        "no offload Job or pod for {}",
        ns.name
    );
    let new_jobs: Vec<String> = operator_jobs(&client)
        .await
        .difference(&jobs_before)
        .cloned()
        .collect();
    assert!(
        new_jobs.is_empty(),
        "Jobs appeared in {OPERATOR_NAMESPACE}: {new_jobs:?}"
    );
    let victim_after = deployments.get("victim").await.unwrap();
    // generation, not resourceVersion: the Deployment controller writes its status meanwhile;
    // any change of the spec (a sweep's patch) bumps the generation.
    assert_eq!(
        victim_after.metadata.generation, victim_before.metadata.generation,
        "the Deployment's spec was not written"
    );
    assert_eq!(victim_after.spec, victim_before.spec);
    assert_eq!(
        net.features(NODE, &net.vxlan).unwrap(),
        device_before,
        "{}'s features are untouched",
        net.vxlan
    );
}

/// Features of `dev` to switch off: each of `names` that ethtool shows as on and not fixed
/// (switching off never fails on a dependency; the kernel switches dependants off too).
fn flips(net: &EgressNet, dev: &str, names: &[&str]) -> serde_json::Map<String, Value> {
    let text = net.ethtool_k(NODE, dev).unwrap();
    names
        .iter()
        .filter_map(|name| {
            let line = text
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{name}:")))?;
            if line.contains("[fixed]") || !line.contains(": on") {
                return None;
            }
            Some((name.to_string(), json!(false)))
        })
        .collect()
}

/// (b) A profile touching several features on two devices: applied for the case, then written
/// back, and `ethtool -k` of both is identical before and after; OffloadRestored=True; the
/// records in the operator's namespace are gone once the restore was verified.
#[tokio::test]
async fn many_features_on_two_devices_are_restored_exactly() {
    let net = EgressNet::up().unwrap();
    let devices = [net.vxlan.clone(), net.nic.clone()];
    let names = [
        "tx-checksumming",
        "scatter-gather",
        "tcp-segmentation-offload",
        "generic-segmentation-offload",
        "generic-receive-offload",
    ];
    let ethtool_k = |d: &str| net.ethtool_k(NODE, d).unwrap();
    let before: Vec<String> = devices.iter().map(|d| ethtool_k(d)).collect();
    let settings: Vec<Value> = devices
        .iter()
        .map(|d| {
            let features = flips(&net, d, &names);
            assert!(
                features.len() >= 3,
                "{d}: too few changeable features: {features:?}"
            );
            json!({"nodeNames": [NODE], "interface": d, "features": features})
        })
        .collect();
    let client = client().await;
    let ns = TestNs::new(&client, ALLOWED).await;
    let spec = json!({
        "offload": {"profiles": [{"name": "many", "settings": settings}]},
        "cases": [{
            "name": "vx", "offloadProfile": "many", "duration": "2s",
            "client": {"nodeName": NODE, "hostNetwork": true, "bindInterface": net.vxlan},
            "server": {"nodeName": net.server_node, "hostNetwork": true, "bindInterface": net.vxlan},
        }],
    });
    let many = benchmark(EB, &ns.name, "many", spec);
    let done = create_and_wait(&client, &many, FINISHED, RUN_TIMEOUT).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{:#}", done["status"]);
    let restored = wait_offload_restored(&client, &ns.name, "many", Duration::from_secs(90)).await;
    let st = &restored["status"];
    let records = st["offload"].as_array().expect("offload records in status");
    assert_eq!(records.len(), 2, "{st:#}");
    for (r, setting) in records.iter().zip(&settings) {
        assert_eq!(r["interface"], setting["interface"], "{r:#}");
        assert_eq!(r["restored"], true, "{r:#}");
        // The profile was applied: what the device showed after the change.
        assert_eq!(r["applied"], setting["features"], "{r:#}");
        for (name, value) in setting["features"].as_object().unwrap() {
            assert_eq!(r["before"][name], json!(!value.as_bool().unwrap()), "{r:#}");
        }
    }
    for (d, b) in devices.iter().zip(&before) {
        assert_eq!(
            &ethtool_k(d),
            b,
            "ethtool -k {d} after the run equals before"
        );
    }
    // Restores verified: the offload records in the operator's namespace are gone (status keeps
    // a copy; the run record stays with the benchmark).
    let selector = format!(
        "netbench.io/namespace={},netbench.io/record=offload",
        ns.name
    );
    let left = Api::<ConfigMap>::namespaced(client.clone(), OPERATOR_NAMESPACE)
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap();
    assert!(left.items.is_empty(), "records left: {:?}", left.items);
    wait_no_children(&client, &ns.name, Duration::from_secs(60)).await;
}
