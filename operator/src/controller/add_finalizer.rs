//! The operator's finalizer put on a new benchmark in the reconcile that first sees it, which
//! then goes on with the object the API server answered. kube-runtime's `finalizer` helper adds
//! it and ends the reconcile; the next one, woken by the watch showing the change, read the
//! object again (a version this process had not seen): two round trips and a watch delay at
//! every benchmark's start. The patch is the helper's own (a test of the list as seen, then
//! the addition), so a finalizer someone else added in between makes it fail and retry, never
//! a duplicate; the helper then finds ours and runs Apply.

use std::sync::Arc;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::k8s::versions::Versions;

/// `obj` with `name` among its finalizers: as it is when it has it or is being deleted, else as
/// the API server answered the patch that added it (both versions noted in `versions`, so the
/// reconcile needs no fresh read of it, and the copy without it is known to be behind). None
/// for a copy behind this process's own writes (`Versions::is_behind`): it added the finalizer
/// already, the watch has yet to show it, and a patch tested against this copy would fail.
pub async fn with_finalizer<K>(
    api: &Api<K>,
    name: &str,
    obj: Arc<K>,
    versions: &Versions,
) -> Result<Option<Arc<K>>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let has = obj.finalizers().iter().any(|f| f == name);
    if has || obj.meta().deletion_timestamp.is_some() {
        return Ok(Some(obj));
    }
    if let (Some(uid), Some(version)) = (obj.uid(), obj.resource_version()) {
        if versions.is_behind(&uid, &version) {
            return Ok(None);
        }
        versions.note(&uid, &version);
    }
    let patch: json_patch::Patch = serde_json::from_value(add_operations(obj.finalizers(), name))
        .map_err(kube::Error::SerdeError)?;
    let patched = api
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await?;
    versions.note_object(&patched);
    Ok(Some(Arc::new(patched)))
}

/// kube-runtime's operations: the list must still be what was seen (absent when empty), then
/// `name` is added.
fn add_operations(seen: &[String], name: &str) -> Value {
    if seen.is_empty() {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [name]},
        ])
    } else {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": seen},
            {"op": "add", "path": "/metadata/finalizers/-", "value": name},
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_tests_the_list_as_seen() {
        let none = add_operations(&[], "f");
        assert_eq!(
            none[0],
            json!({"op": "test", "path": "/metadata/finalizers", "value": null})
        );
        assert_eq!(none[1]["value"], json!(["f"]));
        let other = add_operations(&["x".to_string()], "f");
        assert_eq!(other[0]["value"], json!(["x"]));
        assert_eq!(
            other[1],
            json!({"op": "add", "path": "/metadata/finalizers/-", "value": "f"})
        );
        let _: json_patch::Patch = serde_json::from_value(other).unwrap();
    }
}
