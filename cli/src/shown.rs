//! How a figure is shown: its unit converted for people (bit/s as Gbit/s, ratios as percent),
//! a column heading for the figures results carry, and the order of columns. Generic: a
//! figure this CLI does not know is shown by its own name and unit, after the known ones.

use crds::result::MetricStats;

use crate::text;

/// How a unit is shown: factor, unit shown, decimals (of a comparison; see [`TABLE_DECIMALS`]).
pub fn unit(unit: &str) -> (f64, &str, usize) {
    match unit {
        "bit/s" => (1e-9, "Gbit/s", 3),
        "ratio" => (100.0, "%", 3),
        "count" => (1.0, "count", 1),
        u => (1.0, u, 2),
    }
}

/// Decimals a report table shows of values of 1 or more; smaller values get more
/// (text::decimals_for). A comparison shows more: its deltas are small.
pub const TABLE_DECIMALS: usize = 2;

/// The figures results carry, in the order tables show them, with the words a heading uses.
const KNOWN: [(&str, &str); 28] = [
    ("rps", "requests/s"),
    ("receiverBitsPerSecond", "receiver"),
    ("senderBitsPerSecond", "sender"),
    ("offeredBitsPerSecond", "offered"),
    ("transactionsPerSecond", "transactions"),
    ("p50Ms", "p50"),
    ("p90Ms", "p90"),
    ("p99Ms", "p99"),
    ("p999Ms", "p99.9"),
    ("maxMs", "max"),
    ("lossPercent", "loss"),
    ("scheduleMissedPercent", "schedule missed"),
    ("jitterMs", "jitter"),
    ("jitterMaxMs", "worst stream's jitter"),
    ("returnJitterMs", "return jitter"),
    ("returnJitterMaxMs", "worst return jitter"),
    ("errorRate", "error rate"),
    ("retransmits", "retransmits"),
    ("failures", "failures"),
    (
        "clientCpuUsPerTransaction",
        "client process CPU per transaction",
    ),
    (
        "serverCpuUsPerTransaction",
        "server process CPU per transaction",
    ),
    (
        "clientNodeCpuUsPerTransaction",
        "client node CPU per transaction",
    ),
    (
        "serverNodeCpuUsPerTransaction",
        "server node CPU per transaction",
    ),
    ("cpuSecondsPerGb", "process CPU per GB"),
    ("nodeCpuSecondsPerGb", "node CPU per GB"),
    ("probeP50Ms", "probe p50"),
    ("probeP90Ms", "probe p90"),
    ("probeP99Ms", "probe p99"),
];

/// Where a figure goes among columns: known figures in [`KNOWN`] order, then the others.
pub fn rank(name: &str) -> usize {
    KNOWN
        .iter()
        .position(|k| k.0 == name)
        .unwrap_or(KNOWN.len())
}

/// A table column of one figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    pub heading: String,
    /// The unit shown ("Gbit/s", "ms"), cleaned; may be empty.
    pub unit: String,
    pub factor: f64,
    pub decimals: usize,
}

impl Column {
    /// The column of a figure, headed by its words (or its name) and the unit shown.
    pub fn of(f: &MetricStats) -> Column {
        let (factor, shown, decimals) = unit(&f.unit);
        let words = KNOWN
            .iter()
            .find(|k| k.0 == f.name)
            .map_or_else(|| text::label(&f.name), |k| k.1.to_string());
        let unit = text::label(shown);
        let heading = if unit.is_empty() || unit == "count" || words.ends_with(&unit) {
            words
        } else {
            format!("{words} ({unit})")
        };
        Column {
            name: f.name.clone(),
            heading,
            unit,
            factor,
            decimals: decimals.min(TABLE_DECIMALS),
        }
    }

    /// The figure as "mean ± ci" in the unit shown, "-" when absent.
    pub fn cell(&self, f: Option<&MetricStats>) -> String {
        f.map_or_else(
            || "-".into(),
            |f| text::interval(f.mean * self.factor, f.ci95 * self.factor, self.decimals),
        )
    }
}

/// The columns of some measurements' figures: `first` (the main figures, when present) in
/// that order, then every other figure any of them has, known ones in [`KNOWN`] order, others
/// in order of first appearance; at most `max` columns, and how many more there were. Each
/// column shows enough decimals for its smallest value (text::decimals_for).
pub fn columns<'a>(
    figures: impl Iterator<Item = &'a MetricStats>,
    first: &[&str],
    max: usize,
) -> (Vec<Column>, usize) {
    let seen: Vec<&MetricStats> = figures.collect();
    let mut all: Vec<&MetricStats> = vec![];
    for f in seen.iter().copied() {
        if !all.iter().any(|a| a.name == f.name) {
            all.push(f);
        }
    }
    // Stable: ties (unknown figures) keep their order of first appearance.
    all.sort_by_key(|f| {
        let main = first.iter().position(|m| *m == f.name);
        (main.is_none(), main.unwrap_or(0), rank(&f.name))
    });
    let hidden = all.len().saturating_sub(max);
    let mut columns: Vec<Column> = all.into_iter().take(max).map(Column::of).collect();
    for c in &mut columns {
        let values = seen
            .iter()
            .filter(|f| f.name == c.name)
            .map(|f| f.mean * c.factor);
        c.decimals = text::decimals_for(values, c.decimals);
    }
    (columns, hidden)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::history::Better;
    use crds::stats::metric;

    #[test]
    fn columns_put_the_main_figures_first_then_known_then_unknown_figures() {
        let figs = [
            metric("zeta", "widgets", Better::Higher, vec![1.0]),
            metric("p99Ms", "ms", Better::Lower, vec![1.0]),
            metric("lossPercent", "%", Better::Lower, vec![1.0]),
            metric("alpha", "", Better::Higher, vec![1.0]),
            metric(
                "receiverBitsPerSecond",
                "bit/s",
                Better::Higher,
                vec![9.41e9],
            ),
            metric("p99Ms", "ms", Better::Lower, vec![2.0]),
        ];
        let (cols, hidden) = columns(figs.iter(), &["receiverBitsPerSecond", "lossPercent"], 10);
        let heads: Vec<&str> = cols.iter().map(|c| c.heading.as_str()).collect();
        assert_eq!(
            heads,
            [
                "receiver (Gbit/s)",
                "loss (%)",
                "p99 (ms)",
                "zeta (widgets)",
                "alpha"
            ]
        );
        assert_eq!(hidden, 0);
        assert_eq!(cols[0].cell(Some(&figs[4])), "9.41");
        assert_eq!(cols[0].cell(None), "-");
        assert_eq!(
            cols[2].cell(Some(&figs[1])),
            "1.00",
            "1 and 2 ms need no more decimals"
        );
        let small = [metric("p99Ms", "ms", Better::Lower, vec![0.046])];
        let (cols, _) = columns(small.iter(), &[], 10);
        assert_eq!(cols[0].cell(Some(&small[0])), "0.0460");
        let (cut, hidden) = columns(figs.iter(), &[], 2);
        assert_eq!((cut.len(), hidden), (2, 3));
    }

    #[test]
    fn hostile_figure_names_and_units_are_cleaned() {
        let mut f = metric("a\nb", "u\u{1}nit", Better::Higher, vec![1.0]);
        f.mean = f64::NAN;
        let c = Column::of(&f);
        assert_eq!(c.heading, "a b (unit)");
        assert_eq!(c.cell(Some(&f)), "n/a");
    }
}
