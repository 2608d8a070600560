//! `netbench report`: report.md and SVG charts from BenchmarkResults, one section per
//! benchmark (its newest result in full; with several results, its history too).

pub mod cases;
pub mod charts;
mod controllers;
pub mod egress;
pub mod latency;
pub mod markdown;
mod pairs;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::figures::{self, Kind};
use crate::source::{Loaded, SourceArgs};
use crate::text::md_text;

/// `netbench report` arguments.
#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Directory to write report.md and the charts to (created if missing).
    #[arg(long, value_name = "DIR", default_value = "netbench-report")]
    pub out: PathBuf,
}

/// A chart file of a report.
#[derive(Clone, Debug)]
pub struct Chart {
    pub file: String,
    pub svg: String,
}

/// A rendered report, before it is written.
#[derive(Clone, Debug, Default)]
pub struct Rendered {
    pub markdown: String,
    pub charts: Vec<Chart>,
}

/// Results grouped by benchmark, in order of first appearance; each group oldest first.
pub fn group(results: &[Loaded]) -> Vec<Vec<&Loaded>> {
    let mut groups: Vec<Vec<&Loaded>> = vec![];
    for r in results {
        let key = r.benchmark_key();
        match groups
            .iter_mut()
            .find(|g| g.first().is_some_and(|f| f.benchmark_key() == key))
        {
            Some(g)
                if !g
                    .iter()
                    .any(|x| x.name == r.name && x.spec.run_id == r.spec.run_id) =>
            {
                g.push(r)
            }
            Some(_) => {}
            None => groups.push(vec![r]),
        }
    }
    for g in &mut groups {
        g.sort_by(|a, b| a.when().cmp(&b.when()));
    }
    groups
}

/// The report of some results.
pub fn render(results: &[Loaded]) -> Result<Rendered> {
    let mut out = Rendered {
        markdown: "# netbench report\n\n".into(),
        charts: vec![],
    };
    for (i, runs) in group(results).iter().enumerate() {
        section(i.saturating_add(1), runs, &mut out)?;
    }
    Ok(out)
}

fn section(number: usize, runs: &[&Loaded], out: &mut Rendered) -> Result<()> {
    let Some(latest) = runs.last() else {
        return Ok(());
    };
    let b = &latest.spec.benchmark;
    out.markdown.push_str(&format!(
        "## {} {}/{}\n\n",
        md_text(&b.kind),
        md_text(&b.namespace),
        md_text(&b.name)
    ));
    out.markdown.push_str(&markdown::what_ran(latest));
    out.markdown.push('\n');
    match figures::kind(&latest.spec) {
        Some(Kind::Ingress) => ingress(number, latest, out)?,
        Some(Kind::Egress) => egress::section(number, latest, out)?,
        None => out
            .markdown
            .push_str("The result holds no figure this report knows.\n\n"),
    }
    if let Some(v) = markdown::verdict(latest) {
        out.markdown.push_str(&v);
        out.markdown.push('\n');
    }
    out.markdown.push_str(&markdown::cluster(latest));
    out.markdown.push('\n');
    if runs.len() > 1 {
        history(number, runs, out)?;
    }
    Ok(())
}

fn push_chart(out: &mut Rendered, file: String, alt: &str, svg: String) {
    out.markdown.push_str(&format!("![{alt}]({file})\n\n"));
    out.charts.push(Chart { file, svg });
}

fn ingress(number: usize, r: &Loaded, out: &mut Rendered) -> Result<()> {
    let steps = figures::steps(&r.spec);
    out.markdown.push_str("### Throughput per step\n\n");
    out.markdown.push_str(&markdown::steps(&steps));
    out.markdown.push('\n');
    if let Some(c) = figures::conclusion(&steps) {
        out.markdown.push_str(&format!("**{}**\n\n", md_text(&c)));
    }
    let name = &r.spec.benchmark.name;
    // Controllers side by side: a comparison at each size when they were swept.
    let sizes = controllers::sizes(&r.spec);
    let mut compared = false;
    for (part, size) in sizes.iter().enumerate() {
        if let Some(c) = controllers::of(&r.spec, size.as_deref()) {
            controllers::section(number, name, size.as_deref(), part, &c, out)?;
            compared = true;
        }
    }
    if compared {
        controllers::route_section(&r.spec, out);
    }
    let swept = sizes.iter().any(Option::is_some);
    if compared && swept {
        // A scaling chart per controller, from its own steps.
        for (part, controller) in controllers::names(&r.spec).into_iter().enumerate() {
            let own: Vec<_> = steps
                .iter()
                .filter(|s| {
                    s.m.parameters.get("controller").map(String::as_str) == Some(controller)
                })
                .cloned()
                .collect();
            if own.len() > 1 {
                let title = format!("{name}: {controller}: requests/s against size");
                scaling_chart(number, &format!("-{part}"), &title, &own, out)?;
            }
        }
    } else if !compared && steps.len() > 1 {
        let title = format!("{name}: requests/s against size");
        scaling_chart(number, "", &title, &steps, out)?;
    }
    let reads = latency::read(steps.iter().map(|s| (s.m, s.m.name.clone())));
    let title = format!("{}: latency per step", r.spec.benchmark.name);
    latency::section(out, number, "steps", &title, &reads, ("step", "requests"))
}

/// Requests/s against size, with the line of linear scaling from the first step.
fn scaling_chart(
    number: usize,
    part: &str,
    title: &str,
    steps: &[figures::Step<'_>],
    out: &mut Rendered,
) -> Result<()> {
    let (x_desc, points) = scaling_points(steps);
    let svg = charts::scaling(title, x_desc, "requests/s", &points)?;
    push_chart(
        out,
        format!("{number}-ingress-scaling{part}.svg"),
        "RPS against CPU with the linear-scaling line",
        svg,
    );
    Ok(())
}

/// The x of each step: CPUs when the sweep set them, else replicas, else the size factor.
fn scaling_points(steps: &[figures::Step<'_>]) -> (&'static str, Vec<charts::Point>) {
    let cpus = |s: &figures::Step<'_>| s.cpu.and_then(figures::millicores).map(|m| m / 1000.0);
    let replicas = |s: &figures::Step<'_>| s.replicas.and_then(|r| r.trim().parse::<f64>().ok());
    let by_cpu = steps
        .iter()
        .all(|s| cpus(s).is_some() && s.replicas.is_none());
    let by_replicas = steps
        .iter()
        .all(|s| s.cpu.is_none() && replicas(s).is_some());
    let desc = match (by_cpu, by_replicas) {
        (true, _) => "controller CPUs",
        (false, true) => "controller replicas",
        (false, false) => "size relative to the first step",
    };
    let x = |s: &figures::Step<'_>| match (by_cpu, by_replicas) {
        (true, _) => cpus(s),
        (false, true) => replicas(s),
        (false, false) => s.size_factor,
    };
    let points = steps
        .iter()
        .filter_map(|s| {
            let rps = s.rps?;
            Some(charts::Point {
                x: x(s)?,
                mean: rps.mean,
                ci: rps.ci95,
            })
        })
        .collect();
    (desc, points)
}

/// Most lines of a history chart (a result holds at most 64 measurements).
const MAX_SERIES: usize = 16;

fn history(number: usize, runs: &[&Loaded], out: &mut Rendered) -> Result<()> {
    let Some((metric, scale, unit, _)) = runs.last().and_then(|r| figures::main_metric(&r.spec))
    else {
        return Ok(());
    };
    out.markdown
        .push_str(&format!("### History ({} results)\n\n", runs.len()));
    out.markdown.push_str(&markdown::history(runs));
    out.markdown.push('\n');
    let mut series: Vec<charts::Series> = vec![];
    for (i, r) in runs.iter().enumerate() {
        for m in figures::sorted(&r.spec) {
            let Some(f) = figures::metric(m, metric) else {
                continue;
            };
            let point = (i, f.mean * scale, f.ci95 * scale);
            if let Some(s) = series.iter_mut().find(|s| s.name == m.name) {
                s.points.push(point);
            } else if series.len() < MAX_SERIES {
                series.push(charts::Series {
                    name: m.name.clone(),
                    points: vec![point],
                });
            }
        }
    }
    let labels: Vec<String> = runs
        .iter()
        .map(|r| {
            r.when().map_or_else(
                || r.spec.run_id.clone(),
                |t| t.0.strftime("%m-%d %H:%M").to_string(),
            )
        })
        .collect();
    let (list, marks) = change_points(runs, metric, unit, &series, &labels);
    out.markdown.push_str(&list);
    let title = format!(
        "{}: {metric} per run",
        runs.last().map_or("", |r| r.spec.benchmark.name.as_str())
    );
    let svg = charts::history(&title, unit, &labels, &series, &marks)?;
    push_chart(
        out,
        format!("{number}-history.svg"),
        "main figure per run, oldest first",
        svg,
    );
    Ok(())
}

/// The change points of each measurement's main figure over the history (crds::changepoint):
/// a markdown list (empty when there is no history to judge) and the chart's marks.
fn change_points(
    runs: &[&Loaded],
    metric: &str,
    unit: &str,
    series: &[charts::Series],
    labels: &[String],
) -> (String, Vec<charts::Mark>) {
    let better = runs
        .last()
        .and_then(|r| {
            figures::sorted(&r.spec)
                .into_iter()
                .find_map(|m| figures::metric(m, metric))
        })
        .map(|f| f.better);
    let mut lines = vec![];
    let mut marks = vec![];
    for s in series {
        let means: Vec<(usize, f64)> = s.points.iter().map(|p| (p.0, p.1)).collect();
        for (run, cp) in crds::changepoint::find_at(&means, crds::changepoint::Options::default()) {
            let worse = cp.worse(better.unwrap_or(crds::history::Better::Higher));
            let direction = if worse { "worse" } else { "better" };
            lines.push(format!(
                "- {}: from run {} ({}): {:.2} -> {:.2} {unit} ({:+.1} %, {direction}; p = {:.4})",
                crate::text::md_text(&s.name),
                crate::text::md_text(labels.get(run).map_or("?", String::as_str)),
                crate::text::md_text(runs.get(run).map_or("?", |r| r.spec.run_id.as_str())),
                cp.before,
                cp.after,
                cp.change_percent,
                cp.p_value,
            ));
            marks.push(charts::Mark {
                run,
                label: format!("{}: {direction} {:+.0}%", s.name, cp.change_percent),
                worse,
            });
        }
    }
    if runs.len() < 6 {
        return (String::new(), vec![]);
    }
    let mut md = String::from("Change points of the main figure (a two-sample t-test over the history, at most 1 % false alarms per segment searched; docs/results.md), marked on the chart below by a dashed line at the first run of the new regime:\n\n");
    if lines.is_empty() {
        md.push_str("- none: no shift stands out of the run-to-run noise\n");
    } else {
        md.push_str(&lines.join("\n"));
        md.push('\n');
    }
    md.push('\n');
    (md, marks)
}

/// Writes report.md and the charts into `dir`.
pub fn write(dir: &Path, r: &Rendered) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let md = dir.join("report.md");
    std::fs::write(&md, &r.markdown).with_context(|| format!("cannot write {}", md.display()))?;
    for c in &r.charts {
        let path = dir.join(&c.file);
        std::fs::write(&path, &c.svg)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// `netbench report`.
pub async fn run(args: &ReportArgs, cluster: &crate::kube_client::ClusterArgs) -> Result<()> {
    let results = args.source.load(cluster).await?;
    let rendered = render(&results)?;
    write(&args.out, &rendered)?;
    println!(
        "wrote {} ({} results, {} charts)",
        args.out.join("report.md").display(),
        results.len(),
        rendered.charts.len()
    );
    Ok(())
}
