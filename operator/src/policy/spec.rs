//! What a run measures: the spec of a benchmark object, and its fingerprint (the same spec runs
//! the same measurement; schedule, history, baseline, cleanup and gates do not change it).

use sha2::{Digest, Sha256};

/// The spec as JSON, from the object (every kind keeps it under "spec").
pub fn spec_of<K: serde::Serialize>(obj: &K) -> serde_json::Value {
    serde_json::to_value(obj)
        .ok()
        .and_then(|mut v| v.get_mut("spec").map(serde_json::Value::take))
        .unwrap_or_default()
}

/// SHA-256 of the spec's measurement-defining part, hex: what "the same spec" means for a
/// baseline of previous results (schedule, history, baseline, cleanup and gates left out).
pub fn spec_hash(spec: &serde_json::Value) -> String {
    let mut measured = spec.clone();
    if let Some(map) = measured.as_object_mut() {
        for key in [
            "schedule",
            "suspend",
            "concurrencyPolicy",
            "historyLimit",
            "baseline",
            "cleanup",
            "gates",
        ] {
            map.remove(key);
        }
    }
    let canonical = serde_json::to_string(&measured).unwrap_or_default();
    let digest = Sha256::digest(canonical.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_ignore_what_does_not_measure() {
        let a = serde_json::json!({"target": {"url": "http://x/"}, "schedule": "* * * * *"});
        let b = serde_json::json!({"target": {"url": "http://x/"}, "historyLimit": 3});
        let c = serde_json::json!({"target": {"url": "http://y/"}});
        assert_eq!(spec_hash(&a), spec_hash(&b));
        assert_ne!(spec_hash(&a), spec_hash(&c));
        assert_eq!(spec_hash(&a).len(), 64);
    }
}
