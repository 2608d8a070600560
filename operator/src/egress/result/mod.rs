//! A case's result from its client's report (read per protocol by `protocols`), and the
//! comparisons across cases (overhead against the baseline, the best case) for status and
//! printer columns. Pure.

use crds::cases::Measured;
use std::collections::BTreeMap;

use crds::egress::{CaseResult, PairAggregate, PairResult};
use crds::history::Better;
use protocol::worker::FinalReport;
use protocol::Protocol;

use super::protocols;
use super::readings::round2;
use crate::policy::samples::Figure;

/// One pair's client report, with where the pair ran (from the pods the operator created).
pub struct PairReport<'a> {
    pub pair: u32,
    pub wave: u32,
    pub client: &'a FinalReport,
    pub client_node: Option<String>,
    pub server_node: Option<String>,
}

/// A pair below this share of the median pair's main figure is named an outlier.
const OUTLIER_SHARE: f64 = 0.8;
/// Most outliers named in a case's aggregate (slowest first).
const MAX_OUTLIERS: usize = 16;

/// The case's result; Err when a report is unreadable. Stream errors are returned beside
/// the result so the run can fail without losing what was measured. A case with a topology
/// gets the exact merge of its pairs' reports, a row per pair and the aggregate across them.
pub fn case_result(
    case: &Measured,
    pairs: &[PairReport<'_>],
) -> Result<(CaseResult, Vec<String>), String> {
    let spec = &case.spec;
    let mut result = CaseResult {
        name: case.name.clone(),
        offload_profile: spec.offload_profile.clone(),
        protocol: Some(spec.protocol),
        case: (case.case != case.name).then(|| case.case.clone()),
        message_size: spec.shown_message_size(),
        streams: Some(spec.streams),
        path: Some(spec.path().to_string()),
        ..Default::default()
    };
    // Each report validated once: for its row, then for the exact merge of all.
    let clients: Vec<&FinalReport> = pairs.iter().map(|p| p.client).collect();
    let (each, errors) = protocols::read(
        spec.protocol,
        &clients,
        spec.topology.is_some(),
        &mut result,
    )
    .map_err(|e| format!("case {}: {e}", case.name))?;
    let mut rows: Vec<PairResult> = pairs
        .iter()
        .zip(&each)
        .map(|(p, one)| PairResult {
            pair: p.pair,
            client_node: p.client_node.clone(),
            server_node: p.server_node.clone(),
            value: main_figure(one),
            p99_ms: one.latency.as_ref().map(|l| l.p99),
            loss_percent: one.loss_percent,
            start_lateness_ms: 0.0,
            outlier: false,
        })
        .collect();
    if spec.topology.is_none() {
        if let Some(only) = pairs.first() {
            result.client_node = only
                .client_node
                .clone()
                .or_else(|| only.client.node.clone());
            result.server_node = only.server_node.clone();
        }
        return Ok((result, errors));
    }
    let spread = set_lateness(&mut rows, pairs);
    result.aggregate = Some(aggregate(&mut rows, spread));
    result.pairs = rows;
    Ok((result, errors))
}

/// A client's start more than this before its wave's median start is not believed (one
/// barrier instant released them all): it counts as the median, so one client's report cannot
/// make every other pair look late. Later starts are believed up to an hour.
const EARLIEST_BELIEVED_MS: u64 = 10_000;
const LATEST_BELIEVED_MS: u64 = 3_600_000;

/// Each pair's start lateness against the earliest (believable) client start of its wave;
/// returns the largest spread of a wave (ms). Each start is the client's own clock, so clock
/// skew between nodes is not in these figures.
fn set_lateness(rows: &mut [PairResult], pairs: &[PairReport<'_>]) -> f64 {
    let mut by_wave: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for p in pairs {
        by_wave
            .entry(p.wave)
            .or_default()
            .push(p.client.started_at_unix_ms);
    }
    let believed: BTreeMap<u32, (u64, u64)> = by_wave
        .into_iter()
        .map(|(wave, mut starts)| {
            starts.sort_unstable();
            let median = starts.get(starts.len() / 2).copied().unwrap_or(0);
            (wave, (median.saturating_sub(EARLIEST_BELIEVED_MS), median))
        })
        .collect();
    let clamp = |wave: u32, t: u64| {
        let (low, median) = believed.get(&wave).copied().unwrap_or((t, t));
        if t < low {
            median
        } else {
            t.min(median.saturating_add(LATEST_BELIEVED_MS))
        }
    };
    let mut span: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for p in pairs {
        let t = clamp(p.wave, p.client.started_at_unix_ms);
        let e = span.entry(p.wave).or_insert((t, t));
        *e = (e.0.min(t), e.1.max(t));
    }
    for (row, p) in rows.iter_mut().zip(pairs) {
        let first = span.get(&p.wave).map_or(0, |e| e.0);
        row.start_lateness_ms =
            ms(clamp(p.wave, p.client.started_at_unix_ms).saturating_sub(first));
    }
    span.values()
        .map(|(first, last)| ms(last.saturating_sub(*first)))
        .fold(0.0, f64::max)
}

fn ms(v: u64) -> f64 {
    // At most LATEST_BELIEVED_MS plus EARLIEST_BELIEVED_MS here: exact in an f64.
    v.min(1 << 52) as f64
}

/// Sum, median, p05/p95 (nearest rank) and extremes of the pairs' main figure; marks and names
/// the outliers (below 80 % of the median), slowest first.
pub fn aggregate(rows: &mut [PairResult], start_spread_ms: f64) -> PairAggregate {
    let mut values: Vec<f64> = rows
        .iter()
        .map(|r| r.value)
        .filter(|v| v.is_finite())
        .collect();
    values.sort_by(f64::total_cmp);
    let rank = |q: f64| -> f64 {
        // Nearest rank: the smallest value with at least q of the values at or below it.
        let n = values.len();
        let k = (q * n as f64).ceil().max(1.0) as usize;
        values
            .get(k.min(n).saturating_sub(1))
            .copied()
            .unwrap_or(0.0)
    };
    let median = rank(0.5);
    let mut slow: Vec<&mut PairResult> = rows
        .iter_mut()
        .filter(|r| median > 0.0 && r.value < OUTLIER_SHARE * median)
        .collect();
    slow.sort_by(|a, b| a.value.total_cmp(&b.value));
    let mut outliers = Vec::new();
    for r in slow {
        r.outlier = true;
        if outliers.len() < MAX_OUTLIERS {
            let node = |n: &Option<String>| n.clone().unwrap_or_else(|| "?".into());
            outliers.push(format!(
                "{}->{}",
                node(&r.client_node),
                node(&r.server_node)
            ));
        }
    }
    PairAggregate {
        pairs: u32::try_from(rows.len()).unwrap_or(u32::MAX),
        sum: round2(values.iter().sum()),
        median,
        p05: rank(0.05),
        p95: rank(0.95),
        min: values.first().copied().unwrap_or(0.0),
        max: values.last().copied().unwrap_or(0.0),
        start_spread_ms,
        outliers,
    }
}

/// Some(why) when the case measured nothing: no byte reached its receiver, or no transaction
/// was answered (its numbers are still recorded).
pub fn nothing_transferred(r: &CaseResult) -> Option<String> {
    if let Some(tps) = r.transactions_per_second {
        // Only a positive rate counts (so NaN does not).
        let answered = tps > 0.0;
        return (!answered).then(|| {
            format!(
                "no transaction was answered ({} failed{})",
                r.failures.unwrap_or(0),
                r.loss_percent
                    .map(|l| format!(", {l}% lost"))
                    .unwrap_or_default()
            )
        });
    }
    let moved = r.receiver_bits_per_second.is_some_and(|b| b > 0.0);
    (!moved).then(|| {
        format!(
            "no byte was transferred: the receiver got 0 bit/s (sender {})",
            format_bits(r.sender_bits_per_second.unwrap_or(0.0).max(0.0))
        )
    })
}

/// The figure cases are compared by: transactions/s for request/response, else the
/// receiver's throughput.
pub(super) fn main_figure(r: &CaseResult) -> f64 {
    r.transactions_per_second
        .or(r.receiver_bits_per_second)
        .unwrap_or(0.0)
}

pub(super) fn protocol_of(r: &CaseResult) -> Protocol {
    r.protocol.unwrap_or_default()
}

/// The figures of one sample, main figure first (samples, results, verdicts). Units: what
/// `netbench report` shows (lossPercent already in percent).
pub fn figures(r: &CaseResult) -> Vec<Figure> {
    use Better::Lower;
    let mut listed = protocols::figures(protocol_of(r), r);
    listed.extend([
        ("cpuSecondsPerGb", "s/GB", Lower, r.cpu_seconds_per_gb),
        (
            "nodeCpuSecondsPerGb",
            "s/GB",
            Lower,
            r.node_cpu_seconds_per_gb,
        ),
    ]);
    listed
        .into_iter()
        .filter_map(|(name, unit, better, value)| {
            Some(Figure {
                name: name.into(),
                unit: unit.into(),
                better,
                value: value?,
            })
        })
        .collect()
}

/// "9.41 Gbit/s", "812.3 Mbit/s".
pub fn format_bits(bps: f64) -> String {
    match bps {
        b if b >= 1e9 => format!("{:.2} Gbit/s", b / 1e9),
        b if b >= 1e6 => format!("{:.1} Mbit/s", b / 1e6),
        b => format!("{:.0} kbit/s", b / 1e3),
    }
}

/// What a case measured, in a line (its Event): "9.41 Gbit/s received, 3 retransmits",
/// "45.2k tx/s, p99 0.21 ms", "998 Mbit/s received, 0.01% lost, jitter 0.02 ms".
pub fn headline(r: &CaseResult) -> String {
    match (r.transactions_per_second, &r.latency) {
        (Some(tps), Some(l)) => {
            let lost = r
                .loss_percent
                .map(|l| format!(", {l}% lost"))
                .unwrap_or_default();
            format!(
                "{}, p50 {} ms, p99 {} ms{lost}",
                format_tps(tps),
                l.p50,
                l.p99
            )
        }
        (Some(tps), None) => format_tps(tps),
        _ => match (r.loss_percent, r.jitter_ms) {
            (Some(loss), jitter) => format!(
                "{} received, {loss}% lost{}",
                format_bits(r.receiver_bits_per_second.unwrap_or(0.0)),
                jitter
                    .map(|j| format!(", jitter {j} ms"))
                    .unwrap_or_default()
            ),
            _ => format!(
                "{} received, {} retransmits{}",
                format_bits(r.receiver_bits_per_second.unwrap_or(0.0)),
                r.retransmits,
                r.probe_latency
                    .as_ref()
                    .map(|p| format!(", probe p99 {} ms", p.p99))
                    .unwrap_or_default()
            ),
        },
    }
}

/// "45.2k tx/s", "812 tx/s".
pub fn format_tps(tps: f64) -> String {
    if tps >= 1e3 {
        format!("{:.1}k tx/s", tps / 1e3)
    } else {
        format!("{tps:.0} tx/s")
    }
}

#[cfg(test)]
pub(super) mod tests;
