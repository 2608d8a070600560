//! SVG charts drawn with plotters (SVG backend only). plotters XML-escapes text; labels are
//! cleaned first (text::label) so characters XML cannot hold never reach it. Values are
//! sanitised here: nothing that is not finite is drawn, and axes always have a positive span.

use anyhow::{anyhow, Result};
use plotters::coord::ranged1d::{SegmentValue, SegmentedCoord};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::text;

/// Largest value drawn; anything above is clamped (a stored object may claim any number).
const MAX_VALUE: f64 = 1e15;
const FONT: &str = "sans-serif";
const MEASURED: RGBColor = RGBColor(31, 119, 180);
const LINEAR: RGBColor = RGBColor(120, 120, 120);
/// Bar and series colours, in order (colour-blind friendly).
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn color(i: usize) -> RGBColor {
    PALETTE.get(i % PALETTE.len()).copied().unwrap_or(MEASURED)
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("cannot draw the chart: {e}")
}

/// A value fit to draw: finite, within [0, MAX_VALUE].
fn fit(v: f64) -> f64 {
    if v.is_finite() {
        v.clamp(0.0, MAX_VALUE)
    } else {
        0.0
    }
}

/// The top of a value axis: a bit above the largest value, never 0.
fn top(values: impl Iterator<Item = f64>) -> f64 {
    let max = values.map(fit).fold(0.0, f64::max);
    if max > 0.0 {
        max * 1.12
    } else {
        1.0
    }
}

/// One measured point with its 95% interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub x: f64,
    pub mean: f64,
    pub ci: f64,
}

impl Point {
    fn low(&self) -> f64 {
        fit(self.mean - fit(self.ci))
    }
    fn high(&self) -> f64 {
        fit(self.mean + fit(self.ci))
    }
}

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
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(text::label(title), (FONT, 20))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(80)
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
        measured(&mut chart, &pts)?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

type Cartesian<'a, X, Y> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>;

/// The measured line, its points, their intervals and their values.
fn measured(
    chart: &mut Cartesian<
        '_,
        plotters::coord::types::RangedCoordf64,
        plotters::coord::types::RangedCoordf64,
    >,
    pts: &[Point],
) -> Result<()> {
    chart
        .draw_series(LineSeries::new(
            pts.iter().map(|p| (p.x, p.mean)),
            MEASURED.stroke_width(2),
        ))
        .map_err(err)?
        .label("measured: mean ± 95% CI")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], MEASURED.stroke_width(2)));
    chart
        .draw_series(
            pts.iter()
                .map(|p| ErrorBar::new_vertical(p.x, p.low(), p.mean, p.high(), MEASURED, 10)),
        )
        .map_err(err)?;
    chart
        .draw_series(
            pts.iter()
                .map(|p| Circle::new((p.x, p.mean), 4, MEASURED.filled())),
        )
        .map_err(err)?;
    chart
        .draw_series(pts.iter().map(|p| {
            EmptyElement::at((p.x, p.high()))
                + Text::new(
                    text::num(p.mean, 0),
                    (8, -16),
                    (FONT, 13).into_font().color(&BLACK),
                )
        }))
        .map_err(err)?;
    Ok(())
}

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
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(text::label(title), (FONT, 20))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d((0..last).into_segmented(), 0f64..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(TRANSPARENT)
            .y_label_formatter(&|v| text::num(*v, 1))
            .y_desc(text::label(y_desc))
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => usize::try_from(*i)
                    .ok()
                    .and_then(|i| labels.get(i))
                    .cloned()
                    .unwrap_or_default(),
                _ => String::new(),
            })
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
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn draw_bars(
    chart: &mut Cartesian<
        '_,
        SegmentedCoord<plotters::coord::types::RangedCoordi32>,
        plotters::coord::types::RangedCoordf64,
    >,
    bars: &[Bar],
    groups: &[String],
) -> Result<()> {
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
                + Text::new(text::num(b.mean, 2), (0, -10), style)
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
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(text::label(title), (FONT, 20))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d((0..last).into_segmented(), 0f64..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .y_label_formatter(&|v| text::num(*v, if ymax < 100.0 { 1 } else { 0 }))
            .y_desc(text::label(y_desc))
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => usize::try_from(*i)
                    .ok()
                    .and_then(|i| runs.get(i))
                    .cloned()
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .draw()
            .map_err(err)?;
        for (k, s) in series.iter().enumerate() {
            run_line(&mut chart, color(k), s)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn center(i: usize) -> SegmentValue<i32> {
    SegmentValue::CenterOf(i32::try_from(i).unwrap_or(i32::MAX))
}

/// One series of a history chart: its line, intervals and points.
fn run_line(
    chart: &mut Cartesian<
        '_,
        SegmentedCoord<plotters::coord::types::RangedCoordi32>,
        plotters::coord::types::RangedCoordf64,
    >,
    c: RGBColor,
    s: &Series,
) -> Result<()> {
    let pts: Vec<(SegmentValue<i32>, f64, f64)> = s
        .points
        .iter()
        .map(|p| (center(p.0), fit(p.1), fit(p.2)))
        .collect();
    chart
        .draw_series(LineSeries::new(
            pts.iter().map(|p| (p.0.clone(), p.1)),
            c.stroke_width(2),
        ))
        .map_err(err)?
        .label(text::label(&s.name))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    chart
        .draw_series(pts.iter().map(|p| {
            ErrorBar::new_vertical(p.0.clone(), fit(p.1 - p.2), p.1, fit(p.1 + p.2), c, 8)
        }))
        .map_err(err)?;
    chart
        .draw_series(
            pts.iter()
                .map(|p| Circle::new((p.0.clone(), p.1), 4, c.filled())),
        )
        .map_err(err)?;
    Ok(())
}

/// The legend box of a chart.
fn legend<X: Ranged, Y: Ranged>(
    chart: &mut Cartesian<'_, X, Y>,
    position: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}
