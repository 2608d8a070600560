//! SVG charts drawn with plotters (SVG backend only), one module per chart; this module holds
//! what they share: the canvas and frame ([`draw`], [`frame`]), colours, the legend, a line of
//! means with their intervals, and the sanitising of values. plotters XML-escapes text; labels
//! are cleaned first (text::label) so characters XML cannot hold never reach it. Values are
//! sanitised here: nothing that is not finite is drawn, and axes always have a positive span.

mod bars;
mod distribution;
mod heatmap;
mod history;
mod scaling;
mod sweep;

pub use bars::{bars, Bar};
pub use distribution::{distribution, Curve};
pub use heatmap::{heatmap, Cell};
pub use history::{history, Mark, Series};
pub use scaling::scaling;
pub use sweep::{sweep, Line, Panel, XAxis};

use anyhow::{anyhow, Result};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, SegmentValue};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

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

/// Most lines one chart draws: one colour each.
pub const MAX_LINES: usize = PALETTE.len();

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

/// Decimals of a value axis' labels that reaches `ymax`.
fn axis_decimals(ymax: f64) -> usize {
    if ymax >= 100.0 {
        0
    } else if ymax >= 10.0 {
        1
    } else {
        text::decimals_for(std::iter::once(ymax), 1)
    }
}

/// Decimals of the values written beside points: none from 100 up, else enough for the
/// smallest (text::decimals_for, at least 2).
fn value_decimals(values: impl Iterator<Item = f64> + Clone) -> usize {
    if values.clone().filter(|v| v.is_finite()).all(|v| v >= 100.0) {
        0
    } else {
        text::decimals_for(values, 2)
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

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Cartesian<'a, X, Y> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>;

/// An SVG of `size` pixels on a white canvas, drawn by `paint`.
fn draw(size: (u32, u32), paint: impl FnOnce(&Area<'_>) -> Result<()>) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        paint(&root)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The frame every chart shares: margins and the room for the axes' labels (the title is
/// drawn above it by [`titled`]).
fn frame<'a, 'b>(area: &'a Area<'b>, y_label_area: u32) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(area);
    b.margin(16)
        .x_label_area_size(44)
        .y_label_area_size(y_label_area);
    b
}

/// The area below `title`, drawn whole in as many centred lines as the area's width needs (a
/// title is never cut: it says what the chart compares). Each line holds at most as many
/// characters as fit at `size` pixels (about 0.55 em each).
fn titled<'a>(area: &Area<'a>, title: &str, size: u32) -> Result<Area<'a>> {
    let (width, _) = area.dim_in_pixel();
    let per_char = (f64::from(size) * 0.55).max(1.0);
    // Pixels to a character count: small, non-negative, so the cast is exact.
    let fits = (f64::from(width.saturating_sub(32)) / per_char).floor() as usize;
    let mut body = area.clone();
    for line in text::wrap(title, fits.max(16)) {
        body = body.titled(&line, (FONT, size)).map_err(err)?;
    }
    Ok(body)
}

/// A line through means, the 95% interval of each and a dot on each; with `values`, each
/// mean is written above its interval with that many decimals.
fn line_with_intervals<XR>(
    chart: &mut Cartesian<'_, XR, RangedCoordf64>,
    c: RGBColor,
    label: &str,
    points: &[(XR::ValueType, Point)],
    values: Option<usize>,
) -> Result<()>
where
    XR: Ranged,
    XR::ValueType: Clone + 'static,
{
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|(x, p)| (x.clone(), p.mean)),
            c.stroke_width(2),
        ))
        .map_err(err)?
        .label(text::label(label))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    chart
        .draw_series(
            points
                .iter()
                .map(|(x, p)| ErrorBar::new_vertical(x.clone(), p.low(), p.mean, p.high(), c, 10)),
        )
        .map_err(err)?;
    chart
        .draw_series(
            points
                .iter()
                .map(|(x, p)| Circle::new((x.clone(), p.mean), 4, c.filled())),
        )
        .map_err(err)?;
    if let Some(decimals) = values {
        chart
            .draw_series(points.iter().map(|(x, p)| {
                EmptyElement::at((x.clone(), p.high()))
                    + Text::new(
                        text::num(p.mean, decimals),
                        (8, -16),
                        (FONT, 13).into_font().color(&BLACK),
                    )
            }))
            .map_err(err)?;
    }
    Ok(())
}

/// A linear f64 axis whose ticks are exactly the given values (plotters' own WithKeyPoints
/// over f64 cannot format its labels; every chart using this one gives a label formatter).
#[derive(Clone)]
struct Ticked {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ticked {
    fn new(range: std::ops::Range<f64>, ticks: Vec<f64>) -> Ticked {
        Ticked {
            inner: range.into(),
            ticks,
        }
    }
}

impl Ranged for Ticked {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            vec![]
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// The middle of the i-th segment of a segmented axis.
fn center(i: usize) -> SegmentValue<i32> {
    SegmentValue::CenterOf(i32::try_from(i).unwrap_or(i32::MAX))
}

/// The label of a segmented axis' tick: the i-th label at the middle of segment i, else none.
fn segment_label(labels: &[String], v: &SegmentValue<i32>) -> String {
    match v {
        SegmentValue::CenterOf(i) => usize::try_from(*i)
            .ok()
            .and_then(|i| labels.get(i))
            .cloned()
            .unwrap_or_default(),
        _ => String::new(),
    }
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
