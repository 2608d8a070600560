//! A swept case: each main figure against the swept parameter, one panel per figure stacked
//! over a shared x (log2 for sizes), one line per series (a second swept parameter), each
//! point with its 95% interval. Ticks sit on the swept values themselves.

use anyhow::Result;
use plotters::prelude::*;

use super::{
    axis_decimals, color, draw, err, fit, frame, legend, line_with_intervals, titled, top,
    value_decimals, Area, Point, Ticked, MAX_LINES,
};
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::FONT;
use crate::text;

/// Room right of the plot for the legend of several lines, in pixels.
const LEGEND_WIDTH: u32 = 150;
/// Most x ticks written; with more swept values, every n-th is.
const MAX_TICKS: usize = 16;

/// The swept parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct XAxis {
    pub desc: String,
    pub log2: bool,
    /// Values are bytes ("64 KiB"), else plain counts.
    pub bytes: bool,
}

impl XAxis {
    /// Where a value goes on the axis; None for one it cannot draw.
    fn place(&self, v: f64) -> Option<f64> {
        let x = if self.log2 { v.log2() } else { v };
        (v.is_finite() && v > 0.0 && x.is_finite()).then_some(x)
    }

    fn label(&self, x: f64) -> String {
        let v = if self.log2 { x.exp2() } else { x };
        // Saturating float-to-integer conversion of our own tick.
        let v = v.round() as u64;
        if self.bytes {
            text::bytes(v)
        } else {
            v.to_string()
        }
    }
}

/// One line: a series of the sweep (e.g. "4 streams"), its points at the swept values.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub name: String,
    pub points: Vec<Point>,
}

/// One figure: its panel's title, the unit on its axis, its lines.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    pub title: String,
    pub y_desc: String,
    pub lines: Vec<Line>,
}

/// The panels stacked under one title (at most [`MAX_LINES`] lines each).
pub fn sweep(title: &str, x: &XAxis, panels: &[Panel]) -> Result<String> {
    let mut xs: Vec<f64> = panels
        .iter()
        .flat_map(|p| p.lines.iter().flat_map(|l| l.points.iter()))
        .filter_map(|p| x.place(p.x))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let (lo, hi) = match (xs.first(), xs.last()) {
        (Some(lo), Some(hi)) => (*lo, *hi),
        _ => (0.0, 1.0),
    };
    // Room beside the outer points for their written values.
    let pad = ((hi - lo) * 0.1).max(0.6);
    let range = if x.log2 {
        (lo - pad)..(hi + pad)
    } else {
        0f64.min(lo - pad)..(hi + pad)
    };
    let every = xs.len().div_ceil(MAX_TICKS).max(1);
    let ticks: Vec<f64> = xs.iter().step_by(every).copied().collect();
    let height = u32::try_from(panels.len().max(1))
        .unwrap_or(1)
        .saturating_mul(380)
        .saturating_add(40);
    // Several lines: their legend goes in a column right of the plot, where it hides nothing.
    let beside = panels.iter().any(|p| p.lines.len() > 1);
    let width = if beside { 800 + LEGEND_WIDTH } else { 800 };
    draw((width, height), |root| {
        let body = titled(root, title, 22)?;
        for (area, panel) in body
            .split_evenly((panels.len().max(1), 1))
            .iter()
            .zip(panels)
        {
            draw_panel(area, x, &range, &ticks, panel, beside)?;
        }
        Ok(())
    })
}

fn draw_panel(
    area: &Area<'_>,
    x: &XAxis,
    range: &std::ops::Range<f64>,
    ticks: &[f64],
    panel: &Panel,
    beside: bool,
) -> Result<()> {
    let lines: Vec<(&str, Vec<(f64, Point)>)> = panel
        .lines
        .iter()
        .take(MAX_LINES)
        .map(|l| {
            let pts = l
                .points
                .iter()
                .filter(|p| p.mean.is_finite())
                .filter_map(|p| x.place(p.x).map(|at| (at, p.clone())))
                .collect();
            (l.name.as_str(), pts)
        })
        .collect();
    // Room above the lines for the legend of one line and for the values written.
    let ymax = top(lines.iter().flat_map(|l| l.1.iter().map(|p| p.1.high()))) * 1.25;
    let (plot, side) = if beside {
        let (w, _) = area.dim_in_pixel();
        let split = i32::try_from(w.saturating_sub(LEGEND_WIDTH)).unwrap_or(0);
        let (plot, side) = area.split_horizontally(split);
        (plot, Some(side))
    } else {
        (area.clone(), None)
    };
    let body = titled(&plot, &panel.title, 20)?;
    let mut chart = frame(&body, 80)
        .build_cartesian_2d(Ticked::new(range.clone(), ticks.to_vec()), 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(text::label(&x.desc))
        .y_desc(text::label(&panel.y_desc))
        .light_line_style(TRANSPARENT)
        .x_label_formatter(&|v| x.label(*v))
        .y_label_formatter(&|v| text::num(*v, axis_decimals(ymax)))
        .draw()
        .map_err(err)?;
    let single = lines.len() == 1;
    let written = value_decimals(lines.iter().flat_map(|l| l.1.iter().map(|p| p.1.mean)));
    for (k, (name, pts)) in lines.iter().enumerate() {
        let pts: Vec<(f64, Point)> = pts
            .iter()
            .map(|(at, p)| {
                let p = Point {
                    x: p.x,
                    mean: fit(p.mean),
                    ci: fit(p.ci),
                };
                (*at, p)
            })
            .collect();
        let values = single.then_some(written);
        line_with_intervals(&mut chart, color(k), name, &pts, values)?;
    }
    match side {
        Some(side) => side_legend(&side, lines.iter().map(|l| l.0)),
        None => legend(&mut chart, SeriesLabelPosition::UpperRight),
    }
}

/// The legend of several lines in its own column right of the plot: a swatch and a name each.
fn side_legend<'n>(area: &Area<'_>, names: impl Iterator<Item = &'n str>) -> Result<()> {
    for (k, name) in names.enumerate() {
        let row = i32::try_from(k).unwrap_or(i32::MAX).saturating_mul(18);
        let y = row.saturating_add(64);
        area.draw(&PathElement::new(
            vec![(8, y), (28, y)],
            color(k).stroke_width(2),
        ))
        .map_err(err)?;
        let style = (FONT, 12)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        area.draw(&Text::new(text::label(name), (34, y), style))
            .map_err(err)?;
    }
    Ok(())
}
