//! The main figure of each step or case over a benchmark's runs, oldest first.

use anyhow::Result;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use super::{
    center, color, draw, err, fit, frame, legend, line_with_intervals, segment_label, top, Point,
};
use crate::text;

/// One line of a history chart: a step's or case's main figure, one point per run.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    /// (run number, mean, ci); runs without this measurement are left out.
    pub points: Vec<(usize, f64, f64)>,
}

/// Each series over the runs, oldest first; `runs` labels the x axis.
pub fn history(title: &str, y_desc: &str, runs: &[String], series: &[Series]) -> Result<String> {
    let n = runs.len().max(1);
    let runs: Vec<String> = runs.iter().map(|r| text::label(r)).collect();
    // Room above the lines for the legend.
    let ymax = top(series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| fit(p.1) + fit(p.2))))
        * 1.3;
    let last = i32::try_from(n).unwrap_or(i32::MAX).saturating_sub(1);
    draw((800, 480), |root| {
        let mut chart = frame(root, title, 80)
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
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}
