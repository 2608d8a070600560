//! The API server's defaults (from the schema) and the Rust types' serde defaults agree, so a
//! minimal object means the same to `kubectl apply` and to the operator.
mod support;

use kube::core::cel::apply_defaults;

#[test]
fn schema_defaults_equal_type_defaults() {
    let minimal = support::yaml_to_json(
        "apiVersion: netbench.io/v1alpha1\nkind: IngressBenchmark\nmetadata: {name: t}\nspec: {target: {url: 'http://x/'}}\n",
    );
    let defaulted = apply_defaults(&support::schema_of("IngressBenchmark"), &minimal);
    let load = &defaulted["spec"]["load"];
    assert_eq!(load["connections"], 50);
    assert_eq!(load["threads"], 1);
    assert_eq!(load["duration"], "30s");
    assert_eq!(load["keepAlive"], true);
    assert_eq!(defaulted["spec"]["cleanup"], "Always");
    assert_eq!(defaulted["spec"]["target"]["method"], "GET");

    let typed: crds::IngressBenchmark = serde_json::from_value(minimal).unwrap();
    let from_types = serde_json::to_value(&typed.spec).unwrap();
    assert_eq!(from_types["load"], defaulted["spec"]["load"]);
    assert_eq!(from_types["cleanup"], defaulted["spec"]["cleanup"]);
    assert_eq!(
        from_types["target"]["method"],
        defaulted["spec"]["target"]["method"]
    );
}

#[test]
fn egress_case_defaults() {
    let minimal = support::yaml_to_json(
        "apiVersion: netbench.io/v1alpha1\nkind: EgressBenchmark\nmetadata: {name: t}\nspec: {cases: [{name: a, client: {}, server: {nodeName: n}}]}\n",
    );
    let defaulted = apply_defaults(&support::schema_of("EgressBenchmark"), &minimal);
    let case = &defaulted["spec"]["cases"][0];
    assert_eq!(case["streams"], 1);
    assert_eq!(case["duration"], "10s");
    // messageSize has no schema default: tcp-stream's (128 KiB) and udp-stream's (the path's
    // MTU) differ, so the operator applies it per protocol.
    assert_eq!(case.get("messageSize"), None);
    assert_eq!(case["protocol"], "tcp-stream");
    assert_eq!(case["direction"], "Send");
    assert_eq!(case["server"]["port"], 5201);
    let typed: crds::EgressBenchmark = serde_json::from_value(minimal).unwrap();
    assert_eq!(serde_json::to_value(&typed.spec.cases[0]).unwrap(), *case);
}

#[test]
fn durations_parse_with_clear_errors() {
    let ok: crds::Duration = "1m30s".parse().unwrap();
    assert_eq!(
        std::time::Duration::from(ok),
        std::time::Duration::from_secs(90)
    );
    let err = "30".parse::<crds::Duration>().unwrap_err().to_string();
    assert!(err.contains("unit"), "{err}");
    let bad: Result<crds::IngressBenchmarkSpec, _> = serde_json::from_value(
        serde_json::json!({"target": {"url": "http://x/"}, "load": {"duration": "10 s"}}),
    );
    assert!(bad.is_err());
}
