//! Exact merge of rr reports of clients that ran AT THE SAME TIME: every input is validated,
//! every sum checked; counts add up, histograms merge exactly and the percentiles are
//! recomputed from the merged histogram; rates add up; runs and streams are concatenated.

use super::report::{RrCounts, RrReport};
use super::validate::validate_rr;
use super::REPORT_VERSION;
use crate::report::histogram::{self, new_latency_histogram, MAX_TOTAL_COUNT};
use crate::report::http::tool_name;
use crate::report::{concat_runs, time_span, InvalidReport, LatencySummary};
use crate::tcp::CpuReport;
use crate::ReportKind;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RrMergeError {
    #[error("nothing to merge")]
    Empty,
    #[error(transparent)]
    Invalid(#[from] InvalidReport),
    #[error(
        "cannot merge rr reports of different tests ({0}); merge only runs of one test that ran at the same time"
    )]
    Mismatch(String),
    #[error("merging overflows {0}")]
    Overflow(&'static str),
    #[error("histogram: {0}")]
    Histogram(String),
}

/// Merges reports of concurrent runs of one test (same mode, sizes, burst, rate, timeout).
pub fn merge(reports: &[RrReport]) -> Result<RrReport, RrMergeError> {
    let first = reports.first().ok_or(RrMergeError::Empty)?;
    let overflow = RrMergeError::Overflow;
    let mut hist = new_latency_histogram();
    let mut counts = RrCounts::default();
    let mut cpu = CpuReport::default();
    let (mut streams, mut tps, mut requested) = (0u32, 0f64, None::<f64>);
    for r in reports {
        let h = validate_rr(r)?;
        if r.setup != first.setup {
            return Err(RrMergeError::Mismatch(format!(
                "{:?} and {:?}",
                first.setup, r.setup
            )));
        }
        if hist.len().saturating_add(h.len()) > MAX_TOTAL_COUNT {
            return Err(overflow("the latency histogram"));
        }
        hist.add(&h)
            .map_err(|e| RrMergeError::Histogram(format!("{e:?}")))?;
        counts = counts.checked_add(&r.counts).ok_or(overflow("counts"))?;
        streams = streams.checked_add(r.streams).ok_or(overflow("streams"))?;
        tps += r.transactions_per_second;
        if let Some(q) = r.requested_per_second {
            requested = Some(requested.unwrap_or(0.0) + q);
        }
        cpu = cpu.sum(&r.cpu);
    }
    let parts = reports.iter().map(|r| (&r.runs[..], &r.per_stream[..]));
    let (runs, per_stream) = concat_runs(parts, |s| &mut s.run).ok_or(overflow("the run index"))?;
    let (started_at_unix_ms, ended_at_unix_ms) = time_span(
        reports
            .iter()
            .map(|r| (r.started_at_unix_ms, r.ended_at_unix_ms)),
    );
    let mut merged = RrReport {
        version: REPORT_VERSION,
        kind: ReportKind::Rr.as_str().into(),
        tool: tool_name(),
        setup: first.setup,
        streams,
        started_at_unix_ms,
        ended_at_unix_ms,
        duration_secs: reports.iter().fold(0f64, |acc, r| acc.max(r.duration_secs)),
        counts,
        transactions_per_second: tps,
        requested_per_second: requested,
        loss_percent: None,
        port_exhausted: false,
        latency: LatencySummary::from_histogram(&hist),
        histogram: histogram::encode(&hist).map_err(RrMergeError::Histogram)?,
        cpu,
        cpu_us_per_transaction: None,
        node_cpu_us_per_transaction: None,
        runs,
        per_stream,
    };
    merged.fill_derived();
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rr::report::fixtures::rr_report;
    use crate::Protocol;

    #[test]
    fn merging_adds_counts_and_histograms_exactly() {
        let a = rr_report(Protocol::UdpRr, &[100, 200, 300], 2);
        let b = rr_report(Protocol::UdpRr, &[1_000, 2_000], 1);
        let m = merge(&[a.clone(), b.clone()]).unwrap();
        validate_rr(&m).unwrap();
        assert_eq!(m.counts.transactions, 5);
        assert_eq!(m.counts.lost, 3);
        assert_eq!(m.counts.attempted, a.counts.attempted + b.counts.attempted);
        assert_eq!(m.latency.count, 5);
        assert_eq!(m.latency.max_us, 2_000);
        assert_eq!(m.latency.min_us, 100);
        assert_eq!(m.streams, 4);
        assert_eq!(
            m.transactions_per_second,
            a.transactions_per_second + b.transactions_per_second
        );
        assert_eq!(
            m.per_stream.iter().map(|s| s.run).collect::<Vec<_>>(),
            [0, 0, 1, 1]
        );
        assert_eq!(m.loss_percent, Some(3.0 * 100.0 / 8.0));
        // Associative: a merged report merges again without loss.
        let again = merge(&[merge(std::slice::from_ref(&a)).unwrap(), b]).unwrap();
        assert_eq!(again, m);
        // The service demand is the CPU seconds of both runs over both runs' transactions.
        let cost = m.cpu_us_per_transaction.unwrap();
        assert!(
            (cost.client - 2.0 * 0.4 * 2.0 * 1e6 / 5.0).abs() < 1e-6,
            "{cost:?}"
        );
    }

    #[test]
    fn different_tests_and_invalid_inputs_are_refused() {
        assert_eq!(merge(&[]), Err(RrMergeError::Empty));
        let a = rr_report(Protocol::TcpRr, &[100], 0);
        let mut other = a.clone();
        other.setup.response_size = 1024;
        assert!(matches!(
            merge(&[a.clone(), other]),
            Err(RrMergeError::Mismatch(_))
        ));
        let crr = rr_report(Protocol::TcpCrr, &[100], 0);
        assert!(matches!(
            merge(&[a.clone(), crr]),
            Err(RrMergeError::Mismatch(_))
        ));
        let mut bad = a.clone();
        bad.counts.transactions += 1;
        bad.counts.attempted += 1;
        assert!(matches!(
            merge(&[a, bad]),
            Err(RrMergeError::Invalid(e)) if e.field == "counts.transactions"
        ));
    }
}
