//! Running: the sample's clients report. The run fails as soon as a report can no longer come
//! (a worker's check before the barrier failed, its pod failed, a server pod or a node is gone),
//! an SLO gate with abortOnFail is broken on the clients' merged live progress, or the
//! measurement outlived its deadline, naming who never reported.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use protocol::worker::Role;

use crds::Phase;

use super::super::transition::{fail, set_phase, Next};
use super::{announce, gates};
use crate::base::clock::elapsed_since;
use crate::base::conditions::WORKERS_SCHEDULED;
use crate::base::error::Result;
use crate::base::outcome::{Failure, Reason, Step, POLL};
use crate::base::text::clip;
use crate::k8s::pods;
use crate::policy::samples::Slot;
use crate::run::{Hooks, Run, RunState};
use crate::store::reports::Owner;

pub(in crate::driver) async fn handle<K: Hooks>(run: &mut Run<'_, K>, index: u32) -> Result<Next> {
    let slot = run.slot();
    let what = run.describe(slot);
    let ctx = run.ctx();
    // After an operator restart the barrier state is gone: announce again.
    if !ctx.runs.is_announced(run.id(), slot.wire()) {
        announce(run, slot);
    }
    if let Some(m) = preflight_failure(run) {
        fail(run, Failure::new(Reason::PreflightFailed, m).about(&what));
        return Ok(Next::Continue);
    }
    let expected = run.obj().sample(run.id(), slot).workers;
    let awaited: BTreeMap<String, Role> = expected
        .iter()
        .filter(|(_, role)| **role == Role::Client)
        .map(|(w, r)| (w.clone(), *r))
        .collect();
    // What the watches hold first; the API server is asked only before failing the run on
    // what they said (they lag it by a few milliseconds).
    let mut seen = look(run, slot, &expected, From::Watches).await?;
    let mut wake = POLL;
    let expecting = awaited.len();
    let done = loop {
        let done = awaited
            .keys()
            .filter(|w| seen.reported.contains(*w))
            .count();
        if done == expecting {
            run.set_progress(done, expecting);
            let m = format!("{what}: collecting {} report(s)", seen.reported.len());
            set_phase(run, Phase::Collecting, m);
            return Ok(Next::Continue);
        }
        let ending = match ending(run, index, &expected, &awaited, &seen).await? {
            None => break done,
            Some(_) if seen.from == From::Watches => {
                seen = look(run, slot, &expected, From::ApiServer).await?;
                continue;
            }
            Some(ending) => ending,
        };
        run.set_progress(done, expecting);
        fail(run, ending.about(&what));
        return Ok(Next::Continue);
    };
    // The run waits: a new count is shown at most every PROGRESS_EVERY (each is a status
    // write); a run that ends shows its last count at once.
    if ctx
        .runs
        .progress_due(run.id(), slot.wire(), done, expecting)
    {
        run.set_progress(done, expecting);
    }
    note_scheduled(run, &seen.pods, expected.len());
    if let Some(abort) = gates::live_abort(run, slot) {
        run.set_progress(done, expecting);
        fail(run, abort);
        return Ok(Next::Continue);
    }
    // The kind's work while the workers run; an error is said and tried again at the next
    // tick, never in the way of the checks above (a lost worker, the deadline).
    match K::while_running(run, index).await {
        Ok(Step::Done) => {}
        Ok(Step::Wait { message, after }) => {
            if let Some(m) = message {
                run.say(m);
            }
            wake = wake.min(after);
        }
        Ok(Step::Fail(f)) => {
            run.set_progress(done, expecting);
            fail(run, f.about(&what));
            return Ok(Next::Continue);
        }
        Err(e) => run.say(format!("{what}: {e}; trying again")),
    }
    Ok(Next::after(wake))
}

/// Where a look at the sample's pods and reports came from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum From {
    /// The controllers' pod watches and the operator's report watch (where they can answer).
    Watches,
    /// Lists from the API server.
    ApiServer,
}

/// The sample's pods and the workers whose report is stored.
struct Seen {
    pods: Vec<Arc<Pod>>,
    reported: BTreeSet<String>,
    from: From,
}

/// Pods first, then reports: a worker exits only after its report is stored, so a finished
/// pod's report is always in the second look.
async fn look<K: Hooks>(
    run: &Run<'_, K>,
    slot: Slot,
    expected: &BTreeMap<String, Role>,
    from: From,
) -> Result<Seen> {
    let ctx = run.ctx();
    let selector = run.slot_selector(slot);
    let owner = Owner::of(run.obj());
    let store = ctx.reports();
    let watched = match from {
        From::Watches => ctx.pods.list(run.ns(), &selector).zip(store.reported(
            &owner,
            run.id(),
            slot.wire(),
            expected,
        )),
        From::ApiServer => None,
    };
    if let Some((pods, reported)) = watched {
        return Ok(Seen {
            pods,
            reported,
            from: From::Watches,
        });
    }
    let pods = pods::list_pods(&ctx.client, run.ns(), &selector)
        .await?
        .into_iter()
        .map(Arc::new)
        .collect();
    let reports = store.load(&owner, run.id(), slot.wire(), expected).await?;
    Ok(Seen {
        pods,
        reported: reports.reports.into_keys().collect(),
        from: From::ApiServer,
    })
}

/// Why the sample can no longer succeed, if it cannot: a lost worker, or the measurement's
/// deadline passed with reports missing.
async fn ending<K: Hooks>(
    run: &Run<'_, K>,
    index: u32,
    expected: &BTreeMap<String, Role>,
    awaited: &BTreeMap<String, Role>,
    seen: &Seen,
) -> Result<Option<Failure>> {
    if let Some(lost) = lost_worker(run, expected, awaited, &seen.pods, &seen.reported).await? {
        return Ok(Some(lost));
    }
    let ctx = run.ctx();
    let after_start = run.obj().measurement(index).after_start;
    let deadline = ctx
        .config
        .worker_start_timeout()
        .saturating_add(after_start);
    if elapsed_since(&run.status().run().phase_since) <= deadline {
        return Ok(None);
    }
    let missing: Vec<&String> = awaited
        .keys()
        .filter(|w| !seen.reported.contains(*w))
        .collect();
    Ok(Some(Failure::new(
        Reason::WorkerTimeout,
        never_reported(&missing, &seen.pods, deadline),
    )))
}

/// Workers named in a timeout's message; the rest are counted (256 scheduler reasons would
/// make a status of tens of kilobytes).
const MISSING_NAMED: usize = 5;

/// "worker pod A (not scheduled: ...), ... and N more never reported within Ns", and, when the
/// scheduler named an untolerated taint, who can let workers past one: benchmarks cannot.
/// (Most clusters' control-plane nodes are tainted, so the taint may not be the cause.)
fn never_reported(missing: &[&String], pods: &[Arc<Pod>], deadline: Duration) -> String {
    let by_name = pods::ByName::of(pods);
    let named: Vec<String> = missing
        .iter()
        .take(MISSING_NAMED)
        .map(|w| pods::describe_pod(w, &by_name))
        .collect();
    let more = match missing.len().saturating_sub(MISSING_NAMED) {
        0 => String::new(),
        n => format!(" and {n} more worker pod(s)"),
    };
    let taint = if named.iter().any(|d| d.contains("untolerated taint")) {
        "; if a taint named above is on the nodes meant for benchmarks, only the cluster admin \
         can let workers past it (Helm value workerTolerations)"
    } else {
        ""
    };
    format!(
        "{}{more} never reported within {}s{taint}",
        named.join(", "),
        deadline.as_secs()
    )
}

/// Some(message) when a worker of the run reported that it cannot start (its target does not
/// resolve or accept a connection, ...): the run ends with that cause before the measurement.
fn preflight_failure<K: Hooks>(run: &Run<'_, K>) -> Option<String> {
    let failures = run.ctx().runs.preflight_failures(run.id());
    let (worker, why) = failures.first()?;
    Some(format!(
        "worker {worker} failed its check before the measurement: {}",
        clip(why, 1000)
    ))
}

/// WorkersScheduled: how many of the measurement's pods have a node.
fn note_scheduled<K: Hooks>(run: &mut Run<'_, K>, pods: &[Arc<Pod>], expected: usize) {
    let scheduled = pods
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .count();
    let m = format!("{scheduled}/{expected} worker(s) scheduled");
    run.condition(WORKERS_SCHEDULED, scheduled == expected, "Scheduling", m);
}

/// A worker whose report can no longer come: its pod failed, a server pod is gone
/// (WorkerFailed), or the node of one that has not reported is gone (NodeLost).
async fn lost_worker<K: Hooks>(
    run: &Run<'_, K>,
    expected: &BTreeMap<String, Role>,
    awaited: &BTreeMap<String, Role>,
    pods: &[Arc<Pod>],
    reports: &BTreeSet<String>,
) -> Result<Option<Failure>> {
    let named = pods::ByName::of(pods);
    let problem = pods::worker_problem(awaited, &named, reports)
        .or_else(|| pods::server_problem(expected, &named));
    if let Some(p) = problem {
        return Ok(Some(Failure::new(Reason::WorkerFailed, p)));
    }
    let unreported: Vec<&String> = expected.keys().filter(|w| !reports.contains(*w)).collect();
    let ctx = run.ctx();
    let lost = pods::node_problem(&ctx.client, &ctx.nodes, &named, unreported).await?;
    Ok(lost.map(|p| Failure::new(Reason::NodeLost, p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unscheduled(name: &str, why: &str) -> Arc<Pod> {
        Arc::new(crate::testing::unscheduled_pod(name, why))
    }

    #[test]
    fn a_timeout_names_five_workers_counts_the_rest_and_who_can_lift_a_taint() {
        let taint = "0/3 nodes are available: 3 node(s) had untolerated taint {pool: bench}.";
        let names: Vec<String> = (0..256).map(|i| format!("w{i:03}")).collect();
        let pods: Vec<Arc<Pod>> = names.iter().map(|n| unscheduled(n, taint)).collect();
        let missing: Vec<&String> = names.iter().collect();
        let m = never_reported(&missing, &pods, Duration::from_secs(120));
        assert!(
            m.starts_with(&format!("worker pod w000 (not scheduled: {taint}), ")),
            "{m}"
        );
        assert!(m.contains("worker pod w004 (not scheduled"), "{m}");
        assert!(!m.contains("w005"), "{m}");
        assert!(
            m.contains(" and 251 more worker pod(s) never reported within 120s"),
            "{m}"
        );
        assert!(m.ends_with("(Helm value workerTolerations)"), "{m}");
        assert!(m.len() < 1000, "{} characters", m.len());

        // Each reason is bounded (the Event's note is cut to 1024 bytes where it is published).
        let long = format!("0/3 nodes are available: {}", "x".repeat(5000));
        let pods: Vec<Arc<Pod>> = names.iter().map(|n| unscheduled(n, &long)).collect();
        let m = never_reported(&missing, &pods, Duration::from_secs(120));
        assert!(m.len() < 2000, "{} characters", m.len());

        let selector =
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.";
        let pods = [unscheduled("w0", selector)];
        let w0 = "w0".to_string();
        assert_eq!(
            never_reported(&[&w0], &pods, Duration::from_secs(60)),
            format!("worker pod w0 (not scheduled: {selector}) never reported within 60s")
        );
    }
}
