//! A finished run's BenchmarkResult: built from the run's stored reports (never from status,
//! which others can write), written once in the benchmark's namespace, judged against the
//! benchmark's baseline, and the history trimmed to `historyLimit`. Results carry no owner
//! reference: they outlive the benchmark.

mod baseline;
mod build;
mod facts;
pub mod metrics;

use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use kube::runtime::events::EventType;
use kube::ResourceExt;

use crds::result::{BENCHMARK_LABEL, KIND_LABEL};
use crds::BenchmarkResult;

use crate::base::conditions::REGRESSED;
use crate::base::error::Result;
use crate::driver::{Kind, Run, RunState};
use metrics::ResultMetrics;

pub use build::result_name;

/// Writes the run's result unless status already points at it, then the verdict and the
/// history limit. Runs that never left the queue (refused specs) get none.
pub async fn record<K: Kind>(run: &mut Run<'_, K>) -> Result<()> {
    let name = result_name(&run.name, &run.id);
    let status = run.status.run();
    // Runs that never left the queue get none, nor runs finished before results existed
    // (their reports are gone).
    let before_results =
        status.statistics.is_empty() && status.phase == Some(crds::Phase::Succeeded);
    if status.latest_result.as_deref() == Some(name.as_str())
        || status.start_time.is_none()
        || before_results
    {
        return Ok(());
    }
    let mut spec = build::result_spec(run).await?;
    spec.verdict = baseline::judge(run, &spec).await?;
    let object = build::object(run, &name, spec);
    let api: Api<BenchmarkResult> = Api::namespaced(run.ctx.client.clone(), &run.ns);
    create(run, &api, &object).await?;
    note_verdict(run, object.spec.verdict.as_ref());
    run.ctx
        .metrics
        .family::<ResultMetrics>()
        .set(&K::kind(&()), &run.ns, &run.name, &object.spec);
    let limit = run.obj.repetition().history_limit();
    prune(&api, &K::kind(&()), &run.name, limit).await?;
    run.status.run_mut().latest_result = Some(name.clone());
    let m = format!(
        "result {name} written ({})",
        object.spec.summary.as_deref().unwrap_or("no figures")
    );
    run.events
        .push((EventType::Normal, "ResultWritten".into(), m));
    Ok(())
}

/// Creates the result; one already there from this very run (a retried reconcile) is fine, any
/// other object holding its name is deleted (that object only) and creation retried once.
async fn create<K: Kind>(
    run: &mut Run<'_, K>,
    api: &Api<BenchmarkResult>,
    object: &BenchmarkResult,
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
        run.events
            .push((EventType::Warning, "ResultReplaced".into(), m));
    }
    Err(crate::base::error::Error::Pending(format!(
        "BenchmarkResult {name} keeps being taken by another object"
    )))
}

/// Deletes the benchmark's oldest results beyond `limit` (by creation time, which only the API
/// server writes).
async fn prune(api: &Api<BenchmarkResult>, kind: &str, benchmark: &str, limit: u32) -> Result<()> {
    let selector = format!(
        "{BENCHMARK_LABEL}={},{KIND_LABEL}={}",
        build::label_value(benchmark),
        kind.to_lowercase()
    );
    let mut all: Vec<BenchmarkResult> = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|r| r.spec.benchmark.name == benchmark && r.spec.benchmark.kind == kind)
        .collect();
    all.sort_by_key(|r| std::cmp::Reverse(newest_first(r)));
    for old in all
        .iter()
        .skip(usize::try_from(limit).unwrap_or(usize::MAX))
    {
        match api.delete(&old.name_any(), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Sort key: creation time, then name.
fn newest_first(r: &BenchmarkResult) -> (Option<jiff::Timestamp>, String) {
    (
        r.metadata.creation_timestamp.as_ref().map(|t| t.0),
        r.name_any(),
    )
}

/// The Regressed condition and its Event.
fn note_verdict<K: Kind>(run: &mut Run<'_, K>, verdict: Option<&crds::result::Verdict>) {
    let Some(v) = verdict else {
        return;
    };
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
        _ => ("NoBaseline", v.baseline.clone(), EventType::Normal),
    };
    let message = crate::base::text::clip(&message, 1000);
    run.condition_status(REGRESSED, &v.regressed, reason, message.clone());
    run.events.push((event, reason.into(), message));
}
