//! The chart's optional NetworkPolicy admits worker pods by the labels the operator gives them
//! (charts/netbench/templates/networkpolicy.yaml): every worker pod of both kinds, in every
//! role, must match its selector, or workers could not reach the operator with the policy on.

use std::collections::BTreeMap;

use operator::base::labels::{MANAGED_BY, OPERATOR, ROLE};

fn template() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../charts/netbench/templates/networkpolicy.yaml"
    );
    std::fs::read_to_string(path).expect("the chart's NetworkPolicy template")
}

/// The worker rule's selector as the template writes it: (matchLabels, role values).
fn worker_selector(text: &str) -> (BTreeMap<String, String>, Vec<String>) {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let start = lines
        .iter()
        .position(|l| *l == "- namespaceSelector: {}")
        .expect("the worker rule: pods of any namespace");
    let rule = &lines[start..];
    let labels_at = rule.iter().position(|l| *l == "matchLabels:").unwrap() + 1;
    let mut match_labels = BTreeMap::new();
    for l in &rule[labels_at..] {
        let Some((k, v)) = l.split_once(": ") else {
            break;
        };
        if k.contains(' ') || k == "matchExpressions" {
            break;
        }
        match_labels.insert(k.to_string(), v.to_string());
    }
    let key_at = rule
        .iter()
        .position(|l| *l == format!("- key: {ROLE}"))
        .expect("a matchExpression on the role label");
    assert_eq!(rule[key_at + 1], "operator: In");
    let values = rule[key_at + 2]
        .strip_prefix("values: [")
        .and_then(|v| v.strip_suffix(']'))
        .expect("values: [..]")
        .split(',')
        .map(|v| v.trim().to_string())
        .collect();
    (match_labels, values)
}

fn admitted(
    labels: &BTreeMap<String, String>,
    selector: &(BTreeMap<String, String>, Vec<String>),
) -> bool {
    selector.0.iter().all(|(k, v)| labels.get(k) == Some(v))
        && labels.get(ROLE).is_some_and(|r| selector.1.contains(r))
}

#[test]
fn every_worker_pod_matches_the_chart_network_policy() {
    let selector = worker_selector(&template());
    assert_eq!(
        selector.0,
        BTreeMap::from([(MANAGED_BY.to_string(), OPERATOR.to_string())])
    );
    let ib: crds::IngressBenchmark = serde_yaml::from_str(
        "{apiVersion: netbench.io/v1alpha1, kind: IngressBenchmark, metadata: {name: web, namespace: team, uid: u-1}, spec: {target: {url: 'http://svc/'}, workers: {replicas: 2}}}",
    )
    .unwrap();
    let eb: crds::EgressBenchmark = serde_yaml::from_str(
        "{apiVersion: netbench.io/v1alpha1, kind: EgressBenchmark, metadata: {name: e, namespace: team, uid: u-2}, spec: {cases: [{name: pod, client: {nodeName: a}, server: {nodeName: b}}, {name: ext, client: {nodeName: a, hostNetwork: true}, server: {address: 198.18.20.2}}]}}",
    )
    .unwrap();
    let mut pods = operator::ingress::plan::workers(
        &ib,
        "run",
        operator::policy::samples::Slot::first(0),
        false,
    );
    pods.extend(operator::egress::plan::workers(
        &eb,
        "run",
        operator::policy::samples::Slot::first(0),
    ));
    pods.extend(operator::egress::plan::workers(
        &eb,
        "run",
        operator::policy::samples::Slot::first(1),
    ));
    let roles: std::collections::BTreeSet<&str> =
        pods.iter().map(|p| p.labels[ROLE].as_str()).collect();
    assert_eq!(roles, ["client", "server"].into(), "both roles covered");
    for pod in &pods {
        assert!(
            admitted(&pod.labels, &selector),
            "{} ({:?}) is not admitted by the chart's NetworkPolicy {selector:?}",
            pod.name,
            pod.labels
        );
    }
}
