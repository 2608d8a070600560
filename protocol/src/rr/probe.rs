//! Latency under load: a paced request/response probe that runs on its own connection beside
//! a stream test, between the same two ends. Its figures travel in the TCP report
//! (`latency_probe`); the histogram merges exactly like the rr report's.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::MAX_TCP_MESSAGE;
use crate::report::histogram::{self, new_latency_histogram, MAX_TOTAL_COUNT};
use crate::report::validate::check_latency_at;
use crate::report::{check_number, check_text, invalid, InvalidReport, LatencySummary, MAX_RATE};

/// What happened to a probe's requests (the histogram holds the answered ones).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeCounts {
    pub attempted: u64,
    pub skipped: u64,
    pub failed: u64,
}

/// The probe's figures (one run, or a merge of concurrent runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyProbe {
    /// Requests per second asked for (summed when merged). The probe is open loop: latency
    /// counts from each request's intended send time.
    pub rate: f64,
    pub request_size: u32,
    pub response_size: u32,
    /// Requests sent.
    pub attempted: u64,
    /// Intended send times never used: the probe was behind its schedule when the test
    /// ended (see [`super::RrCounts::skipped`]); `attempted + skipped` is the schedule.
    /// (Absent from reports of older builds: 0.)
    #[serde(default)]
    pub skipped: u64,
    /// Answered: the histogram's samples.
    pub transactions: u64,
    /// Not answered (the probe connection broke or timed out).
    pub failed: u64,
    pub latency: LatencySummary,
    /// base64(HDR V2 + DEFLATE) of the latencies in microseconds.
    pub histogram: String,
    /// Why the probe ended early, if it did.
    pub error: Option<String>,
}

impl LatencyProbe {
    /// The probe of one run; `hist` holds its `transactions` latencies.
    pub fn single(
        rate: f64,
        request_size: u32,
        response_size: u32,
        counts: ProbeCounts,
        hist: &Histogram<u64>,
        error: Option<String>,
    ) -> Result<LatencyProbe, String> {
        Ok(LatencyProbe {
            rate,
            request_size,
            response_size,
            attempted: counts.attempted,
            skipped: counts.skipped,
            transactions: hist.len(),
            failed: counts.failed,
            latency: LatencySummary::from_histogram(hist),
            histogram: histogram::encode(hist)?,
            error,
        })
    }

    /// Combines the probes of concurrent runs: counts add up, histograms merge exactly.
    /// The inputs must be valid ([`super::check_probe`]); `None` when there is none.
    pub(crate) fn merge<'a>(
        probes: impl IntoIterator<Item = &'a LatencyProbe>,
    ) -> Result<Option<LatencyProbe>, String> {
        let mut merged: Option<(LatencyProbe, Histogram<u64>)> = None;
        for p in probes {
            let h = histogram::decode(&p.histogram)?;
            let (acc, hist) = merged.get_or_insert_with(|| {
                (
                    LatencyProbe {
                        rate: 0.0,
                        attempted: 0,
                        skipped: 0,
                        transactions: 0,
                        failed: 0,
                        error: None,
                        ..p.clone()
                    },
                    new_latency_histogram(),
                )
            });
            if hist.len().saturating_add(h.len()) > MAX_TOTAL_COUNT {
                return Err("merged probe histogram would hold too many samples".into());
            }
            hist.add(&h)
                .map_err(|e| format!("cannot merge probe histograms: {e:?}"))?;
            let overflow = || "probe counts overflow".to_string();
            acc.rate += p.rate;
            acc.attempted = acc
                .attempted
                .checked_add(p.attempted)
                .ok_or_else(overflow)?;
            acc.transactions = acc
                .transactions
                .checked_add(p.transactions)
                .ok_or_else(overflow)?;
            acc.skipped = acc.skipped.checked_add(p.skipped).ok_or_else(overflow)?;
            acc.failed = acc.failed.checked_add(p.failed).ok_or_else(overflow)?;
            if acc.error.is_none() {
                acc.error.clone_from(&p.error);
            }
        }
        merged
            .map(|(mut p, h)| {
                p.latency = LatencySummary::from_histogram(&h);
                p.histogram = histogram::encode(&h)?;
                Ok(p)
            })
            .transpose()
    }
}

/// A stream report's latency probe: sizes within bounds, counts that add up, percentiles the
/// histogram gives.
pub(crate) fn check_probe(prefix: &str, p: &LatencyProbe) -> Result<(), InvalidReport> {
    let field = |name: &str| format!("{prefix}.{name}");
    check_number(&field("rate"), p.rate, f64::MIN_POSITIVE, MAX_RATE)?;
    for (name, v) in [
        ("request_size", p.request_size),
        ("response_size", p.response_size),
    ] {
        if !(1..=MAX_TCP_MESSAGE).contains(&v) {
            return Err(invalid(
                field(name),
                format!("{v} bytes (allowed 1..={MAX_TCP_MESSAGE})"),
            ));
        }
    }
    if p.transactions.checked_add(p.failed) != Some(p.attempted) {
        return Err(invalid(
            field("attempted"),
            format!(
                "{} but transactions ({}) and failures ({}) do not add up to it",
                p.attempted, p.transactions, p.failed
            ),
        ));
    }
    if p.skipped > MAX_TOTAL_COUNT {
        return Err(invalid(
            field("skipped"),
            format!("{} is more than {MAX_TOTAL_COUNT}", p.skipped),
        ));
    }
    let hist = histogram::decode(&p.histogram).map_err(|e| invalid(field("histogram"), e))?;
    if hist.len() != p.transactions {
        return Err(invalid(
            field("transactions"),
            format!(
                "{} but the latency histogram holds {} samples",
                p.transactions,
                hist.len()
            ),
        ));
    }
    check_latency_at(&field("latency"), &p.latency, &hist)?;
    if let Some(e) = &p.error {
        check_text(&field("error"), e)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_are_checked_like_reports() {
        let mut h = crate::report::histogram::new_latency_histogram();
        h.record(120).unwrap();
        h.record(80).unwrap();
        let counts = ProbeCounts {
            attempted: 3,
            skipped: 2,
            failed: 1,
        };
        let p = LatencyProbe::single(100.0, 1, 1, counts, &h, None).unwrap();
        check_probe("latency_probe", &p).unwrap();
        let mut bad = p.clone();
        bad.failed = 0;
        let e = check_probe("latency_probe", &bad).unwrap_err();
        assert_eq!(e.field, "latency_probe.attempted");
        let mut bad = p.clone();
        bad.latency.p99_us = 5;
        let e = check_probe("latency_probe", &bad).unwrap_err();
        assert_eq!(e.field, "latency_probe.latency.p99_us");
        let mut bad = p.clone();
        bad.skipped = u64::MAX;
        let e = check_probe("latency_probe", &bad).unwrap_err();
        assert_eq!(e.field, "latency_probe.skipped");
        let mut bad = p;
        bad.rate = 0.0;
        let e = check_probe("latency_probe", &bad).unwrap_err();
        assert_eq!(e.field, "latency_probe.rate");
    }
}
