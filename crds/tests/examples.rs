//! Every example in deploy/examples parses into the Rust types, survives a round trip, and
//! passes the CRD's CEL rules.
mod support;

use crds::{EgressBenchmark, IngressBenchmark};
use serde_json::Value;

fn round_trip<T>(value: &Value) -> T
where
    T: serde::de::DeserializeOwned + serde::Serialize + PartialEq + std::fmt::Debug,
{
    let typed: T = serde_json::from_value(value.clone()).expect("example matches the types");
    let again: T = serde_json::from_value(serde_json::to_value(&typed).unwrap()).unwrap();
    assert_eq!(typed, again, "round trip changed the object");
    typed
}

#[test]
fn every_example_parses_round_trips_and_passes_cel() {
    let examples = support::examples();
    let names: Vec<&str> = examples.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "egress-vxlan-offload.yaml",
        "ingress-cpu-sweep.yaml",
        "ingress-controllers-sweep.yaml",
        "ingress-simple.yaml",
    ] {
        assert!(names.contains(&expected), "missing example {expected}");
    }
    for (name, value) in &examples {
        match value["kind"].as_str() {
            // And what the operator checks beyond the schema.
            Some("IngressBenchmark") => {
                let ib = round_trip::<IngressBenchmark>(value);
                assert_eq!(crds::bounds::ingress(&ib.spec), Ok(()), "{name}");
            }
            Some("EgressBenchmark") => {
                let eb = round_trip::<EgressBenchmark>(value);
                assert_eq!(crds::bounds::egress(&eb.spec), Ok(()), "{name}");
            }
            // The target that ships with the project (checked below).
            Some("Deployment" | "Service") if name == "target.yaml" => continue,
            other => panic!("{name}: unexpected kind {other:?}"),
        }
        let errors = support::cel_errors(value);
        assert!(errors.is_empty(), "{name}: {errors:?}");
    }
}

fn example(name: &str) -> Value {
    support::examples()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no example {name}"))
        .1
}

#[test]
fn cpu_sweep_example_is_the_seed_experiment() {
    let ib: IngressBenchmark = serde_json::from_value(example("ingress-cpu-sweep.yaml")).unwrap();
    assert!(!ib.spec.load.keep_alive, "the seed ran without keep-alive");
    let sweep = ib.spec.sweep.expect("sweep");
    let cpus: Vec<&str> = sweep
        .steps
        .iter()
        .map(|s| s.cpu.as_ref().unwrap().0.as_str())
        .collect();
    assert_eq!(cpus, ["1", "2", "4", "8"]);
}

#[test]
fn egress_example_has_the_seed_cases_and_offload_contrast() {
    let eb: EgressBenchmark = serde_json::from_value(example("egress-vxlan-offload.yaml")).unwrap();
    let cases: Vec<&str> = eb.spec.cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        cases,
        [
            "node-to-node",
            "vxlan-to-vxlan",
            "vxlan-csum-off",
            "pod-to-target"
        ]
    );
    let off = &eb.spec.offload.as_ref().unwrap().profiles[0];
    assert_eq!(
        off.settings[0].features.get("tx-checksumming"),
        Some(&false)
    );
    assert_eq!(
        eb.spec.cases[2].offload_profile.as_deref(),
        Some(off.name.as_str())
    );
    assert!(
        eb.spec.cases[3].server.address.is_some(),
        "pod -> egress node -> external target"
    );
}

#[test]
fn the_shipped_target_runs_this_releases_loadgen_as_http_server() {
    let deployment = support::examples()
        .into_iter()
        .find(|(n, v)| n == "target.yaml" && v["kind"] == "Deployment")
        .expect("target.yaml has a Deployment")
        .1;
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let image = format!("localhost/netbench/loadgen:{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(
        container["image"],
        image.as_str(),
        "the release's loadgen image"
    );
    assert_eq!(container["args"][0], "http-server");
}
