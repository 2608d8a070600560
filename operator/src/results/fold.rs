//! Each sample folded into one stored object (`store::reports::folded`): what a result needs of
//! a sample, made from its verified worker reports by [`fold`], the one function the result
//! builder also uses on reports that were never folded, so a result is the same either way.
//!
//! When: right after the status write that stored a sample's figures recorded this reconcile
//! ([`confirmed`]), the sample's reports are folded and, once the fold is stored, deleted. Until that status is
//! stored the reports are what a retried Collecting reads; after it, no phase reads them again.
//! A fold that cannot be stored leaves the reports where they are: the result is made of them
//! instead (best effort, logged; nothing waits for it).

use std::collections::BTreeMap;

use protocol::worker::{validate_final, FinalReport, Role};

use crds::RunStatus;

use crate::context::Context;
use crate::policy::samples::{self, Slot};
use crate::run::{Hooks, Plan};
use crate::store::reports::folded::{self, MAX_FOLDED_BYTES, MAX_HISTOGRAM_CHARS};
use crate::store::reports::{every_client_reported, Folded, Owner};

/// The fold of one sample from its verified reports; None while a client has not reported or
/// when the reports make no figures (such a sample is not part of a result).
pub fn fold<P: Plan>(
    plan: &P,
    run: &str,
    slot: Slot,
    reports: &BTreeMap<String, FinalReport>,
) -> Option<Folded> {
    let expected = plan.sample(run, slot).workers;
    if !every_client_reported(&expected, reports) {
        return None;
    }
    let mut f = Folded::new(slot.wire());
    let reading = plan.read(run, slot, reports).ok()?;
    if reading.figures.iter().any(|x| !x.value.is_finite()) {
        return None;
    }
    (f.figures, f.parameters, f.pairs) = (reading.figures, reading.parameters, reading.pairs);
    let mut histograms = vec![];
    for (worker, r) in reports {
        let Some(role) = expected.get(worker) else {
            continue;
        };
        // Only starts that are times (an absurd one would hide the real ones).
        if super::backing::report_start(r.started_at_unix_ms).is_some() {
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
        .flatten()
        .filter(|h| h.len() <= MAX_HISTOGRAM_CHARS);
    Some(f.bounded(MAX_FOLDED_BYTES))
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Client => "client",
        Role::Server => "server",
    }
}

/// A report's latency histogram, if its kind carries one (validated again: stored objects are
/// hostile).
fn histogram_of(r: &FinalReport) -> Option<String> {
    let kind = r.report.get("kind")?.as_str()?.parse().ok()?;
    validate_final(r, kind).ok()?.latency_histogram()
}

/// Of the samples this reconcile recorded, those whose figures `persisted` (the status as the
/// API server stored it) holds for `run`: their reports no phase reads again. Status alone
/// never names a sample to fold.
pub fn confirmed(recorded: &[Slot], persisted: &RunStatus, run: &str) -> Vec<Slot> {
    if persisted.run_id.as_deref() != Some(run) {
        return vec![];
    }
    recorded
        .iter()
        .filter(|s| samples::recorded(&persisted.statistics, s.measurement, s.sample))
        .copied()
        .collect()
}

/// Folds the samples a status write just stored (`recorded`, confirmed in `persisted`) and
/// deletes their worker reports; a sample whose fold cannot be made, read back or stored keeps
/// its reports (logged).
pub async fn fold_recorded<K: Hooks>(
    ctx: &Context,
    obj: &K,
    run: &str,
    recorded: &[Slot],
    persisted: &RunStatus,
) {
    let store = ctx.reports();
    let owner = Owner::of(obj);
    for slot in confirmed(recorded, persisted, run) {
        let expected = obj.sample(run, slot).workers;
        let outcome = async {
            let loaded = store.load(&owner, run, slot.wire(), &expected).await?;
            let Some(folded) = fold(obj, run, slot, &loaded.reports) else {
                return Ok("its reports make no sample; they stay".to_string());
            };
            // Only a fold the builder will accept replaces the reports.
            if let Err(why) = folded::readable(&owner, run, &folded) {
                return Ok(format!(
                    "the fold would not read back ({why}); the reports stay"
                ));
            }
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
    fn only_samples_this_reconcile_recorded_and_the_stored_status_holds_are_folded() {
        let stored = status("r", &[(0, 3), (1, 2)]);
        let recorded = [slot(1, 1), slot(1, 2), slot(0, 0)];
        // slot (1, 2) is not in the stored status (not written, or written by another).
        assert_eq!(confirmed(&recorded, &stored, "r"), [slot(1, 1), slot(0, 0)]);
        // A stored status of another run confirms nothing.
        assert_eq!(
            confirmed(&recorded, &status("q", &[(0, 9), (1, 9)]), "r"),
            []
        );
        // A forged status full of samples folds only what this reconcile recorded.
        let forged = status("r", &[(0, 1_000_000), (1, 1_000_000)]);
        assert_eq!(confirmed(&[], &forged, "r"), []);
    }
}
