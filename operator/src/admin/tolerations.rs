//! Tolerations the cluster admin gives every worker pod (Helm value `workerTolerations`, flag
//! `--worker-tolerations`): for clusters whose benchmark nodes are tainted. Never from a
//! benchmark: a taint often keeps teams' pods off nodes (control planes, other tenants' pools),
//! so only the admin may let benchmarks past one.
//!
//! The flag is a JSON array of core/v1 Tolerations, as Helm's `toJson` renders it. Anything
//! the API server would refuse on a pod is refused when the operator starts, with the entry and
//! the reason: a bad toleration would otherwise fail every benchmark's pods one by one.

use k8s_openapi::api::core::v1::{Taint, Toleration};
use serde::Deserialize;

use crate::base::labels::{is_label_key, is_label_name};
use crate::base::text::clip;

/// More than any real node pool needs; bounds what each pod carries.
pub const MAX_TOLERATIONS: usize = 32;

/// The admin's worker tolerations, checked as the API server checks a pod's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkerTolerations(Vec<Toleration>);

/// One entry as written: unknown fields are refused (a misspelt `efect` would otherwise
/// widen the toleration to every effect).
/// A field that is absent, null or "" is empty, as for the API server.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Entry {
    #[serde(default, deserialize_with = "empty_if_null")]
    key: String,
    #[serde(default, deserialize_with = "empty_if_null")]
    operator: String,
    #[serde(default, deserialize_with = "empty_if_null")]
    value: String,
    #[serde(default, deserialize_with = "empty_if_null")]
    effect: String,
    toleration_seconds: Option<i64>,
}

fn empty_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

impl WorkerTolerations {
    /// The pod spec's `tolerations` (None when there are none).
    pub fn for_pod(&self) -> Option<Vec<Toleration>> {
        (!self.0.is_empty()).then(|| self.0.clone())
    }

    /// Does one of them tolerate `taint` (Kubernetes' ToleratesTaint)?
    pub fn tolerate(&self, taint: &Taint) -> bool {
        self.0.iter().any(|t| tolerates(t, taint))
    }

    /// May a worker stay on a node with `taint` for as long as it runs? A NoExecute taint
    /// evicts a pod after the tolerationSeconds of the FIRST toleration that matches it
    /// (Kubernetes' taint eviction), at once when none matches.
    pub fn tolerate_for_good(&self, taint: &Taint) -> bool {
        let first = self.0.iter().find(|t| tolerates(t, taint));
        match first {
            None => false,
            Some(t) if taint.effect == "NoExecute" => t.toleration_seconds.is_none(),
            Some(_) => true,
        }
    }
}

fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    let effect = t.effect.as_deref().unwrap_or("");
    let key = t.key.as_deref().unwrap_or("");
    if (!effect.is_empty() && effect != taint.effect) || (!key.is_empty() && key != taint.key) {
        return false;
    }
    match t.operator.as_deref().unwrap_or("") {
        "Exists" => true,
        "" | "Equal" => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        _ => false,
    }
}

impl std::str::FromStr for WorkerTolerations {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        // Helm renders a deleted value (`--set workerTolerations=null`) as null.
        if text.trim().is_empty() || text.trim() == "null" {
            return Ok(WorkerTolerations::default());
        }
        let entries: Vec<Entry> = serde_json::from_str(text).map_err(|e| {
            // serde quotes what it could not read: bounded.
            let why = clip(&e.to_string(), 200);
            format!("not a JSON array of tolerations ({{\"key\", \"operator\", \"value\", \"effect\", \"tolerationSeconds\"}}): {why}")
        })?;
        if entries.len() > MAX_TOLERATIONS {
            return Err(format!(
                "{} tolerations; at most {MAX_TOLERATIONS}",
                entries.len()
            ));
        }
        let checked = entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| check(e).map_err(|why| format!("toleration {i}: {why}")))
            .collect::<Result<_, _>>()?;
        Ok(WorkerTolerations(checked))
    }
}

/// The API server's checks of one toleration (ValidateTolerations), with the reason.
fn check(e: Entry) -> Result<Toleration, String> {
    let shown = |s: &str| clip(s, 64);
    if !e.key.is_empty() && !is_label_key(&e.key) {
        return Err(format!("key {:?} is not a label key", shown(&e.key)));
    }
    match e.operator.as_str() {
        "Exists" if !e.value.is_empty() => {
            return Err("operator Exists takes no value".into());
        }
        "Exists" => {}
        "" | "Equal" if e.key.is_empty() => {
            return Err("an empty key tolerates every taint only with operator Exists".into());
        }
        "" | "Equal" if !e.value.is_empty() && !is_label_name(&e.value) => {
            return Err(format!("value {:?} is not a label value", shown(&e.value)));
        }
        "" | "Equal" => {}
        other => {
            return Err(format!(
                "operator {:?} is not Exists or Equal (Lt and Gt are not supported)",
                shown(other)
            ))
        }
    }
    if !matches!(
        e.effect.as_str(),
        "" | "NoSchedule" | "PreferNoSchedule" | "NoExecute"
    ) {
        return Err(format!(
            "effect {:?} is not NoSchedule, PreferNoSchedule or NoExecute",
            shown(&e.effect)
        ));
    }
    // Zero or less is valid: evicted at once (such a node is then not usable, above).
    if e.toleration_seconds.is_some() && e.effect != "NoExecute" {
        return Err("tolerationSeconds needs effect NoExecute".into());
    }
    let some = |s: String| (!s.is_empty()).then_some(s);
    Ok(Toleration {
        key: some(e.key),
        operator: some(e.operator),
        value: some(e.value),
        effect: some(e.effect),
        toleration_seconds: e.toleration_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<WorkerTolerations, String> {
        text.parse()
    }

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(String::from),
            effect: effect.into(),
            ..Default::default()
        }
    }

    #[test]
    fn none_by_default_and_helm_s_empty_list_is_none() {
        for text in ["", "  ", "[]"] {
            let t = parse(text).unwrap();
            assert_eq!(t.for_pod(), None, "{text:?}");
            assert!(!t.tolerate(&taint("a", None, "NoSchedule")));
        }
    }

    #[test]
    fn entries_are_kept_as_written() {
        let t = parse(
            r#"[{"key":"kwok.x-k8s.io/node","operator":"Exists","effect":"NoSchedule"},
                {"key":"pool","value":"bench","effect":"NoExecute","tolerationSeconds":30}]"#,
        )
        .unwrap();
        let pod = t.for_pod().unwrap();
        assert_eq!(pod.len(), 2);
        assert_eq!(pod[0].key.as_deref(), Some("kwok.x-k8s.io/node"));
        assert_eq!(pod[0].operator.as_deref(), Some("Exists"));
        assert_eq!(pod[0].value, None);
        assert_eq!(pod[1].operator, None);
        assert_eq!(pod[1].value.as_deref(), Some("bench"));
        assert_eq!(pod[1].toleration_seconds, Some(30));
    }

    #[test]
    fn a_taint_is_tolerated_as_kubernetes_tolerates_it() {
        let t = parse(
            r#"[{"key":"kwok.x-k8s.io/node","operator":"Exists","effect":"NoSchedule"},
                {"key":"pool","operator":"Equal","value":"bench"}]"#,
        )
        .unwrap();
        assert!(t.tolerate(&taint("kwok.x-k8s.io/node", Some("fake"), "NoSchedule")));
        assert!(!t.tolerate(&taint("kwok.x-k8s.io/node", Some("fake"), "NoExecute")));
        // No effect named: every effect; Equal: the value must match.
        assert!(t.tolerate(&taint("pool", Some("bench"), "NoExecute")));
        assert!(!t.tolerate(&taint("pool", Some("prod"), "NoSchedule")));
        assert!(!t.tolerate(&taint("pool", None, "NoSchedule")));
        assert!(!t.tolerate(&taint(
            "node-role.kubernetes.io/control-plane",
            None,
            "NoSchedule"
        )));
        let all = parse(r#"[{"operator":"Exists"}]"#).unwrap();
        assert!(all.tolerate(&taint("anything", Some("x"), "NoExecute")));
    }

    #[test]
    fn what_the_api_server_would_refuse_is_refused_with_the_entry_and_why() {
        let refused = [
            ("{}", "not a JSON array of tolerations"),
            ("[{\"key\":\"a\"", "not a JSON array"),
            (
                r#"[{"key":"a","efect":"NoSchedule"}]"#,
                "unknown field `efect`",
            ),
            (
                r#"[{"key":"a b"}]"#,
                "toleration 0: key \"a b\" is not a label key",
            ),
            (
                r#"[{"key":"a","operator":"In"}]"#,
                "operator \"In\" is not Exists or Equal",
            ),
            (
                r#"[{"key":"a","operator":"Exists","value":"x"}]"#,
                "operator Exists takes no value",
            ),
            (
                r#"[{"value":"x"}]"#,
                "an empty key tolerates every taint only with operator Exists",
            ),
            (
                r#"[{"key":"a","value":"x y"}]"#,
                "value \"x y\" is not a label value",
            ),
            (
                r#"[{"key":"a","effect":"NoRun"}]"#,
                "effect \"NoRun\" is not NoSchedule",
            ),
            (
                r#"[{"key":"a","effect":"NoSchedule","tolerationSeconds":5}]"#,
                "tolerationSeconds needs effect NoExecute",
            ),
            (
                r#"[{"key":"ok","operator":"Exists"},{"key":"b","operator":"Exists","value":"v"}]"#,
                "toleration 1: operator Exists takes no value",
            ),
        ];
        for (text, want) in refused {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
        let many = format!(
            "[{}]",
            vec![r#"{"key":"a","operator":"Exists"}"#; 33].join(",")
        );
        assert_eq!(parse(&many).unwrap_err(), "33 tolerations; at most 32");
    }

    #[test]
    fn a_refusal_quotes_a_bounded_part_of_the_entry() {
        let long = "k".repeat(10_000);
        let e = parse(&format!(r#"[{{"key":"a","operator":"{long}"}}]"#)).unwrap_err();
        assert!(e.len() < 200, "{} characters", e.len());
        // serde quotes an unknown field or a wrong type whole.
        let e = parse(&format!(r#"[{{"{long}":"a"}}]"#)).unwrap_err();
        assert!(e.len() < 400, "{} characters", e.len());
        let e = parse(&format!(r#"["{long}"]"#)).unwrap_err();
        assert!(e.len() < 400, "{} characters", e.len());
    }

    #[test]
    fn null_is_empty_as_for_the_api_server_and_negative_seconds_are_valid() {
        assert_eq!(parse("null").unwrap().for_pod(), None);
        let t = parse(r#"[{"key":"a","operator":null,"value":null,"effect":null}]"#).unwrap();
        assert_eq!(t.for_pod().unwrap()[0].operator, None);
        assert!(t.tolerate(&taint("a", None, "NoSchedule")));
        assert!(parse(r#"[{"key":"a","effect":"NoExecute","tolerationSeconds":-1}]"#).is_ok());
    }

    #[test]
    fn a_no_execute_taint_is_tolerated_for_good_only_without_seconds_on_the_first_match() {
        let t = parse(
            r#"[{"key":"a","operator":"Exists","effect":"NoExecute","tolerationSeconds":30},
                {"key":"a","operator":"Exists"},
                {"key":"b","operator":"Exists"}]"#,
        )
        .unwrap();
        // The first match (30 s) decides, as the taint eviction controller does.
        assert!(t.tolerate(&taint("a", None, "NoExecute")));
        assert!(!t.tolerate_for_good(&taint("a", None, "NoExecute")));
        assert!(t.tolerate_for_good(&taint("a", None, "NoSchedule")));
        assert!(t.tolerate_for_good(&taint("b", None, "NoExecute")));
        assert!(!t.tolerate_for_good(&taint("c", None, "NoSchedule")));
    }
}
