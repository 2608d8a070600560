//! `netbench compare A B`: every figure of every step or case of two results, B against A
//! (A is the baseline), with the judgement of crds::stats: delta, whether the 95% intervals
//! are apart (significant), and whether B regressed beyond the tolerance and the noise.
//! `netbench compare --history KIND/NAME`: the change points of every figure over a
//! benchmark's history instead (crate::history).

use std::path::PathBuf;

use anyhow::{bail, Result};
use crds::environment::{self, Environment};
use crds::history::{Better, MetricTolerance};
use crds::result::{MeasurementStats, MetricVerdict};
use serde::Serialize;

use crate::shown;
use crate::source::{self, Loaded};
use crate::text;

/// `netbench compare` arguments.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// BenchmarkResults by name: A (the baseline) then B (judged against A).
    #[arg(value_name = "RESULT", num_args = 0..=2)]
    pub results: Vec<String>,
    /// Read results from a YAML or JSON file instead (repeatable; files come before names,
    /// and a file may hold both results; with --history, the benchmark's history).
    #[arg(long, value_name = "PATH")]
    pub file: Vec<PathBuf>,
    /// How many percent worse a figure may get before it counts as a regression.
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    pub tolerance: f64,
    /// Exit with 1 when a figure regressed (worse beyond the tolerance and the noise).
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Instead of B against A: the change points of every figure over this benchmark's
    /// history (KIND/NAME: ib/web, eb/vxlan), its succeeded results of one spec, oldest first;
    /// from the cluster, or from the --file files when given.
    #[arg(
        long,
        value_name = "KIND/NAME",
        conflicts_with_all = ["results", "fail_on_regression", "tolerance"]
    )]
    pub history: Option<crate::kube_client::BenchRef>,
    /// With --history: judge at most the newest N results.
    #[arg(long, value_name = "N", default_value_t = 100, requires = "history",
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub runs: u16,
    /// With --history: judge the results of every spec, not only those of the newest result's
    /// spec (a change of spec then shows as a change point too).
    #[arg(long, requires = "history")]
    pub all_specs: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
}

/// One side of a comparison.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    pub result: String,
    pub benchmark: String,
    pub run_id: String,
    pub spec_hash: String,
    /// Its environment fingerprint (absent from results written before fingerprints).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
}

/// One figure of one step or case.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub unit: String,
    /// The 95% intervals do not overlap.
    pub significant: bool,
    /// "better", "worse", "regressed", "within noise" or "same".
    pub verdict: &'static str,
    #[serde(flatten)]
    pub judged: MetricVerdict,
}

/// B against A.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    pub tolerance_percent: f64,
    pub regressed: bool,
    pub rows: Vec<Row>,
    /// Steps or cases only one side has, and other caveats.
    pub notes: Vec<String>,
}

fn side(r: &Loaded) -> Side {
    let b = &r.spec.benchmark;
    Side {
        result: r.display_name().to_string(),
        benchmark: format!("{} {}/{}", b.kind, b.namespace, b.name),
        run_id: r.spec.run_id.clone(),
        spec_hash: r.spec.spec_hash.clone(),
        environment: r.spec.environment.clone(),
    }
}

/// The figures to judge: every figure B holds, each with the same tolerance.
fn judged(b: &[MeasurementStats], tolerance: f64) -> Vec<MetricTolerance> {
    let mut out: Vec<MetricTolerance> = vec![];
    for f in b.iter().flat_map(|m| m.metrics.iter()) {
        if !out.iter().any(|t| t.name == f.name) {
            out.push(MetricTolerance {
                name: f.name.clone(),
                tolerance_percent: tolerance,
                better: None,
            });
        }
    }
    out
}

fn verdict(v: &MetricVerdict) -> &'static str {
    let worse = match v.better {
        Better::Higher => v.delta_percent < 0.0,
        Better::Lower => v.delta_percent > 0.0,
    };
    match (v.regressed, v.beyond_noise, worse) {
        (true, _, _) => "regressed",
        (false, false, _) if v.delta_percent == 0.0 => "same",
        (false, false, _) => "within noise",
        (false, true, true) => "worse",
        (false, true, false) => "better",
    }
}

/// Compares B with A (pure).
pub fn compare(a: &Loaded, b: &Loaded, tolerance: f64) -> Result<Comparison> {
    if !tolerance.is_finite() || !(0.0..=1000.0).contains(&tolerance) {
        bail!("--tolerance must be a percentage between 0 and 1000");
    }
    let (mut sa, mut sb) = (a.spec.statistics(), b.spec.statistics());
    // Only measurements of the same node pair and path are set side by side.
    let apart = apart(a, b);
    let kept = |m: &MeasurementStats| !apart.iter().any(|(i, n, _)| *i == m.index && *n == m.name);
    sa.retain(kept);
    sb.retain(kept);
    let verdicts = crds::stats::compare(&sb, &sa, &judged(&sb, tolerance));
    let unit_of = |v: &MetricVerdict| {
        sb.iter()
            .find(|m| m.name == v.measurement)
            .and_then(|m| m.metric(&v.metric))
            .map_or_else(String::new, |f| f.unit.clone())
    };
    let rows: Vec<Row> = verdicts
        .into_iter()
        .map(|v| Row {
            unit: unit_of(&v),
            significant: v.beyond_noise,
            verdict: verdict(&v),
            judged: v,
        })
        .collect();
    let mut notes = notes(a, b, &sa, &sb);
    notes.extend(apart.into_iter().map(|(_, _, why)| why));
    Ok(Comparison {
        a: side(a),
        b: side(b),
        tolerance_percent: tolerance,
        regressed: rows.iter().any(|r| r.judged.regressed),
        notes,
        rows,
    })
}

/// The egress measurements both results hold (same index and name) that ran on different node
/// pairs or paths (or whose nodes one does not record): (index, name, why), A's pair first.
fn apart(a: &Loaded, b: &Loaded) -> Vec<(u32, String, String)> {
    let egress = |r: &Loaded| crate::figures::kind(&r.spec) == Some(crate::figures::Kind::Egress);
    if !egress(a) || !egress(b) {
        return vec![];
    }
    a.spec
        .measurements
        .iter()
        .filter_map(|ma| {
            let mb = b
                .spec
                .measurements
                .iter()
                .find(|mb| mb.index == ma.index && mb.name == ma.name)?;
            let why = crate::egress::not_comparable(ma, mb)?;
            Some((
                ma.index,
                ma.name.clone(),
                format!("{}: {why}", text::label(&ma.name)),
            ))
        })
        .collect()
}

fn notes(a: &Loaded, b: &Loaded, sa: &[MeasurementStats], sb: &[MeasurementStats]) -> Vec<String> {
    let mut notes = vec![];
    if a.benchmark_key() != b.benchmark_key() {
        notes.push("A and B are results of different benchmarks".to_string());
    }
    if a.spec.spec_hash != b.spec.spec_hash {
        notes.push("A and B ran different specs (spec hashes differ)".to_string());
    }
    notes.extend(environment_notes(
        a.spec.environment.as_ref(),
        b.spec.environment.as_ref(),
    ));
    let missing = |from: &[MeasurementStats], other: &[MeasurementStats], side: &str| {
        from.iter()
            .filter(|m| !other.iter().any(|o| o.index == m.index && o.name == m.name))
            .map(|m| format!("{} only in {side}", text::label(&m.name)))
            .collect::<Vec<_>>()
    };
    notes.extend(missing(sa, sb, "A"));
    notes.extend(missing(sb, sa, "B"));
    notes
}

/// A note per field of the environment fingerprint in which A and B differ (as a baseline
/// would skip B for A); one when only one side records a fingerprint, none when neither does.
fn environment_notes(a: Option<&Environment>, b: Option<&Environment>) -> Vec<String> {
    match (a, b) {
        (None, None) => vec![],
        (None, Some(_)) | (Some(_), None) => {
            let side = if a.is_none() { "A" } else { "B" };
            vec![format!(
                "{side} records no environment (written before fingerprints); a baseline would not use it unless ignoreEnvironment: [all]"
            )]
        }
        (Some(_), Some(_)) => environment::compare(a, b, &[])
            .differs
            .iter()
            .map(|d| {
                format!(
                    "environments differ in {}: A {}, B {}",
                    d.field.name(),
                    environment::shown(d.this.as_deref()),
                    environment::shown(d.other.as_deref())
                )
            })
            .collect(),
    }
}

/// The comparison as an aligned plain-text table.
pub fn to_text(c: &Comparison) -> String {
    let mut rows: Vec<[String; 7]> = vec![[
        "STEP/CASE".into(),
        "FIGURE".into(),
        "A (mean ± 95% CI)".into(),
        "B (mean ± 95% CI)".into(),
        "DELTA".into(),
        "SIGNIFICANT".into(),
        "VERDICT".into(),
    ]];
    for r in &c.rows {
        let v = &r.judged;
        let (f, unit, d) = shown::unit(&r.unit);
        rows.push([
            text::label(&v.measurement),
            format!("{} ({unit})", text::label(&v.metric)),
            text::interval(v.baseline_mean * f, v.baseline_ci95 * f, d),
            text::interval(v.mean * f, v.ci95 * f, d),
            text::signed_percent(v.delta_percent),
            if r.significant { "yes" } else { "no" }.into(),
            r.verdict.to_string(),
        ]);
    }
    let mut out = format!(
        "A: {} ({}, run {})\nB: {} ({}, run {})\ntolerance {}%\n\n",
        text::label(&c.a.result),
        text::label(&c.a.benchmark),
        text::label(&c.a.run_id),
        text::label(&c.b.result),
        text::label(&c.b.benchmark),
        text::label(&c.b.run_id),
        text::num(c.tolerance_percent, 1),
    );
    out.push_str(&text::aligned(&rows));
    for n in &c.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    let regressed = c.rows.iter().filter(|r| r.judged.regressed).count();
    out.push_str(&match regressed {
        0 => "\nno regression\n".to_string(),
        n => format!("\nREGRESSED: {n} figure(s) worse beyond the tolerance and the noise\n"),
    });
    out
}

/// `netbench compare`.
pub async fn run(args: &CompareArgs, cluster: &crate::kube_client::ClusterArgs) -> Result<bool> {
    if let Some(bench) = &args.history {
        return history(args, bench, cluster).await;
    }
    let sources = source::SourceArgs {
        result: args.results.clone(),
        file: args.file.clone(),
        ..Default::default()
    };
    let results = sources.load(cluster).await?;
    let [a, b] = results.as_slice() else {
        bail!(
            "compare needs exactly two results (A, the baseline, then B); got {}",
            results.len()
        );
    };
    let c = compare(a, b, args.tolerance)?;
    match args.output {
        Output::Text => print!("{}", to_text(&c)),
        Output::Json => println!("{}", serde_json::to_string_pretty(&c)?),
    }
    Ok(args.fail_on_regression && c.regressed)
}

/// `netbench compare --history KIND/NAME`: never a "no" (exit 1); NewRegime is the operator's.
async fn history(
    args: &CompareArgs,
    bench: &crate::kube_client::BenchRef,
    cluster: &crate::kube_client::ClusterArgs,
) -> Result<bool> {
    let sources = if args.file.is_empty() {
        source::SourceArgs {
            benchmark: vec![bench.clone()],
            history: usize::from(args.runs),
            ..Default::default()
        }
    } else {
        source::SourceArgs {
            file: args.file.clone(),
            ..Default::default()
        }
    };
    let results = sources.load(cluster).await?;
    let ours = crate::history::select(&results, bench, cluster.namespace.as_deref())?;
    let h = crate::history::judge(&ours, usize::from(args.runs), args.all_specs);
    match args.output {
        Output::Text => print!("{}", crate::history::to_text(&h)),
        Output::Json => println!("{}", serde_json::to_string_pretty(&h)?),
    }
    Ok(false)
}
