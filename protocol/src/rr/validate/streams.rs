//! The rr report's streams: each belongs to a run and adds up, the runs have their streams,
//! the streams add up to the counts, and an open loop's streams account for their schedule.

use super::super::report::RrReport;
use crate::report::{check_text, invalid, InvalidReport};

/// Every stream belongs to a run, each run has its streams, each stream adds up, and each
/// stream that says what it skipped (every stream of this build) accounts for its whole
/// schedule in open loop and skipped nothing in closed loop.
pub(super) fn check_streams(r: &RrReport) -> Result<(), InvalidReport> {
    let mut per_run = vec![0u32; r.runs.len()];
    let mut sums = (0u64, 0u64, 0u64, 0u64);
    for (i, s) in r.per_stream.iter().enumerate() {
        let field = |name: &str| format!("per_stream[{i}].{name}");
        let run = usize::try_from(s.run)
            .ok()
            .filter(|run| *run < r.runs.len())
            .ok_or_else(|| {
                invalid(
                    field("run"),
                    format!("{} but the report has {} run(s)", s.run, r.runs.len()),
                )
            })?;
        if let Some(count) = per_run.get_mut(run) {
            *count = count.saturating_add(1);
        }
        if let (Some(skipped), Some(run)) = (s.skipped, r.runs.get(run)) {
            let schedule = (r.setup.rate_per_stream, run.duration_secs);
            check_schedule(&field("skipped"), s.attempted, skipped, schedule)?;
        }
        if s.transactions.checked_add(s.failed) != Some(s.attempted) {
            return Err(invalid(
                field("attempted"),
                format!(
                    "{} but transactions ({}) and failures ({}) do not add up to it",
                    s.attempted, s.transactions, s.failed
                ),
            ));
        }
        if let Some(e) = &s.error {
            check_text(&field("error"), e)?;
        }
        sums = (
            sums.0.saturating_add(s.attempted),
            sums.1.saturating_add(s.transactions),
            sums.2.saturating_add(s.failed),
            sums.3.saturating_add(s.skipped.unwrap_or(0)),
        );
    }
    for (i, (run, n)) in r.runs.iter().zip(per_run).enumerate() {
        if n != run.streams {
            return Err(invalid(
                format!("runs[{i}].streams"),
                format!(
                    "{} but the report has {n} stream(s) of this run",
                    run.streams
                ),
            ));
        }
    }
    let c = &r.counts;
    let failed = c.checked_failed().unwrap_or(u64::MAX);
    if sums != (c.attempted, c.transactions, failed, c.skipped) {
        return Err(invalid(
            "per_stream",
            format!(
                "streams add up to {} attempted, {} transactions, {} failed, {} skipped; the counts say {}, {}, {failed}, {}",
                sums.0, sums.1, sums.2, sums.3, c.attempted, c.transactions, c.skipped
            ),
        ));
    }
    Ok(())
}

/// An open-loop stream's `attempted + skipped` is its schedule: the intended send times of
/// `rate` per second in a window of `secs` (shifted by a phase under one interval, so one
/// more or less than `rate x secs`; a millionth more for the clock's rounding). A closed loop
/// has no schedule, so nothing to skip.
fn check_schedule(
    field: &str,
    attempted: u64,
    skipped: u64,
    (rate, secs): (Option<f64>, f64),
) -> Result<(), InvalidReport> {
    let Some(rate) = rate else {
        if skipped == 0 {
            return Ok(());
        }
        return Err(invalid(
            field,
            format!("{skipped}, but only an open loop has a schedule to fall behind"),
        ));
    };
    let want = rate * secs;
    let got = attempted.saturating_add(skipped);
    if (got as f64 - want).abs() > 1.0 + want * 1e-6 {
        return Err(invalid(
            field,
            format!(
                "{attempted} attempted + {skipped} skipped = {got}, but {rate}/s for {secs} s \
                 schedules {want:.0} transactions"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{open_loop, udp};
    use super::super::validate_rr;
    use crate::report::validate::assert_refused;
    use crate::rr::RrReport;

    /// Adds `n` to stream `i`'s skipped sends (and, if `total`, to the report's).
    fn skip_more(r: &RrReport, i: usize, n: i64, total: bool) -> RrReport {
        let mut r = r.clone();
        let s = &mut r.per_stream[i].skipped;
        *s = s.map(|v| v.checked_add_signed(n).unwrap());
        if total {
            r.counts.skipped = r.counts.skipped.checked_add_signed(n).unwrap();
        }
        r
    }

    #[test]
    fn an_open_loop_accounts_for_its_whole_schedule() {
        let r = open_loop(udp(), 100.0);
        validate_rr(&r).unwrap();
        assert_eq!(r.counts.attempted + r.counts.skipped, 400);
        let w = r.warnings();
        assert!(
            w[0].contains("fell behind its schedule: 393 of 400 intended"),
            "{w:?}"
        );
        // One more or less than rate x window: the phase.
        validate_rr(&skip_more(&r, 1, 1, true)).unwrap();
        validate_rr(&skip_more(&r, 1, -1, true)).unwrap();
        // A stream that sent less than its schedule without saying so.
        let bad = skip_more(&r, 1, -2, true);
        assert_refused(
            validate_rr(&bad),
            "per_stream[1].skipped",
            "schedules 200 transactions",
        );
        // Or that says it skipped more than it had.
        let bad = skip_more(&r, 0, 2, true);
        assert_refused(validate_rr(&bad), "per_stream[0].skipped", "= 202");
        // The streams' skipped sends are the total's.
        let mut bad = r.clone();
        bad.counts.skipped += 1;
        assert_refused(validate_rr(&bad), "per_stream", "skipped");
        // A closed loop has no schedule to fall behind.
        let mut bad = udp();
        bad.counts.skipped = 1;
        bad.per_stream[0].skipped = Some(1);
        assert_refused(validate_rr(&bad), "counts.skipped", "only an open loop");
        let bad = skip_more(&udp(), 0, 1, false);
        assert_refused(
            validate_rr(&bad),
            "per_stream[0].skipped",
            "only an open loop",
        );
    }

    #[test]
    fn a_report_of_an_older_build_without_skipped_sends_still_validates() {
        // Older builds neither counted skipped sends nor kept their schedule exactly: an open
        // loop of theirs that fell behind (7 of 400 sent) has no `skipped` field at all.
        let mut r = open_loop(udp(), 100.0);
        r.counts.skipped = 0;
        let mut json = serde_json::to_value(&r).unwrap();
        json["counts"].as_object_mut().unwrap().remove("skipped");
        for s in json["per_stream"].as_array_mut().unwrap() {
            s.as_object_mut().unwrap().remove("skipped");
        }
        let old: RrReport = serde_json::from_value(json).unwrap();
        assert_eq!(old.counts.skipped, 0);
        assert!(old.per_stream.iter().all(|s| s.skipped.is_none()));
        validate_rr(&old).unwrap();
        assert!(old.warnings().is_empty());
        // This build always says: the same figures with `skipped: 0` did not add up.
        let mut new = old.clone();
        new.per_stream[0].skipped = Some(0);
        assert_refused(
            validate_rr(&new),
            "per_stream[0].skipped",
            "schedules 200 transactions",
        );
    }
}
