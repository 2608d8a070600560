//! The egress part of a report: per protocol (in order of first appearance) a table of its
//! unswept cases with a bar chart of their headline figure and their latency, then each swept
//! case with its table (a row per swept value), its chart (main figures against the swept
//! parameter) and its latency. Every measurement appears in exactly one table. File names use
//! the section number, a known protocol's name or an index, never text from the result.

use anyhow::Result;
use crds::result::Measurement;

use super::{cases, charts, latency, push_chart, Rendered};
use crate::egress::{self, Group, Sweep, Swept};
use crate::figures::{self, Case};
use crate::shown::Column;
use crate::source::Loaded;
use crate::text::md_text;

/// The egress section of result `r`, section `number`.
pub fn section(number: usize, r: &Loaded, out: &mut Rendered) -> Result<()> {
    let cases = figures::cases(&r.spec);
    let ms = figures::sorted(&r.spec);
    let groups = egress::groups(&ms);
    let mut protocols: Vec<&str> = vec![];
    for g in &groups {
        if !protocols.contains(&g.protocol) {
            protocols.push(g.protocol);
        }
    }
    out.markdown
        .push_str("Figures are means ± 95% confidence intervals over the samples.\n\n");
    for (p, protocol) in protocols.iter().enumerate() {
        let tag =
            egress::file_tag(protocol).map_or_else(|| format!("protocol-{p}"), str::to_string);
        let main = egress::main_figures(protocol);
        out.markdown
            .push_str(&format!("### {} cases\n\n", md_text(protocol)));
        let mine: Vec<(usize, &Group<'_>)> = groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.protocol == *protocol)
            .collect();
        let single: Vec<&Case<'_>> = mine
            .iter()
            .filter(|(_, g)| g.members.len() == 1)
            .flat_map(|(_, g)| g.members.iter())
            .filter_map(|m| cases::case_of(&cases, m))
            .collect();
        if !single.is_empty() {
            out.markdown.push_str(&cases::table(&single, main));
            out.markdown.push('\n');
            bars(number, &tag, &r.spec.benchmark.name, &single, out)?;
            let reads = latency::read(single.iter().map(|c| (c.m, c.m.name.clone())));
            let title = format!("{}: {protocol} latency", r.spec.benchmark.name);
            latency::section(out, number, &tag, &title, &reads, LATENCY_ROWS)?;
        }
        for (k, g) in mine {
            if let Some(s) = egress::sweep(g) {
                let c = SweptCase {
                    number,
                    k,
                    benchmark: &r.spec.benchmark.name,
                    g,
                    s: &s,
                };
                swept(c, &cases, out)?;
            }
        }
    }
    super::pairs::section(number, &r.spec.benchmark.name, &r.spec.measurements, out)
}

/// The rows of a latency table of cases: a case each, over its transactions.
const LATENCY_ROWS: (&str, &str) = ("case", "transactions");

/// A bar per unswept case of its protocol's headline figure, coloured by offload profile. The
/// tcp-stream chart keeps the name it always had, `N-egress-throughput.svg`.
fn bars(
    number: usize,
    tag: &str,
    benchmark: &str,
    cases: &[&Case<'_>],
    out: &mut Rendered,
) -> Result<()> {
    let Some(column) = cases.iter().find_map(|c| c.main).map(Column::of) else {
        return Ok(());
    };
    let bars: Vec<charts::Bar> = cases
        .iter()
        .filter_map(|c| {
            let f = c.main.filter(|f| f.name == column.name)?;
            Some(charts::Bar {
                label: c.m.name.clone(),
                group: c.profile.map_or_else(
                    || "offload as found".into(),
                    |p| format!("offload profile {p}"),
                ),
                mean: f.mean * column.factor,
                ci: f.ci95 * column.factor,
            })
        })
        .collect();
    let title = format!("{benchmark}: {} per case", column.heading);
    let svg = charts::bars(&title, &column.unit, &bars)?;
    let file = match tag {
        egress::TCP_STREAM => format!("{number}-egress-throughput.svg"),
        t => format!("{number}-egress-{t}.svg"),
    };
    push_chart(
        out,
        file,
        "headline figure per case, coloured by offload profile",
        svg,
    );
    Ok(())
}

/// The `k`th case group of the `number`th result of the report, `g`, swept as `s`.
#[derive(Clone, Copy)]
struct SweptCase<'a> {
    number: usize,
    k: usize,
    benchmark: &'a str,
    g: &'a Group<'a>,
    s: &'a Sweep<'a>,
}

/// A swept case: where it ran, its table, its chart and its latency.
fn swept(c: SweptCase<'_>, cases: &[Case<'_>], out: &mut Rendered) -> Result<()> {
    let SweptCase {
        number,
        k,
        benchmark,
        g,
        s,
    } = c;
    let axes: Vec<&str> = s.axes.iter().map(|a| a.describe()).collect();
    out.markdown.push_str(&format!(
        "#### Case {} swept over {}\n\n",
        md_text(g.case),
        if axes.is_empty() {
            "nothing".to_string()
        } else {
            axes.join(" and ")
        }
    ));
    let main = egress::main_figures(g.protocol);
    out.markdown.push_str(&cases::where_ran(s, g.protocol));
    out.markdown.push('\n');
    out.markdown.push_str(&cases::sweep_table(s, cases, main));
    out.markdown.push('\n');
    sweep_chart(c, out)?;
    let reads = latency::read(
        s.rows
            .iter()
            .map(|row| (row.m, cases::swept_values(s, row))),
    );
    let title = format!("{benchmark}: {} latency", g.case);
    latency::section(
        out,
        number,
        &format!("sweep-{k}"),
        &title,
        &reads,
        LATENCY_ROWS,
    )
}

/// The figures a sweep chart draws: the protocol's main figures the rows have, else the first
/// figure of the first row (a protocol this CLI does not know).
fn drawn_figures(g: &Group<'_>, rows: &[&Measurement]) -> Vec<Column> {
    let has = |name: &str| rows.iter().find_map(|m| figures::metric(m, name));
    let main: Vec<Column> = egress::main_figures(g.protocol)
        .iter()
        .filter_map(|n| has(n))
        .map(Column::of)
        .collect();
    if !main.is_empty() {
        return main;
    }
    rows.first()
        .and_then(|m| m.metrics.first())
        .map(Column::of)
        .into_iter()
        .collect()
}

/// The chart of a sweep: each drawn figure against the first swept parameter, a line per
/// value of the second one.
fn sweep_chart(c: SweptCase<'_>, out: &mut Rendered) -> Result<()> {
    let SweptCase {
        number,
        k,
        benchmark,
        g,
        s,
    } = c;
    let Some(x) = s.axes.first().copied() else {
        out.markdown.push_str(
            "Its measurements differ in no swept parameter (message size, streams): no chart.\n\n",
        );
        return Ok(());
    };
    // A line through values measured on different node pairs would draw the pairs, not
    // the swept parameter.
    let pairs = cases::sweep_pairs(s);
    if !matches!(pairs.as_slice(), [one] if one != egress::NOT_RECORDED) {
        out.markdown.push_str(&format!(
            "No chart: not comparable: {}.\n\n",
            md_text(&pairs.join(" vs "))
        ));
        return Ok(());
    }
    let series_axis = s.axes.get(1).copied();
    let drawable: Vec<(u64, Option<u64>, &Measurement)> = s
        .rows
        .iter()
        .filter_map(|r| {
            Some((
                r.values.first().copied()??,
                r.values.get(1).copied().flatten(),
                r.m,
            ))
        })
        .collect();
    let left_out = s.rows.len().saturating_sub(drawable.len());
    let mut keys: Vec<Option<u64>> = vec![];
    for d in &drawable {
        if !keys.contains(&d.1) {
            keys.push(d.1);
        }
    }
    keys.sort();
    let rows: Vec<&Measurement> = drawable.iter().map(|d| d.2).collect();
    let panels: Vec<charts::Panel> = drawn_figures(g, &rows)
        .into_iter()
        .map(|col| charts::Panel {
            title: col.heading.clone(),
            y_desc: col.unit.clone(),
            lines: keys
                .iter()
                .map(|key| charts::Line {
                    name: series_name(series_axis, *key),
                    points: drawable
                        .iter()
                        .filter(|d| d.1 == *key)
                        .filter_map(|d| {
                            let f = figures::metric(d.2, &col.name)?;
                            Some(charts::Point {
                                // Swept values are at most 2^40: exact as f64.
                                x: d.0 as f64,
                                mean: f.mean * col.factor,
                                ci: f.ci95 * col.factor,
                            })
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    if panels.is_empty() || drawable.is_empty() {
        out.markdown
            .push_str("No figure to draw for this sweep.\n\n");
        return Ok(());
    }
    let axis = charts::XAxis {
        desc: x.describe().to_string(),
        log2: x.log2(drawable.iter().map(|d| d.0)),
        bytes: x == Swept::MessageSize,
    };
    let title = format!("{benchmark}: case {} against {}", g.case, x.describe());
    let svg = charts::sweep(&title, &axis, &panels)?;
    push_chart(
        out,
        format!("{number}-sweep-{k}.svg"),
        "main figures against the swept parameter",
        svg,
    );
    if left_out > 0 {
        out.markdown.push_str(&format!(
            "{left_out} measurement(s) whose swept value does not parse are in the table, not in the chart.\n\n"
        ));
    }
    if keys.len() > charts::MAX_LINES {
        out.markdown.push_str(&format!(
            "The chart draws the first {} of {} lines.\n\n",
            charts::MAX_LINES,
            keys.len()
        ));
    }
    Ok(())
}

/// The legend of a line: the value of the second swept parameter, or the one line's meaning.
fn series_name(axis: Option<Swept>, key: Option<u64>) -> String {
    match (axis, key) {
        (None, _) => "mean ± 95% CI".into(),
        (Some(a), Some(v)) => format!("{} {}", a.describe(), a.show(v)),
        (Some(a), None) => format!("{} not readable", a.describe()),
    }
}
