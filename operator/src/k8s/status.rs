//! Status writes: server-side apply of the whole status under one field manager.

use kube::api::{Api, Patch, PatchParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;

use crate::base::error::Result;

pub const FIELD_MANAGER: &str = "netbench-operator";

/// Writes `status`; returns the object as the API server stored it.
pub async fn write<K>(api: &Api<K>, name: &str, status: &impl Serialize) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    Ok(api
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await?)
}
