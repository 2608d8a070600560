//! `netbench junit`: results as JUnit XML for CI systems. One testsuite per benchmark (its
//! newest result), with the test cases "run succeeded", "thresholds met" (when the benchmark's
//! ThresholdsMet condition is known) and one per figure of the regression verdict.

use std::path::PathBuf;

use anyhow::{Context, Result};
use crds::Phase;
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use crate::source::{Loaded, SourceArgs};
use crate::text;

/// `netbench junit` arguments.
#[derive(clap::Args, Debug)]
pub struct JunitArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Write the XML to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

fn failed(message: String) -> TestCaseStatus {
    let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
    s.set_message(text::clean(&message, 1024));
    s
}

fn case(name: &str, status: TestCaseStatus, classname: &str) -> TestCase {
    let mut c = TestCase::new(text::clean(name, text::MAX_SHOWN_CHARS), status);
    c.set_classname(classname);
    c
}

/// The test cases of one result.
fn cases(r: &Loaded, classname: &str) -> Vec<TestCase> {
    let s = &r.spec;
    let mut out = vec![];
    let run = if s.phase == Phase::Succeeded {
        TestCaseStatus::success()
    } else {
        failed(format!(
            "run {} ended {:?}: {}",
            s.run_id,
            s.phase,
            s.message.as_deref().unwrap_or("no message")
        ))
    };
    out.push(case("run succeeded", run, classname));
    if let Some(c) = r.conditions.iter().find(|c| c.type_ == "ThresholdsMet") {
        let status = match c.status.as_str() {
            "True" => TestCaseStatus::success(),
            "False" => failed(format!("{}: {}", c.reason, c.message)),
            _ => TestCaseStatus::skipped(),
        };
        out.push(case("thresholds met", status, classname));
    }
    for m in s.verdict.iter().flat_map(|v| v.metrics.iter()) {
        let name = format!("{} {}", m.measurement, m.metric);
        let what = format!(
            "{} {}: {} against baseline {} ({}, tolerance {}%, beyond noise: {})",
            m.measurement,
            m.metric,
            text::interval(m.mean, m.ci95, 2),
            text::interval(m.baseline_mean, m.baseline_ci95, 2),
            text::signed_percent(m.delta_percent),
            text::num(m.tolerance_percent, 1),
            if m.beyond_noise { "yes" } else { "no" },
        );
        let status = if m.regressed {
            failed(format!("regressed: {what}"))
        } else {
            TestCaseStatus::success()
        };
        let mut c = case(&name, status, classname);
        c.set_system_out(text::clean(&what, 1024));
        out.push(c);
    }
    out
}

/// The JUnit XML of some results: a testsuite per benchmark, from its newest result.
pub fn render(results: &[Loaded]) -> Result<String> {
    let mut report = Report::new("netbench");
    for runs in crate::report::group(results) {
        let Some(latest) = runs.last() else { continue };
        let b = &latest.spec.benchmark;
        let suite_name = text::clean(
            &format!("{} {}/{}", b.kind, b.namespace, b.name),
            text::MAX_SHOWN_CHARS,
        );
        let mut suite = TestSuite::new(suite_name.clone());
        suite.add_test_cases(cases(latest, &suite_name));
        if let Some(secs) = text::seconds_between(
            latest.spec.start_time.as_ref(),
            latest.spec.completion_time.as_ref(),
        ) {
            if let Ok(d) = std::time::Duration::try_from_secs_f64(secs) {
                suite.set_time(d);
            }
        }
        report.add_test_suite(suite);
    }
    report.to_string().context("cannot write the JUnit XML")
}

/// `netbench junit`.
pub async fn run(args: &JunitArgs, cluster: &crate::kube_client::ClusterArgs) -> Result<()> {
    // Only each benchmark's newest result becomes a suite: its history is not needed.
    let source = SourceArgs {
        history: 0,
        ..args.source.clone()
    };
    let results = source.load(cluster).await?;
    let xml = render(&results)?;
    match &args.out {
        Some(path) => {
            std::fs::write(path, xml).with_context(|| format!("cannot write {}", path.display()))?
        }
        None => print!("{xml}"),
    }
    Ok(())
}
