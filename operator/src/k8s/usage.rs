//! CPU and memory of pods as their kubelets sample them: the kubelet's resource metrics
//! (`/metrics/resource`, what metrics-server reads), through the API server's node proxy. A
//! window's samples are kept in memory, per pod, and give that pod's mean CPU between its
//! first and last sample in the window (from the cumulative CPU counter and the kubelet's own
//! timestamps) and its highest working set. Nothing here knows a benchmark kind.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http_body_util::{BodyExt, Limited};
use kube::Client;

use crate::base::labels::is_dns_subdomain;

/// Largest metrics page read from one kubelet (about 1 KB per pod; a node has at most a few
/// hundred pods).
const MAX_PAGE: usize = 4 << 20;
/// How long one kubelet read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Most pods of one workload that are read (a workload with more is not measured).
pub const MAX_PODS: usize = 16;
/// Most kubelets read at once.
const PARALLEL_READS: usize = 4;
/// A window not read for this long belongs to a run that went without collecting it.
const STALE_MS: u64 = 3_600_000;

/// One pod's figures in one kubelet page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodReading {
    /// Cumulative CPU in core-seconds, and when the kubelet sampled it (ms since the epoch).
    pub cpu: Option<(f64, u64)>,
    /// Working-set memory in bytes, and when sampled.
    pub memory: Option<(f64, u64)>,
}

/// Pods by (namespace, name) in one kubelet page.
pub type Page = BTreeMap<(String, String), PodReading>;

/// Reads node `node`'s resource metrics. Err says why (no permission, the kubelet out of
/// reach, a page too large or not as expected).
pub async fn read_node(client: &Client, node: &str) -> Result<Page, String> {
    if !is_dns_subdomain(node) {
        return Err(format!("node name {node:?} is not a DNS subdomain"));
    }
    let path = format!("/api/v1/nodes/{node}/proxy/metrics/resource");
    let request = http::Request::get(path)
        .body(kube::client::Body::empty())
        .map_err(|e| e.to_string())?;
    let read = async {
        let response = client.send(request).await.map_err(|e| e.to_string())?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_PAGE)
            .collect()
            .await
            .map_err(|e| format!("reading node {node}'s resource metrics: {e}"))?
            .to_bytes();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            let text: String = text.chars().take(200).collect();
            return Err(format!(
                "node {node}'s resource metrics: HTTP {status}: {}",
                text.trim()
            ));
        }
        let text = std::str::from_utf8(&body)
            .map_err(|_| format!("node {node}'s resource metrics are not UTF-8"))?;
        Ok(parse(text))
    };
    tokio::time::timeout(READ_TIMEOUT, read)
        .await
        .map_err(|_| format!("node {node}'s resource metrics: no answer within 5s"))?
}

/// Reads the kubelets of `nodes`, a few at a time.
pub async fn read_nodes(
    client: &Client,
    nodes: Vec<String>,
) -> BTreeMap<String, Result<Page, String>> {
    use futures::stream::{self, StreamExt};
    stream::iter(nodes)
        .map(|node| {
            let client = client.clone();
            async move {
                let page = read_node(&client, &node).await;
                (node, page)
            }
        })
        .buffer_unordered(PARALLEL_READS)
        .collect()
        .await
}

/// The pod lines of a `/metrics/resource` page (Prometheus text format): CPU and working
/// set with their timestamps. Lines that do not parse, values that are not finite and
/// non-negative, and samples without a timestamp are left out.
pub fn parse(text: &str) -> Page {
    let mut page = Page::new();
    for line in text.lines() {
        let (cpu, rest) = if let Some(rest) = line.strip_prefix("pod_cpu_usage_seconds_total{") {
            (true, rest)
        } else if let Some(rest) = line.strip_prefix("pod_memory_working_set_bytes{") {
            (false, rest)
        } else {
            continue;
        };
        let Some((labels, rest)) = labels(rest) else {
            continue;
        };
        let (Some(ns), Some(pod)) = (labels.get("namespace"), labels.get("pod")) else {
            continue;
        };
        let mut fields = rest.split_ascii_whitespace();
        let value = fields.next().and_then(|v| v.parse::<f64>().ok());
        let at = fields.next().and_then(|t| t.parse::<u64>().ok());
        let (Some(value), Some(at), None) = (value, at, fields.next()) else {
            continue;
        };
        if !value.is_finite() || value < 0.0 {
            continue;
        }
        let reading = page.entry((ns.clone(), pod.clone())).or_default();
        if cpu {
            reading.cpu = Some((value, at));
        } else {
            reading.memory = Some((value, at));
        }
    }
    page
}

/// `name="value",...}` and what follows the brace; None if it does not parse.
fn labels(text: &str) -> Option<(HashMap<String, String>, &str)> {
    let mut labels = HashMap::new();
    let mut rest = text;
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Some((labels, after));
        }
        let (name, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '"' => break i,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                c => value.push(c),
            }
        };
        labels.insert(name.trim_start_matches(',').to_string(), value);
        rest = after.get(end + 1..)?;
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// One pod's samples within a window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodSeries {
    /// The first and last CPU samples in the window (core-seconds, ms).
    pub first: Option<(f64, u64)>,
    pub last: Option<(f64, u64)>,
    /// Highest working set sampled in the window.
    pub max_memory: Option<f64>,
    /// The CPU counter went down: the pod's container restarted and its CPU is not known.
    pub restarted: bool,
}

impl PodSeries {
    /// Whether the kubelet sampled `reading` (CPU or memory) within `[from_ms, to_ms]`.
    pub fn inside(reading: &PodReading, from_ms: u64, to_ms: u64) -> bool {
        let inside = |r: Option<(f64, u64)>| r.is_some_and(|(_, at)| from_ms <= at && at <= to_ms);
        inside(reading.cpu) || inside(reading.memory)
    }

    /// Adds a reading if the kubelet sampled it within `[from_ms, to_ms]`.
    pub fn add(&mut self, reading: &PodReading, from_ms: u64, to_ms: u64) {
        let inside = |at: u64| from_ms <= at && at <= to_ms;
        if let Some((cpu, at)) = reading.cpu.filter(|(_, at)| inside(*at)) {
            match self.last {
                // The same sample again, or an older one.
                Some((_, then)) if at <= then => {}
                Some((before, _)) => {
                    self.restarted |= cpu < before;
                    self.last = Some((cpu, at));
                }
                None => {
                    self.first = Some((cpu, at));
                    self.last = Some((cpu, at));
                }
            }
        }
        if let Some((memory, _)) = reading.memory.filter(|(_, at)| inside(*at)) {
            self.max_memory = Some(self.max_memory.map_or(memory, |m| m.max(memory)));
        }
    }

    /// Mean cores between the first and last CPU samples, and the seconds between them;
    /// None with fewer than two samples or after a restart.
    pub fn cpu(&self) -> Option<(f64, f64)> {
        let ((a, t0), (b, t1)) = (self.first?, self.last?);
        if self.restarted || t1 <= t0 || b < a {
            return None;
        }
        let seconds = (t1 - t0) as f64 / 1000.0;
        let cores = (b - a) / seconds;
        cores.is_finite().then_some((cores, seconds))
    }
}

/// The samples of every window being measured, by a key the caller chooses (`RUN/SLOT`); kept
/// in memory only: an operator restarted during a window has no figures for it (the note says
/// so).
pub struct Windows<F> {
    windows: Mutex<HashMap<String, Window<F>>>,
}

impl<F> Default for Windows<F> {
    fn default() -> Self {
        Windows {
            windows: Mutex::default(),
        }
    }
}

/// One window's pods by workload, what went wrong reading them, and the figures `F` made of
/// them once collected.
#[derive(Clone, Debug, PartialEq)]
pub struct Window<F> {
    /// Pods by workload (an index the caller chooses), then by pod name.
    pub pods: BTreeMap<usize, BTreeMap<String, PodSeries>>,
    /// Per workload and pod, the last working set (bytes, ms) the kubelet sampled before a
    /// given instant (a route scale's first route: see `remember_before`).
    pub before: BTreeMap<usize, BTreeMap<String, (f64, u64)>>,
    /// The last error per workload.
    pub errors: BTreeMap<usize, String>,
    /// When the window was last sampled (ms since the epoch).
    pub polled_at: Option<u64>,
    /// What the window was made into once collected (a retried collection gives the same).
    pub figures: Option<F>,
}

impl<F> Window<F> {
    /// Keeps `reading`'s working set for `pod` of workload `i` if the kubelet sampled it
    /// before `instant_ms` and after what is kept.
    pub fn remember_before(&mut self, i: usize, pod: &str, reading: &PodReading, instant_ms: u64) {
        let Some((bytes, at)) = reading.memory.filter(|(_, at)| *at < instant_ms) else {
            return;
        };
        let kept = self.before.entry(i).or_default();
        if kept.get(pod).is_none_or(|(_, then)| at > *then) {
            kept.insert(pod.to_string(), (bytes, at));
        }
    }
}

impl<F> Default for Window<F> {
    fn default() -> Self {
        Window {
            pods: BTreeMap::new(),
            before: BTreeMap::new(),
            errors: BTreeMap::new(),
            polled_at: None,
            figures: None,
        }
    }
}

impl<F: Clone> Windows<F> {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Window<F>>> {
        self.windows.lock().unwrap_or_else(PoisonError::into_inner)
    }
    /// Changes window `key` (made empty first if new); windows of runs that went without
    /// collecting them (not read for an hour) are dropped.
    pub fn update<R>(&self, key: &str, now_ms: u64, change: impl FnOnce(&mut Window<F>) -> R) -> R {
        let mut windows = self.lock();
        windows.retain(|_, w| {
            w.polled_at
                .is_none_or(|at| now_ms.saturating_sub(at) < STALE_MS)
        });
        change(windows.entry(key.to_string()).or_default())
    }
    /// Window `key`'s samples, if any.
    pub fn get(&self, key: &str) -> Option<Window<F>> {
        self.lock().get(key).cloned()
    }
    /// Forgets every window of run `run` (keys `RUN/...`: a run that ended, was replaced or
    /// deleted).
    pub fn forget_run(&self, run: &str) {
        self.lock()
            .retain(|k, _| k.split_once('/').is_none_or(|(r, _)| r != run));
    }
    /// How many windows are kept.
    pub fn kept(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="envoy-gateway-system",pod="envoy-bench-7d96ddcc69-zkglj"} 0.592225385 1796413529603
pod_cpu_usage_seconds_total{namespace="gateway-traefik",pod="traefik-gateway-58b46f777f-w6xkr"} 0.300680854 1796413521360
pod_memory_working_set_bytes{namespace="envoy-gateway-system",pod="envoy-bench-7d96ddcc69-zkglj"} 3.7142528e+07 1796413529603
pod_swap_usage_bytes{namespace="envoy-gateway-system",pod="envoy-bench-7d96ddcc69-zkglj"} 0 1796413529603
container_cpu_usage_seconds_total{container="envoy",namespace="envoy-gateway-system",pod="envoy-bench-7d96ddcc69-zkglj"} 0.5 1796413529603
"#;

    #[test]
    fn a_kubelet_page_gives_each_pods_cpu_and_memory_with_their_times() {
        let page = parse(PAGE);
        assert_eq!(page.len(), 2);
        let envoy = &page[&(
            "envoy-gateway-system".to_string(),
            "envoy-bench-7d96ddcc69-zkglj".to_string(),
        )];
        assert_eq!(envoy.cpu, Some((0.592225385, 1796413529603)));
        assert_eq!(envoy.memory, Some((3.7142528e7, 1796413529603)));
        let traefik = &page[&(
            "gateway-traefik".to_string(),
            "traefik-gateway-58b46f777f-w6xkr".to_string(),
        )];
        assert_eq!(traefik.memory, None);
    }

    #[test]
    fn hostile_lines_are_left_out_and_never_panic() {
        let page = parse(concat!(
            "pod_cpu_usage_seconds_total{namespace=\"a\",pod=\"p\"} NaN 1\n",
            "pod_cpu_usage_seconds_total{namespace=\"a\",pod=\"q\"} -1 1\n",
            "pod_cpu_usage_seconds_total{namespace=\"a\",pod=\"r\"} 1\n",
            "pod_cpu_usage_seconds_total{namespace=\"a\",pod=\"s\"} 1 2 3\n",
            "pod_cpu_usage_seconds_total{namespace=\"a\",pod=\"t\n",
            "pod_cpu_usage_seconds_total{namespace=\"a\"} 1 2\n",
            "pod_cpu_usage_seconds_total{pod=\"\\\"x\\\\\",namespace=\"b\"} 1 2\n",
            "pod_memory_working_set_bytes{namespace=\"a\",pod=\"é\"} inf 2\n",
            "pod_cpu_usage_seconds_total{",
        ));
        let keys: Vec<_> = page.keys().cloned().collect();
        assert_eq!(keys, vec![("b".to_string(), "\"x\\".to_string())]);
        for cut in 0..PAGE.len() {
            if let Some(prefix) = PAGE.get(..cut) {
                let _ = parse(prefix);
            }
        }
    }

    fn reading(cpu: f64, at: u64, memory: f64) -> PodReading {
        PodReading {
            cpu: Some((cpu, at)),
            memory: Some((memory, at)),
        }
    }

    #[test]
    fn cpu_is_the_counters_rise_over_the_kubelets_own_times_inside_the_window() {
        let mut s = PodSeries::default();
        s.add(&reading(1.0, 500, 9e6), 1000, 30_000); // before the window
        s.add(&reading(2.0, 2000, 10e6), 1000, 30_000);
        s.add(&reading(2.0, 2000, 10e6), 1000, 30_000); // the same sample, read again
        s.add(&reading(5.0, 14_000, 30e6), 1000, 30_000);
        s.add(&reading(7.0, 26_000, 20e6), 1000, 30_000);
        s.add(&reading(9.0, 31_000, 90e6), 1000, 30_000); // after it
        let (cores, seconds) = s.cpu().unwrap();
        assert!((cores - 5.0 / 24.0).abs() < 1e-9, "{cores}");
        assert!((seconds - 24.0).abs() < 1e-9);
        assert_eq!(s.max_memory, Some(30e6));
    }

    #[test]
    fn one_sample_or_a_restart_gives_no_cpu() {
        let mut one = PodSeries::default();
        one.add(&reading(2.0, 2000, 1.0), 0, 9000);
        assert_eq!(one.cpu(), None);
        assert_eq!(one.max_memory, Some(1.0));
        let mut restarted = PodSeries::default();
        restarted.add(&reading(5.0, 2000, 1.0), 0, 9000);
        restarted.add(&reading(0.5, 4000, 1.0), 0, 9000);
        restarted.add(&reading(1.5, 6000, 1.0), 0, 9000);
        assert!(restarted.restarted);
        assert_eq!(restarted.cpu(), None);
        let mut huge = PodSeries::default();
        huge.add(&reading(0.0, 1000, 1.0), 0, 9000);
        huge.add(&reading(f64::MAX, 1001, 1.0), 0, 9000);
        assert_eq!(huge.cpu(), None, "no infinite cores");
        let outside = reading(1.0, 10_000, 1.0);
        assert!(!PodSeries::inside(&outside, 0, 9000));
        assert!(PodSeries::inside(&outside, 0, 10_000));
    }

    #[test]
    fn node_names_outside_dns_subdomains_are_not_put_in_a_path() {
        assert!(is_dns_subdomain("nb-node1"));
        assert!(is_dns_subdomain("ip-10-0-0-1.ec2.internal"));
        for bad in ["", "a/../b", "A", "-a", "a..b", "a?x=1"] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
    }
}
