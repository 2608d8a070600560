//! The operator's own requests to the API server, counted by verb and resource
//! (`netbench_kube_requests_total`): where a benchmark's requests go, seen from the operator
//! (the API server's metrics count every client's together).

use http::header::CONTENT_TYPE;
use http::{Method, Request};
use kube::client::Body;
use prometheus::{IntCounterVec, Registry};
use tower::util::MapRequestLayer;

use crate::base::metrics::{counter, Family, Metrics};

pub struct RequestMetrics {
    pub requests: IntCounterVec,
}

impl Family for RequestMetrics {
    fn register(registry: &Registry) -> Self {
        RequestMetrics {
            requests: counter(
                registry,
                "netbench_kube_requests_total",
                "Requests this operator sent to the API server, by verb (GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION) and resource (with its subresource)",
                &["verb", "resource"],
            ),
        }
    }
}

/// A layer for the operator's `kube::Client` that counts each request as it is sent.
pub fn counting(
    metrics: &Metrics,
) -> MapRequestLayer<impl Fn(Request<Body>) -> Request<Body> + Clone> {
    let family = metrics.family::<RequestMetrics>();
    MapRequestLayer::new(move |req: Request<Body>| {
        let (verb, resource) = classify(&req);
        family.requests.with_label_values(&[verb, &resource]).inc();
        req
    })
}

/// The request's verb (kubectl's and the API server's names) and resource.
pub fn classify<B>(req: &Request<B>) -> (&'static str, String) {
    let uri = req.uri();
    let (resource, named) = resource_of(uri.path());
    let watching = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let applying = req
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/apply-patch"));
    let verb = match *req.method() {
        Method::GET if watching => "WATCH",
        Method::GET if named => "GET",
        Method::GET => "LIST",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH if applying => "APPLY",
        Method::PATCH => "PATCH",
        Method::DELETE if named => "DELETE",
        Method::DELETE => "DELETECOLLECTION",
        _ => "OTHER",
    };
    (verb, resource)
}

/// The resource (with "/subresource") a path names, and whether it names one object.
/// `/api/v1/namespaces/ns/pods/p/status` -> ("pods/status", true); a path that is not a
/// resource's (`/version`, `/openapi/v3`) -> ("other", false).
fn resource_of(path: &str) -> (String, bool) {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return ("other".into(), false),
    };
    let rest = match rest {
        ["namespaces", _ns, inner @ ..] if !inner.is_empty() => inner,
        _ => rest,
    };
    let (resource, named) = match rest {
        [resource] => (resource.to_string(), false),
        [resource, _name] => (resource.to_string(), true),
        [resource, _name, sub, ..] => (format!("{resource}/{sub}"), true),
        _ => return ("other".into(), false),
    };
    // The label's values come from this operator's own calls; a name of another shape is not
    // a resource's.
    let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "./-".contains(c);
    if resource.len() > 80 || !resource.chars().all(plain) {
        return ("other".into(), false);
    }
    (resource, named)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(method: &str, uri: &str, content_type: Option<&str>) -> (&'static str, String) {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(ct) = content_type {
            req = req.header(CONTENT_TYPE, ct);
        }
        classify(&req.body(()).unwrap())
    }

    #[test]
    fn verbs_and_resources_are_the_api_servers() {
        let cases = [
            (("GET", "/api/v1/namespaces/a/pods/p", None), ("GET", "pods")),
            (("GET", "/api/v1/namespaces/a/pods?labelSelector=x", None), ("LIST", "pods")),
            (("GET", "/api/v1/pods?watch=true&resourceVersion=1", None), ("WATCH", "pods")),
            (("GET", "/api/v1/namespaces/a", None), ("GET", "namespaces")),
            (("GET", "/api/v1/namespaces", None), ("LIST", "namespaces")),
            (("POST", "/api/v1/namespaces/a/configmaps", None), ("POST", "configmaps")),
            (("PUT", "/api/v1/namespaces/a/configmaps/c", None), ("PUT", "configmaps")),
            (("DELETE", "/api/v1/namespaces/a/configmaps/c", None), ("DELETE", "configmaps")),
            (("DELETE", "/api/v1/namespaces/a/configmaps?labelSelector=x", None), ("DELETECOLLECTION", "configmaps")),
            (
                ("PATCH", "/apis/netbench.io/v1alpha1/namespaces/a/ingressbenchmarks/b/status?fieldManager=x", Some("application/apply-patch+yaml")),
                ("APPLY", "ingressbenchmarks/status"),
            ),
            (
                ("PATCH", "/apis/netbench.io/v1alpha1/namespaces/a/ingressbenchmarks/b", Some("application/merge-patch+json")),
                ("PATCH", "ingressbenchmarks"),
            ),
            (("POST", "/apis/authentication.k8s.io/v1/tokenreviews", None), ("POST", "tokenreviews")),
            (("POST", "/api/v1/namespaces/a/pods/p/eviction", None), ("POST", "pods/eviction")),
            (("GET", "/version", None), ("LIST", "other")),
            (("GET", "/apis/x/v1/namespaces/a/Caps", None), ("LIST", "other")),
        ];
        for ((method, uri, ct), (verb, resource)) in cases {
            assert_eq!(
                of(method, uri, ct),
                (verb, resource.to_string()),
                "{method} {uri}"
            );
        }
    }

    #[tokio::test]
    async fn a_client_with_the_layer_counts_each_request() {
        let metrics = Metrics::new();
        let fake = crate::testing::fake_api::FakeApi::default();
        let served = fake.service_after(std::time::Duration::ZERO, |_| {
            (404, serde_json::json!({"kind": "Status", "code": 404}))
        });
        let client = kube::client::ClientBuilder::new(served, "default")
            .with_layer(&counting(&metrics))
            .build();
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, "a");
        let _ = pods.get_opt("p").await;
        let _ = pods.get_opt("q").await;
        let _ = pods.list(&Default::default()).await;
        let family = metrics.family::<RequestMetrics>();
        let count = |verb: &str| family.requests.with_label_values(&[verb, "pods"]).get();
        assert_eq!((count("GET"), count("LIST")), (2, 1));
        assert_eq!(fake.requests().len(), 3);
    }
}
