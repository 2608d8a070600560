//! Helpers of the cli tests: fixtures and XML checks.
#![allow(dead_code)]

use std::path::PathBuf;

use netbench_cli::report::Rendered;
use netbench_cli::source::{file, Loaded};

/// Runs the netbench binary (with no usable kubeconfig: files only).
pub fn netbench(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_netbench"))
        .args(args)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .unwrap()
}

pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The results of some fixture files, in order.
pub fn fixtures(names: &[&str]) -> Vec<Loaded> {
    names
        .iter()
        .flat_map(|n| file::read(&fixture_path(n)).expect("fixture parses"))
        .collect()
}

/// The measurement `name` of a result, to change it.
pub fn measurement_mut<'a>(r: &'a mut Loaded, name: &str) -> &'a mut crds::result::Measurement {
    r.spec
        .measurements
        .iter_mut()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("no measurement {name}"))
}

/// Parses a document as XML; panics with the parser's message when it is not.
pub fn xml(text: &str) -> roxmltree::Document<'_> {
    roxmltree::Document::parse(text).unwrap_or_else(|e| panic!("not XML: {e}\n{text}"))
}

/// Elements with this tag name.
pub fn elements<'a>(doc: &'a roxmltree::Document<'a>, tag: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants().filter(|n| n.has_tag_name(tag)).collect()
}

/// The text of every <text> element.
pub fn texts(doc: &roxmltree::Document<'_>) -> Vec<String> {
    elements(doc, "text")
        .iter()
        .map(|n| n.text().unwrap_or_default().trim().to_string())
        .collect()
}

/// The chart whose file name ends with `suffix`.
pub fn chart<'a>(r: &'a Rendered, suffix: &str) -> &'a str {
    r.charts
        .iter()
        .find(|c| c.file.ends_with(suffix))
        .map(|c| c.svg.as_str())
        .unwrap_or_else(|| {
            panic!(
                "no chart *{suffix} in {:?}",
                r.charts.iter().map(|c| &c.file).collect::<Vec<_>>()
            )
        })
}

/// The points of a polyline, in pixels.
pub fn points(line: &roxmltree::Node<'_, '_>) -> Vec<(f64, f64)> {
    line.attribute("points")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| {
            let (x, y) = p.split_once(',')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect()
}

/// The polylines of one colour with at least `min` points (a series, not a legend swatch).
pub fn series<'a>(
    doc: &'a roxmltree::Document<'a>,
    stroke: &str,
    min: usize,
) -> Vec<Vec<(f64, f64)>> {
    elements(doc, "polyline")
        .iter()
        .filter(|p| p.attribute("stroke") == Some(stroke))
        .map(points)
        .filter(|p| p.len() >= min)
        .collect()
}
