//! Labels and names of the objects the operator creates for a run.

use std::collections::BTreeMap;

pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const OPERATOR: &str = "netbench-operator";
pub const BENCHMARK: &str = "netbench.io/benchmark";
pub const KIND: &str = "netbench.io/kind";
pub const RUN: &str = "netbench.io/run";
pub const STEP: &str = "netbench.io/step";
pub const ROLE: &str = "netbench.io/role";
/// The pair of a case with a topology a worker belongs to (0 without one).
pub const PAIR: &str = "netbench.io/pair";
/// Namespace of the benchmark an object belongs to, on objects kept in the operator's namespace.
pub const NAMESPACE: &str = "netbench.io/namespace";
/// Marks ConfigMaps that hold a worker's final report.
pub const REPORT: &str = "netbench.io/report";
/// Uid of the benchmark an object in the operator's namespace belongs to.
pub const BENCHMARK_UID: &str = "netbench.io/benchmark-uid";
/// The worker pod whose report an object holds.
pub const WORKER: &str = "netbench.io/worker";
/// Marks the report object that holds one whole sample, folded (`store::reports::folded`).
pub const SAMPLE: &str = "netbench.io/sample";

/// The run id: stable for one generation of one object, so a restarted operator finds the
/// same run instead of starting a second one.
pub fn run_id(uid: &str, generation: i64) -> String {
    format!("{}-g{generation}", short_uid(uid))
}

/// The run id of round `round` of a scheduled benchmark (see `policy::schedule`): at most 52
/// characters, a valid label value.
pub fn scheduled_run_id(uid: &str, generation: i64, round: u64) -> String {
    format!("{}-r{round}", run_id(uid, generation))
}

/// The first 8 alphanumeric characters of an object's uid, which begin its run ids.
pub fn short_uid(uid: &str) -> String {
    uid.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(8)
        .collect()
}

pub fn run_labels(kind: &str, benchmark: &str, run: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY.to_string(), OPERATOR.to_string()),
        (KIND.to_string(), kind.to_lowercase()),
        (BENCHMARK.to_string(), truncate(benchmark, 63)),
        (RUN.to_string(), run.to_string()),
    ])
}

/// The controller reference every child of a benchmark carries (deletion cleans it up).
pub fn owner<K: kube::Resource<DynamicType = ()>>(
    obj: &K,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: obj.meta().name.clone().unwrap_or_default(),
        uid: obj.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether `meta`'s controller reference names the object of `uid` (never an empty uid): a
/// child is the benchmark's own by uid, not by a name or labels someone else can copy.
pub fn controlled_by(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    uid: &str,
) -> bool {
    !uid.is_empty()
        && meta
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// Selector for every child of one benchmark object (all runs).
pub fn benchmark_selector(kind: &str, benchmark: &str) -> String {
    format!(
        "{MANAGED_BY}={OPERATOR},{KIND}={},{BENCHMARK}={}",
        kind.to_lowercase(),
        truncate(benchmark, 63)
    )
}

/// Name of worker `index` of `step`; deterministic so creation is idempotent.
pub fn worker_name(benchmark: &str, run: &str, step: u32, index: u32) -> String {
    let suffix = format!("-{run}-s{step}-w{index}");
    format!(
        "{}{suffix}",
        truncate(benchmark, 63usize.saturating_sub(suffix.len()))
    )
}

/// The name of a Service for worker `worker`'s pod: a DNS-1035 label (a letter first, no
/// dots, at most 63 characters), keeping the end of the worker's name (run, step and worker:
/// what makes it unique) when it must be cut.
pub fn service_name(worker: &str) -> String {
    let label: String = worker
        .chars()
        .map(|c| if c == '.' { '-' } else { c })
        .collect();
    let keep = label.chars().count().saturating_sub(60);
    let tail: String = label.chars().skip(keep).collect();
    format!("nb-{}", tail.trim_start_matches('-'))
}

pub fn truncate(s: &str, max: usize) -> String {
    s.chars()
        .take(max)
        .collect::<String>()
        .trim_end_matches(['-', '.'])
        .to_string()
}

/// `[prefix/]name`, the prefix a DNS subdomain.
pub fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    prefix.is_none_or(is_dns_subdomain) && is_label_name(name)
}

/// 1-253 characters of dot-separated lowercase DNS labels (a node's or a key prefix's name).
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// 1-63 of `[A-Za-z0-9._-]`, alphanumeric at both ends.
pub fn is_label_name(name: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    (1..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && edge(name.chars().next())
        && edge(name.chars().last())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_ours_only_by_the_controller_reference_of_our_uid() {
        let meta = |uid: &str, controller: Option<bool>| {
            serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(
                serde_json::json!({"ownerReferences": [{"apiVersion": "netbench.io/v1alpha1",
                    "kind": "IngressBenchmark", "name": "b", "uid": uid, "controller": controller}]}),
            )
            .unwrap()
        };
        assert!(controlled_by(&meta("u1", Some(true)), "u1"));
        assert!(!controlled_by(&meta("u1", Some(true)), "u2"));
        assert!(
            !controlled_by(&meta("u1", None), "u1"),
            "not the controller"
        );
        assert!(
            !controlled_by(&meta("", Some(true)), ""),
            "an empty uid is no one's"
        );
        assert!(!controlled_by(&Default::default(), "u1"));
    }

    #[test]
    fn names_are_short_enough_and_stable() {
        let run = run_id("3f2a9c1d-aaaa-bbbb-cccc-123456789012", 7);
        assert_eq!(run, "3f2a9c1d-g7");
        let long = "x".repeat(100);
        let w = worker_name(&long, &run, 3, 12);
        assert!(w.len() <= 63, "{w}");
        assert!(w.ends_with("-3f2a9c1d-g7-s3-w12"));
        assert_eq!(worker_name("bench", &run, 0, 1), "bench-3f2a9c1d-g7-s0-w1");
    }

    #[test]
    fn service_names_are_dns_labels_that_keep_the_unique_end() {
        let run = run_id("3f2a9c1d-aaaa-bbbb-cccc-123456789012", 7);
        assert_eq!(
            service_name(&worker_name("bench", &run, 0, 1)),
            "nb-bench-3f2a9c1d-g7-s0-w1"
        );
        let dotted = worker_name("9.web.example", &run, 2, 1);
        assert_eq!(service_name(&dotted), "nb-9-web-example-3f2a9c1d-g7-s2-w1");
        let long = service_name(&worker_name(&"x".repeat(100), &run, 63, 1));
        assert!(long.len() <= 63, "{long}");
        assert!(
            long.starts_with("nb-") && long.ends_with("-3f2a9c1d-g7-s63-w1"),
            "{long}"
        );
        let dashes = service_name(&format!("{}{}", "-".repeat(70), "a-s1-w1"));
        assert_eq!(dashes, "nb-a-s1-w1");
    }
}
