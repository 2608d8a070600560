//! Several controllers measured side by side in one IngressBenchmark: each a named entry point
//! (its own URL and Host header, or a Gateway API HTTPRoute the benchmark creates and removes),
//! loaded in turn by the same workers with the same load.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::common::Duration;

/// Most controllers one benchmark compares (each is one measurement of every sample).
pub const MAX_CONTROLLERS: usize = 8;

/// A DNS label (RFC 1123): a controller's name, a namespace.
const DNS_LABEL: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// A DNS subdomain (RFC 1123): a hostname, a Gateway's or listener's name.
const DNS_SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// One controller under the benchmark's load.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Controller {
    /// Its name in status, results and the `controller` metric label, e.g. "traefik" or
    /// "envoy-gateway": lowercase letters, digits and '-'.
    #[schemars(
        regex(pattern = DNS_LABEL),
        length(min = 1, max = 40)
    )]
    pub name: String,
    /// The URL to load for this controller (its Service or load balancer); defaults to
    /// target.url. The rest of target (method, headers, body, TLS) applies to every controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''").message("controllers[].url must be an absolute http:// or https:// URL with a host"))]
    #[schemars(length(min = 1, max = 2048))]
    pub url: Option<String>,
    /// Host header for this controller; defaults to the route's hostname, then to
    /// target.hostHeader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub host_header: Option<String>,
    /// A Gateway API HTTPRoute the benchmark creates in its own namespace before this
    /// controller's first measurement, waits for, and deletes when the run ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<OwnedRoute>,
    /// The controller's workloads (its data plane, its control plane) whose pods' CPU and
    /// memory each measurement reports, as the kubelets sampled them during the measured
    /// window. The cluster admin must allow it (Helm value security.usageTargets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    // A map list: the API server refuses a workload listed twice, at no CEL cost.
    #[schemars(length(max = 4), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["kind", "namespace", "name"]))]
    pub workloads: Vec<ControllerWorkload>,
    /// The workload serving this controller (its data plane) that each step of spec.sweep
    /// scales, saved before the first step and restored at the end like sweep.targetRef.
    /// Required for every controller when the benchmark has a sweep; the cluster admin must
    /// pair it with the benchmark's namespace (Helm value security.sweepTargets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_target: Option<super::TargetRef>,
}

/// A Deployment or DaemonSet of a controller, by name.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ControllerWorkload {
    /// Deployment (the default) or DaemonSet.
    #[serde(default)]
    pub kind: super::TargetKind,
    #[schemars(
        regex(pattern = DNS_SUBDOMAIN),
        length(min = 1, max = 253)
    )]
    pub name: String,
    #[schemars(
        regex(pattern = DNS_LABEL),
        length(min = 1, max = 63)
    )]
    pub namespace: String,
}

/// Most workloads one controller lists (controllers[].workloads).
pub const MAX_WORKLOADS: usize = 4;

/// CPU and memory of one controller workload's pods during a measured window, from the
/// kubelets' resource metrics (`/metrics/resource`, what metrics-server reads), read through
/// the API server's node proxy. The kubelet samples a busy pod every 10-20 s (an idle one up to
/// every 30 s): the CPU figure covers the part of the window between each pod's first and last
/// sample in it, and a window of 40 s or more gives a busy pod the two samples it needs.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadUsage {
    /// "Kind namespace/name".
    #[schemars(length(max = 340))]
    pub workload: String,
    /// Pods of the workload the kubelets sampled in the window.
    pub pods: u32,
    /// CPU in cores: the sum over the pods of each pod's mean between its first and last
    /// kubelet samples in the window (its CPU-seconds between them, over the time between).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub cpu_cores: Option<f64>,
    /// Seconds of the window the CPU figure covers (the shortest over the pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub covered_seconds: Option<f64>,
    /// Highest working-set memory sampled in the window, summed over the pods, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// With a route scale: the working set before the sample's routes, summed over the pods
    /// sampled in the window (each pod's last kubelet sample before the first route was made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_before_routes_bytes: Option<u64>,
    /// With a route scale: (memoryBytes - memoryBeforeRoutesBytes) / the routes the sample
    /// made, in bytes: what each route, with the connections that load it, added to the
    /// working set (negative when it shrank). A sample after another's routes were deleted
    /// may start from memory they left behind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_per_route_bytes: Option<f64>,
    /// Why a figure is missing (fewer than two samples of a pod in the window, a pod
    /// restarted, the kubelet out of reach).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub note: Option<String>,
}

/// An HTTPRoute (gateway.networking.k8s.io/v1) owned by the run: one rule, one hostname, one
/// backend Service in the benchmark's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OwnedRoute {
    /// The Gateway the route attaches to (its listeners must allow routes from the
    /// benchmark's namespace).
    pub gateway: GatewayRef,
    /// The hostname the route matches, and the Host header sent unless hostHeader is set.
    #[schemars(
        regex(pattern = DNS_SUBDOMAIN),
        length(min = 1, max = 253)
    )]
    pub hostname: String,
    /// The Service, in the benchmark's namespace, the route sends every request to.
    pub backend: RouteBackend,
    /// How long to wait after the controller accepted the route before measuring: its data
    /// plane may apply changes later (Traefik at most every providersThrottleDuration, 2s by
    /// default).
    #[serde(default = "default_route_settle")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN), length(max = 32))]
    #[x_kube(validation = Rule::new("duration(self) <= duration('5m')").message("controllers[].route.settle must be at most 5m"))]
    pub settle: Duration,
    /// How many routes: 1 (the default) is one route for `hostname`, created before the
    /// controller's first measurement and kept until the run ends. More is a route scale: at
    /// the start of each of the controller's measurements (when its load and warm-up begin)
    /// the run creates `count` routes, hostnames r0.<hostname> ... r<count-1>.<hostname>, all
    /// to `backend`, and deletes them when the measurement ends. Every worker spreads its
    /// connections over the hostnames (load.connections at least `count`), and each route's
    /// time from its creation to the first 2xx answer from its backend through it is reported
    /// (steps[].routeScale). Requests/s and latency are those at that scale after the warm-up:
    /// make the warm-up longer than the routes take to answer.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    #[schemars(range(min = 1, max = 1000))]
    pub count: u32,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// Most routes one controller's route scale creates (controllers[].route.count).
pub const MAX_ROUTE_COUNT: u32 = 1000;

fn default_route_settle() -> Duration {
    std::time::Duration::from_secs(3).into()
}

/// A Gateway by name.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayRef {
    #[schemars(
        regex(pattern = DNS_SUBDOMAIN),
        length(min = 1, max = 253)
    )]
    pub name: String,
    /// Defaults to the benchmark's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        regex(pattern = DNS_LABEL),
        length(min = 1, max = 63)
    )]
    pub namespace: Option<String>,
    /// One listener of the Gateway; all of them when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        regex(pattern = DNS_SUBDOMAIN),
        length(min = 1, max = 253)
    )]
    pub section_name: Option<String>,
}

/// A Service port in the benchmark's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteBackend {
    #[schemars(
        regex(pattern = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"),
        length(min = 1, max = 63)
    )]
    pub name: String,
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
}

/// Most route changes one sample makes (load.duration / routeChanges.every).
pub const MAX_ROUTE_CHANGES: u64 = 600;

/// Route changes under load: during each controller's measurement the run changes its route
/// every `every` and reads from what the clients saw answer how long each change took to reach
/// the data plane, while the step's error counts say what the churn cost. With `action:
/// SwapBackend` (the default) it swaps the route's backend between `backend` and `swapTo`
/// (propagation: to the first 2xx answer from the new backend); with `DeleteAndCreate` it
/// deletes the route and creates it again, in turn (to the first 404 from the Gateway itself,
/// and to the first 2xx from the route's backend). The backends name themselves in the
/// `X-Netbench-Backend` header (netbench-loadgen http-server --name, as in
/// deploy/examples/target.yaml) with their Service's name.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("(has(self.action) && self.action == 'DeleteAndCreate') ? !has(self.swapTo) : has(self.swapTo)").message("routeChanges.swapTo is needed to swap backends (action SwapBackend) and has no use with action DeleteAndCreate"),
)]
pub struct RouteChanges {
    /// Time between two changes; a change whose effect has not shown in the answers before
    /// the next one is counted as not shown. At most 600 changes per sample (load.duration /
    /// every).
    #[serde(default = "default_change_every")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN), length(max = 32))]
    #[x_kube(validation = Rule::new("duration(self) >= duration('200ms') && duration(self) <= duration('5m')").message("routeChanges.every must be between 200ms and 5m"))]
    pub every: Duration,
    /// What a change is: SwapBackend (the route's backend between `backend` and `swapTo`) or
    /// DeleteAndCreate (the route deleted, then created again, in turn).
    #[serde(default)]
    pub action: RouteChangeAction,
    /// The second backend (SwapBackend only): a Service in the benchmark's namespace whose
    /// pods answer with `X-Netbench-Backend: <its name>`, as the route's own backend must.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_to: Option<RouteBackend>,
}

/// What one route change is.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum RouteChangeAction {
    /// The route's backend swapped between `backend` and `swapTo`.
    #[default]
    SwapBackend,
    /// The route deleted, then created again with the same name and spec, in turn.
    DeleteAndCreate,
}

fn default_change_every() -> Duration {
    std::time::Duration::from_secs(2).into()
}

/// The route changes the current sample has made (the operator's record: a restarted
/// operator goes on from it, and the sample's collection reads it).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteChangeLog {
    pub step: u32,
    pub sample: u32,
    /// The start of the measured window (the workers' barrier plus the warm-up), Unix µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor_unix_us: Option<u64>,
    #[schemars(length(max = 600))]
    pub changes: Vec<MadeChange>,
}

/// One change: when it was sent to the API server (Unix µs), what it did, and the backend
/// that answers after it (the one swapped to, the one created, or the one deleted).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MadeChange {
    pub at_unix_us: u64,
    #[schemars(length(max = 63))]
    pub backend: String,
    #[serde(default)]
    pub made: Made,
    /// The change was made but its instant was lost (the route was found deleted with no
    /// record of when: a restart between the deletion and its record, or someone else): it
    /// counts as made, never as shown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untimed: bool,
}

/// What a change did to the route.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum Made {
    #[default]
    Swapped,
    Deleted,
    Created,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How one step's route changes showed in the answers, over its samples.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteChangeResult {
    /// The samples counted in (a sample is counted once, however often it is collected).
    #[schemars(length(max = 1000))]
    pub samples: Vec<u32>,
    /// Changes the run made (sent to the API server), and deletions found made with no
    /// record of when (`untimed`).
    pub changes: u32,
    /// Changes that showed in the answers before the next change or the end of the sample.
    pub shown: u32,
    /// Changes made whose instant was lost (counted in `changes`, never shown).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub untimed: u32,
    /// From sending the change to the first answer that shows it, over the shown changes:
    /// 50th and 99th percentile and the largest, in milliseconds (absent while none showed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<f64>,
    /// base64(HDR histogram V2 deflate) of the shown changes' propagation in microseconds,
    /// merged over the samples.
    #[schemars(length(max = 65536))]
    pub histogram: String,
}

/// The routes the current sample of a route scale has created (the operator's record: a
/// restarted operator goes on from it, and the sample's collection reads it).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteScaleLog {
    pub step: u32,
    pub sample: u32,
    /// When the workers' load began (their barrier), Unix µs: the routes are created from then
    /// on, never before (no route can answer before the first request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_start_unix_us: Option<u64>,
    /// Per route (index i: hostname r<i>.<hostname>), when its creation was sent to the API
    /// server, Unix µs; 0 for a route found created with no record of when (a restart), None
    /// while not created.
    #[schemars(length(max = 1000))]
    pub created_unix_us: Vec<Option<u64>>,
    /// Creations the API server refused, with the first reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub refused: Option<String>,
}

/// A route scale's routes (controllers[].route.count > 1), over the step's samples: each
/// route's time from its creation request to the first 2xx answer naming a backend that the
/// workers got through its hostname.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteScaleResult {
    /// The samples counted in (a sample is counted once, however often it is collected).
    #[schemars(length(max = 1000))]
    pub samples: Vec<u32>,
    /// Routes per sample (route.count).
    pub routes: u32,
    /// Routes the API server accepted, over the samples.
    pub created: u32,
    /// Created routes that answered before their measurement ended, over the samples.
    pub answered: u32,
    /// From a route's creation request to its first 2xx answer, over the answered routes:
    /// 50th and 99th percentile and the largest, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<f64>,
    /// From the first creation request of a sample to the last of its routes answering, the
    /// longest over the samples; absent when a sample's routes did not all answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_answered_ms: Option<f64>,
    /// base64(HDR histogram V2 deflate) of the answered routes' times in microseconds, merged
    /// over the samples.
    #[schemars(length(max = 65536))]
    pub histogram: String,
    /// What went wrong: routes refused by the API server, a hostname answered before its
    /// route existed (another route matches it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub note: Option<String>,
}

/// The controllers side by side once the run ended (status.comparison): each one's figures
/// over its samples, against the best controller of each figure.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    #[schemars(length(max = 8))]
    pub rows: Vec<ControllerRow>,
    /// One line per controller, e.g. "traefik-gw: 11200 ± 300 req/s, 6.9% fewer than traefik
    /// (significant); p99 2.10ms, within noise of traefik".
    #[schemars(length(max = 4096))]
    pub summary: String,
}

/// One controller's figures: means over its samples with their 95% confidence intervals.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ControllerRow {
    pub name: String,
    /// The step that measured it.
    pub step: u32,
    pub samples: u32,
    pub rps: f64,
    pub rps_ci95: f64,
    /// rps / the best controller's rps.
    pub relative_rps: f64,
    pub rps_verdict: Standing,
    pub p99_ms: f64,
    pub p99_ci95_ms: f64,
    pub p99_verdict: Standing,
    /// Failed / all requests, mean over the samples.
    pub error_rate: f64,
}

/// A controller's figure against the best controller's.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema, Default,
)]
pub enum Standing {
    /// The best of the controllers.
    Best,
    /// Worse, and the two 95% intervals do not overlap.
    Worse,
    /// Worse, within the noise: the intervals overlap.
    WithinNoise,
    /// One sample on either side: the noise is unknown, so is the difference's significance.
    #[default]
    Unknown,
}
