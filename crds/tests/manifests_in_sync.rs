//! The checked-in CRD YAML must be exactly what the Rust types generate.
mod support;

#[test]
fn checked_in_crds_match_the_types() {
    for dir in ["crds/manifests", "charts/netbench/files/crds"] {
        for (name, generated) in crds::manifests::render() {
            let path = support::repo_root().join(dir).join(name);
            let on_disk = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                on_disk == generated,
                "{} is out of date: run `cargo run -p crds --bin crdgen`",
                path.display()
            );
        }
    }
}

#[test]
fn crds_have_names_columns_and_status_subresource() {
    let ib =
        serde_json::to_value(<crds::IngressBenchmark as kube::CustomResourceExt>::crd()).unwrap();
    let eb =
        serde_json::to_value(<crds::EgressBenchmark as kube::CustomResourceExt>::crd()).unwrap();
    for (crd, short, columns) in [
        (
            &ib,
            "ib",
            ["Phase", "RPS", "P99", "Workers", "Queue", "Age"],
        ),
        (
            &eb,
            "eb",
            ["Phase", "Cases", "Best", "Overhead", "Queue", "Age"],
        ),
    ] {
        assert_eq!(crd["spec"]["group"], "netbench.io");
        assert_eq!(crd["spec"]["names"]["shortNames"][0], short);
        assert_eq!(crd["spec"]["names"]["categories"][0], "benchmarks");
        let version = &crd["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha1");
        assert!(
            version["subresources"]["status"].is_object(),
            "status subresource"
        );
        let names: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, columns);
        // The queue position only with -o wide: the default columns stay as designed.
        let wide: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["priority"].as_i64().unwrap_or(0) > 0)
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(wide, ["Queue"]);
    }
}

#[test]
fn field_docs_become_descriptions() {
    // `kubectl explain ingressbenchmark.spec.load.connections` shows this text.
    let schema = support::schema_of("IngressBenchmark");
    let text = &schema["properties"]["spec"]["properties"]["load"]["properties"]["connections"]
        ["description"];
    // One flowing paragraph: the doc comment's line break is gone.
    assert_eq!(
        text,
        "Open connections per worker (wrk -c). At most 20000: what one pod can hold open to one target address (its ephemeral ports), with room to spare."
    );
}
