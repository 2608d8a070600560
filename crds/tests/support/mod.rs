//! Helpers shared by the crds integration tests: the CRD schemas and a local CEL validator
//! (kube's `cel` feature evaluates the same `x-kubernetes-validations` the API server does).
#![allow(dead_code)] // each test binary uses a different subset

use std::path::PathBuf;

use kube::core::cel::Validator;
use serde_json::Value;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The openAPIV3Schema of the CRD serving `kind`.
pub fn schema_of(kind: &str) -> Value {
    let crd = match kind {
        "IngressBenchmark" => crds::manifests::published::<crds::IngressBenchmark>(),
        "EgressBenchmark" => crds::manifests::published::<crds::EgressBenchmark>(),
        other => panic!("unknown kind {other}"),
    };
    let crd = serde_json::to_value(crd).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// Validate an object as the API server would (defaults applied, then CEL rules);
/// returns the messages of the rules that failed.
pub fn cel_errors(object: &Value) -> Vec<String> {
    let kind = object["kind"].as_str().expect("object has a kind");
    let schema = schema_of(kind);
    let defaulted = kube::core::cel::apply_defaults(&schema, object);
    match Validator::new().validate(&schema, &defaulted, None) {
        Ok(()) => vec![],
        Err(errors) => errors.iter().map(|e| e.message.clone()).collect(),
    }
}

pub fn yaml_to_json(yaml: &str) -> Value {
    serde_yaml::from_str(yaml).expect("valid YAML")
}

/// A benchmark of `kind` (netbench.io/v1alpha1) named t, whose spec is the YAML `spec` (its
/// lines indented by two spaces).
pub fn benchmark(kind: &str, spec: &str) -> Value {
    yaml_to_json(&format!(
        "apiVersion: netbench.io/v1alpha1\nkind: {kind}\nmetadata: {{name: t}}\nspec:{spec}"
    ))
}

/// Every example manifest under deploy/examples, as (file name, JSON).
pub fn examples() -> Vec<(String, Value)> {
    let dir = repo_root().join("deploy/examples");
    let mut out = vec![];
    for entry in std::fs::read_dir(&dir).expect("deploy/examples exists") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let value: Value = serde::Deserialize::deserialize(doc).unwrap();
                if !value.is_null() {
                    out.push((
                        path.file_name().unwrap().to_string_lossy().into_owned(),
                        value,
                    ));
                }
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
