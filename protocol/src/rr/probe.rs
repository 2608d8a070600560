//! Latency under load: a paced request/response probe that runs on its own connection beside
//! a stream test, between the same two ends. Its figures travel in the TCP report
//! (`latency_probe`); the histogram merges exactly like the rr report's.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::report::histogram::{self, new_latency_histogram, MAX_TOTAL_COUNT};
use crate::report::LatencySummary;

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
