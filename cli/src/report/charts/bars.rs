//! A bar per case, coloured by group, with the interval on each bar and its value above it.

use anyhow::Result;
use plotters::coord::ranged1d::{SegmentValue, SegmentedCoord};
use plotters::coord::types::{RangedCoordf64, RangedCoordi32};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{
    axis_decimals, center, color, draw, err, fit, frame, legend, segment_label, titled, top,
    value_decimals, Cartesian, Point, FONT,
};
use crate::text;

/// One bar: a case, its group (offload profile) and its value with the 95% interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    pub label: String,
    pub group: String,
    pub mean: f64,
    pub ci: f64,
}

/// A bar per case, coloured by group, with the interval on each bar and its value above it.
pub fn bars(title: &str, y_desc: &str, bars: &[Bar]) -> Result<String> {
    let n = bars.len().max(1);
    let groups = distinct(bars.iter().map(|b| b.group.as_str()));
    let labels: Vec<String> = bars.iter().map(|b| text::label(&b.label)).collect();
    let ymax = top(bars.iter().map(|b| fit(b.mean) + fit(b.ci)));
    let width = u32::try_from(n.saturating_mul(150))
        .unwrap_or(u32::MAX)
        .clamp(640, 2400);
    let last = i32::try_from(n).unwrap_or(i32::MAX).saturating_sub(1);
    draw((width, 480), |root| {
        let body = titled(root, title, 20)?;
        let mut chart = frame(&body, 70)
            .build_cartesian_2d((0..last).into_segmented(), 0f64..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(TRANSPARENT)
            .y_label_formatter(&|v| text::num(*v, axis_decimals(ymax).max(1)))
            .y_desc(text::label(y_desc))
            .x_labels(n)
            .x_label_formatter(&|v| segment_label(&labels, v))
            .draw()
            .map_err(err)?;
        for (g, name) in groups.iter().enumerate() {
            let c = color(g);
            chart
                .draw_series(std::iter::empty::<Circle<(SegmentValue<i32>, f64), i32>>())
                .map_err(err)?
                .label(text::label(name))
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
        }
        draw_bars(&mut chart, bars, &groups)?;
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    })
}

fn draw_bars(
    chart: &mut Cartesian<'_, SegmentedCoord<RangedCoordi32>, RangedCoordf64>,
    bars: &[Bar],
    groups: &[String],
) -> Result<()> {
    let written = value_decimals(bars.iter().map(|b| b.mean));
    let exact = |i: usize| SegmentValue::Exact(i32::try_from(i).unwrap_or(i32::MAX));
    let group_of = |b: &Bar| groups.iter().position(|g| *g == b.group).unwrap_or(0);
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let mut r = Rectangle::new(
                [(exact(i), 0.0), (exact(i.saturating_add(1)), fit(b.mean))],
                color(group_of(b)).filled(),
            );
            r.set_margin(0, 0, 18, 18);
            r
        }))
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let p = Point {
                x: 0.0,
                mean: fit(b.mean),
                ci: fit(b.ci),
            };
            ErrorBar::new_vertical(center(i), p.low(), p.mean, p.high(), BLACK, 12)
        }))
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let style = (FONT, 14)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Bottom));
            EmptyElement::at((center(i), fit(b.mean) + fit(b.ci)))
                + Text::new(text::num(b.mean, written), (0, -10), style)
        }))
        .map_err(err)?;
    Ok(())
}

/// The distinct names, in order of first appearance.
fn distinct<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for n in names {
        if !out.iter().any(|o| o == n) {
            out.push(n.to_string());
        }
    }
    out
}
