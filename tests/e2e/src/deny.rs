//! A ValidatingAdmissionPolicy and its binding that deny, in one namespace, the requests a rule
//! and a CEL expression pick (as a policy, a webhook or RBAC taken away would). Lifting it
//! deletes the binding; dropping it deletes both.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{Api, DeleteParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

pub struct DenyPolicy {
    pub name: String,
    /// The denial's message, unique to the namespace (so old log lines never match).
    pub message: String,
}

impl DenyPolicy {
    /// Denies, in namespace `ns`, the requests `rule` (a matchConstraints resource rule) matches
    /// for which `expression` is false, with `message`.
    pub async fn create(
        client: &Client,
        name: String,
        ns: &str,
        rule: Value,
        expression: &str,
        message: String,
    ) -> DenyPolicy {
        let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [rule]},
                "validations": [{"expression": expression, "message": message}]}
        }))
        .unwrap();
        let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": ns}}}}
        }))
        .unwrap();
        let pp = PostParams::default();
        Api::<ValidatingAdmissionPolicy>::all(client.clone())
            .create(&pp, &policy)
            .await
            .expect("create the ValidatingAdmissionPolicy");
        let deny = DenyPolicy { name, message };
        Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
            .create(&pp, &binding)
            .await
            .expect("create the binding");
        deny
    }

    /// The denial ends: the binding goes (the policy stays until drop).
    pub async fn lift(&self, client: &Client) {
        Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
            .delete(&self.name, &DeleteParams::default())
            .await
            .expect("delete the binding");
    }
}

impl Drop for DenyPolicy {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kubectl")
            .args([
                "delete",
                &format!("validatingadmissionpolicybinding/{}", self.name),
                &format!("validatingadmissionpolicy/{}", self.name),
                "--ignore-not-found",
                "--wait=false",
            ])
            .output();
    }
}
