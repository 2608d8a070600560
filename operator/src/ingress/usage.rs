//! The controllers' CPU and memory during each measured window (controllers[].workloads): the
//! workloads' pods are sampled from their kubelets every [`POLL_EVERY`] while the window is
//! open and once more when the sample is collected; each workload then gets a WorkloadUsage
//! from the kubelet samples taken inside the window. Reading never fails a run: what could not
//! be read is said in the figure's note. Only pods the workload owns count, at most
//! [`MAX_PODS`] of them (a workload with more is not read at all), and one reading of every
//! workload takes at most [`SAMPLE_DEADLINE`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams};
use kube::core::Selector;
use kube::Client;

use crds::ingress::{ControllerWorkload, IngressBenchmark, TargetKind, WorkloadUsage};

use protocol::worker::now_unix_ms as now_ms;

use super::{plan, scale};
use crate::k8s::usage::{self, PodSeries, MAX_PODS};
use crate::policy::samples::Slot;
use crate::run::Run;

type IngressRun<'a> = Run<'a, IngressBenchmark>;

/// How often the kubelets are read while a window is open (cAdvisor samples a container every
/// 10-20 s, up to 30 s while it is idle).
const POLL_EVERY: Duration = Duration::from_secs(2);
/// Longest one reading of every workload may take (its pods listed, their kubelets read).
const SAMPLE_DEADLINE: Duration = Duration::from_secs(4);
/// Longest note kept.
const MAX_NOTE: usize = 1000;
/// Most pods a note names.
const NAMED_PODS: usize = 5;

type Window = usage::Window<Vec<WorkloadUsage>>;

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

/// With a route scale, the instant its routes begin to be created (the workers' barrier, in
/// ms): the kubelets' samples before it are the workloads without the sample's routes.
fn routes_from(run: &IngressRun<'_>, slot: Slot) -> Option<u64> {
    scale::scaled(&run.obj().spec, slot.measurement)?;
    run.ctx().runs.started_at(run.id(), slot.wire())
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
    let key = key(run, slot);
    let polled = run.ctx().usage.get(&key).and_then(|w| w.polled_at);
    if now < from {
        // A route scale's workloads are read once at once, while the kubelets' last samples
        // still predate its routes.
        if polled.is_none() && routes_from(run, slot).is_some() {
            sample(run, &key, &controller.workloads, (from, to)).await;
        }
        return Some(Duration::from_millis(from - now));
    }
    if now > to {
        return None;
    }
    if let Some(due) = polled.map(|at| at.saturating_add(ms(POLL_EVERY))) {
        if now < due {
            return Some(Duration::from_millis(due - now));
        }
    }
    sample(run, &key, &controller.workloads, (from, to)).await;
    Some(POLL_EVERY)
}

/// The figures of the slot's window, after one last reading (the kubelets may publish a
/// sample taken inside the window after it ended); kept with the window, so a collection
/// tried again gives the same figures. The run's windows go when it ends (`forget_run`).
pub async fn collect(run: &IngressRun<'_>, slot: Slot) -> Vec<WorkloadUsage> {
    let Some(controller) = plan::controller(&run.obj().spec, slot.measurement) else {
        return vec![];
    };
    if controller.workloads.is_empty() {
        return vec![];
    }
    let key = key(run, slot);
    if let Some(made) = run.ctx().usage.get(&key).and_then(|w| w.figures) {
        return made;
    }
    let Some(bounds) = window(run, slot) else {
        // The operator restarted during the window: its readings were in memory.
        let why = "not measured: the operator restarted during the window";
        return unmeasured(&controller.workloads, why);
    };
    sample(run, &key, &controller.workloads, bounds).await;
    let spec = &run.obj().spec;
    // The routes made by the window's end (the peak is read up to there).
    let until_us = bounds.1.saturating_mul(1000);
    let routes = scale::made_in_sample(spec, run.status().route_scale_log.as_ref(), slot, until_us);
    run.ctx().usage.update(&key, now_ms(), |window| {
        let mut made = figures(&controller.workloads, window);
        if let Some(routes) = routes {
            per_route(&mut made, &controller.workloads, window, routes);
        }
        window.figures = Some(made.clone());
        made
    })
}

/// A route scale's cost per route: each workload's working set before the sample's routes
/// (the sum over its pods of each one's last kubelet sample before the first route), and its
/// growth to the highest in the window over the `routes` the sample made.
fn per_route(
    made: &mut [WorkloadUsage],
    workloads: &[ControllerWorkload],
    window: &Window,
    routes: usize,
) {
    let empty = BTreeMap::new();
    for ((i, _), usage) in workloads.iter().enumerate().zip(made.iter_mut()) {
        let sampled = window.pods.get(&i).unwrap_or(&empty);
        let before = window.before.get(&i);
        let each: Option<Vec<f64>> = sampled
            .keys()
            .map(|pod| before.and_then(|b| b.get(pod)).map(|(bytes, _)| *bytes))
            .collect();
        let before = each
            .filter(|b| !b.is_empty())
            .map(|b| b.iter().sum::<f64>());
        let Some(before) = before else {
            let note = "no memory per route: a pod has no kubelet sample from before the routes (the kubelet sampled it again before the operator's first reading, or the pod started since)";
            usage.note = Some(match usage.note.take() {
                Some(n) => crate::base::labels::truncate(&format!("{n}; {note}"), MAX_NOTE),
                None => note.to_string(),
            });
            continue;
        };
        usage.memory_before_routes_bytes = Some(bytes(before));
        if let (Some(after), Ok(routes)) = (usage.memory_bytes, u32::try_from(routes)) {
            if routes > 0 {
                let growth = after as f64 - bytes(before) as f64;
                usage.memory_per_route_bytes = Some((growth / f64::from(routes)).round());
            }
        }
    }
}

/// A working set is at most a node's memory: far inside u64 and f64's exact integers.
fn bytes(b: f64) -> u64 {
    b.round().clamp(0.0, 9.0e15) as u64
}

/// Forgets every window of the run (it ended).
pub fn forget_run(run: &IngressRun<'_>) {
    run.ctx().usage.forget_run(run.id());
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
    let kind = super::target::kind_name(w.kind);
    format!("{kind} {}/{}", w.namespace, w.name)
}

/// Reads every workload's pods and their nodes' kubelets once (within [`SAMPLE_DEADLINE`]),
/// and keeps the samples taken within `bounds`.
async fn sample(
    run: &IngressRun<'_>,
    key: &str,
    workloads: &[ControllerWorkload],
    (from, to): (u64, u64),
) {
    let client = run.ctx().client.clone();
    let routes_from = routes_from(run, run.slot());
    let read = async {
        let mut found: BTreeMap<usize, Result<Vec<(String, String)>, String>> = BTreeMap::new();
        for (i, w) in workloads.iter().enumerate() {
            found.insert(i, pods_of(&client, w).await);
        }
        let nodes: BTreeSet<String> = found
            .values()
            .flatten()
            .flat_map(|pods| pods.iter().map(|(_, node)| node.clone()))
            .collect();
        let pages = usage::read_nodes(&client, nodes.into_iter().collect()).await;
        (found, pages)
    };
    let (found, pages) = match tokio::time::timeout(SAMPLE_DEADLINE, read).await {
        Ok(read) => read,
        Err(_) => {
            let late = format!(
                "a reading of the workloads took more than {}s",
                SAMPLE_DEADLINE.as_secs()
            );
            let failed = (0..workloads.len()).map(|i| (i, Err(late.clone())));
            (failed.collect(), BTreeMap::new())
        }
    };
    let now = now_ms();
    run.ctx().usage.update(key, now, |window| {
        window.polled_at = Some(now);
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
                if let Some(instant) = routes_from {
                    window.remember_before(i, pod, reading, instant);
                }
                // A pod counts once the kubelet sampled it inside the window.
                if !PodSeries::inside(reading, from, to) {
                    continue;
                }
                let series = window.pods.entry(i).or_default();
                series
                    .entry(pod.clone())
                    .or_default()
                    .add(reading, from, to);
            }
        }
    });
}

/// The running pods workload `w` owns and their nodes: selected by its selector, kept only if
/// owned (a DaemonSet's pods by its uid, a Deployment's through a ReplicaSet named for it and
/// the pod's template hash). More than [`MAX_PODS`] is an error: the workload is not read.
async fn pods_of(client: &Client, w: &ControllerWorkload) -> Result<Vec<(String, String)>, String> {
    let it = describe(w);
    let forbidden = |e: kube::Error| match e {
        kube::Error::Api(s) if s.code == 403 => format!("{it} is out of reach: {}", s.message),
        e => format!("{it}: {e}"),
    };
    let found: Option<(LabelSelector, Option<String>)> = match w.kind {
        TargetKind::Deployment => Api::<Deployment>::namespaced(client.clone(), &w.namespace)
            .get_opt(&w.name)
            .await
            .map_err(forbidden)?
            .map(|d| (d.spec.selector, d.metadata.uid)),
        TargetKind::DaemonSet => Api::<DaemonSet>::namespaced(client.clone(), &w.namespace)
            .get_opt(&w.name)
            .await
            .map_err(forbidden)?
            .map(|d| (d.spec.selector, d.metadata.uid)),
    };
    let (selector, uid) = found.ok_or_else(|| format!("{it} not found"))?;
    let selector = Selector::try_from(selector).map_err(|e| format!("{it}'s selector: {e}"))?;
    if selector.selects_all() {
        return Err(format!("{it} selects every pod of its namespace"));
    }
    let limit = u32::try_from(MAX_PODS)
        .unwrap_or(u32::MAX)
        .saturating_add(1);
    let params = ListParams::default()
        .labels_from(&selector)
        .fields("status.phase=Running")
        .limit(limit);
    let pods = Api::<Pod>::namespaced(client.clone(), &w.namespace)
        .list(&params)
        .await
        .map_err(forbidden)?;
    let more = pods.metadata.continue_.is_some_and(|c| !c.is_empty());
    if pods.items.len() > MAX_PODS || more {
        return Err(format!(
            "{it} has more than {MAX_PODS} running pods: not read (at most {MAX_PODS})"
        ));
    }
    Ok(pods
        .items
        .into_iter()
        .filter(|p| owned(w, uid.as_deref(), p))
        .filter_map(|p| {
            let node = p.spec.as_ref()?.node_name.clone()?;
            Some((p.metadata.name?, node))
        })
        .collect())
}

/// Whether workload `w` (of uid `uid`) controls pod `p`.
fn owned(w: &ControllerWorkload, uid: Option<&str>, p: &Pod) -> bool {
    let owners = p.metadata.owner_references.iter().flatten();
    let Some(owner) = owners.into_iter().find(|o| o.controller == Some(true)) else {
        return false;
    };
    match w.kind {
        TargetKind::DaemonSet => owner.kind == "DaemonSet" && Some(owner.uid.as_str()) == uid,
        TargetKind::Deployment => {
            let labels = p.metadata.labels.as_ref();
            let hash = labels.and_then(|l| l.get("pod-template-hash"));
            owner.kind == "ReplicaSet"
                && hash.is_some_and(|h| owner.name == format!("{}-{h}", w.name))
        }
    }
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
                usage.note = Some(match usage.note.take() {
                    Some(n) => format!("{n}; {e}"),
                    None => e.clone(),
                });
            }
            usage.note = usage
                .note
                .map(|n| crate::base::labels::truncate(&n, MAX_NOTE));
            usage
        })
        .collect()
}

/// Pod names for a note: the first few, then how many more.
fn some_pods(names: &[&str]) -> String {
    let more = names.len().saturating_sub(NAMED_PODS);
    let named = names
        .iter()
        .take(NAMED_PODS)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    match more {
        0 => named,
        n => format!("{named} and {n} more"),
    }
}

/// One workload's figures: CPU only when every pod sampled in the window has two CPU samples
/// there (the sum of each pod's mean between its first and last sample), memory only when
/// every such pod has a memory sample.
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
                some_pods(&short)
            ));
        }
    }
    let memory: Option<f64> = pods.values().map(|s| s.max_memory).sum();
    if memory.is_none() {
        let missing: Vec<&str> = pods
            .iter()
            .filter(|(_, s)| s.max_memory.is_none())
            .map(|(name, _)| name.as_str())
            .collect();
        let note = format!(
            "no memory figure: no working-set sample in the window for pod(s) {}",
            some_pods(&missing)
        );
        usage.note = Some(match usage.note.take() {
            Some(n) => format!("{n}; {note}"),
            None => note,
        });
    }
    usage.memory_bytes = memory.map(bytes);
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
    fn memory_per_route_is_the_growth_from_before_the_routes_over_the_routes_made() {
        let w: Vec<ControllerWorkload> = vec![
            serde_yaml::from_str("{name: envoy, namespace: gw}").unwrap(),
            serde_yaml::from_str("{name: ctl, namespace: gw}").unwrap(),
        ];
        let mut window = Window::default();
        let at = |bytes: f64, ms: u64| PodReading {
            cpu: Some((1.0, ms)),
            memory: Some((bytes, ms)),
        };
        // The routes begin at 10 s. Pod e1's samples at 2 s and 8 s come before: the later
        // one is kept; one at 12 s is not "before". Pod e2 was last sampled at 9 s.
        window.remember_before(0, "e1", &at(50e6, 2_000), 10_000);
        window.remember_before(0, "e1", &at(60e6, 8_000), 10_000);
        window.remember_before(0, "e1", &at(55e6, 5_000), 10_000);
        window.remember_before(0, "e1", &at(99e6, 12_000), 10_000);
        window.remember_before(0, "e2", &at(40e6, 9_000), 10_000);
        // In the window: e1 peaks at 80 MB, e2 at 50 MB: 30 MB more with 100 routes.
        let mut s = PodSeries::default();
        s.add(&at(80e6, 15_000), 10_000, 40_000);
        window
            .pods
            .entry(0)
            .or_default()
            .insert("e1".into(), s.clone());
        let mut s2 = PodSeries::default();
        s2.add(&at(50e6, 16_000), 10_000, 40_000);
        window.pods.entry(0).or_default().insert("e2".into(), s2);
        // The control plane's only pod has no sample from before.
        window.pods.entry(1).or_default().insert("c1".into(), s);
        let mut made = figures(&w, &window);
        per_route(&mut made, &w, &window, 100);
        assert_eq!(made[0].memory_before_routes_bytes, Some(100_000_000));
        assert_eq!(made[0].memory_bytes, Some(130_000_000));
        assert_eq!(made[0].memory_per_route_bytes, Some(300_000.0));
        assert_eq!(made[1].memory_per_route_bytes, None);
        assert!(
            made[1]
                .note
                .as_deref()
                .unwrap()
                .contains("no memory per route"),
            "{:?}",
            made[1].note
        );
        // Memory that fell reads as a negative growth, not as nothing.
        let mut shrunk = figures(&w, &window);
        shrunk[0].memory_bytes = Some(90_000_000);
        per_route(&mut shrunk, &w, &window, 100);
        assert_eq!(shrunk[0].memory_per_route_bytes, Some(-100_000.0));
        // No route made: no figure (never a division by zero).
        let mut none = figures(&w, &window);
        per_route(&mut none, &w, &window, 0);
        assert_eq!(none[0].memory_per_route_bytes, None);
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

    #[test]
    fn a_note_stays_short_whatever_the_number_of_pods() {
        let pods: BTreeMap<String, PodSeries> = (0..200)
            .map(|i| {
                (
                    format!("ingress-nginx-controller-{i:03}-abcdefghij"),
                    series(&[(1.0, 1000, 1.0)]),
                )
            })
            .collect();
        let mut window = Window::default();
        window.pods.insert(0, pods);
        window.errors.insert(0, "x".repeat(5000));
        let w = ControllerWorkload {
            kind: TargetKind::Deployment,
            name: "ingress-nginx-controller".into(),
            namespace: "ingress".into(),
        };
        let u = &figures(&[w], &window)[0];
        let note = u.note.clone().unwrap();
        assert!(note.chars().count() <= MAX_NOTE, "{}", note.len());
        assert!(note.contains("and 195 more"), "{note}");
        assert_eq!(u.pods, 200);
    }

    #[test]
    fn a_pod_without_a_memory_sample_is_named() {
        let mut cpu_only = PodSeries::default();
        let reading = PodReading {
            cpu: Some((1.0, 1000)),
            memory: None,
        };
        cpu_only.add(&reading, 0, 100_000);
        let pods = BTreeMap::from([
            (
                "a".to_string(),
                series(&[(1.0, 1000, 5e6), (3.0, 21_000, 7e6)]),
            ),
            ("b".to_string(), cpu_only),
        ]);
        let u = workload_usage(&pods);
        assert_eq!(u.memory_bytes, None);
        assert!(u
            .note
            .unwrap()
            .contains("no memory figure: no working-set sample in the window for pod(s) b"));
    }

    fn pod(owner_kind: &str, owner: &str, uid: &str, hash: Option<&str>) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "p",
                "labels": hash.map(|h| serde_json::json!({"pod-template-hash": h})).unwrap_or(serde_json::json!({})),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner_kind, "name": owner,
                                     "uid": uid, "controller": true}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn only_pods_the_workload_controls_count() {
        let deploy = ControllerWorkload {
            kind: TargetKind::Deployment,
            name: "envoy".into(),
            namespace: "gw".into(),
        };
        assert!(owned(
            &deploy,
            Some("d1"),
            &pod("ReplicaSet", "envoy-5d8f", "rs1", Some("5d8f"))
        ));
        // Another Deployment's ReplicaSet whose name starts the same, a bare ReplicaSet, no hash.
        assert!(!owned(
            &deploy,
            Some("d1"),
            &pod("ReplicaSet", "envoy-admin-5d8f", "rs2", Some("5d8f"))
        ));
        assert!(!owned(
            &deploy,
            Some("d1"),
            &pod("ReplicaSet", "other", "rs3", Some("5d8f"))
        ));
        assert!(!owned(
            &deploy,
            Some("d1"),
            &pod("ReplicaSet", "envoy-5d8f", "rs1", None)
        ));
        assert!(!owned(
            &deploy,
            Some("d1"),
            &pod("DaemonSet", "envoy", "d1", Some("5d8f"))
        ));
        let ds = ControllerWorkload {
            kind: TargetKind::DaemonSet,
            name: "cilium-envoy".into(),
            namespace: "kube-system".into(),
        };
        assert!(owned(
            &ds,
            Some("u1"),
            &pod("DaemonSet", "cilium-envoy", "u1", None)
        ));
        assert!(!owned(
            &ds,
            Some("u1"),
            &pod("DaemonSet", "cilium-envoy", "u2", None)
        ));
        assert!(!owned(
            &ds,
            None,
            &pod("DaemonSet", "cilium-envoy", "u1", None)
        ));
        let mut bare = pod("DaemonSet", "cilium-envoy", "u1", None);
        bare.metadata.owner_references = None;
        assert!(!owned(&ds, Some("u1"), &bare));
    }

    #[test]
    fn windows_go_with_their_run_and_when_stale() {
        let windows = usage::Windows::<Vec<WorkloadUsage>>::default();
        for key in ["run-1/0", "run-1/65", "run-10/0", "run-2/1"] {
            windows.update(key, 1_000, |w| w.polled_at = Some(1_000));
        }
        windows.forget_run("run-1");
        assert!(windows.get("run-1/0").is_none() && windows.get("run-1/65").is_none());
        assert!(
            windows.get("run-10/0").is_some(),
            "another run whose id starts the same"
        );
        windows.update("run-3/0", 1_000 + 3_600_000, |w| {
            w.polled_at = Some(3_601_000)
        });
        assert_eq!(
            windows.kept(),
            1,
            "windows not read for an hour are dropped"
        );
    }
}
