//! The rr report's totals: the sums of its runs, and the figures derived from them (rates,
//! loss, port exhaustion, CPU per transaction).

use super::super::report::{cpu_per_transaction, node_cpu_per_transaction, RrReport};
use crate::cpu::{check_derived, check_sum};
use crate::report::{check_close, check_number, invalid, InvalidReport, MAX_DURATION_S, MAX_RATE};

/// The report's totals are the sums of its runs, and the derived figures are the ones they
/// give.
pub(super) fn check_totals(r: &RrReport) -> Result<(), InvalidReport> {
    let runs = &r.runs;
    let streams = runs
        .iter()
        .try_fold(0u32, |acc, run| acc.checked_add(run.streams));
    if streams != Some(r.streams) {
        return Err(invalid(
            "streams",
            format!("{} is not the sum of the runs' streams", r.streams),
        ));
    }
    let transactions = runs
        .iter()
        .try_fold(0u64, |acc, run| acc.checked_add(run.transactions));
    if transactions != Some(r.counts.transactions) {
        return Err(invalid(
            "runs",
            format!(
                "the runs' transactions do not add up to counts.transactions ({})",
                r.counts.transactions
            ),
        ));
    }
    check_number("duration_secs", r.duration_secs, 0.0, MAX_DURATION_S)?;
    let longest = runs
        .iter()
        .fold(0f64, |acc, run| acc.max(run.duration_secs));
    check_close("duration_secs", r.duration_secs, longest)?;
    let tps: f64 = runs.iter().map(|run| run.transactions_per_second).sum();
    check_number(
        "transactions_per_second",
        r.transactions_per_second,
        0.0,
        MAX_RATE,
    )?;
    check_close("transactions_per_second", r.transactions_per_second, tps)?;
    let requested = r
        .setup
        .rate_per_stream
        .map(|rate| rate * f64::from(r.streams));
    match (r.requested_per_second, requested) {
        (None, None) => {}
        (Some(got), Some(want)) => {
            check_number("requested_per_second", got, 0.0, MAX_RATE)?;
            check_close("requested_per_second", got, want)?;
        }
        _ => {
            return Err(invalid(
                "requested_per_second",
                "present exactly when rate_per_stream is (open loop)",
            ))
        }
    }
    match (r.loss_percent, r.setup.mode) {
        (Some(loss), mode) if mode.is_udp() => {
            check_number("loss_percent", loss, 0.0, 100.0)?;
            check_close("loss_percent", loss, r.counts.loss_percent())?;
        }
        (None, mode) if !mode.is_udp() => {}
        _ => return Err(invalid("loss_percent", "present exactly for udp-rr")),
    }
    if r.port_exhausted != (r.counts.errors.address_not_available > 0) {
        return Err(invalid(
            "port_exhausted",
            format!(
                "{} but {} connection attempts found no free local port",
                r.port_exhausted, r.counts.errors.address_not_available
            ),
        ));
    }
    check_sum(&r.cpu, runs.iter().map(|run| &run.cpu))?;
    let transactions = r.counts.transactions;
    check_derived(
        "cpu_us_per_transaction",
        r.cpu_us_per_transaction.as_ref(),
        cpu_per_transaction(runs, transactions),
        true,
    )?;
    check_derived(
        "node_cpu_us_per_transaction",
        r.node_cpu_us_per_transaction.as_ref(),
        node_cpu_per_transaction(runs, transactions),
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::super::validate_rr;
    use crate::rr::report::fixtures::rr_report;
    use crate::Protocol;

    #[test]
    fn port_exhaustion_is_flagged_and_explained() {
        let mut r = rr_report(Protocol::TcpCrr, &[100, 200], 0);
        r.counts.errors.address_not_available = 5;
        r.counts.attempted += 5;
        r.per_stream[0].failed += 5;
        r.per_stream[0].attempted += 5;
        r.fill_derived();
        validate_rr(&r).unwrap();
        assert!(r.port_exhausted);
        let w = r.warnings();
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("ephemeral ports exhausted: 5"), "{w:?}");
    }
}
