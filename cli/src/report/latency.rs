//! The latency of a table's steps or cases in a report: the exact percentiles over every
//! request or transaction (from the merged histograms) and the distribution charts. Each
//! histogram is decoded once ([`read`]); one that does not decode is named in the table and
//! left out of the chart. A chart holds at most [`charts::MAX_LINES`] curves; more measurements
//! get more charts. File names come from the caller's fixed tags, never from a result.

use anyhow::Result;
use crds::result::Measurement;

use super::charts;
use super::markdown::Table;
use super::Rendered;
use crate::latency::{self, Latency};
use crate::text::{self, num};

/// A measurement with a histogram, read.
pub struct Read<'a> {
    pub m: &'a Measurement,
    /// Its name in a chart's legend.
    pub label: String,
    pub latency: Result<Latency, String>,
}

/// The measurements that carry a histogram, each read once, with their legend names.
pub fn read<'a>(ms: impl Iterator<Item = (&'a Measurement, String)>) -> Vec<Read<'a>> {
    ms.filter_map(|(m, label)| {
        let h = m.histogram.as_deref()?;
        Some(Read {
            m,
            label,
            latency: latency::read(h),
        })
    })
    .collect()
}

/// Exact percentiles over every request (`noun`: "requests", "transactions") of each step or
/// case (`what`), when any has a histogram.
pub fn table(reads: &[Read<'_>], what: &str, noun: &str) -> Option<String> {
    if reads.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        what,
        noun,
        "p50 (ms)",
        "p90 (ms)",
        "p99 (ms)",
        "p99.9 (ms)",
        "max (ms)",
    ]);
    let d = text::decimals_for(
        reads
            .iter()
            .filter_map(|r| r.latency.as_ref().ok())
            .map(|l| l.merged.p50),
        2,
    );
    for r in reads {
        match &r.latency {
            Ok(l) => {
                let m = &l.merged;
                t.row(vec![
                    r.m.name.clone(),
                    m.requests.to_string(),
                    num(m.p50, d),
                    num(m.p90, d),
                    num(m.p99, d),
                    num(m.p999, d),
                    num(m.max, d),
                ]);
            }
            Err(e) => t.row(vec![r.m.name.clone(), format!("unreadable histogram: {e}")]),
        }
    }
    Some(format!(
        "Latency over every one of the {noun} of all samples (merged HDR histograms):\n\n{}",
        t.render()
    ))
}

/// The latency table of some measurements (a row per `what`, over all its `noun`), then their
/// distribution charts (see `charts`).
pub fn section(
    out: &mut Rendered,
    number: usize,
    tag: &str,
    title: &str,
    reads: &[Read<'_>],
    (what, noun): (&str, &str),
) -> Result<()> {
    if let Some(t) = table(reads, what, noun) {
        out.markdown.push_str(&t);
        out.markdown.push('\n');
    }
    charts(out, number, tag, title, reads)
}

/// The distribution charts of some measurements, linked into the report: `{number}-latency-
/// {tag}.svg` (with `-2`, `-3`, ... when it takes more than one chart).
pub fn charts(
    out: &mut Rendered,
    number: usize,
    tag: &str,
    title: &str,
    reads: &[Read<'_>],
) -> Result<()> {
    let curves: Vec<charts::Curve> = reads
        .iter()
        .filter_map(|r| {
            let l = r.latency.as_ref().ok()?;
            (!l.curve.is_empty()).then(|| charts::Curve {
                name: r.label.clone(),
                points: l.curve.clone(),
                marks: l.marks.iter().map(|(n, a)| (n.to_string(), *a)).collect(),
            })
        })
        .collect();
    let chunks: Vec<&[charts::Curve]> = curves.chunks(charts::MAX_LINES).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let file = match i {
            0 => format!("{number}-latency-{tag}.svg"),
            i => format!("{number}-latency-{tag}-{}.svg", i.saturating_add(1)),
        };
        // The part number survives the cut of a long title.
        let title = match chunks.len() {
            1 => title.to_string(),
            n => format!("{} ({}/{n})", text::clean(title, 38), i.saturating_add(1)),
        };
        let svg = charts::distribution(&title, chunk)?;
        super::push_chart(
            out,
            file,
            "latency distribution: latency (ms) against percentile",
            svg,
        );
    }
    Ok(())
}
