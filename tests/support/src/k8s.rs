//! Kubernetes helpers for tests against the real cluster: create any object from JSON, wait
//! for an object's state with `kube::runtime::wait::await_condition` under a timeout (a panic
//! that names the object, its phase, conditions and last message, and the time waited), and
//! assertions on the status JSON every benchmark kind shares.

use std::fmt::Debug;
use std::time::Duration;

use kube::api::{Api, DynamicObject, GroupVersionKind, PostParams, TypeMeta};
use kube::runtime::wait::await_condition;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Creates any namespaced object from JSON through the dynamic API (like kubectl create).
pub async fn create(client: &Client, namespace: &str, obj: &Value) -> Result<(), kube::Error> {
    let gvk = GroupVersionKind::try_from(&TypeMeta {
        api_version: obj["apiVersion"].as_str().unwrap_or_default().into(),
        kind: obj["kind"].as_str().unwrap_or_default().into(),
    })
    .expect("object has apiVersion and kind");
    let (ar, _) = kube::discovery::pinned_kind(client, &gvk).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    let obj: DynamicObject = serde_json::from_value(obj.clone()).expect("valid object");
    api.create(&PostParams::default(), &obj).await.map(drop)
}

/// Watches the object `name` of `api` until `ready` holds for it, for at most `timeout`, and
/// returns it. `what` names the awaited state in the panic message. An absent object is not
/// ready (it may be created meanwhile).
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    ready: impl Fn(&K) -> bool,
) -> K
where
    K: Resource + Clone + Debug + Send + DeserializeOwned + Serialize + 'static,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    let at = match api.namespace() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    };
    let cond = |obj: Option<&K>| obj.is_some_and(&ready);
    match tokio::time::timeout(timeout, await_condition(api.clone(), name, cond)).await {
        Ok(Ok(Some(obj))) => obj,
        Ok(Ok(None)) => unreachable!("an absent object is never ready"),
        Ok(Err(e)) => panic!("{at}: watching for {what} failed: {e}"),
        Err(_) => {
            let last = match api.get_opt(name).await {
                Ok(Some(obj)) => describe(&serde_json::to_value(&obj).unwrap_or_default()),
                Ok(None) => "it does not exist".to_string(),
                Err(e) => format!("reading it failed: {e}"),
            };
            panic!("{at}: no {what} within {timeout:?}; {last}")
        }
    }
}

/// An object's state for a failure message: phase, message and conditions (one line), then
/// the whole status.
pub fn describe(obj: &Value) -> String {
    let st = &obj["status"];
    let conditions: Vec<String> = st["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}={} ({}: {})",
                c["type"].as_str().unwrap_or("?"),
                c["status"].as_str().unwrap_or("?"),
                c["reason"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    format!(
        "phase {:?}, message {:?}, conditions [{}]; status: {st:#}",
        st["phase"].as_str().unwrap_or(""),
        st["message"].as_str().unwrap_or(""),
        conditions.join(", ")
    )
}

/// The condition `type_` in the status of `obj` (JSON); panics when it has none.
pub fn condition<'a>(obj: &'a Value, type_: &str) -> &'a Value {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition: {:#}", obj["status"]))
}

/// Whether the status of `obj` (JSON) has condition `type_` with status `value`.
pub fn condition_is(obj: &Value, type_: &str, value: &str) -> bool {
    obj["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == type_ && c["status"] == value)
    })
}

/// Asserts the phase in the status of `obj` (JSON), showing the status when it differs.
#[track_caller]
pub fn assert_phase(obj: &Value, phase: &str) {
    assert_eq!(obj["status"]["phase"], phase, "{:#}", obj["status"]);
}
