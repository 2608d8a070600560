//! The controllers' CPU and memory during each measured window (controllers[].workloads): the
//! workloads' pods are sampled from their kubelets every [`POLL_EVERY`] while the window is
//! open and once more when the sample is collected; each workload then gets a WorkloadUsage
//! from the kubelet samples taken inside the window. Reading never fails a run: what could not
//! be read is said in the figure's note.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams};
use kube::core::Selector;
use kube::Client;

use crds::ingress::{ControllerWorkload, IngressBenchmark, TargetKind, WorkloadUsage};

use super::plan;
use crate::k8s::usage::{self, PodSeries, Window, MAX_PODS};
use crate::policy::samples::Slot;
use crate::run::Run;

type IngressRun<'a> = Run<'a, IngressBenchmark>;

/// How often the kubelets are read while a window is open (cAdvisor samples a container every
/// 10-20 s, up to 30 s while it is idle).
const POLL_EVERY: Duration = Duration::from_secs(2);

fn now_ms() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(now.as_millis()).unwrap_or(u64::MAX)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn key(run: &IngressRun<'_>, slot: Slot) -> String {
    format!("{}/{}", run.id(), slot.wire())
}

/// The measured window of the slot under way, in ms since the epoch, once its workers have a
/// start time.
fn window(run: &IngressRun<'_>, slot: Slot) -> Option<(u64, u64)> {
    let load = &run.obj().spec.load;
    let started = run.ctx().runs.started_at(run.id(), slot.wire())?;
    let from = started.saturating_add(ms(load.warmup.as_std()));
    Some((from, from.saturating_add(ms(load.duration.as_std()))))
}

/// While step `step`'s workers run: samples its controller's workloads when due. Returns when
/// it wants to sample next (None: nothing to sample, or the window is over).
pub async fn while_running(run: &IngressRun<'_>, step: u32) -> Option<Duration> {
    let controller = plan::controller(&run.obj().spec, step)?;
    if controller.workloads.is_empty() {
        return None;
    }
    let slot = run.slot();
    let Some((from, to)) = window(run, slot) else {
        return Some(POLL_EVERY);
    };
    let now = now_ms();
    if now < from {
        return Some(Duration::from_millis(from - now));
    }
    if now > to {
        return None;
    }
    let key = key(run, slot);
    let polled = run.ctx().usage.get(&key).and_then(|w| w.polled_at);
    if let Some(due) = polled.map(|at| at.saturating_add(ms(POLL_EVERY))) {
        if now < due {
            return Some(Duration::from_millis(due - now));
        }
    }
    sample(run, &key, &controller.workloads, (from, to)).await;
    Some(POLL_EVERY)
}

/// The figures of the slot's window, after one last reading (the kubelets may publish a
/// sample taken inside the window after it ended); the window's samples are then forgotten.
pub async fn collect(run: &IngressRun<'_>, slot: Slot) -> Vec<WorkloadUsage> {
    let Some(controller) = plan::controller(&run.obj().spec, slot.measurement) else {
        return vec![];
    };
    if controller.workloads.is_empty() {
        return vec![];
    }
    let key = key(run, slot);
    let Some(bounds) = window(run, slot) else {
        run.ctx().usage.forget(&key);
        return unmeasured(&controller.workloads, "the window's start is not known");
    };
    sample(run, &key, &controller.workloads, bounds).await;
    let window = run.ctx().usage.get(&key).unwrap_or_default();
    run.ctx().usage.forget(&key);
    figures(&controller.workloads, &window)
}

/// Forgets every window of run `id` (a run that ended before its windows were collected).
pub fn forget_run(run: &IngressRun<'_>) {
    run.ctx().usage.forget(&format!("{}/", run.id()));
}

fn unmeasured(workloads: &[ControllerWorkload], why: &str) -> Vec<WorkloadUsage> {
    workloads
        .iter()
        .map(|w| WorkloadUsage {
            workload: describe(w),
            note: Some(why.to_string()),
            ..Default::default()
        })
        .collect()
}

pub(crate) fn describe(w: &ControllerWorkload) -> String {
    let kind = match w.kind {
        TargetKind::Deployment => "Deployment",
        TargetKind::DaemonSet => "DaemonSet",
    };
    format!("{kind} {}/{}", w.namespace, w.name)
}

/// Reads every workload's pods and their nodes' kubelets once, and keeps the samples taken
/// within `bounds`.
async fn sample(
    run: &IngressRun<'_>,
    key: &str,
    workloads: &[ControllerWorkload],
    (from, to): (u64, u64),
) {
    let client = run.ctx().client.clone();
    let mut found: BTreeMap<usize, Result<Vec<(String, String)>, String>> = BTreeMap::new();
    for (i, w) in workloads.iter().enumerate() {
        found.insert(i, pods_of(&client, w).await);
    }
    let nodes: BTreeSet<&String> = found
        .values()
        .flatten()
        .flat_map(|pods| pods.iter().map(|(_, node)| node))
        .collect();
    let mut pages = BTreeMap::new();
    for node in nodes {
        pages.insert(node.clone(), usage::read_node(&client, node).await);
    }
    run.ctx().usage.update(key, |window| {
        window.polled_at = Some(now_ms());
        for (i, w) in workloads.iter().enumerate() {
            let pods = match found.get(&i) {
                Some(Ok(pods)) => pods,
                Some(Err(e)) => {
                    window.errors.insert(i, e.clone());
                    continue;
                }
                None => continue,
            };
            for (pod, node) in pods {
                let page = match pages.get(node) {
                    Some(Ok(page)) => page,
                    Some(Err(e)) => {
                        window.errors.insert(i, e.clone());
                        continue;
                    }
                    None => continue,
                };
                let Some(reading) = page.get(&(w.namespace.clone(), pod.clone())) else {
                    continue;
                };
                let series = window.pods.entry(i).or_default();
                if series.len() >= MAX_PODS && !series.contains_key(pod) {
                    window.errors.insert(
                        i,
                        format!("more than {MAX_PODS} pods: the rest are not followed"),
                    );
                    continue;
                }
                series
                    .entry(pod.clone())
                    .or_default()
                    .add(reading, from, to);
            }
        }
    });
}

/// The running pods of workload `w` and their nodes, by its selector.
async fn pods_of(client: &Client, w: &ControllerWorkload) -> Result<Vec<(String, String)>, String> {
    let it = describe(w);
    let forbidden = |e: kube::Error| match e {
        kube::Error::Api(s) if s.code == 403 => format!("{it} is out of reach: {}", s.message),
        e => format!("{it}: {e}"),
    };
    let selector: Option<LabelSelector> = match w.kind {
        TargetKind::Deployment => Api::<Deployment>::namespaced(client.clone(), &w.namespace)
            .get_opt(&w.name)
            .await
            .map_err(forbidden)?
            .map(|d| d.spec.selector),
        TargetKind::DaemonSet => Api::<DaemonSet>::namespaced(client.clone(), &w.namespace)
            .get_opt(&w.name)
            .await
            .map_err(forbidden)?
            .map(|d| d.spec.selector),
    };
    let selector = selector.ok_or_else(|| format!("{it} not found"))?;
    let selector = Selector::try_from(selector).map_err(|e| format!("{it}'s selector: {e}"))?;
    if selector.selects_all() {
        return Err(format!("{it} selects every pod of its namespace"));
    }
    let pods = Api::<Pod>::namespaced(client.clone(), &w.namespace)
        .list(&ListParams::default().labels_from(&selector))
        .await
        .map_err(forbidden)?;
    Ok(pods
        .items
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| {
            let node = p.spec.as_ref()?.node_name.clone()?;
            Some((p.metadata.name?, node))
        })
        .collect())
}

/// Each workload's figures from the window's samples.
fn figures(workloads: &[ControllerWorkload], window: &Window) -> Vec<WorkloadUsage> {
    let empty = BTreeMap::new();
    workloads
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let pods = window.pods.get(&i).unwrap_or(&empty);
            let mut usage = workload_usage(pods);
            usage.workload = describe(w);
            if let Some(e) = window.errors.get(&i) {
                let note = match usage.note.take() {
                    Some(n) => format!("{n}; {e}"),
                    None => e.clone(),
                };
                usage.note = Some(crate::base::labels::truncate(&note, 1000));
            }
            usage
        })
        .collect()
}

/// One workload's figures: CPU only when every pod sampled has two samples in the window.
fn workload_usage(pods: &BTreeMap<String, PodSeries>) -> WorkloadUsage {
    let mut usage = WorkloadUsage {
        pods: u32::try_from(pods.len()).unwrap_or(u32::MAX),
        ..Default::default()
    };
    if pods.is_empty() {
        usage.note = Some("no pod of the workload was sampled in the window".into());
        return usage;
    }
    let cpu: Option<Vec<(f64, f64)>> = pods.values().map(PodSeries::cpu).collect();
    match cpu {
        Some(cpu) => {
            usage.cpu_cores = Some(cpu.iter().map(|(cores, _)| cores).sum());
            usage.covered_seconds = cpu.iter().map(|(_, s)| *s).reduce(f64::min);
        }
        None => {
            let short: Vec<&str> = pods
                .iter()
                .filter(|(_, s)| s.cpu().is_none())
                .map(|(name, _)| name.as_str())
                .collect();
            usage.note = Some(format!(
                "no CPU figure: fewer than two kubelet samples in the window, or a restart, for pod(s) {} (the kubelet samples a busy pod every 10-20 s, an idle one every 15-30 s: a window of 40 s or more gives a busy pod two)",
                short.join(", ")
            ));
        }
    }
    let memory: Option<f64> = pods.values().map(|s| s.max_memory).sum();
    // A working set is at most a node's memory: far inside u64 and f64's exact integers.
    usage.memory_bytes = memory.map(|m| m.round().clamp(0.0, 9.0e15) as u64);
    usage
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::usage::PodReading;

    fn series(samples: &[(f64, u64, f64)]) -> PodSeries {
        let mut s = PodSeries::default();
        for (cpu, at, memory) in samples {
            let reading = PodReading {
                cpu: Some((*cpu, *at)),
                memory: Some((*memory, *at)),
            };
            s.add(&reading, 0, 100_000);
        }
        s
    }

    #[test]
    fn a_workloads_cpu_sums_its_pods_and_covers_the_shortest() {
        let pods = BTreeMap::from([
            (
                "a".to_string(),
                series(&[(1.0, 1000, 5e6), (3.0, 21_000, 7e6)]),
            ),
            (
                "b".to_string(),
                series(&[(0.0, 5000, 1e6), (1.0, 15_000, 2e6)]),
            ),
        ]);
        let u = workload_usage(&pods);
        assert_eq!(u.pods, 2);
        assert!((u.cpu_cores.unwrap() - (0.1 + 0.1)).abs() < 1e-9);
        assert_eq!(u.covered_seconds, Some(10.0));
        assert_eq!(u.memory_bytes, Some(9_000_000));
        assert_eq!(u.note, None);
    }

    #[test]
    fn a_pod_with_one_sample_leaves_cpu_out_and_says_which() {
        let pods = BTreeMap::from([
            (
                "a".to_string(),
                series(&[(1.0, 1000, 5e6), (3.0, 21_000, 7e6)]),
            ),
            ("b".to_string(), series(&[(0.0, 5000, 1e6)])),
        ]);
        let u = workload_usage(&pods);
        assert_eq!(u.cpu_cores, None);
        assert_eq!(u.covered_seconds, None);
        assert_eq!(u.memory_bytes, Some(8_000_000));
        assert!(u.note.unwrap().contains("pod(s) b "));
        let none = workload_usage(&BTreeMap::new());
        assert_eq!((none.pods, none.memory_bytes), (0, None));
        assert!(none.note.unwrap().contains("no pod"));
    }

    #[test]
    fn errors_are_said_in_the_note() {
        let w = ControllerWorkload {
            kind: TargetKind::DaemonSet,
            name: "traefik".into(),
            namespace: "ingress".into(),
        };
        let mut window = Window::default();
        window
            .errors
            .insert(0, "node n1's resource metrics: HTTP 403 Forbidden".into());
        let u = figures(&[w], &window);
        assert_eq!(u[0].workload, "DaemonSet ingress/traefik");
        let note = u[0].note.clone().unwrap();
        assert!(
            note.contains("no pod") && note.contains("HTTP 403"),
            "{note}"
        );
    }
}
