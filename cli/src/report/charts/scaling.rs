//! Throughput against size, with the dashed line of linear scaling from the first point.

use anyhow::Result;
use plotters::prelude::*;

use super::{
    draw, err, fit, frame, legend, line_with_intervals, titled, top, Point, LINEAR, MEASURED,
};
use crate::text;

/// Throughput against size, with the line of linear scaling from the first point.
pub fn scaling(title: &str, x_desc: &str, y_desc: &str, points: &[Point]) -> Result<String> {
    let pts: Vec<Point> = points
        .iter()
        .filter(|p| p.x.is_finite() && p.x > 0.0 && p.mean.is_finite())
        .map(|p| Point {
            x: fit(p.x),
            mean: fit(p.mean),
            ci: fit(p.ci),
        })
        .collect();
    let linear: Vec<(f64, f64)> = match pts.first() {
        Some(first) => pts
            .iter()
            .map(|p| (p.x, fit(first.mean * p.x / first.x)))
            .collect(),
        None => vec![],
    };
    let xmax = top(pts.iter().map(|p| p.x));
    let ymax = top(pts
        .iter()
        .map(Point::high)
        .chain(linear.iter().map(|l| l.1)));
    draw((800, 480), |root| {
        let body = titled(root, title, 20)?;
        let mut chart = frame(&body, 80)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(text::label(x_desc))
            .y_desc(text::label(y_desc))
            .light_line_style(TRANSPARENT)
            .y_label_formatter(&|v| text::num(*v, 0))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(DashedLineSeries::new(linear, 8, 6, LINEAR.stroke_width(2)))
            .map_err(err)?
            .label("linear scaling from the first step")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], LINEAR.stroke_width(2)));
        let measured: Vec<(f64, Point)> = pts.iter().map(|p| (p.x, p.clone())).collect();
        line_with_intervals(
            &mut chart,
            MEASURED,
            "measured: mean ± 95% CI",
            &measured,
            Some(0),
        )?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}
