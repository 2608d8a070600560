//! The benchmark a stored object (a worker report, a restore record) belongs to, as the operator
//! knows it from the benchmark itself, never as a stored object claims.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{Resource, ResourceExt};

#[derive(Clone, Debug, PartialEq)]
pub struct Owner {
    /// The kind's name, e.g. "IngressBenchmark".
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl Owner {
    pub fn of<K: Resource<DynamicType = ()>>(obj: &K) -> Owner {
        Owner {
            kind: K::kind(&()).into_owned(),
            namespace: obj.namespace().unwrap_or_default(),
            name: obj.name_any(),
            uid: obj.uid().unwrap_or_default(),
        }
    }

    /// The benchmark as an Event's subject.
    pub fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some("netbench.io/v1alpha1".into()),
            kind: Some(self.kind.clone()),
            namespace: Some(self.namespace.clone()),
            name: Some(self.name.clone()),
            uid: Some(self.uid.clone()),
            ..Default::default()
        }
    }
}
