//! The Markdown of a report, section by section. Every table cell goes through
//! [`text::md_cell`] (in [`Table::render`]), every heading and sentence with user text through
//! [`text::md_text`].

use std::fmt::Write as _;

use crate::figures::{self, Step};
use crate::source::Loaded;
use crate::text::{self, interval, md_text, num, percent};

/// A Markdown table; cells are escaped when it is rendered.
pub struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|h| h.to_string()).collect(),
            rows: vec![],
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let line = |cells: &[String]| {
            let mut cells: Vec<String> = cells.iter().map(|c| text::md_cell(c)).collect();
            cells.resize(self.head.len(), String::new());
            format!("| {} |\n", cells.join(" | "))
        };
        let mut out = line(&self.head);
        out.push_str(&format!("|{}\n", " --- |".repeat(self.head.len())));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

/// A text, or "-" when there is none.
pub fn opt(s: Option<&str>) -> String {
    s.unwrap_or("-").to_string()
}

/// What ran: the benchmark, the result, its run, times and spec hash.
pub fn what_ran(r: &Loaded) -> String {
    let s = &r.spec;
    let mut t = Table::new(&["", ""]);
    let b = &s.benchmark;
    t.row(vec![
        "benchmark".into(),
        format!("{} {}/{}", b.kind, b.namespace, b.name),
    ]);
    t.row(vec!["result".into(), r.display_name().to_string()]);
    t.row(vec!["run id".into(), s.run_id.clone()]);
    t.row(vec!["phase".into(), format!("{:?}", s.phase)]);
    if let Some(m) = &s.message {
        t.row(vec!["message".into(), m.clone()]);
    }
    t.row(vec!["started".into(), text::time(s.start_time.as_ref())]);
    let took = text::seconds_between(s.start_time.as_ref(), s.completion_time.as_ref())
        .map(|secs| format!(" ({})", text::human_seconds(secs)))
        .unwrap_or_default();
    t.row(vec![
        "finished".into(),
        format!("{}{took}", text::time(s.completion_time.as_ref())),
    ]);
    t.row(vec![
        "spec hash".into(),
        s.spec_hash.chars().take(16).collect(),
    ]);
    if let Some(summary) = &s.summary {
        t.row(vec!["summary".into(), summary.clone()]);
    }
    format!("### What ran\n\n{}", t.render())
}

/// The cluster the run measured: its nodes, then the environment fingerprint baselines are
/// matched on.
pub fn cluster(r: &Loaded) -> String {
    let mut out = nodes(r);
    out.push_str(&fingerprint(r));
    out
}

/// The environment fingerprint, one row per field; nothing for a result without one.
fn fingerprint(r: &Loaded) -> String {
    let Some(e) = &r.spec.environment else {
        return String::new();
    };
    let mut t = Table::new(&["environment", "value"]);
    for f in crds::environment::EnvironmentField::FIELDS {
        t.row(vec![f.name().into(), opt(e.get(f))]);
    }
    format!(
        "\nBaselines use only results with the same environment fingerprint (`baseline.ignoreEnvironment` leaves fields out):\n\n{}",
        t.render()
    )
}

fn nodes(r: &Loaded) -> String {
    let c = &r.spec.cluster;
    let mut out = String::from("### Cluster\n\n");
    if let Some(v) = &c.kubernetes_version {
        let _ = writeln!(out, "Kubernetes {}\n", md_text(v));
    }
    if c.nodes.is_empty() {
        out.push_str("No node facts recorded.\n");
        return out;
    }
    let mut t = Table::new(&[
        "node",
        "kernel",
        "OS",
        "arch",
        "kubelet",
        "CPUs",
        "CPU model",
        "interfaces (MTU)",
    ]);
    for n in &c.nodes {
        let ifs: Vec<String> = n
            .interfaces
            .iter()
            .map(|i| format!("{} ({})", i.name, i.mtu))
            .collect();
        t.row(vec![
            n.name.clone(),
            opt(n.kernel_version.as_deref()),
            opt(n.os_image.as_deref()),
            opt(n.architecture.as_deref()),
            opt(n.kubelet_version.as_deref()),
            opt(n.cpus.as_deref()),
            opt(n.cpu_model.as_deref()),
            if ifs.is_empty() {
                "-".into()
            } else {
                ifs.join(", ")
            },
        ]);
    }
    out.push_str(&t.render());
    out
}

fn stat(m: Option<&crds::result::MetricStats>, scale: f64, decimals: usize) -> String {
    m.map_or("-".into(), |f| {
        interval(f.mean * scale, f.ci95 * scale, decimals)
    })
}

/// The steps of an ingress run: throughput, latency, errors, and scaling against linear.
pub fn steps(steps: &[Step<'_>]) -> String {
    let mut t = Table::new(&[
        "step",
        "CPU",
        "replicas",
        "RPS (mean ± 95% CI)",
        "samples",
        "p50 (ms)",
        "p99 (ms)",
        "error rate",
        "speed-up",
        "efficiency vs linear",
    ]);
    for s in steps {
        let m = s.m;
        t.row(vec![
            m.name.clone(),
            opt(s.cpu),
            opt(s.replicas),
            stat(s.rps, 1.0, 2),
            s.rps.map_or("-".into(), |f| f.values.len().to_string()),
            stat(figures::metric(m, figures::P50), 1.0, 2),
            stat(figures::metric(m, figures::P99), 1.0, 2),
            figures::metric(m, figures::ERROR_RATE).map_or("-".into(), |f| percent(f.mean, 2)),
            s.speedup.map_or("-".into(), |v| format!("{}x", num(v, 2))),
            s.efficiency.map_or("-".into(), |v| percent(v, 0)),
        ]);
    }
    t.render()
}

/// The comparison with the baseline, when the result has one.
pub fn verdict(r: &Loaded) -> Option<String> {
    let v = r.spec.verdict.as_ref()?;
    let mut out = format!(
        "### Verdict\n\nCompared with {}: regressed **{}**.\n\n",
        md_text(&v.baseline),
        md_text(&v.regressed)
    );
    for (title, lines) in [
        ("Not compared with (another environment)", &v.skipped),
        ("Environment differences ignored", &v.ignored),
    ] {
        if !lines.is_empty() {
            let _ = writeln!(out, "{title}:\n");
            for l in lines {
                let _ = writeln!(out, "- {}", md_text(l));
            }
            out.push('\n');
        }
    }
    if v.metrics.is_empty() {
        return Some(out);
    }
    let mut t = Table::new(&[
        "step / case",
        "figure",
        "baseline",
        "this run",
        "delta",
        "tolerance",
        "beyond noise",
        "regressed",
    ]);
    for m in &v.metrics {
        t.row(vec![
            m.measurement.clone(),
            m.metric.clone(),
            interval(m.baseline_mean, m.baseline_ci95, 2),
            interval(m.mean, m.ci95, 2),
            text::signed_percent(m.delta_percent),
            format!("{}%", num(m.tolerance_percent, 1)),
            yes_no(m.beyond_noise),
            if m.regressed {
                "**yes**".into()
            } else {
                "no".into()
            },
        ]);
    }
    out.push_str(&t.render());
    Some(out)
}

pub fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// The runs of one benchmark, oldest first, with their headline figure.
pub fn history(runs: &[&Loaded]) -> String {
    let mut t = Table::new(&[
        "started",
        "result",
        "run id",
        "phase",
        "spec hash",
        "headline",
        "regressed",
    ]);
    for r in runs {
        let s = &r.spec;
        let headline = figures::headline(s)
            .map(|(m, mean, ci, unit)| format!("{m}: {} {unit}", interval(mean, ci, 2)))
            .unwrap_or_else(|| "-".into());
        t.row(vec![
            text::time(r.when()),
            r.display_name().to_string(),
            s.run_id.clone(),
            format!("{:?}", s.phase),
            s.spec_hash.chars().take(16).collect(),
            headline,
            s.verdict
                .as_ref()
                .map_or("-".into(), |v| v.regressed.clone()),
        ]);
    }
    t.render()
}
