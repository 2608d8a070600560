//! Controllers side by side (an IngressBenchmark with `spec.controllers`): the comparison the
//! operator makes (crds::ingress::compare, from the result's measurements, never from status),
//! as a table and two bar charts, a colour per controller; and, when the run changed routes
//! under load or made a route scale, each controller's route figures (the share of changes
//! shown, their p99; the share of routes answered, the time until all did).

use anyhow::Result;

use crds::ingress::compare::comparison;
use crds::ingress::{Comparison, ControllerRow, Standing};
use crds::result::{BenchmarkResultSpec, MeasurementStats};

use super::charts::{self, Bar};
use super::{push_chart, Rendered};
use crate::text::{md_cell, md_text};

/// A measurement's controller, and its sweep size when controllers were swept.
struct Named<'a> {
    controller: &'a str,
    size: Option<String>,
    stats: MeasurementStats,
}

impl Named<'_> {
    /// "traefik", or "traefik at 2 CPUs" when controllers were swept.
    fn label(&self) -> String {
        match &self.size {
            Some(size) => format!("{} at {size}", self.controller),
            None => self.controller.to_string(),
        }
    }
}

/// The measurements that name their controller, with their statistics, in step order.
fn named(spec: &BenchmarkResultSpec) -> Vec<Named<'_>> {
    let mut named: Vec<_> = spec
        .measurements
        .iter()
        .filter_map(|m| {
            let p = |k: &str| m.parameters.get(k).map(String::as_str);
            Some(Named {
                controller: p("controller")?,
                size: crate::figures::size_label(p("cpu"), p("replicas")),
                stats: m.statistics(),
            })
        })
        .collect();
    named.sort_by_key(|n| n.stats.index);
    named
}

/// The sizes the controllers were measured at, in step order (one None when not swept).
pub fn sizes(spec: &BenchmarkResultSpec) -> Vec<Option<String>> {
    let mut sizes = vec![];
    for n in named(spec) {
        if !sizes.contains(&n.size) {
            sizes.push(n.size);
        }
    }
    sizes
}

/// The comparison of the controllers measured at `size` (None: not swept); None with fewer
/// than two.
pub fn of(spec: &BenchmarkResultSpec, size: Option<&str>) -> Option<Comparison> {
    let named = named(spec);
    comparison(
        named
            .iter()
            .filter(|n| n.size.as_deref() == size)
            .map(|n| (n.controller, &n.stats)),
    )
}

/// The controllers measured, each once, in step order.
pub fn names(spec: &BenchmarkResultSpec) -> Vec<&str> {
    let mut names = vec![];
    for n in named(spec) {
        if !names.contains(&n.controller) {
            names.push(n.controller);
        }
    }
    names
}

fn standing(s: Standing) -> &'static str {
    match s {
        Standing::Best => "best",
        Standing::Worse => "worse (significant)",
        Standing::WithinNoise => "not significant",
        Standing::Unknown => "unknown (one sample)",
    }
}

/// The table, the summary and the two charts; `size` (controllers swept) names the sweep step
/// compared, and `part` keeps each step's chart files apart.
pub fn section(
    number: usize,
    title: &str,
    size: Option<&str>,
    part: usize,
    c: &Comparison,
    out: &mut Rendered,
) -> Result<()> {
    let (at, file_part) = match size {
        Some(s) => (format!(" at {s}"), format!("-{part}")),
        None => (String::new(), String::new()),
    };
    let title = format!("{title}{at}");
    out.markdown
        .push_str(&format!("### Controllers side by side{}\n\n", md_text(&at)));
    out.markdown.push_str(
        "| controller | samples | req/s | ± 95% | vs best | p99 ms | ± 95% | vs best |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in &c.rows {
        out.markdown.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.1}%, {} | {:.2} | {:.2} | {} |\n",
            md_cell(&r.name),
            r.samples,
            r.rps,
            r.rps_ci95,
            r.relative_rps * 100.0,
            standing(r.rps_verdict),
            r.p99_ms,
            r.p99_ci95_ms,
            standing(r.p99_verdict),
        ));
    }
    out.markdown.push('\n');
    for line in c.summary.lines() {
        out.markdown.push_str(&format!("- {}\n", md_text(line)));
    }
    out.markdown.push('\n');
    // requests/s and p99, each a bar per controller with its 95% interval.
    let drawn: [(&str, &str, &str, RowFigure); 2] = [
        ("requests/s", "requests/s", "rps", |r| (r.rps, r.rps_ci95)),
        ("p99", "p99 (ms)", "p99", |r| (r.p99_ms, r.p99_ci95_ms)),
    ];
    for (figure, unit, file, value) in drawn {
        let bars: Vec<Bar> = c
            .rows
            .iter()
            .map(|r| {
                let (mean, ci) = value(r);
                Bar {
                    label: r.name.clone(),
                    group: r.name.clone(),
                    mean,
                    ci,
                }
            })
            .collect();
        let svg = charts::bars(&format!("{title}: {figure} per controller"), unit, &bars)?;
        push_chart(
            out,
            format!("{number}-controllers-{file}{file_part}.svg"),
            &format!("{figure} per controller with 95% intervals"),
            svg,
        );
    }
    Ok(())
}

/// A figure of a controller's row and its 95% interval.
type RowFigure = fn(&ControllerRow) -> (f64, f64);

/// The per-sample route figures (spec.routeChanges), in the order a table shows them.
const ROUTE_FIGURES: [(&str, &str); 6] = [
    ("routeChangesShown", "swaps shown"),
    ("routeChangeP99Ms", "swap p99 ms"),
    ("routeCreationsShown", "creations shown"),
    ("routeCreationP99Ms", "creation p99 ms"),
    ("routeDeletionsShown", "deletions shown"),
    ("routeDeletionP99Ms", "deletion p99 ms"),
];

/// A route scale's per-sample figures (controllers[].route.count).
const SCALE_FIGURES: [(&str, &str); 2] = [
    ("routesAnswered", "routes answered"),
    ("routesAllAnsweredMs", "all answered ms"),
];

/// Each controller's route figures (mean ± 95% over the samples), when the result has any:
/// a share as a percentage, a time in ms. Route changes under load, then a route scale.
pub fn route_section(spec: &BenchmarkResultSpec, out: &mut Rendered) {
    let named = named(spec);
    let rows: Vec<(String, &MeasurementStats)> =
        named.iter().map(|n| (n.label(), &n.stats)).collect();
    figure_table(
        &rows,
        "Route changes under load",
        "A change not shown counts in the p99 at the time it was given (the p99 is then a lower bound).",
        &ROUTE_FIGURES,
        out,
    );
    figure_table(
        &rows,
        "Route scale",
        "Routes answered: the share of a sample's routes whose first 2xx came through the data plane. All answered: from the first route's creation until the last one answered (when not all did, the time they were given: a lower bound).",
        &SCALE_FIGURES,
        out,
    );
}

/// One table of `figures` (those any controller has), a row per controller.
fn figure_table(
    rows: &[(String, &MeasurementStats)],
    title: &str,
    intro: &str,
    figures: &[(&str, &str)],
    out: &mut Rendered,
) {
    let present: Vec<&(&str, &str)> = figures
        .iter()
        .filter(|(name, _)| rows.iter().any(|(_, m)| m.metric(name).is_some()))
        .collect();
    if present.is_empty() {
        return;
    }
    out.markdown.push_str(&format!(
        "### {title}\n\nMean of the samples ± 95%. {intro}\n\n| controller |"
    ));
    for (_, title) in &present {
        out.markdown.push_str(&format!(" {title} |"));
    }
    out.markdown.push_str("\n|---|");
    out.markdown.push_str(&"---|".repeat(present.len()));
    out.markdown.push('\n');
    for (controller, m) in rows {
        out.markdown
            .push_str(&format!("| {} |", md_cell(controller)));
        for (name, _) in &present {
            let cell = match m.metric(name) {
                Some(f) if !name.ends_with("Ms") => {
                    format!(" {:.0}% ± {:.0} |", f.mean * 100.0, f.ci95 * 100.0)
                }
                Some(f) => format!(" {:.1} ± {:.1} |", f.mean, f.ci95),
                None => " - |".to_string(),
            };
            out.markdown.push_str(&cell);
        }
        out.markdown.push('\n');
    }
    out.markdown.push('\n');
}
