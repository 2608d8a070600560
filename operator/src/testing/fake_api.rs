//! The one fake Kubernetes API server of the operator's tests: a `kube::Client` whose requests
//! go to a function of the test instead of a cluster, each logged as
//! "METHOD path query body" (trimmed). [`FakeApi::serving`] answers like an API server that
//! holds one benchmark and nothing else; [`FakeApi::failing`] answers every request with a
//! 500. Tests of a whole reconcile read the log to see what the operator wrote.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};

use http::{Request, Response};
use kube::client::Body;
use serde_json::{json, Value};

use crate::admin::config::Config;
use crate::base::metrics::Metrics;
use crate::context::{Context, Kinds};

/// One request as the fake server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub body: String,
}

/// The answer to a request: status code and JSON body.
pub type Answer = (u16, Value);

/// A fake API server and the log of what it was asked.
#[derive(Clone, Default)]
pub struct FakeApi {
    log: Arc<Mutex<Vec<String>>>,
}

impl FakeApi {
    /// A client whose every request `answer` answers.
    pub fn client(
        &self,
        answer: impl Fn(&Seen) -> Answer + Clone + Send + Sync + 'static,
    ) -> kube::Client {
        self.client_after(std::time::Duration::ZERO, answer)
    }

    /// A client whose every request is logged at once and answered by `answer` after `delay`
    /// (tokio's clock: a test with paused time sees it exactly).
    pub fn client_after(
        &self,
        delay: std::time::Duration,
        answer: impl Fn(&Seen) -> Answer + Clone + Send + Sync + 'static,
    ) -> kube::Client {
        kube::Client::new(self.service_after(delay, answer), "default")
    }

    /// The service behind [`FakeApi::client_after`], for a test that puts a layer in front.
    pub fn service_after(
        &self,
        delay: std::time::Duration,
        answer: impl Fn(&Seen) -> Answer + Clone + Send + Sync + 'static,
    ) -> tower::util::BoxCloneService<Request<Body>, Response<Body>, Infallible> {
        let log = self.log.clone();
        let svc = tower::service_fn(move |req: Request<Body>| {
            let (log, answer) = (log.clone(), answer.clone());
            async move {
                let method = req.method().to_string();
                let path = req.uri().path().to_string();
                let query = req.uri().query().unwrap_or("").to_string();
                let body = http_body_util::BodyExt::collect(req.into_body())
                    .await
                    .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                    .unwrap_or_default();
                let seen = Seen {
                    method,
                    path,
                    query,
                    body,
                };
                let line = format!("{} {} {} {}", seen.method, seen.path, seen.query, seen.body);
                log.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line.trim_end().to_string());
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let (code, body) = answer(&seen);
                let response = Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Body::from(body.to_string().into_bytes()))
                    .unwrap_or_else(|_| Response::new(Body::empty()));
                Ok::<_, Infallible>(response)
            }
        });
        tower::util::BoxCloneService::new(svc)
    }

    /// A client of an API server that holds `benchmark` and nothing else: the benchmark (also
    /// as the answer to a patch of its status), empty lists (and deleted collections), 404 for
    /// anything else.
    pub fn serving(&self, benchmark: Value) -> kube::Client {
        self.client(move |seen| holding(&benchmark, seen))
    }

    /// A client of an API server that answers every request with a 500.
    pub fn failing(&self) -> kube::Client {
        self.client(|_| (500, status(500, "InternalError")))
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One reconcile of `obj` (`driver::apply`), then its Events published (a reconcile hands
/// them over and returns before they are sent): the fake server's log then holds all it did.
pub async fn apply<K: crate::run::Hooks>(
    obj: &K,
    ctx: &Context,
    api: &kube::Api<K>,
) -> crate::base::error::Result<kube::runtime::controller::Action> {
    let action = crate::driver::apply(obj, ctx, api).await;
    assert!(
        ctx.events.flush(std::time::Duration::from_secs(10)).await,
        "the reconcile's Events were not published in 10 s"
    );
    action
}

/// How an API server holding only `benchmark` answers `seen`.
pub fn holding(benchmark: &Value, seen: &Seen) -> Answer {
    let name = benchmark["metadata"]["name"].as_str().unwrap_or_default();
    let plural = format!(
        "{}s",
        benchmark["kind"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase()
    );
    let own = seen.path.ends_with(&format!("/{plural}/{name}"))
        || seen.path.ends_with(&format!("/{plural}/{name}/status"));
    let parts: Vec<&str> = seen.path.trim_matches('/').split('/').collect();
    let collection = match parts.iter().position(|p| *p == "namespaces") {
        Some(i) => parts.len() == i + 3,
        None => parts.len() <= 3 || parts.get(1).is_some_and(|v| v.starts_with('v')),
    };
    match seen.method.as_str() {
        "GET" | "PATCH" if own => (200, benchmark.clone()),
        "GET" | "DELETE" if collection => (200, empty_list()),
        _ => (404, status(404, "NotFound")),
    }
}

/// An empty list of any kind.
pub fn empty_list() -> Value {
    json!({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []})
}

/// A failure Status with `code` and `reason`.
pub fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "reason": reason, "code": code, "message": reason})
}

/// The operator's context for a test: `client`, `config`, fresh metrics and registry, no
/// kinds listed (the queue sees no other benchmark), wake-ups dropped.
pub fn context(client: kube::Client, config: Config) -> Context {
    let (wake, _) = tokio::sync::mpsc::unbounded_channel();
    let reporter = kube::runtime::events::Reporter {
        controller: "netbench-operator".into(),
        instance: None,
    };
    Context::new(
        client,
        config,
        Arc::new(Metrics::new()),
        reporter,
        wake,
        Kinds::default(),
    )
}
