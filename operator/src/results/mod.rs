//! A finished run's BenchmarkResult: built from the run's stored reports and its run record
//! (never from status, which others can write), written once in the benchmark's namespace, judged against the
//! benchmark's baseline, and the history trimmed to `historyLimit`; the history kept is then
//! searched for a new regime (`regime`). Results carry no owner reference: they outlive the
//! benchmark.

mod backing;
mod baseline;
mod build;
mod facts;
pub mod fold;
mod matching;
pub mod metrics;
pub mod regime;

use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use kube::runtime::events::EventType;
use kube::ResourceExt;

use crds::result::{BENCHMARK_LABEL, KIND_LABEL};
use crds::{BenchmarkResult, Phase};

use crate::base::error::{Error, Result};
use crate::base::events::PendingEvent;
use crate::run::{Hooks, Run, RunState};
use crate::store::records::Owner;
use crate::store::run_record::{self, RunRecord};
use metrics::{RegimeMetrics, ResultMetrics};

pub use build::{result_name, statistics};

/// What recording a run's result did, for the driver to put into the run.
#[derive(Default)]
pub struct Recorded {
    /// The name of the result written now (for status.latestResult); None when none is due
    /// (refused runs, runs finished before results existed) or status already points at it.
    pub written: Option<String>,
    /// The Regressed condition (status True, False or Unknown; reason; message), once the
    /// result is judged against the benchmark's baseline.
    pub regressed: Option<(String, &'static str, String)>,
    /// The NewRegime condition (status, reason, message), once the history is judged.
    pub new_regime: Option<(&'static str, &'static str, String)>,
    /// Its Events (a replaced impostor, the verdict, the result).
    pub events: Vec<PendingEvent>,
    /// The result was created now, by this call (the API server answered 201, or showed this
    /// very run's result already there): known first-hand, never from status.
    pub created: bool,
}

/// Writes the run's result unless status already points at it, then the verdict and the
/// history limit. Runs that never left the queue (refused specs) get none. Reads the run and
/// returns what it recorded; on an error, what it recorded before it.
pub async fn record<K: Hooks>(run: &Run<'_, K>) -> (Recorded, Result<()>) {
    let mut recorded = Recorded::default();
    let outcome = write(run, &mut recorded).await;
    (recorded, outcome)
}

async fn write<K: Hooks>(run: &Run<'_, K>, recorded: &mut Recorded) -> Result<()> {
    let name = result_name(run.name(), run.id());
    if run.status().run().latest_result.as_deref() == Some(name.as_str()) {
        return Ok(());
    }
    // What the operator decided about the run (an end decided this reconcile whose write
    // failed included). Runs that never left the queue get no result, nor runs that ended
    // before run records were kept (status is not asked).
    let ctx = run.ctx();
    let owner = Owner::of(run.obj());
    let stored = run_record::load(
        &ctx.client,
        &ctx.config.namespace,
        &ctx.run_records,
        &owner,
        run.id(),
    )
    .await?;
    let record = stored
        .unwrap_or_default()
        .with_pending(run.id(), run.ended());
    let Some(record) = record.filter(RunRecord::result_due) else {
        return Ok(());
    };
    let mut spec = build::result_spec(run, &record).await?;
    spec.verdict = baseline::judge(run, &spec).await?;
    let object = build::object(run, &name, spec);
    let api: Api<BenchmarkResult> = Api::namespaced(run.ctx().client.clone(), run.ns());
    // The history is listed while the result is created (one round trip less in the finishing
    // reconcile); nothing is deleted unless the creation succeeded.
    let kind = K::kind(&());
    let (created, listed) = futures::join!(
        create(&api, &object, &mut recorded.events),
        list_history(&api, &kind, run.name())
    );
    created?;
    recorded.created = true;
    if let Some(v) = &object.spec.verdict {
        recorded.regressed = Some(verdict(v, &mut recorded.events));
    }
    run.ctx()
        .metrics
        .family::<ResultMetrics>()
        .set(&kind, run.ns(), run.name(), &object.spec);
    let limit = run.obj().outline().repetition.history_limit();
    let kept = prune(&api, listed?, &object, limit).await?;
    if object.spec.phase == Phase::Succeeded {
        let judged = regime::judge(&history(&kept, &object));
        recorded.new_regime = Some(judged.condition());
        recorded.events.extend(judged.event());
        run.ctx()
            .metrics
            .family::<RegimeMetrics>()
            .set(&kind, run.ns(), run.name(), &judged);
    } else {
        let m = "the run did not succeed; its history is judged after the next run that does";
        recorded.new_regime = Some(("Unknown", "NotJudged", m.into()));
    }
    let m = format!(
        "result {name} written ({})",
        object.spec.summary.as_deref().unwrap_or("no figures")
    );
    recorded
        .events
        .push((EventType::Normal, "ResultWritten".into(), m));
    recorded.written = Some(name);
    Ok(())
}

/// Creates the result; one already there from this very run (a retried reconcile) is fine, any
/// other object holding its name is deleted (that object only) and creation retried once.
async fn create(
    api: &Api<BenchmarkResult>,
    object: &BenchmarkResult,
    events: &mut Vec<PendingEvent>,
) -> Result<()> {
    let name = object.name_any();
    for _ in 0..2 {
        match api.create(&PostParams::default(), object).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        let Some(existing) = api.get_opt(&name).await? else {
            continue;
        };
        let s = &existing.spec;
        if s.run_id == object.spec.run_id && s.benchmark_uid == object.spec.benchmark_uid {
            return Ok(());
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: existing.uid(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&name, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        let m = format!(
            "BenchmarkResult {name} held this run's name but was not its result; it was replaced"
        );
        events.push((EventType::Warning, "ResultReplaced".into(), m));
    }
    Err(NameTaken(name).into())
}

/// The results of `kind` `benchmark` in the namespace of `api`, as listed.
async fn list_history(
    api: &Api<BenchmarkResult>,
    kind: &str,
    benchmark: &str,
) -> Result<Vec<BenchmarkResult>> {
    let selector = format!(
        "{BENCHMARK_LABEL}={},{KIND_LABEL}={}",
        build::label_value(benchmark),
        kind.to_lowercase()
    );
    Ok(api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|r| r.spec.benchmark.name == benchmark && r.spec.benchmark.kind == kind)
        .collect())
}

/// Deletes the benchmark's oldest results beyond `limit` (by creation time, which only the API
/// server writes, to the second); returns the ones kept, newest first. `written` (the result
/// just created) is the newest whatever the clock says, never deleted here, and counted as it
/// was created: the listing ran beside its creation, so it may miss it, or still show an
/// object of its name that the creation replaced.
async fn prune(
    api: &Api<BenchmarkResult>,
    listed: Vec<BenchmarkResult>,
    written: &BenchmarkResult,
    limit: u32,
) -> Result<Vec<BenchmarkResult>> {
    let (kept, old) = beyond_limit(listed, written, limit);
    for old in &old {
        match api.delete(&old.name_any(), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(kept)
}

/// `listed` with `written` in place of any object of its name, newest first, split into the
/// `limit` kept (`written` first) and the rest.
fn beyond_limit(
    listed: Vec<BenchmarkResult>,
    written: &BenchmarkResult,
    limit: u32,
) -> (Vec<BenchmarkResult>, Vec<BenchmarkResult>) {
    let name = written.name_any();
    let mut all: Vec<BenchmarkResult> = listed
        .into_iter()
        .filter(|r| r.name_any() != name)
        .collect();
    order_newest_first(&mut all, &name);
    all.insert(0, written.clone());
    let old = all.split_off(usize::try_from(limit).unwrap_or(usize::MAX).min(all.len()));
    (all, old)
}

/// The history the NewRegime condition judges, oldest first: of the results kept (newest
/// first), those of this benchmark that succeeded with the same spec, as `baseline` chooses
/// them, then `now` (this run's, as written; not as listed) as the newest.
fn history<'a>(kept: &'a [BenchmarkResult], now: &'a BenchmarkResult) -> Vec<regime::Entry<'a>> {
    let n = &now.spec;
    let mut entries: Vec<regime::Entry<'a>> = kept
        .iter()
        .take(crds::changepoint::MAX_SERIES)
        .filter(|r| {
            let s = &r.spec;
            s.benchmark == n.benchmark
                && s.spec_hash == n.spec_hash
                && s.phase == Phase::Succeeded
                && s.run_id != n.run_id
        })
        .map(|r| regime::Entry {
            name: r.metadata.name.as_deref().unwrap_or_default(),
            spec: &r.spec,
        })
        .collect();
    entries.reverse();
    entries.push(regime::Entry {
        name: now.metadata.name.as_deref().unwrap_or_default(),
        spec: n,
    });
    entries
}

/// Sorts `all` newest first: `written` first, then by creation time and name.
fn order_newest_first(all: &mut [BenchmarkResult], written: &str) {
    all.sort_by_key(|r| std::cmp::Reverse((r.name_any() == written, newest_first(r))));
}

/// Sort key: creation time, then name.
fn newest_first(r: &BenchmarkResult) -> (Option<jiff::Timestamp>, String) {
    (
        r.metadata.creation_timestamp.as_ref().map(|t| t.0),
        r.name_any(),
    )
}

/// The Regressed condition (status, reason, message) of a verdict; its Event goes to `events`.
fn verdict(
    v: &crds::result::Verdict,
    events: &mut Vec<PendingEvent>,
) -> (String, &'static str, String) {
    let regressed: Vec<String> = v
        .metrics
        .iter()
        .filter(|m| m.regressed)
        .map(|m| {
            format!(
                "{} {} {:+.1}% (tolerance {}%, beyond the noise)",
                m.measurement, m.metric, m.delta_percent, m.tolerance_percent
            )
        })
        .collect();
    let (reason, message, event) = match v.regressed.as_str() {
        "True" => (
            "Regressed",
            format!("against {}: {}", v.baseline, regressed.join("; ")),
            EventType::Warning,
        ),
        "False" => (
            "WithinTolerance",
            format!(
                "against {}: {} figure(s) within tolerance or noise",
                v.baseline,
                v.metrics.len()
            ),
            EventType::Normal,
        ),
        // Results were there, but none of this run's environment.
        _ if v.baseline_results.is_empty() && !v.skipped.is_empty() => {
            ("OtherEnvironment", v.baseline.clone(), EventType::Normal)
        }
        _ => ("NoBaseline", v.baseline.clone(), EventType::Normal),
    };
    let message = crate::base::text::clip(&message, 1000);
    events.push((event, reason.into(), message.clone()));
    (v.regressed.clone(), reason, message)
}

/// Another object keeps taking the name of this run's result.
#[derive(Debug, thiserror::Error)]
#[error("BenchmarkResult {0} keeps being taken by another object")]
struct NameTaken(String);

impl From<NameTaken> for Error {
    fn from(e: NameTaken) -> Error {
        Error::Internal(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::BenchmarkResultSpec;

    fn result(name: &str, run: &str, hash: &str, phase: Phase) -> BenchmarkResult {
        let spec = BenchmarkResultSpec {
            benchmark: crds::BenchmarkRef {
                kind: "IngressBenchmark".into(),
                namespace: "team".into(),
                name: "web".into(),
            },
            benchmark_uid: "u1".into(),
            spec_hash: hash.into(),
            phase,
            ..crate::testing::results::succeeded(run, vec![])
        };
        BenchmarkResult::new(name, spec)
    }

    /// With the history limit at 1, the result just written is the one kept, even when an
    /// older one created in the same second sorts after it by name ("-g9" after "-g10").
    #[test]
    fn the_result_just_written_is_newest_whatever_its_name() {
        let second = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-12-05T10:00:00Z".parse().unwrap(),
        );
        let mut all: Vec<BenchmarkResult> = ["web-u-g9", "web-u-g10"]
            .into_iter()
            .map(|name| {
                let mut r = result(name, name, "h", Phase::Succeeded);
                r.metadata.creation_timestamp = Some(second.clone());
                r
            })
            .collect();
        order_newest_first(&mut all, "web-u-g10");
        assert_eq!(all[0].name_any(), "web-u-g10");
        order_newest_first(&mut all, "web-u-g9");
        assert_eq!(all[0].name_any(), "web-u-g9");
    }

    fn at(r: BenchmarkResult, when: &str) -> BenchmarkResult {
        let mut r = r;
        r.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            when.parse().unwrap(),
        ));
        r
    }

    fn names(results: &[BenchmarkResult]) -> Vec<String> {
        results.iter().map(ResourceExt::name_any).collect()
    }

    /// The history is listed beside the result's creation: a listing that missed the result
    /// still counts it among those kept, so no more than the limit stay.
    #[test]
    fn a_listing_that_missed_the_result_just_written_still_counts_it() {
        let written = result("web-r4", "r4", "h", Phase::Succeeded);
        let listed = vec![
            at(
                result("web-r1", "r1", "h", Phase::Succeeded),
                "2026-12-05T10:00:01Z",
            ),
            at(
                result("web-r3", "r3", "h", Phase::Succeeded),
                "2026-12-05T10:00:03Z",
            ),
            at(
                result("web-r2", "r2", "h", Phase::Succeeded),
                "2026-12-05T10:00:02Z",
            ),
        ];
        let (kept, old) = beyond_limit(listed.clone(), &written, 2);
        assert_eq!(names(&kept), ["web-r4", "web-r3"]);
        assert_eq!(names(&old), ["web-r2", "web-r1"]);

        // Listed after the creation, the same split.
        let mut with_it = listed;
        with_it.push(at(written.clone(), "2026-12-05T10:00:04Z"));
        let (kept, old) = beyond_limit(with_it, &written, 2);
        assert_eq!(names(&kept), ["web-r4", "web-r3"]);
        assert_eq!(names(&old), ["web-r2", "web-r1"]);
    }

    /// An object of the result's name in the listing (one the creation replaced) is neither
    /// kept as history nor deleted: deleting by that name would delete the result itself.
    #[test]
    fn an_object_listed_under_the_results_name_is_never_deleted_nor_kept() {
        let written = result("web-r4", "r4", "h", Phase::Succeeded);
        let mut impostor = result("web-r4", "forged", "h", Phase::Succeeded);
        impostor.spec.benchmark_uid = "someone-else".into();
        let listed = vec![
            at(impostor, "2020-01-01T00:00:00Z"),
            at(
                result("web-r3", "r3", "h", Phase::Succeeded),
                "2026-12-05T10:00:03Z",
            ),
        ];
        for limit in [1, 2, 5] {
            let (kept, old) = beyond_limit(listed.clone(), &written, limit);
            assert!(names(&old).iter().all(|n| n != "web-r4"), "{limit}");
            assert_eq!(kept[0].spec.run_id, "r4", "{limit}");
            assert_eq!(kept.iter().filter(|r| r.name_any() == "web-r4").count(), 1);
            assert_eq!(kept.len() + old.len(), 2, "{limit}");
        }
    }

    #[test]
    fn the_history_is_this_benchmarks_succeeded_results_of_the_spec_then_this_run() {
        let now = result("web-r9", "r9", "h", Phase::Succeeded);
        let mut other_benchmark = result("api-r8", "r8", "h", Phase::Succeeded);
        other_benchmark.spec.benchmark.name = "api".into();
        let mut forged_now = result("web-r9", "r9", "h", Phase::Succeeded);
        forged_now.spec.summary = Some("listed copy".into());
        // As prune returns them: newest first.
        let kept = vec![
            forged_now,
            result("web-r8", "r8", "h", Phase::Succeeded),
            result("web-r7", "r7", "h", Phase::Failed),
            other_benchmark,
            result("web-r6", "r6", "other-spec", Phase::Succeeded),
            result("web-r5", "r5", "h", Phase::Succeeded),
        ];
        let h = history(&kept, &now);
        let names: Vec<&str> = h.iter().map(|e| e.name).collect();
        assert_eq!(names, ["web-r5", "web-r8", "web-r9"]);
        assert_eq!(
            h.last().map(|e| e.spec),
            Some(&now.spec),
            "this run as written"
        );
    }
}
