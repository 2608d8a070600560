//! The krew manifest example names the binary this crate builds, for every platform.

#[test]
fn the_krew_manifest_names_the_kubectl_binary() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{dir}/krew/netbench.yaml")).unwrap();
    let manifest: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(manifest["metadata"]["name"], "netbench");
    let platforms = manifest["spec"]["platforms"].as_sequence().unwrap();
    assert!(!platforms.is_empty());
    for p in platforms {
        assert_eq!(p["bin"], "kubectl-netbench");
        assert!(p["uri"]
            .as_str()
            .unwrap()
            .contains("RELEASE-URL-PLACEHOLDER"));
        assert_eq!(p["sha256"].as_str().unwrap().len(), 64);
    }
    // The binary exists under that name.
    assert!(std::path::Path::new(env!("CARGO_BIN_EXE_kubectl-netbench")).exists());
    assert!(text.contains("NOT A PUBLISHED PLUGIN"));
}
