//! The latency distribution of steps or cases as an HdrHistogram percentile plot: x is the
//! percentile on a log scale of 1 / (1 - p) (ticks 0%, 90%, 99%, 99.9%, 99.99%, 99.999%), y
//! the latency in ms; one line per curve, a dot on each marked percentile, and with a single
//! curve each marked percentile's value written beside it ("p99: 10.75 ms").

use anyhow::Result;
use plotters::prelude::*;

use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{
    axis_decimals, color, draw, err, fit, frame, legend, titled, top, value_decimals, Ticked, FONT,
};
use crate::latency::{percentile, At, MAX_NINES};
use crate::text;

/// One step's or case's distribution.
#[derive(Clone, Debug, PartialEq)]
pub struct Curve {
    pub name: String,
    /// Ascending in nines.
    pub points: Vec<At>,
    /// Marked percentiles: label ("p99") and point.
    pub marks: Vec<(String, At)>,
}

/// A tick's percentile: 0 -> "0%", 1 -> "90%", 3 -> "99.9%".
fn tick(nines: f64) -> String {
    let decimals = usize::try_from((nines.round() as i64).saturating_sub(2)).unwrap_or(0);
    format!("{}%", text::num(percentile(nines) * 100.0, decimals))
}

/// The curves on one chart (the caller keeps them to a readable few).
pub fn distribution(title: &str, curves: &[Curve]) -> Result<String> {
    let nines = |a: &At| fit(a.nines).min(MAX_NINES);
    let last = curves
        .iter()
        .flat_map(|c| c.points.iter().map(nines))
        .fold(0.0, f64::max);
    // Whole nines, at least 90 %: 1 ..= 5 ticks past 0, and room for the last tick's label.
    let xmax = last.ceil().clamp(1.0, MAX_NINES);
    let ticks: Vec<f64> = (0..=5u8).map(f64::from).filter(|t| *t <= xmax).collect();
    let ymax = top(curves.iter().flat_map(|c| c.points.iter().map(|a| a.ms)));
    let decimals = axis_decimals(ymax);
    let single = curves.len() == 1;
    let written = value_decimals(curves.iter().flat_map(|c| c.marks.iter().map(|m| m.1.ms)));
    draw((800, 480), |root| {
        let body = titled(root, title, 20)?;
        let mut chart = frame(&body, 80)
            .build_cartesian_2d(Ticked::new(0f64..xmax + 0.12, ticks.clone()), 0f64..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("latency (ms)")
            .light_line_style(TRANSPARENT)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| text::num(*v, decimals))
            .draw()
            .map_err(err)?;
        for (k, c) in curves.iter().enumerate() {
            let colour = color(k);
            let pts = |points: &mut dyn Iterator<Item = &At>| -> Vec<(f64, f64)> {
                points.map(|a| (nines(a), fit(a.ms))).collect()
            };
            chart
                .draw_series(LineSeries::new(
                    pts(&mut c.points.iter()),
                    colour.stroke_width(2),
                ))
                .map_err(err)?
                .label(text::label(&c.name))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            let marks = pts(&mut c.marks.iter().map(|m| &m.1));
            chart
                .draw_series(marks.iter().map(|p| Circle::new(*p, 3, colour.filled())))
                .map_err(err)?;
            if single {
                chart
                    .draw_series(c.marks.iter().zip(&marks).map(|((label, a), p)| {
                        // Above and left of its dot (the curve rises to the right), except
                        // near the y axis.
                        let (h, dx) = if a.nines < 0.5 {
                            (HPos::Left, 6)
                        } else {
                            (HPos::Right, -6)
                        };
                        let style = (FONT, 12)
                            .into_font()
                            .color(&BLACK)
                            .pos(Pos::new(h, VPos::Bottom));
                        EmptyElement::at(*p)
                            + Text::new(
                                format!("{}: {} ms", text::label(label), text::num(a.ms, written)),
                                (dx, -6),
                                style,
                            )
                    }))
                    .map_err(err)?;
            }
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}
