//! The latency of a step or case from its merged HDR histogram (microseconds, decoded only by
//! protocol's bounded decoder): exact percentiles, and the distribution as an HdrHistogram
//! percentile plot draws it. Its x is the "nines" of a percentile p, log10(1 / (1 - p)): 0 at
//! 0 %, 1 at 90 %, 2 at 99 %, ... 5 at 99.999 %. Invariants: the curve is sampled from
//! value_at_quantile at increasing x, so its latencies never decrease; it stops where the
//! samples stop resolving percentiles (x = log10(samples), at most [`MAX_NINES`]); every value
//! is finite. Pure.

/// The last percentile drawn: 99.999 %.
pub const MAX_NINES: f64 = 5.0;
/// Points of the curve per nine (101 points over 0 .. 99.999 %).
const POINTS_PER_NINE: f64 = 20.0;

/// The percentiles marked on a curve and listed in tables: label and nines.
pub const MARKS: [(&str, f64); 6] = [
    ("p50", std::f64::consts::LOG10_2),
    ("p90", 1.0),
    ("p99", 2.0),
    ("p99.9", 3.0),
    ("p99.99", 4.0),
    ("p99.999", 5.0),
];

/// A percentile (0 <= p < 1) as nines, log10(1 / (1 - p)).
pub fn nines(p: f64) -> f64 {
    -(1.0 - p).log10()
}

/// The percentile of some nines, 1 - 10^-x.
pub fn percentile(nines: f64) -> f64 {
    1.0 - 10f64.powf(-nines)
}

/// Exact latency over every request or transaction of a step or case (milliseconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Merged {
    pub requests: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// A point of the curve or a marked percentile: x in nines, latency in ms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct At {
    pub nines: f64,
    pub ms: f64,
}

/// What a histogram says: its percentiles, the curve and its marked percentiles.
#[derive(Clone, Debug, PartialEq)]
pub struct Latency {
    pub merged: Merged,
    /// Ascending in nines, never decreasing in ms; empty when the histogram holds no sample.
    pub curve: Vec<At>,
    /// The percentiles of [`MARKS`] the samples resolve, with their labels.
    pub marks: Vec<(&'static str, At)>,
}

/// Decodes a histogram (bounded: protocol::report::histogram) and reads it.
pub fn read(histogram: &str) -> Result<Latency, String> {
    let h = protocol::report::histogram::decode(histogram)?;
    // Microseconds to ms; u64 -> f64 cannot fail (values are at most 1 h in us).
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let at = |nines: f64| At {
        nines,
        ms: ms(percentile(nines)),
    };
    let requests = h.len();
    let merged = Merged {
        requests,
        p50: ms(0.5),
        p90: ms(0.9),
        p99: ms(0.99),
        p999: ms(0.999),
        max: h.max() as f64 / 1000.0,
    };
    if requests == 0 {
        return Ok(Latency {
            merged,
            curve: vec![],
            marks: vec![],
        });
    }
    // Snapped to 1e-9 so that 1000 samples resolve exactly 3 nines (99.9 %).
    let last = ((requests as f64).log10() * 1e9).round() / 1e9;
    let last = last.clamp(0.0, MAX_NINES);
    let mut xs: Vec<f64> = (0..=100u32)
        .map(|k| f64::from(k) / POINTS_PER_NINE)
        .take_while(|x| *x < last)
        .chain(MARKS.iter().map(|m| m.1).filter(|x| *x <= last))
        .chain(std::iter::once(last))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    let marks = MARKS
        .iter()
        .filter(|m| m.1 <= last)
        .map(|(label, x)| (*label, at(*x)))
        .collect();
    Ok(Latency {
        merged,
        curve: xs.into_iter().map(at).collect(),
        marks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(samples_us: impl Iterator<Item = u64>) -> String {
        let mut h = protocol::report::histogram::new_latency_histogram();
        for v in samples_us {
            h.record(v).unwrap();
        }
        protocol::report::histogram::encode(&h).unwrap()
    }

    #[test]
    fn nines_place_the_percentiles_of_an_hdr_plot() {
        assert!((nines(0.99) - 2.0).abs() < 1e-9);
        assert!((nines(0.99999) - 5.0).abs() < 1e-6);
        assert_eq!(nines(0.0), 0.0);
        assert!((percentile(3.0) - 0.999).abs() < 1e-12);
    }

    #[test]
    fn the_curve_climbs_to_the_resolved_percentiles_and_marks_them_exactly() {
        // 1..=100000 us: p99 is 99 ms, and 100000 samples resolve 99.999 %.
        let l = read(&encoded(1..=100_000)).unwrap();
        assert_eq!(l.merged.requests, 100_000);
        assert!((l.merged.p99 - 99.0).abs() < 0.1, "{}", l.merged.p99);
        assert!(l.curve.windows(2).all(|w| w[0].nines < w[1].nines));
        assert!(l.curve.windows(2).all(|w| w[0].ms <= w[1].ms));
        assert_eq!(l.curve.last().map(|a| a.nines), Some(5.0));
        let p99 = l.marks.iter().find(|m| m.0 == "p99").unwrap().1;
        assert_eq!(p99.ms, l.merged.p99);
        assert!(l.curve.contains(&p99), "the curve passes through its marks");
        assert_eq!(l.marks.len(), 6);
    }

    #[test]
    fn few_samples_stop_the_curve_where_they_stop_resolving() {
        // 1000 samples resolve 99.9 %, not beyond.
        let l = read(&encoded((1..=1000).map(|v| v * 10))).unwrap();
        assert_eq!(l.curve.last().map(|a| a.nines), Some(3.0));
        let labels: Vec<&str> = l.marks.iter().map(|m| m.0).collect();
        assert_eq!(labels, ["p50", "p90", "p99", "p99.9"]);
        let one = read(&encoded(std::iter::once(500))).unwrap();
        assert_eq!(one.curve.len(), 1);
        assert_eq!(one.curve[0].nines, 0.0);
        let empty = read(&encoded(std::iter::empty())).unwrap();
        assert!(empty.curve.is_empty() && empty.marks.is_empty());
    }

    #[test]
    fn a_histogram_that_does_not_decode_is_an_error() {
        assert!(read("not a histogram").is_err());
        assert!(read("").is_err());
    }
}
