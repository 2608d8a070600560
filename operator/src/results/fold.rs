//! Each sample folded into one stored object (`store::reports::folded`): what a result needs of
//! a sample, made from its verified worker reports by [`fold`], the one function the result
//! builder also uses on reports that were never folded, so a result is the same either way.
//!
//! When: right after a status write that recorded a sample's figures ([`newly_recorded`]), the
//! sample's reports are folded and, once the fold is stored, deleted. Until that status is
//! stored the reports are what a retried Collecting reads; after it, no phase reads them again.
//! A fold that cannot be stored leaves the reports where they are: the result is made of them
//! instead (best effort, logged; nothing waits for it).

use std::collections::BTreeMap;

use protocol::worker::{validate_final, FinalReport, Role};

use crds::RunStatus;

use crate::context::Context;
use crate::policy::samples::{Slot, STRIDE};
use crate::run::{Hooks, Plan};
use crate::store::reports::folded::MAX_FOLDED_BYTES;
use crate::store::reports::{Folded, Owner};

/// The fold of one sample from its verified reports; None while a client has not reported or
/// when the reports make no figures (such a sample is not part of a result).
pub fn fold<P: Plan>(
    plan: &P,
    run: &str,
    slot: Slot,
    reports: &BTreeMap<String, FinalReport>,
) -> Option<Folded> {
    let expected = plan.workers(run, slot);
    if !complete(&expected, reports) {
        return None;
    }
    let mut f = Folded::new(slot.wire());
    f.figures = plan.figures(run, slot, reports).ok()?;
    f.pairs = plan.pair_rows(run, slot, reports);
    f.parameters = plan.parameters(run, slot, reports);
    let mut histograms = vec![];
    for (worker, r) in reports {
        let Some(role) = expected.get(worker) else {
            continue;
        };
        if r.started_at_unix_ms > 0 {
            let t = r.started_at_unix_ms;
            f.starts = Some(f.starts.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        }
        if let Some(node) = &r.node {
            let host = f.nodes.entry(node.clone()).or_default();
            if host.is_none() {
                *host = r.host.clone();
            }
            let nodes = f.placement.entry(role_name(*role).to_string()).or_default();
            nodes.insert(node.clone());
        }
        // Latency is what the clients measured; a server's report adds none (a compromised
        // server pod cannot add samples to the result's distribution).
        if *role == Role::Client {
            histograms.extend(histogram_of(r));
        }
    }
    f.histogram = protocol::report::histogram::merge_encoded(histograms.iter().map(String::as_str))
        .ok()
        .flatten();
    Some(f.bounded(MAX_FOLDED_BYTES))
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Client => "client",
        Role::Server => "server",
    }
}

/// Every client of the sample reported.
fn complete(expected: &BTreeMap<String, Role>, reports: &BTreeMap<String, FinalReport>) -> bool {
    let mut clients = expected
        .iter()
        .filter(|(_, r)| **r == Role::Client)
        .peekable();
    clients.peek().is_some() && clients.all(|(w, _)| reports.contains_key(w))
}

/// A report's latency histogram, if its kind carries one (validated again: stored objects are
/// hostile).
fn histogram_of(r: &FinalReport) -> Option<String> {
    let kind = r.report.get("kind")?.as_str()?;
    validate_final(r, kind).ok()?.latency_histogram()
}

/// The samples of `run` whose figures `persisted` (the status as stored) holds and `before`
/// (the status this reconcile read) did not: the ones whose reports no phase reads again. Only
/// measurements below `count` and samples below `max` (the spec's), whatever status claims.
pub fn newly_recorded(
    before: &RunStatus,
    persisted: &RunStatus,
    run: &str,
    count: u32,
    max: u32,
) -> Vec<Slot> {
    if persisted.run_id.as_deref() != Some(run) {
        return vec![];
    }
    let same_run = before.run_id.as_deref() == Some(run);
    let taken = |status: &RunStatus, index: u32| {
        status
            .statistics
            .iter()
            .find(|m| m.index == index)
            .map_or(0, |m| m.samples().min(max))
    };
    let mut out = vec![];
    for index in 0..count.min(STRIDE) {
        let from = if same_run { taken(before, index) } else { 0 };
        for sample in from..taken(persisted, index) {
            out.push(Slot {
                measurement: index,
                sample,
            });
        }
    }
    out
}

/// Folds the samples a status write just recorded and deletes their worker reports; a sample
/// whose fold cannot be made or stored keeps its reports (logged).
pub async fn fold_recorded<K: Hooks>(
    ctx: &Context,
    obj: &K,
    run: &str,
    before: &RunStatus,
    persisted: &RunStatus,
) {
    let max = obj.repetition().samples().max();
    let slots = newly_recorded(before, persisted, run, obj.count(), max);
    let store = ctx.reports();
    let owner = Owner::of(obj);
    for slot in slots {
        let expected = obj.workers(run, slot);
        let outcome = async {
            let loaded = store.load(&owner, run, slot.wire(), &expected).await?;
            let Some(folded) = fold(obj, run, slot, &loaded.reports) else {
                return Ok("its reports make no sample; they stay".to_string());
            };
            store.keep_folded(&owner, run, &folded).await?;
            store
                .delete_worker_reports(&owner, run, slot.wire())
                .await?;
            Ok::<_, crate::store::reports::StoreError>(format!(
                "{} report(s) folded into one",
                loaded.reports.len()
            ))
        }
        .await;
        match outcome {
            Ok(what) => tracing::debug!(
                benchmark = owner.name,
                namespace = owner.namespace,
                run,
                slot = slot.wire(),
                "{what}"
            ),
            Err(e) => tracing::warn!(
                benchmark = owner.name,
                namespace = owner.namespace,
                run,
                slot = slot.wire(),
                "folding the sample's reports: {e}; they stay"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::result::MeasurementStats;

    fn status(run: &str, samples: &[(u32, usize)]) -> RunStatus {
        RunStatus {
            run_id: Some(run.into()),
            statistics: samples
                .iter()
                .map(|(index, n)| MeasurementStats {
                    index: *index,
                    name: format!("step {index}"),
                    metrics: vec![crds::stats::metric(
                        "rps",
                        "req/s",
                        crds::history::Better::Higher,
                        vec![1.0; *n],
                    )],
                })
                .collect(),
            ..Default::default()
        }
    }

    fn slot(measurement: u32, sample: u32) -> Slot {
        Slot {
            measurement,
            sample,
        }
    }

    #[test]
    fn only_samples_the_write_recorded_are_folded() {
        let before = status("r", &[(0, 3), (1, 1)]);
        let after = status("r", &[(0, 3), (1, 2)]);
        assert_eq!(newly_recorded(&before, &after, "r", 2, 5), [slot(1, 1)]);
        assert_eq!(newly_recorded(&after, &after, "r", 2, 5), []);
        // A new run: everything its status holds is new.
        let old = status("q", &[(0, 3)]);
        let first = status("r", &[(0, 1)]);
        assert_eq!(newly_recorded(&old, &first, "r", 2, 5), [slot(0, 0)]);
        // A status of another run folds nothing of this one.
        assert_eq!(
            newly_recorded(&before, &status("q", &[(0, 9)]), "r", 2, 5),
            []
        );
    }

    #[test]
    fn a_status_claiming_more_than_the_spec_plans_folds_only_what_it_plans() {
        let before = status("r", &[]);
        let forged = status("r", &[(0, 1_000_000), (7, 1), (u32::MAX, 3)]);
        let slots = newly_recorded(&before, &forged, "r", 2, 3);
        assert_eq!(slots, [slot(0, 0), slot(0, 1), slot(0, 2)]);
    }
}
