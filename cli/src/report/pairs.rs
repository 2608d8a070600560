//! The node-pair part of an egress report: for each case with a topology, a table of its pairs
//! (nodes, main figure, p99, start lateness, outliers marked) and the matrix as a heatmap SVG.
//! File names use the section number and the measurement's index, never text from the result.

use anyhow::Result;
use crds::result::Measurement;
use crds::topology::PairResult;
use protocol::Protocol;

use super::{charts, push_chart, Rendered};
use crate::text::{md_text, num};

/// Most rows a pair table shows (the heatmap shows every pair).
const MAX_ROWS: usize = 128;

/// Every measurement of `ms` with pairs: its table and heatmap.
pub fn section(
    number: usize,
    benchmark: &str,
    ms: &[Measurement],
    out: &mut Rendered,
) -> Result<()> {
    for m in ms.iter().filter(|m| !m.pairs.is_empty()) {
        let (unit, scale) = unit_of(m);
        out.markdown.push_str(&format!(
            "### Pairs of case {} ({} pairs)\n\n",
            md_text(&m.name),
            m.pairs.len()
        ));
        out.markdown.push_str(&table(&m.pairs, unit, scale));
        out.markdown.push('\n');
        let (clients, servers, cells) = matrix(&m.pairs, scale);
        let title = format!("{benchmark}: {}", m.name);
        let svg = charts::heatmap(&title, unit, &clients, &servers, &cells)?;
        let file = format!("{number}-egress-pairs-{}.svg", m.index);
        push_chart(
            out,
            file,
            "node-pair matrix: main figure per client and server node",
            svg,
        );
    }
    Ok(())
}

/// The main figure's unit as shown and the factor from the stored value (bit/s or tx/s).
fn unit_of(m: &Measurement) -> (&'static str, f64) {
    let rr = m
        .parameters
        .get("protocol")
        .and_then(|p| p.parse::<Protocol>().ok())
        .is_some_and(Protocol::is_request_response);
    if rr {
        ("transactions/s", 1.0)
    } else {
        ("Gbit/s", 1e-9)
    }
}

fn node(n: &Option<String>) -> String {
    n.clone().unwrap_or_else(|| "?".into())
}

/// A row per pair, slowest marked.
fn table(pairs: &[PairResult], unit: &str, scale: f64) -> String {
    let mut t = format!(
        "| pair | client node | server node | {unit} | p99 ms | start lateness ms | |\n|---:|---|---|---:|---:|---:|---|\n"
    );
    for p in pairs.iter().take(MAX_ROWS) {
        t.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            p.pair,
            md_text(&node(&p.client_node)),
            md_text(&node(&p.server_node)),
            num(p.value * scale, 2),
            p.p99_ms.map_or_else(String::new, |v| num(v, 3)),
            num(p.start_lateness_ms, 0),
            if p.outlier {
                "slow: below 80 % of the median"
            } else {
                ""
            },
        ));
    }
    t
}

/// Rows (client nodes) and columns (server nodes) in order of first appearance, and a cell per
/// pair (a node pair measured twice keeps its last value).
fn matrix(pairs: &[PairResult], scale: f64) -> (Vec<String>, Vec<String>, Vec<charts::Cell>) {
    let (mut clients, mut servers) = (Vec::<String>::new(), Vec::<String>::new());
    let index = |list: &mut Vec<String>, name: String| {
        list.iter().position(|n| *n == name).unwrap_or_else(|| {
            list.push(name);
            list.len() - 1
        })
    };
    let mut cells = vec![];
    for p in pairs {
        let row = index(&mut clients, node(&p.client_node));
        let column = index(&mut servers, node(&p.server_node));
        cells.retain(|c: &charts::Cell| c.row != row || c.column != column);
        cells.push(charts::Cell {
            row,
            column,
            value: p.value * scale,
        });
    }
    (clients, servers, cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(i: u32, c: &str, s: &str, v: f64) -> PairResult {
        PairResult {
            pair: i,
            client_node: Some(c.into()),
            server_node: Some(s.into()),
            value: v,
            outlier: v < 5e9,
            ..Default::default()
        }
    }

    #[test]
    fn a_case_with_pairs_gets_its_table_and_heatmap() {
        let m = Measurement {
            index: 2,
            name: "matrix".into(),
            pairs: vec![
                pair(0, "a", "b", 9e9),
                pair(1, "b", "a", 3e9),
                pair(2, "a", "c", 8e9),
            ],
            ..Default::default()
        };
        let plain = Measurement {
            index: 0,
            name: "single".into(),
            ..Default::default()
        };
        let mut out = Rendered::default();
        section(1, "eb", &[plain, m.clone()], &mut out).unwrap();
        assert_eq!(out.charts.len(), 1, "only the case with pairs");
        assert_eq!(out.charts[0].file, "1-egress-pairs-2.svg");
        assert!(out.markdown.contains("### Pairs of case matrix (3 pairs)"));
        assert!(
            out.markdown.contains("| 1 | b | a | 3.00 |"),
            "{}",
            out.markdown
        );
        assert!(out.markdown.contains("slow: below 80 % of the median"));
        assert!(out.markdown.contains("| Gbit/s |"), "tcp-stream by default");
        for (protocol, unit) in [("tcp-crr", "transactions/s"), ("udp-stream", "Gbit/s")] {
            let mut p = m.clone();
            p.parameters.insert("protocol".into(), protocol.into());
            assert_eq!(unit_of(&p).0, unit, "{protocol}");
        }
        let (clients, servers, cells) = matrix(&m.pairs, 1.0);
        assert_eq!(
            (clients, servers),
            (
                vec!["a".to_string(), "b".into()],
                vec!["b".to_string(), "a".into(), "c".into()]
            )
        );
        assert_eq!(cells.len(), 3);
    }
}
