//! The node-pair matrix: a cell per client node (row) and server node (column), coloured from
//! red (the slowest pair) to green (the fastest), its value written in it; pairs not measured
//! stay grey.

use anyhow::Result;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use super::{draw, err, fit, frame, segment_label, titled, value_decimals, FONT};
use crate::text;

/// Most rows and columns drawn (a stored object may list any number of nodes).
pub const MAX_NODES: usize = 64;
const UNMEASURED: RGBColor = RGBColor(225, 225, 225);

/// One measured pair: the row (client node) and column (server node) indices and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub row: usize,
    pub column: usize,
    pub value: f64,
}

/// Clients as rows, servers as columns, a coloured cell per measured pair.
pub fn heatmap(
    title: &str,
    unit: &str,
    clients: &[String],
    servers: &[String],
    cells: &[Cell],
) -> Result<String> {
    let rows = clients.len().clamp(1, MAX_NODES);
    let columns = servers.len().clamp(1, MAX_NODES);
    let cells: Vec<&Cell> = cells
        .iter()
        .filter(|c| c.row < rows && c.column < columns)
        .collect();
    let values = cells.iter().map(|c| fit(c.value));
    let low = values.clone().fold(f64::INFINITY, f64::min);
    let high = values.clone().fold(0.0, f64::max);
    let decimals = value_decimals(values);
    let row_labels: Vec<String> = clients.iter().map(|c| text::label(c)).collect();
    let column_labels: Vec<String> = servers.iter().map(|c| text::label(c)).collect();
    let width = u32::try_from(columns.saturating_mul(110).saturating_add(220))
        .unwrap_or(u32::MAX)
        .clamp(480, 2400);
    let height = u32::try_from(rows.saturating_mul(44).saturating_add(160))
        .unwrap_or(u32::MAX)
        .clamp(300, 2400);
    // A segment per node, and one past the last: a range of one value would have no width.
    let (column_end, row_end) = (index(columns), index(rows));
    let caption = format!(
        "{title} ({}; rows: client node, columns: server node)",
        text::label(unit)
    );
    draw((width, height), |root| {
        let body = titled(root, &caption, 20)?;
        let mut chart = frame(&body, 160)
            .build_cartesian_2d(
                (0..column_end).into_segmented(),
                (0..row_end).into_segmented(),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(columns)
            .y_labels(rows)
            .x_label_formatter(&|v| segment_label(&column_labels, v))
            .y_label_formatter(&|v| segment_label(&row_labels, v))
            .draw()
            .map_err(err)?;
        let at = |i: usize| SegmentValue::Exact(i32::try_from(i).unwrap_or(i32::MAX));
        let mut all = vec![];
        for r in 0..rows {
            for c in 0..columns {
                all.push((r, c));
            }
        }
        chart
            .draw_series(all.iter().map(|(r, c)| {
                let value = cells.iter().find(|x| x.row == *r && x.column == *c);
                let colour = value.map_or(UNMEASURED, |v| shade(fit(v.value), low, high));
                let mut rect = Rectangle::new(
                    [
                        (at(*c), at(*r)),
                        (at(c.saturating_add(1)), at(r.saturating_add(1))),
                    ],
                    colour.filled(),
                );
                rect.set_margin(1, 1, 1, 1);
                rect
            }))
            .map_err(err)?;
        chart
            .draw_series(cells.iter().map(|cell| {
                EmptyElement::at((
                    SegmentValue::CenterOf(index(cell.column)),
                    SegmentValue::CenterOf(index(cell.row)),
                )) + Text::new(
                    text::num(fit(cell.value), decimals),
                    (-24, -7),
                    (FONT, 13).into_font().color(&BLACK),
                )
            }))
            .map_err(err)?;
        Ok(())
    })
}

fn index(i: usize) -> i32 {
    i32::try_from(i).unwrap_or(i32::MAX)
}

/// Red at `low`, yellow half way, green at `high` (all one colour when they are equal).
fn shade(v: f64, low: f64, high: f64) -> RGBColor {
    let span = high - low;
    let t = if span > 0.0 {
        ((v - low) / span).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let channel = |x: f64| x.round().clamp(0.0, 255.0) as u8;
    if t < 0.5 {
        RGBColor(215, channel(48.0 + t * 2.0 * 170.0), 39)
    } else {
        RGBColor(
            channel(215.0 - (t - 0.5) * 2.0 * 189.0),
            channel(218.0 - (t - 0.5) * 2.0 * 66.0),
            channel(39.0 + (t - 0.5) * 2.0 * 41.0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_per_pair_with_its_value_and_grey_for_pairs_not_measured() {
        let nodes: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let cells = vec![
            Cell {
                row: 0,
                column: 1,
                value: 9.5e9,
            },
            Cell {
                row: 1,
                column: 0,
                value: 2.5e9,
            },
            Cell {
                row: 7,
                column: 9,
                value: 1.0,
            }, // outside the matrix: not drawn
        ];
        let svg = heatmap("m", "bit/s", &nodes, &nodes, &cells).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("rows: client node"));
        // The fastest green, the slowest red, the 7 others unmeasured grey.
        assert!(svg.contains("fill=\"#1A9850\""), "green");
        assert!(svg.contains("fill=\"#D73027\""), "red");
        assert_eq!(svg.matches("fill=\"#E1E1E1\"").count(), 7);
        assert_eq!(shade(5.0, 5.0, 5.0), shade(1.0, 0.0, 1.0));
    }

    #[test]
    fn hostile_values_and_labels_are_drawn_safely() {
        let nodes = vec!["<script>".to_string(); 200];
        let cells = vec![
            Cell {
                row: 0,
                column: 0,
                value: f64::NAN,
            },
            Cell {
                row: 1,
                column: 0,
                value: f64::INFINITY,
            },
        ];
        let svg = heatmap("t", "u", &nodes, &nodes, &cells).unwrap();
        assert!(!svg.contains("<script>"));
    }

    /// The widths of the drawn cells (every rect but the white canvas) in `svg`.
    fn cell_widths(svg: &str) -> Vec<f64> {
        svg.split("<rect")
            .skip(1)
            .filter(|r| !r.contains("fill=\"#FFFFFF\""))
            .filter_map(|r| {
                let w = r.split("width=\"").nth(1)?.split('"').next()?;
                w.parse().ok()
            })
            .collect()
    }

    #[test]
    fn a_fan_in_of_one_column_has_cells_of_full_width() {
        let clients: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let servers = vec!["s".to_string()];
        let cells: Vec<Cell> = (0..3)
            .map(|row| Cell {
                row,
                column: 0,
                value: 1.0 + row as f64,
            })
            .collect();
        let svg = heatmap("fan-in", "Gbit/s", &clients, &servers, &cells).unwrap();
        let widths = cell_widths(&svg);
        assert_eq!(widths.len(), 3, "{svg}");
        assert!(widths.iter().all(|w| *w > 50.0), "{widths:?}");
    }
}
