//! The main figure of each step or case over a benchmark's runs, oldest first, with a dashed
//! vertical line where a change point began a new regime.

use anyhow::Result;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use super::{
    center, color, draw, err, fit, frame, legend, line_with_intervals, segment_label, titled, top,
    Point, FONT,
};
use crate::text;

/// One line of a history chart: a step's or case's main figure, one point per run.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    /// (run number, mean, ci); runs without this measurement are left out.
    pub points: Vec<(usize, f64, f64)>,
}

/// A change point on a history chart: a dashed line before the first run of the new regime.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    /// The run (x index) at which the new regime began.
    pub run: usize,
    /// "step 0: worse -12%".
    pub label: String,
    /// Drawn red when worse, green when better.
    pub worse: bool,
}

/// Most change-point marks drawn (their labels stack at the top).
pub const MAX_MARKS: usize = 8;
const WORSE: RGBColor = RGBColor(178, 24, 43);
const BETTER: RGBColor = RGBColor(27, 120, 55);

/// Each series over the runs, oldest first; `runs` labels the x axis; `marks` are drawn where
/// they fall on it (at most [`MAX_MARKS`]).
pub fn history(
    title: &str,
    y_desc: &str,
    runs: &[String],
    series: &[Series],
    marks: &[Mark],
) -> Result<String> {
    let n = runs.len().max(1);
    let runs: Vec<String> = runs.iter().map(|r| text::label(r)).collect();
    // Room above the lines for the legend.
    let ymax = top(series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| fit(p.1) + fit(p.2))))
        * 1.3;
    let last = i32::try_from(n).unwrap_or(i32::MAX).saturating_sub(1);
    draw((800, 480), |root| {
        let body = titled(root, title, 20)?;
        let mut chart = frame(&body, 80)
            .build_cartesian_2d((0..last).into_segmented(), 0f64..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .y_label_formatter(&|v| text::num(*v, if ymax < 100.0 { 1 } else { 0 }))
            .y_desc(text::label(y_desc))
            .x_labels(n)
            .x_label_formatter(&|v| segment_label(&runs, v))
            .draw()
            .map_err(err)?;
        for (k, s) in series.iter().enumerate() {
            let points: Vec<(SegmentValue<i32>, Point)> = s
                .points
                .iter()
                .map(|p| {
                    let point = Point {
                        x: 0.0,
                        mean: fit(p.1),
                        ci: fit(p.2),
                    };
                    (center(p.0), point)
                })
                .collect();
            line_with_intervals(&mut chart, color(k), &s.name, &points, None)?;
        }
        let on_axis = marks.iter().filter(|m| m.run > 0 && m.run < n);
        for (k, m) in on_axis.take(MAX_MARKS).enumerate() {
            let c = if m.worse { WORSE } else { BETTER };
            let x = SegmentValue::Exact(i32::try_from(m.run).unwrap_or(i32::MAX));
            chart
                .draw_series(DashedLineSeries::new(
                    [(x.clone(), 0.0), (x.clone(), ymax)],
                    6,
                    4,
                    c.stroke_width(2),
                ))
                .map_err(err)?;
            // Labels stacked down from the top, clear of the legend at the upper left.
            let row = i32::try_from(k).unwrap_or(0).saturating_mul(16);
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((x, ymax))
                        + Text::new(
                            text::label(&m.label),
                            (4, row.saturating_add(4)),
                            (FONT, 13).into_font().color(&c),
                        ),
                ))
                .map_err(err)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}
