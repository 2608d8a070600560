//! What a result holds, computed from the run's stored reports (kept in the operator's
//! namespace until the finished status is stored): each sample's figures, the statistics over
//! the samples, the merged latency histograms, each measurement's parameters (an egress case's
//! nodes included); phase, message and times from the run record, as far as the reports back
//! them (`backing`).

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use kube::ResourceExt;

use crds::environment::{Environment, Placement};
use crds::result::{Measurement, MeasurementStats, BENCHMARK_LABEL, KIND_LABEL, SPEC_HASH_LABEL};
use crds::{BenchmarkRef, BenchmarkResult, BenchmarkResultSpec, Phase};

use super::{backing, facts, fold};
use crate::base::error::Result;
use crate::base::labels;
use crate::policy::samples::{self, Slot};
use crate::policy::spec::{spec_hash, spec_of};
use crate::run::{Hooks, Run};
use crate::store::reports::{Folded, Owner, ReportMetrics};
use crate::store::run_record::RunRecord;

/// Largest merged histogram kept in a result (encoded); a larger one is left out.
const MAX_HISTOGRAM_CHARS: usize = 256 * 1024;
/// Largest spec copy kept in a result.
const MAX_SPEC_CHARS: usize = 256 * 1024;
/// Largest result the operator writes (etcd refuses objects over 1.5 MiB): histograms are left
/// out, largest first, until it fits.
const MAX_RESULT_BYTES: usize = 1024 * 1024;

/// The result's name: the benchmark's (shortened to fit) and the run id.
pub fn result_name(benchmark: &str, run: &str) -> String {
    let room = 253usize.saturating_sub(run.len() + 1);
    let prefix: String = benchmark.chars().take(room).collect();
    format!("{}-{run}", prefix.trim_end_matches(['-', '.']))
}

/// A label value for `text` (names longer than 63 characters are cut; the spec holds the
/// whole name).
pub fn label_value(text: &str) -> String {
    let cut: String = text.chars().take(63).collect();
    cut.trim_end_matches(['-', '.', '_']).to_string()
}

/// Everything but the verdict.
pub async fn result_spec<K: Hooks>(
    run: &Run<'_, K>,
    record: &RunRecord,
) -> Result<BenchmarkResultSpec> {
    let spec_json = serde_json::to_value(spec_of(run.obj())).unwrap_or_default();
    let spec_text = serde_json::to_string(&spec_json).unwrap_or_default();
    let Gathered {
        measurements,
        nodes,
        samples,
        started,
        placement,
        ..
    } = measurements(run).await?;
    let ctx = run.ctx();
    let cluster_wide = ctx.config.watch_namespaces.is_cluster();
    let cluster = facts::gather(&ctx.client, &ctx.facts, &nodes, cluster_wide).await;
    // Placement is the benchmark's own: where its spec pins workers. Where the scheduler
    // chooses, each run may land elsewhere, and that is not another environment.
    let pins = run
        .obj()
        .contender()
        .claims
        .iter()
        .any(|c| c.starts_with("node "));
    let placement = if pins { placement } else { Placement::new() };
    let stats: Vec<MeasurementStats> = measurements.iter().map(Measurement::statistics).collect();
    // Phase, message and times from the run record, as far as the reports back them (status,
    // which benchmark authors can write, is not read).
    let outline = run.obj().outline();
    let min = outline.repetition.samples().min();
    let describe = |i| run.obj().measurement(i).name;
    let ended = record.ended.as_ref();
    let decided = ended.map(|e| (e.phase, e.message.as_str()));
    let (phase, message) = backing::phase(decided, &samples, min, describe);
    // A run its gates fail is not a success, whatever was recorded.
    let gates = crate::policy::gates::judge_run(outline.gates, &stats);
    let (phase, message) = match (phase, gates.broken.first()) {
        (Phase::Succeeded, Some(b)) => (Phase::Failed, Some(b.message())),
        (phase, _) => (phase, message),
    };
    let (start_time, completion_time) = backing::times(
        record.started.as_ref(),
        ended.map(|e| &e.at),
        run.obj().meta().creation_timestamp.as_ref(),
        started,
        jiff::Timestamp::now(),
    );
    let mut spec = BenchmarkResultSpec {
        benchmark: BenchmarkRef {
            kind: K::kind(&()).into_owned(),
            namespace: run.ns().to_string(),
            name: run.name().to_string(),
        },
        benchmark_uid: run.obj().uid().unwrap_or_default(),
        run_id: run.id().to_string(),
        spec_hash: spec_hash(&spec_json),
        benchmark_spec: if spec_text.len() <= MAX_SPEC_CHARS {
            spec_text
        } else {
            "{}".into()
        },
        phase,
        message: message.map(|m| crate::base::text::clip(&m, 4000)),
        start_time,
        completion_time,
        cluster,
        environment: None,
        scaling: None,
        summary: summary(stats.last()),
        measurements,
        verdict: None,
    };
    K::complete_result(run, &mut spec).await;
    facts::bound(&mut spec.cluster);
    let known = facts::known(&placement, &spec.cluster);
    spec.environment = Some(Environment::of(&spec.cluster, &known));
    fit(&mut spec, MAX_RESULT_BYTES);
    Ok(spec)
}

/// Leaves out histograms, largest first, then the pair rows of the measurement with the most,
/// until the result's JSON is at most `max` bytes.
fn fit(spec: &mut BenchmarkResultSpec, max: usize) {
    let size = |s: &BenchmarkResultSpec| serde_json::to_vec(s).map_or(usize::MAX, |v| v.len());
    while size(spec) > max {
        let largest = spec
            .measurements
            .iter_mut()
            .filter(|m| m.histogram.is_some())
            .max_by_key(|m| m.histogram.as_ref().map_or(0, String::len));
        if let Some(m) = largest {
            m.histogram = None;
            continue;
        }
        let most_pairs = spec
            .measurements
            .iter_mut()
            .filter(|m| !m.pairs.is_empty())
            .max_by_key(|m| m.pairs.len());
        match most_pairs {
            Some(m) => m.pairs.clear(),
            None => return,
        }
    }
}

/// The object, labelled for its benchmark's history.
pub fn object<K: Hooks>(
    run: &Run<'_, K>,
    name: &str,
    spec: BenchmarkResultSpec,
) -> BenchmarkResult {
    let mut labels = BTreeMap::from([
        (labels::MANAGED_BY.to_string(), labels::OPERATOR.to_string()),
        (BENCHMARK_LABEL.to_string(), label_value(run.name())),
        (KIND_LABEL.to_string(), K::kind(&()).to_lowercase()),
    ]);
    labels.insert(
        SPEC_HASH_LABEL.to_string(),
        spec.spec_hash.chars().take(16).collect(),
    );
    BenchmarkResult {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(run.ns().to_string()),
            labels: Some(labels),
            ..Default::default()
        },
        spec,
    }
}

/// Each measurement's statistics as the run's stored reports make them (never as status says):
/// what the gates are judged on when the last measurement is in.
pub async fn statistics<K: Hooks>(run: &Run<'_, K>) -> Result<Vec<MeasurementStats>> {
    let gathered = measurements(run).await?;
    Ok(gathered
        .measurements
        .iter()
        .map(Measurement::statistics)
        .collect())
}

/// What the stored reports of a run hold.
#[derive(Default)]
struct Gathered {
    /// Each measurement's statistics over its complete samples.
    stats: Vec<MeasurementStats>,
    /// Each measurement's figures over its complete samples, with its merged histogram.
    measurements: Vec<Measurement>,
    /// The nodes the reports came from, with what a worker saw there.
    nodes: facts::Seen,
    /// How many complete samples each measurement of the spec has (by index).
    samples: Vec<u32>,
    /// The earliest and latest start of a report used.
    started: Option<(jiff::Timestamp, jiff::Timestamp)>,
    /// The nodes of each role.
    placement: Placement,
}

/// Each measurement's figures over every complete sample found in the store (a folded sample,
/// or the worker reports of one not folded, folded here the same way), with its merged
/// histogram; the nodes the reports came from, with what a worker saw there; and the nodes of
/// each role.
async fn measurements<K: Hooks>(run: &Run<'_, K>) -> Result<Gathered> {
    let store = run.ctx().reports();
    let owner = Owner::of(run.obj());
    let max = run.obj().outline().repetition.samples().max();
    let mut gathered = Gathered::default();
    for index in 0..run.obj().outline().count.min(samples::STRIDE) {
        let mut taken = Taken::default();
        for sample in 0..max {
            let slot = Slot {
                measurement: index,
                sample,
            };
            // The worker reports folded here when the watch holds every client's (a stored
            // fold of them holds the same: reports never change once stored); else the stored
            // fold, or (none, or not a fold) the worker reports as listed, folded here.
            let expected = run.obj().sample(run.id(), slot).workers;
            let sample_fold = match store.load_watched(&owner, run.id(), slot.wire(), &expected) {
                Some(loaded) => fold::fold(run.obj(), run.id(), slot, &loaded.reports),
                None => match store.folded(&owner, run.id(), slot.wire()).await? {
                    Some(Ok(f)) => Some(f),
                    stored => {
                        if let Some(Err(what)) = stored {
                            forged(run, &owner, &what);
                        }
                        let loaded = store.load(&owner, run.id(), slot.wire(), &expected).await?;
                        fold::fold(run.obj(), run.id(), slot, &loaded.reports)
                    }
                },
            };
            let Some(f) = sample_fold else {
                break;
            };
            gathered.add(
                &mut taken,
                index,
                &run.obj().measurement(index).name,
                sample,
                f,
            );
        }
        gathered.end_measurement(index, taken);
    }
    Ok(gathered)
}

/// An object holding a fold's name that is not one: ignored, counted and logged.
fn forged<K: Hooks>(run: &Run<'_, K>, owner: &Owner, what: &str) {
    run.ctx()
        .metrics
        .family::<ReportMetrics>()
        .rejected
        .with_label_values(&["forged"])
        .inc();
    tracing::warn!(
        benchmark = owner.name,
        namespace = owner.namespace,
        "ignored a forged folded sample: {what}"
    );
}

/// One measurement's samples as they are added.
#[derive(Default)]
struct Taken {
    samples: u32,
    histograms: Vec<String>,
    pairs: Vec<crds::topology::PairResult>,
    parameters: BTreeMap<String, String>,
}

impl Gathered {
    /// Sample `sample` of measurement `index` (its samples come in order, from 0).
    fn add(&mut self, taken: &mut Taken, index: u32, name: &str, sample: u32, f: Folded) {
        samples::record(&mut self.stats, index, name, sample, &f.figures);
        taken.samples = taken.samples.saturating_add(1);
        taken.pairs = f.pairs;
        taken.parameters = f.parameters;
        taken.histograms.extend(f.histogram);
        for t in [f.starts.map(|s| s.0), f.starts.map(|s| s.1)]
            .into_iter()
            .flatten()
            .filter_map(backing::report_start)
        {
            self.started = Some(self.started.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        }
        for (node, host) in f.nodes {
            let seen = self.nodes.entry(node).or_default();
            if seen.is_none() {
                *seen = host;
            }
        }
        for (role, nodes) in f.placement {
            self.placement.entry(role).or_default().extend(nodes);
        }
    }

    /// Measurement `index` has all its samples: its figures and merged histogram.
    fn end_measurement(&mut self, index: u32, taken: Taken) {
        self.samples.push(taken.samples);
        let Some(m) = self.stats.iter().find(|m| m.index == index) else {
            return;
        };
        let histogram =
            protocol::report::histogram::merge_encoded(taken.histograms.iter().map(String::as_str))
                .ok()
                .flatten()
                .filter(|h| h.len() <= MAX_HISTOGRAM_CHARS);
        self.measurements.push(Measurement {
            index,
            name: m.name.clone(),
            parameters: taken.parameters,
            metrics: m.metrics.clone(),
            histogram,
            pairs: taken.pairs,
        });
    }
}

/// The main figure of the last measurement, "12034 ± 210 req/s".
fn summary(last: Option<&MeasurementStats>) -> Option<String> {
    let main = last?.metrics.first()?;
    let (scale, unit) = match main.unit.as_str() {
        "bit/s" => (1e9, "Gbit/s"),
        other => (1.0, other),
    };
    let digits = if scale > 1.0 { 2 } else { 0 };
    let mean = main.mean / scale;
    Some(if main.values.len() > 1 {
        format!(
            "{mean:.digits$} ± {:.digits$} {unit} ({})",
            main.ci95 / scale,
            last?.name
        )
    } else {
        format!("{mean:.digits$} {unit} ({})", last?.name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::worker::FinalReport;

    #[test]
    fn names_fit() {
        let long = "b".repeat(300);
        let name = result_name(&long, "abcdef12-g3-r4");
        assert!(
            name.len() <= 253 && name.ends_with("-abcdef12-g3-r4"),
            "{name}"
        );
        assert_eq!(result_name("web", "abc-g1"), "web-abc-g1");
        assert_eq!(label_value(&long).len(), 63);
    }

    /// A Succeeded result of benchmark a/b of `kind` that holds `measurements`.
    fn spec_of(kind: &str, measurements: Vec<Measurement>) -> BenchmarkResultSpec {
        let mut spec: BenchmarkResultSpec = serde_json::from_value(serde_json::json!({
            "benchmark": {"kind": kind, "namespace": "a", "name": "b"},
            "benchmarkUid": "u", "runId": "r", "specHash": "h", "benchmarkSpec": "{}",
            "phase": "Succeeded"
        }))
        .unwrap();
        spec.measurements = measurements;
        spec
    }

    #[test]
    fn histograms_are_left_out_largest_first_until_the_result_fits() {
        let m = |index, len| Measurement {
            index,
            histogram: Some("h".repeat(len)),
            ..Default::default()
        };
        let mut spec = spec_of(
            "IngressBenchmark",
            vec![m(0, 300_000), m(1, 200), m(2, 900_000)],
        );
        fit(&mut spec, 400_000);
        let kept: Vec<bool> = spec
            .measurements
            .iter()
            .map(|m| m.histogram.is_some())
            .collect();
        assert_eq!(kept, [true, true, false]);
        fit(&mut spec, 100);
        assert!(spec.measurements.iter().all(|m| m.histogram.is_none()));
    }

    #[test]
    fn pair_rows_go_after_the_histograms_most_first() {
        let row = crds::topology::PairResult {
            client_node: Some("n".repeat(253)),
            server_node: Some("n".repeat(253)),
            ..Default::default()
        };
        let m = |index, rows: usize| Measurement {
            index,
            histogram: Some("h".repeat(1000)),
            pairs: vec![row.clone(); rows],
            ..Default::default()
        };
        // 16 cases of 128 forged rows of long node names: over 1 MiB.
        let mut spec = spec_of("EgressBenchmark", (0..16).map(|i| m(i, 128)).collect());
        fit(&mut spec, MAX_RESULT_BYTES);
        let size = serde_json::to_vec(&spec).unwrap().len();
        assert!(size <= MAX_RESULT_BYTES, "{size}");
        assert!(spec.measurements.iter().all(|m| m.histogram.is_none()));
        let kept = spec
            .measurements
            .iter()
            .filter(|m| !m.pairs.is_empty())
            .count();
        assert!(
            (1..16).contains(&kept),
            "as many cases keep their rows as fit: {kept}"
        );
    }

    /// What a client of slot `slot` reports: `requests` requests over a second, latencies
    /// spread by the slot and worker so every sample's histogram differs.
    fn client_report(worker: &str, slot: u32, requests: u64, node: &str) -> FinalReport {
        let latencies: Vec<u64> = (0..requests)
            .map(|i| 900 + (i * 7 + u64::from(slot) * 31) % 5000)
            .collect();
        let start = 1_800_000_000_000 + u64::from(slot) * 10_000;
        FinalReport {
            version: 1,
            worker: worker.into(),
            node: Some(node.into()),
            step: slot,
            started_at_unix_ms: start + worker.len() as u64,
            report: crate::testing::reports::http_report(&latencies, start),
            host: Some(protocol::worker::host::HostFacts {
                cpu_model: Some("Test CPU @ 2.0GHz".into()),
                interfaces: vec![],
            }),
        }
    }

    /// A result made of folded samples (each stored as a ConfigMap and read back) holds exactly
    /// what one made of the worker reports holds: figures, statistics, merged histogram,
    /// parameters, starts, nodes and placement.
    #[test]
    fn a_result_of_folded_samples_equals_one_of_the_worker_reports() {
        use crate::run::Plan;
        let ib: crds::IngressBenchmark = serde_json::from_value(serde_json::json!({
            "apiVersion": "netbench.io/v1alpha1", "kind": "IngressBenchmark",
            "metadata": {"name": "web", "namespace": "team-a",
                         "uid": "5f0c7d1e-0000-4000-8000-000000000001"},
            "spec": {"target": {"url": "http://x/"}, "workers": {"replicas": 2},
                     "samples": {"count": 3}}
        }))
        .unwrap();
        let run = "5f0c7d1e-g1";
        let owner = Owner::of(&ib);
        let mut direct = Gathered::default();
        let mut stored = Gathered::default();
        let (mut taken_d, mut taken_s) = (Taken::default(), Taken::default());
        for sample in 0..3 {
            let slot = Slot {
                measurement: 0,
                sample,
            };
            let reports: BTreeMap<String, FinalReport> = ib
                .sample(run, slot)
                .workers
                .keys()
                .zip(["node-a", "node-b"])
                .zip([1000 + u64::from(sample) * 100, 1500])
                .map(|((w, node), n)| (w.clone(), client_report(w, slot.wire(), n, node)))
                .collect();
            let folded = fold::fold(&ib, run, slot, &reports).unwrap();
            let cm = crate::store::reports::folded::object("netbench-system", &owner, run, &folded)
                .unwrap();
            let read = crate::store::reports::folded::verify(&cm, &owner, run).unwrap();
            direct.add(&mut taken_d, 0, "step 0", sample, folded);
            stored.add(&mut taken_s, 0, "step 0", sample, read);
        }
        direct.end_measurement(0, taken_d);
        stored.end_measurement(0, taken_s);
        assert_eq!(stored.measurements, direct.measurements);
        assert_eq!(stored.samples, [3]);
        assert_eq!(stored.started, direct.started);
        assert_eq!(stored.nodes, direct.nodes);
        assert_eq!(stored.placement, direct.placement);
        // And what they hold is the reports': rps summed over both clients per sample, the
        // histogram merged over every client of every sample, both nodes as client nodes.
        let m = &stored.measurements[0];
        let rps = &m.metrics.iter().find(|f| f.name == "rps").unwrap().values;
        assert_eq!(rps, &[2500.0, 2600.0, 2700.0]);
        let h = protocol::report::histogram::decode(m.histogram.as_deref().unwrap()).unwrap();
        assert_eq!(h.len(), 2500 + 2600 + 2700);
        assert_eq!(stored.placement["client"].len(), 2);
        assert!(stored.nodes.values().all(|h| h.is_some()));
    }

    #[test]
    fn summary_shows_the_interval_only_with_several_samples() {
        let m = |values: Vec<f64>, unit: &str| MeasurementStats {
            index: 0,
            name: "step 0".into(),
            metrics: vec![crds::stats::metric(
                "rps",
                unit,
                crds::history::Better::Higher,
                values,
            )],
        };
        assert_eq!(
            summary(Some(&m(vec![100.0], "req/s"))).unwrap(),
            "100 req/s (step 0)"
        );
        let two = summary(Some(&m(vec![100.0, 110.0], "req/s"))).unwrap();
        assert!(two.starts_with("105 ± "), "{two}");
        let bits = summary(Some(&m(vec![9.4e9], "bit/s"))).unwrap();
        assert_eq!(bits, "9.40 Gbit/s (step 0)");
        assert_eq!(summary(None), None);
    }
}
