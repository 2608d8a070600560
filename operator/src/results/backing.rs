//! What a result says of its run beyond the figures: phase, message and times. They come from
//! the run record (`store::run_record`: what the operator itself decided, kept where benchmark
//! authors cannot write), never from status, and are checked once more against the verified
//! reports and the API server's own timestamps:
//!
//! - Succeeded only when the operator ended the run Succeeded and the stored reports hold every
//!   measurement's planned samples; a run the record does not show ended is Failed, and says so.
//! - The start lies between the benchmark's creation (stamped by the API server) and the first
//!   report's start; the completion between the last report's start (and the start) and now.
//!
//! Pure: the caller gathers the record and the reports.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crds::Phase;

/// The phase and message a result records for a run the operator ended in `decided` (phase
/// and message, from the run record; None: no end recorded), given how many complete samples
/// the stored reports hold of each measurement (`samples[i]` of measurement i; the spec has
/// `samples.len()` of them) and the fewest the spec plans (`min`). `describe` names a
/// measurement ("step 2").
pub fn phase(
    decided: Option<(Phase, &str)>,
    samples: &[u32],
    min: u32,
    describe: impl Fn(u32) -> String,
) -> (Phase, Option<String>) {
    let message = match decided {
        Some((Phase::Succeeded, m)) => m.to_string(),
        Some((Phase::Failed, m)) => return (Phase::Failed, Some(m.to_string())),
        Some((other, _)) => {
            let m = format!("the operator recorded the run's end as {other:?}");
            return (Phase::Failed, Some(m));
        }
        None => {
            let m = "the operator holds no record of the run's end (it did not end the run, \
                     or could not record it)";
            return (Phase::Failed, Some(m.into()));
        }
    };
    let short = samples.iter().zip(0u32..).find(|(taken, _)| **taken < min);
    match short {
        None if !samples.is_empty() => (Phase::Succeeded, Some(message)),
        None => (
            Phase::Failed,
            Some("the run ended Succeeded, but the spec measures nothing".into()),
        ),
        Some((taken, index)) => (
            Phase::Failed,
            Some(format!(
                "the run ended Succeeded, but the stored reports hold {taken} of the {min} \
                 sample(s) of {}",
                describe(index)
            )),
        ),
    }
}

/// Start and completion for a result: the run record's (`claimed_*`), kept within what the API
/// server and the reports back. `created`: the benchmark's creation time; `reports`: the
/// earliest and latest start of a report the result is made of; `now`: the time of writing.
pub fn times(
    claimed_start: Option<&Time>,
    claimed_completion: Option<&Time>,
    created: Option<&Time>,
    reports: Option<(Timestamp, Timestamp)>,
    now: Timestamp,
) -> (Option<Time>, Option<Time>) {
    let earliest = created.map(|t| t.0);
    // A report's start is its worker's clock: never before the benchmark existed nor after now.
    let clamp = |t: Timestamp| earliest.map_or(t, |e| t.max(e)).min(now);
    let reports = reports.map(|(first, last)| (clamp(first), clamp(last)));
    let latest_start = reports.map_or(now, |(first, _)| first.min(now));
    let start = claimed_start.map(|t| {
        let mut s = t.0.min(latest_start);
        if let Some(e) = earliest.filter(|e| *e <= latest_start) {
            s = s.max(e);
        }
        s
    });
    let start = start.or_else(|| reports.map(|(first, _)| first.min(now)));
    let floor = [start, reports.map(|(_, last)| last.min(now))]
        .into_iter()
        .flatten()
        .max();
    let completion = claimed_completion.map(|t| {
        let c = t.0.min(now);
        floor.map_or(c, |f| c.max(f))
    });
    (start.map(Time), completion.map(Time))
}

/// A report's start (unix milliseconds, the worker's clock) as a timestamp; 0 and absurd values
/// are none.
pub fn report_start(unix_ms: u64) -> Option<Timestamp> {
    let ms = i64::try_from(unix_ms).ok().filter(|ms| *ms > 0)?;
    Timestamp::from_millisecond(ms).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(i: u32) -> String {
        format!("step {i}")
    }

    #[test]
    fn a_report_claiming_a_start_before_the_benchmark_existed_moves_nothing_before_it() {
        let at = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        let created = Time(at(0));
        let claimed = Time(at(-86_400 * 365));
        let (start, completion) = times(
            Some(&claimed),
            Some(&Time(at(100))),
            Some(&created),
            Some((at(-86_400 * 365 * 30), at(50))),
            at(200),
        );
        assert_eq!(start.unwrap().0, at(0), "the creation time is a hard floor");
        assert_eq!(completion.unwrap().0, at(100));
    }

    #[test]
    fn succeeded_only_with_every_planned_sample_in_the_reports() {
        let ended = Some((Phase::Succeeded, "2 step(s)"));
        let ok = phase(ended, &[3, 3], 3, step);
        assert_eq!(ok, (Phase::Succeeded, Some("2 step(s)".into())));
        let (p, m) = phase(ended, &[3, 1], 3, step);
        assert_eq!(p, Phase::Failed);
        let m = m.unwrap();
        assert!(m.contains("1 of the 3 sample(s) of step 1"), "{m}");
        let (p, _) = phase(ended, &[0, 0], 1, step);
        assert_eq!(p, Phase::Failed, "no report at all");
        let (p, _) = phase(ended, &[], 1, step);
        assert_eq!(p, Phase::Failed);
    }

    #[test]
    fn a_run_the_operator_failed_or_did_not_end_is_failed_whatever_the_reports() {
        let failed = phase(Some((Phase::Failed, "GateFailed")), &[3], 1, step);
        assert_eq!(failed, (Phase::Failed, Some("GateFailed".into())));
        let (p, m) = phase(None, &[3], 1, step);
        assert_eq!(p, Phase::Failed);
        assert!(m.unwrap().contains("no record of the run's end"));
        for other in [Phase::Running, Phase::Pending] {
            assert_eq!(phase(Some((other, "x")), &[1], 1, step).0, Phase::Failed);
        }
    }

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn time(secs: i64) -> Time {
        Time(t(secs))
    }

    /// `times` of a status start and completion (seconds) of a benchmark created at 0 whose
    /// reports span 20..80, judged at 200.
    fn judged(start: i64, completion: i64) -> (Option<Time>, Option<Time>) {
        times(
            Some(&time(start)),
            Some(&time(completion)),
            Some(&time(0)),
            Some((t(20), t(80))),
            t(200),
        )
    }

    #[test]
    fn honest_times_are_kept() {
        let (s, c) = judged(10, 100);
        assert_eq!((s, c), (Some(time(10)), Some(time(100))));
    }

    #[test]
    fn forged_times_are_kept_within_the_reports_and_the_api_servers_stamps() {
        // A start before the benchmark existed, a completion in the future.
        let (s, c) = judged(-1_000_000, 9_999_999);
        assert_eq!((s, c), (Some(time(0)), Some(time(200))));
        // A start after the measurement began, a completion before it ended.
        let (s, c) = judged(50, 30);
        assert_eq!((s, c), (Some(time(20)), Some(time(80))));
        // No start in status: the first report's.
        let (s, _) = times(None, None, Some(&time(0)), Some((t(20), t(80))), t(200));
        assert_eq!(s, Some(time(20)));
        // No reports, a start in the future.
        let (s, c) = times(Some(&time(500)), Some(&time(600)), None, None, t(200));
        assert_eq!((s, c), (Some(time(200)), Some(time(200))));
    }

    #[test]
    fn report_starts_of_zero_or_beyond_time_are_none() {
        assert_eq!(report_start(0), None);
        assert_eq!(report_start(u64::MAX), None);
        assert_eq!(report_start(1_800_000_000_000), Some(t(0)));
    }
}
