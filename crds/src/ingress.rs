//! IngressBenchmark: HTTP requests per second and latency against an ingress controller, with an
//! optional sweep over the controller's CPUs or replicas.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Affinity;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::{CleanupPolicy, Duration};

pub mod compare;
mod controllers;
mod status;
mod sweep;
pub use controllers::{
    Comparison, Controller, ControllerRow, ControllerWorkload, GatewayRef, Made, MadeChange,
    OwnedRoute, RouteBackend, RouteChangeAction, RouteChangeLog, RouteChangeResult, RouteChanges,
    RouteScaleLog, RouteScaleResult, Standing, WorkloadUsage, MAX_CONTROLLERS, MAX_ROUTE_CHANGES,
    MAX_ROUTE_COUNT, MAX_WORKLOADS,
};
pub use status::{IngressBenchmarkStatus, StepResult, WorkerSummary};
pub use sweep::{SavedTarget, Scaling, ScalingRow, SweepSpec, SweepStep, TargetKind, TargetRef};

/// Measure HTTP requests per second and latency against a target (usually an ingress controller),
/// optionally sweeping the controller's CPUs (1, 2, 4, 8) to show whether throughput scales linearly.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "netbench.io",
    version = "v1alpha1",
    kind = "IngressBenchmark",
    derive = "PartialEq",
    namespaced,
    status = "IngressBenchmarkStatus",
    shortname = "ib",
    category = "benchmarks",
    doc = "Measure HTTP requests per second and latency against an ingress controller, optionally sweeping its CPUs.",
    printcolumn = r#"{"name":"Phase", "type":"string", "jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"RPS", "type":"string", "description":"Requests per second of the last finished step, all workers: mean ± 95% confidence interval over its samples", "jsonPath":".status.rpsInterval"}"#,
    printcolumn = r#"{"name":"P99", "type":"string", "description":"99th percentile latency of the last finished step", "jsonPath":".status.p99"}"#,
    printcolumn = r#"{"name":"Workers", "type":"string", "description":"Workers reporting / requested", "jsonPath":".status.workers"}"#,
    printcolumn = r#"{"name":"Queue", "type":"integer", "priority":1, "description":"Position in the queue while Queued (kubectl get -o wide)", "jsonPath":".status.queue.position"}"#,
    printcolumn = r#"{"name":"Age", "type":"date", "jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.sweep) || (has(self.controllers) && size(self.controllers) > 0 ? !has(self.sweep.targetRef) && self.controllers.all(c, has(c.sweepTarget)) : has(self.sweep.targetRef))").message("a sweep scales sweep.targetRef; with controllers, each controller's own sweepTarget instead (every controller names one, and sweep.targetRef is left out)"),
    validation = Rule::new("has(self.sweep) || !has(self.controllers) || self.controllers.all(c, !has(c.sweepTarget))").message("controllers[].sweepTarget needs spec.sweep (its steps say the sizes)"),
    validation = Rule::new("!has(self.sweep) || !has(self.controllers) || size(self.sweep.steps) * size(self.controllers) <= 64").message("a sweep beside controllers measures each controller at each size: sweep.steps x controllers must be at most 64"),
    validation = Rule::new("!has(self.routeChanges) || !has(self.controllers) || !has(self.routeChanges.swapTo) || self.controllers.all(c, !has(c.route) || c.route.backend.name != self.routeChanges.swapTo.name)").message("routeChanges.swapTo must be another Service than every route's backend (answers name their backend)"),
    validation = Rule::new("!has(self.gates) || self.gates.all(g, !(g.figure in ['routeChangesShown', 'routeChangeP99Ms']) || (has(self.routeChanges) && (!has(self.routeChanges.action) || self.routeChanges.action == 'SwapBackend'))) && self.gates.all(g, !(g.figure in ['routeCreationsShown', 'routeCreationP99Ms', 'routeDeletionsShown', 'routeDeletionP99Ms']) || (has(self.routeChanges) && has(self.routeChanges.action) && self.routeChanges.action == 'DeleteAndCreate'))").message("gates on routeChangesShown or routeChangeP99Ms need routeChanges (action SwapBackend); on routeCreation* or routeDeletion* figures, routeChanges with action DeleteAndCreate"),
    validation = Rule::new("!has(self.routeChanges) || !has(self.routeChanges.action) || self.routeChanges.action != 'DeleteAndCreate' || ((!has(self.gates) || self.gates.all(g, g.figure != 'errorRate')) && (!has(self.thresholds) || !has(self.thresholds.maxErrorRate)))").message("an errorRate gate or thresholds.maxErrorRate cannot judge routeChanges with action DeleteAndCreate: the Gateway's 404s while the route is gone would count as errors (the run fails on a backend's own 4xx, 5xx and connection failures above the operator's limit)"),
    validation = Rule::new("!has(self.routeChanges) || (has(self.controllers) && size(self.controllers) > 0 && self.controllers.all(c, has(c.route)))").message("routeChanges needs controllers, each with a route (the run changes the routes it creates)"),
)]
pub struct IngressBenchmarkSpec {
    /// The HTTP endpoint to load.
    pub target: HttpTarget,
    /// Controllers to compare under the same load (at most 8): each is measured in turn, in
    /// an order interleaved across samples (A B C, then C B A, ...) so that a machine's drift
    /// favours none. Each may set its own URL and Host header, or have a Gateway API HTTPRoute
    /// the benchmark creates. Without controllers, target is measured alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[x_kube(
        validation = Rule::new("self.all(a, self.exists_one(b, b.name == a.name))").message("controllers' names must be unique"),
        validation = Rule::new("self.all(a, !has(a.route) || self.exists_one(b, has(b.route) && b.route.hostname == a.route.hostname))").message("the routes of controllers must have distinct hostnames (a Gateway gives a hostname to the oldest route)"),
    )]
    pub controllers: Vec<Controller>,
    /// Change each controller's route while it is under load (swap its backend, or delete and
    /// create it again): how long a change takes to reach the data plane, and what the churn
    /// costs in errors and latency. Every controller needs a route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_changes: Option<RouteChanges>,
    /// How much load each run generates.
    #[serde(default)]
    pub load: LoadSpec,
    /// Where the load-generator pods run.
    #[serde(default)]
    pub workers: WorkerSpec,
    /// Repeat the run for each step, scaling the target between steps (CPU and/or replicas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepSpec>,
    /// Pass/fail limits; the result sets the ThresholdsMet condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<Thresholds>,
    /// SLO gates: limits on the step figures, judged on the data merged across the workers;
    /// a broken gate fails the run (at once with abortOnFail). See docs/gates.md.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(validation = Rule::new("self.all(g, g.figure in ['rps', 'p50Ms', 'p90Ms', 'p99Ms', 'p999Ms', 'errorRate', 'routeChangesShown', 'routeChangeP99Ms', 'routeCreationsShown', 'routeCreationP99Ms', 'routeDeletionsShown', 'routeDeletionP99Ms', 'routesAnswered', 'routesAllAnsweredMs'])").message("an IngressBenchmark's gates judge rps, p50Ms, p90Ms, p99Ms, p999Ms, errorRate, (with routeChanges) routeChangesShown, routeChangeP99Ms, routeCreationsShown, routeCreationP99Ms, routeDeletionsShown, routeDeletionP99Ms or (with a route scale) routesAnswered, routesAllAnsweredMs"))]
    pub gates: Vec<crate::gates::Gate>,
    /// What happens to worker pods when the run ends: Always (default), OnSuccess, Never.
    #[serde(default)]
    pub cleanup: CleanupPolicy,
    /// Samples, history, baseline and schedule (see crds::history::Repetition).
    #[serde(flatten)]
    pub repetition: crate::history::Repetition,
}

/// The HTTP endpoint under test.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpTarget {
    /// Absolute http:// or https:// URL, e.g. http://ingress-nginx-controller.ingress-nginx/ .
    #[x_kube(validation = Rule::new("isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''").message("target.url must be an absolute http:// or https:// URL with a host"))]
    #[schemars(length(min = 1, max = 2048))]
    pub url: String,
    /// HTTP method.
    #[serde(default = "default_method")]
    #[schemars(regex(pattern = r"^[A-Z]+$"), length(max = 16))]
    pub method: String,
    /// Extra request headers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub headers: Vec<HttpHeader>,
    /// Request body (sent with every request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 65536))]
    pub body: Option<String>,
    /// Host header to send instead of the URL's host (e.g. to pick an Ingress rule while
    /// connecting to the controller's Service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub host_header: Option<String>,
    /// TLS options for https:// targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
}

fn default_method() -> String {
    "GET".into()
}

/// One request header.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct HttpHeader {
    /// Header name.
    #[schemars(
        regex(pattern = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"),
        length(min = 1, max = 128)
    )]
    pub name: String,
    /// Header value.
    #[schemars(length(max = 4096))]
    pub value: String,
}

/// TLS client options.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// Accept any server certificate. Only for test targets with self-signed certificates.
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

/// Load shape, per run (and per sweep step).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.connections >= self.threads").message("load.connections must be at least load.threads (each thread needs a connection)"),
    validation = Rule::new("duration(self.duration) > duration(self.warmup)").message("load.duration must be longer than load.warmup"),
)]
pub struct LoadSpec {
    /// Open connections per worker (wrk -c). At most 20000: what one pod can hold open to one
    /// target address (its ephemeral ports), with room to spare.
    #[serde(default = "default_connections")]
    #[schemars(range(min = 1, max = 20000))]
    pub connections: u32,
    /// Load-generator threads per worker (wrk -t); usually the worker's CPU count.
    #[serde(default = "default_threads")]
    #[schemars(range(min = 1, max = 64))]
    pub threads: u32,
    /// How long each run measures, after the warm-up ("30s", "2m").
    #[serde(default = "default_duration")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN), length(max = 32))]
    #[x_kube(validation = Rule::new("duration(self) >= duration('1s') && duration(self) <= duration('24h')").message("load.duration must be between 1s and 24h"))]
    pub duration: Duration,
    /// Load applied before measuring starts; its requests are not recorded.
    #[serde(default = "default_warmup")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN), length(max = 32))]
    #[x_kube(validation = Rule::new("duration(self) <= duration('1h')").message("load.warmup must be at most 1h"))]
    pub warmup: Duration,
    /// Reuse connections. false opens a new TCP connection per request (the seed report's
    /// ingress-nginx runs were done this way).
    #[serde(default = "default_true")]
    pub keep_alive: bool,
    /// Use HTTP/2 instead of HTTP/1.1.
    #[serde(default)]
    pub http2: bool,
    /// Constant arrival rate in requests per second, over all workers (like wrk2 -R). Absent:
    /// closed loop, as fast as the target answers (like wrk). With a rate, latency is measured
    /// from each request's intended send time (coordinated-omission corrected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000000))]
    pub rate: Option<u64>,
    /// Per-request timeout; slower requests count as timeout errors.
    #[serde(default = "default_timeout")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN), length(max = 32))]
    #[x_kube(validation = Rule::new("duration(self) >= duration('1ms') && duration(self) <= duration('5m')").message("load.timeout must be between 1ms and 5m"))]
    pub timeout: Duration,
}

fn default_connections() -> u32 {
    50
}
fn default_threads() -> u32 {
    1
}
fn default_duration() -> Duration {
    std::time::Duration::from_secs(30).into()
}
fn default_warmup() -> Duration {
    std::time::Duration::from_secs(0).into()
}
fn default_timeout() -> Duration {
    std::time::Duration::from_secs(2).into()
}
fn default_true() -> bool {
    true
}

impl Default for LoadSpec {
    fn default() -> Self {
        LoadSpec {
            connections: default_connections(),
            threads: default_threads(),
            duration: default_duration(),
            warmup: default_warmup(),
            keep_alive: true,
            http2: false,
            rate: None,
            timeout: default_timeout(),
        }
    }
}

/// Where and how the load-generator pods run.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.replicas) || !has(self.nodeNames) || size(self.nodeNames) == 0 || self.replicas == size(self.nodeNames)").message("workers.replicas must equal the number of workers.nodeNames when both are set"),
)]
pub struct WorkerSpec {
    /// Number of worker pods. Defaults to the number of nodeNames, or 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub replicas: Option<u32>,
    /// Pin one worker to each of these nodes.
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub node_names: Vec<String>,
    /// Only schedule workers on nodes with these labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Standard pod affinity rules for the workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Place at most one worker per node (pod anti-affinity on the hostname).
    #[serde(default)]
    pub spread: bool,
    /// CPU for each worker, e.g. "2". Sets requests = limits (Guaranteed QoS), so the kubelet's
    /// static CPU manager can pin it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 16))]
    #[x_kube(validation = Rule::new("isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0')) && quantity(string(self)).compareTo(quantity('256')) <= 0").message("workers.cpu must be a quantity such as 500m or 2, more than 0 and at most 256"))]
    pub cpu: Option<Quantity>,
    /// Memory for each worker (requests = limits). Defaults to 256Mi when cpu is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 16))]
    #[x_kube(validation = Rule::new("isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0')) && quantity(string(self)).compareTo(quantity('1Ti')) <= 0").message("workers.memory must be a quantity such as 256Mi or 1Gi, more than 0 and at most 1Ti"))]
    pub memory: Option<Quantity>,
    /// Run workers in the node's network namespace. Needs the cluster admin's permission
    /// (operator config) for this namespace.
    #[serde(default)]
    pub host_network: bool,
}

impl WorkerSpec {
    /// How many worker pods a run creates.
    pub fn effective_replicas(&self) -> u32 {
        match (self.replicas, self.node_names.len()) {
            (Some(n), _) => n,
            (None, 0) => 1,
            (None, n) => n as u32,
        }
    }
}

/// Pass/fail limits, checked against the last (or only) step.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Thresholds {
    /// Fewest acceptable requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub min_rps: Option<f64>,
    /// Largest acceptable 99th percentile latency ("50ms").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN), length(max = 32))]
    #[x_kube(validation = Rule::new("duration(self) > duration('0s') && duration(self) <= duration('1h')").message("thresholds.maxP99 must be more than 0s and at most 1h"))]
    pub max_p99: Option<Duration>,
    /// Largest acceptable share of failed requests, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_error_rate: Option<f64>,
}
