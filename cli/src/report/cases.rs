//! The Markdown tables of an egress run's cases: one table per protocol of its unswept cases,
//! and one per swept case with a row per swept value. Generic over figures: the columns are
//! the protocol's main figures first, then every other figure the rows have (shown::columns),
//! at most [`MAX_FIGURE_COLUMNS`]. Cells go through Table::render (escaped).

use crds::result::Measurement;

use super::markdown::{opt, Table};
use crate::egress::{self, Row, Sweep, Swept};
use crate::figures::{self, Case};
use crate::shown::{self, Column};
use crate::text::{md_text, num};

/// Most figure columns a table shows (a result may carry 32 figures per measurement, each
/// measurement different ones).
pub const MAX_FIGURE_COLUMNS: usize = 16;

/// The figure columns of some measurements, and the sentence saying how many were left out.
fn figure_columns(ms: &[&Measurement], main: &[&str]) -> (Vec<Column>, Option<String>) {
    let (columns, hidden) = shown::columns(
        ms.iter().flat_map(|m| m.metrics.iter()),
        main,
        MAX_FIGURE_COLUMNS,
    );
    let note = (hidden > 0).then(|| {
        format!("{hidden} more figure(s) not shown here; `netbench compare` lists every figure.\n")
    });
    (columns, note)
}

/// Samples of a measurement: the count of its main figure's values (else its first figure's).
fn samples(m: &Measurement, main: &[&str]) -> String {
    main.iter()
        .find_map(|n| figures::metric(m, n))
        .or(m.metrics.first())
        .map_or("-".into(), |f| f.values.len().to_string())
}

/// The overhead cell of a case against the baseline case.
fn overhead(c: Option<&Case<'_>>) -> String {
    let Some(c) = c else {
        return "-".into();
    };
    if c.is_baseline {
        return "baseline".into();
    }
    match (c.overhead, c.beyond_noise, &c.not_comparable) {
        (Some(o), Some(false), _) => format!("{}% (within noise)", num(o, 1)),
        (Some(o), _, _) => format!("{}%", num(o, 1)),
        (None, _, Some(why)) => why.clone(),
        (None, _, None) => "-".into(),
    }
}

/// The case of a measurement.
pub fn case_of<'a, 'b>(cases: &'b [Case<'a>], m: &Measurement) -> Option<&'b Case<'a>> {
    cases.iter().find(|c| std::ptr::eq(c.m, m))
}

/// Unswept cases of one protocol: where they ran, every figure, samples, overhead.
pub fn table(cases: &[&Case<'_>], main: &[&str]) -> String {
    let ms: Vec<&Measurement> = cases.iter().map(|c| c.m).collect();
    let has = |key: &str| cases.iter().any(|c| c.param(key).is_some());
    let swept = [Swept::MessageSize, Swept::Streams]
        .into_iter()
        .filter(|s| has(s.key()))
        .collect::<Vec<_>>();
    let (columns, note) = figure_columns(&ms, main);
    let mut head: Vec<&str> = vec!["case", "offload profile", "client node", "server node"];
    head.extend(swept.iter().map(|s| s.describe()));
    head.extend(columns.iter().map(|c| c.heading.as_str()));
    head.extend(["samples", "overhead vs baseline"]);
    let mut t = Table::new(&head);
    for c in cases {
        let mut row = vec![
            c.m.name.clone(),
            c.profile.unwrap_or("as found").to_string(),
            opt(c.param("clientNode")),
            opt(c.param("serverNode")),
        ];
        row.extend(swept.iter().map(|s| shown_value(*s, c.param(s.key()))));
        row.extend(
            columns
                .iter()
                .map(|col| col.cell(figures::metric(c.m, &col.name))),
        );
        row.push(samples(c.m, main));
        row.push(overhead(Some(c)));
        t.row(row);
    }
    format!("{}{}", t.render(), note.unwrap_or_default())
}

/// A swept value as people read it; the raw text when it does not parse.
fn shown_value(axis: Swept, raw: Option<&str>) -> String {
    match raw {
        Some(r) => egress::parse_count(r).map_or_else(|| r.to_string(), |v| axis.show(v)),
        None => "-".into(),
    }
}

/// A row's swept value as people read it; its raw text when it does not parse.
fn value(axis: Swept, r: &Row<'_>, v: Option<u64>) -> String {
    v.map_or_else(|| r.raw(axis).to_string(), |v| axis.show(v))
}

/// A row's swept values in words ("64 B", "64 B, 4 streams"); its name when nothing varies.
pub fn swept_values(sweep: &Sweep<'_>, r: &Row<'_>) -> String {
    if sweep.axes.is_empty() {
        return r.m.name.clone();
    }
    sweep
        .axes
        .iter()
        .zip(&r.values)
        .map(|(a, v)| match a {
            Swept::MessageSize => value(*a, r, *v),
            Swept::Streams if *v == Some(1) => "1 stream".to_string(),
            Swept::Streams => format!("{} streams", value(*a, r, *v)),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The node pairs a sweep's values ran on, each once in order of first appearance ("nodes
/// not recorded" for a value without both nodes).
pub fn sweep_pairs(sweep: &Sweep<'_>) -> Vec<String> {
    let mut pairs: Vec<String> = vec![];
    for r in &sweep.rows {
        let on = egress::measured_on(r.m).unwrap_or_else(|| egress::NOT_RECORDED.into());
        if !pairs.contains(&on) {
            pairs.push(on);
        }
    }
    pairs
}

/// Where a swept case ran, in a sentence: protocol, nodes, offload profile; its values on
/// different node pairs are said to be not comparable.
pub fn where_ran(sweep: &Sweep<'_>, protocol: &str) -> String {
    let first = sweep.rows.first().map(|r| r.m);
    let param = |k: &str| first.and_then(|m| m.parameters.get(k)).map(String::as_str);
    let pairs = sweep_pairs(sweep);
    if pairs.len() > 1 {
        return format!(
            "{}: its values ran on different node pairs, not comparable: {}; {} measurements.\n",
            md_text(protocol),
            md_text(&pairs.join(" vs ")),
            sweep.rows.len()
        );
    }
    format!(
        "{}, client node {}, server node {}, offload {}; {} measurements.\n",
        md_text(protocol),
        md_text(&opt(param("clientNode"))),
        md_text(&opt(param("serverNode"))),
        param("offloadProfile")
            .map_or_else(|| "as found".into(), |p| format!("profile {}", md_text(p))),
        sweep.rows.len()
    )
}

/// A swept case: one row per swept value, in order, with every figure, samples and overhead.
pub fn sweep_table(sweep: &Sweep<'_>, cases: &[Case<'_>], main: &[&str]) -> String {
    let ms: Vec<&Measurement> = sweep.rows.iter().map(|r| r.m).collect();
    let (columns, note) = figure_columns(&ms, main);
    let mut head: Vec<&str> = if sweep.axes.is_empty() {
        vec!["measurement"]
    } else {
        sweep.axes.iter().map(|a| a.describe()).collect()
    };
    head.extend(columns.iter().map(|c| c.heading.as_str()));
    head.extend(["samples", "overhead vs baseline"]);
    let mut t = Table::new(&head);
    for r in &sweep.rows {
        let mut row: Vec<String> = if sweep.axes.is_empty() {
            vec![r.m.name.clone()]
        } else {
            sweep
                .axes
                .iter()
                .zip(&r.values)
                .map(|(a, v)| value(*a, r, *v))
                .collect()
        };
        row.extend(
            columns
                .iter()
                .map(|col| col.cell(figures::metric(r.m, &col.name))),
        );
        row.push(samples(r.m, main));
        row.push(overhead(case_of(cases, r.m)));
        t.row(row);
    }
    format!("{}{}", t.render(), note.unwrap_or_default())
}
