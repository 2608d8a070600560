//! Validation of HTTP reports (pure): every report from a worker or a stored object is checked
//! here before it is accepted or merged. The invariants are the ones the engine guarantees
//! (see `http::stats`): every measured response is one request, one status count and one
//! histogram sample; 4xx/5xx errors are those status counts; a single run's rates are its
//! counts over its duration.

use hdrhistogram::Histogram;

use super::histogram::{self, MAX_TOTAL_COUNT};
use super::http::{HttpReport, LatencySummary};
use super::REPORT_VERSION;

/// Longest measured window (or warm-up, or timeout) a report may claim: one week.
pub const MAX_DURATION_S: f64 = 7.0 * 24.0 * 3600.0;
/// Largest rate (requests or bytes per second) a report may claim.
pub const MAX_RATE: f64 = 1e13;
/// Most worker reports one merged report may combine.
pub const MAX_WORKERS: u32 = 100_000;
/// Longest text field (URL, method, tool, stream error) kept from a report.
pub const MAX_TEXT_BYTES: usize = 8 * 1024;

/// A report that breaks an invariant; `field` names it (e.g. `counters.requests`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid report: {field}: {problem}")]
pub struct InvalidReport {
    pub field: String,
    pub problem: String,
}

/// Shorthand for an [`InvalidReport`] naming `field`.
pub fn invalid(field: impl Into<String>, problem: impl Into<String>) -> InvalidReport {
    InvalidReport {
        field: field.into(),
        problem: problem.into(),
    }
}

/// A number that must be finite and within `min..=max`.
pub fn check_number(field: &str, v: f64, min: f64, max: f64) -> Result<(), InvalidReport> {
    if !v.is_finite() {
        return Err(invalid(field, format!("{v} is not a finite number")));
    }
    if v < min || v > max {
        return Err(invalid(field, format!("{v} is outside {min}..={max}")));
    }
    Ok(())
}

/// `v` equals `want` up to float rounding (JSON and division).
pub fn check_close(field: &str, v: f64, want: f64) -> Result<(), InvalidReport> {
    if (v - want).abs() <= 1e-6 * want.abs().max(1.0) {
        Ok(())
    } else {
        Err(invalid(field, format!("{v} does not match {want}")))
    }
}

pub fn check_text(field: &str, v: &str) -> Result<(), InvalidReport> {
    if v.len() > MAX_TEXT_BYTES {
        return Err(invalid(
            field,
            format!("{} bytes, more than {MAX_TEXT_BYTES}", v.len()),
        ));
    }
    Ok(())
}

/// The `version` and `kind` of a stream report are this build's (`want_version`, `want_kind`).
pub(crate) fn check_kind(
    version: u32,
    kind: &str,
    want_version: u32,
    want_kind: &str,
) -> Result<(), InvalidReport> {
    if version != want_version || kind != want_kind {
        return Err(invalid(
            "version",
            format!(
                "a {kind:?} report of version {version} (this build reads {want_kind:?} version {want_version})"
            ),
        ));
    }
    Ok(())
}

/// The runs of a stream or rr report: 1..=[`MAX_WORKERS`] of them, each passing `check_run`
/// (given its index).
pub(crate) fn check_runs<R>(
    runs: &[R],
    check_run: impl Fn(usize, &R) -> Result<(), InvalidReport>,
) -> Result<(), InvalidReport> {
    let n = runs.len();
    if n == 0 || n > MAX_WORKERS as usize {
        return Err(invalid(
            "runs",
            format!("{n} runs (allowed 1..={MAX_WORKERS})"),
        ));
    }
    for (i, run) in runs.iter().enumerate() {
        check_run(i, run)?;
    }
    Ok(())
}

/// A run's streams (`run`: the run's field, e.g. `runs[0]`): 1..=[`crate::tcp::MAX_STREAMS`].
pub(crate) fn check_run_streams(run: &str, streams: u32) -> Result<(), InvalidReport> {
    let max = crate::tcp::MAX_STREAMS;
    if !(1..=max).contains(&streams) {
        return Err(invalid(
            format!("{run}.streams"),
            format!("{streams} (allowed 1..={max})"),
        ));
    }
    Ok(())
}

/// A run's measured window: a duration within [`MAX_DURATION_S`], an end not before its start.
pub(crate) fn check_run_window(
    run: &str,
    duration_secs: f64,
    started_at_unix_ms: u64,
    ended_at_unix_ms: u64,
) -> Result<(), InvalidReport> {
    check_number(
        &format!("{run}.duration_secs"),
        duration_secs,
        0.0,
        MAX_DURATION_S,
    )?;
    if ended_at_unix_ms < started_at_unix_ms {
        return Err(invalid(
            format!("{run}.ended_at_unix_ms"),
            "before started_at_unix_ms",
        ));
    }
    Ok(())
}

/// A stream run's datagram or buffer length, within `lens`.
pub(crate) fn check_run_len(
    run: &str,
    len: usize,
    lens: std::ops::RangeInclusive<usize>,
) -> Result<(), InvalidReport> {
    if !lens.contains(&len) {
        return Err(invalid(
            format!("{run}.len"),
            format!("{len} (allowed {}..={})", lens.start(), lens.end()),
        ));
    }
    Ok(())
}

/// What every stream run (tcp, udp) holds, checked in this order: its streams, its length
/// within `$lens`, its window and its two ends (`$prefix`: the run's field, e.g. `runs[0]`).
macro_rules! check_stream_run {
    ($prefix:expr, $run:expr, $lens:expr) => {
        $crate::report::validate::check_run_streams($prefix, $run.streams)
            .and_then(|()| $crate::report::validate::check_run_len($prefix, $run.len, $lens))
            .and_then(|()| {
                $crate::report::validate::check_run_window(
                    $prefix,
                    $run.duration_secs,
                    $run.started_at_unix_ms,
                    $run.ended_at_unix_ms,
                )
            })
            .and_then(|()| {
                $crate::report::validate::check_run_ends($prefix, &$run.client, &$run.server)
            })
    };
}
pub(crate) use check_stream_run;

/// A run's two ends, as text.
pub(crate) fn check_run_ends(run: &str, client: &str, server: &str) -> Result<(), InvalidReport> {
    check_text(&format!("{run}.client"), client)?;
    check_text(&format!("{run}.server"), server)
}

/// Checks an HTTP report (single or merged) and returns its decoded histogram.
pub fn validate_http(r: &HttpReport) -> Result<Histogram<u64>, InvalidReport> {
    if r.version != REPORT_VERSION {
        return Err(invalid(
            "version",
            format!("{} (this build reads {REPORT_VERSION})", r.version),
        ));
    }
    if !(1..=MAX_WORKERS).contains(&r.workers) {
        return Err(invalid(
            "workers",
            format!("{} is outside 1..={MAX_WORKERS}", r.workers),
        ));
    }
    check_text("tool", &r.tool)?;
    check_config(r)?;
    check_window(r)?;
    let hist = histogram::decode(&r.histogram).map_err(|e| invalid("histogram", e))?;
    check_counters(r, &hist)?;
    check_latency(&r.latency, &hist)?;
    check_rates(r)?;
    check_threads(r)?;
    if let Some(a) = &r.answers {
        a.validate("answers")?;
    }
    Ok(hist)
}

fn check_config(r: &HttpReport) -> Result<(), InvalidReport> {
    let c = &r.config;
    check_text("config.url", &c.url)?;
    check_text("config.method", &c.method)?;
    if c.connections == 0 || c.threads == 0 {
        return Err(invalid(
            "config.connections",
            format!(
                "{} connection(s) on {} thread(s): both must be at least 1",
                c.connections, c.threads
            ),
        ));
    }
    check_number("config.duration_s", c.duration_s, 0.0, MAX_DURATION_S)?;
    check_number("config.warmup_s", c.warmup_s, 0.0, MAX_DURATION_S)?;
    check_number("config.timeout_s", c.timeout_s, 0.0, MAX_DURATION_S)?;
    if let Some(rate) = c.rate {
        check_number("config.rate", rate, 0.0, MAX_RATE)?;
    }
    Ok(())
}

fn check_window(r: &HttpReport) -> Result<(), InvalidReport> {
    check_number("duration_s", r.duration_s, 0.0, MAX_DURATION_S)?;
    if r.duration_s <= 0.0 {
        return Err(invalid("duration_s", "must be more than 0"));
    }
    if r.end_unix_ms < r.start_unix_ms {
        return Err(invalid(
            "end_unix_ms",
            format!(
                "{} is before start_unix_ms {}",
                r.end_unix_ms, r.start_unix_ms
            ),
        ));
    }
    Ok(())
}

/// Requests, status classes and error classes agree with each other and the histogram.
fn check_counters(r: &HttpReport, hist: &Histogram<u64>) -> Result<(), InvalidReport> {
    let c = &r.counters;
    if c.requests != hist.len() {
        return Err(invalid(
            "counters.requests",
            format!(
                "{} requests but the latency histogram holds {} samples",
                c.requests,
                hist.len()
            ),
        ));
    }
    let s = &c.status;
    let statuses = [s.s1xx, s.s2xx, s.s3xx, s.s4xx, s.s5xx, s.other]
        .iter()
        .try_fold(0u64, |acc, v| acc.checked_add(*v));
    if statuses != Some(c.requests) {
        return Err(invalid(
            "counters.status",
            format!(
                "the status classes do not add up to {} requests",
                c.requests
            ),
        ));
    }
    if c.errors.status_4xx != s.s4xx || c.errors.status_5xx != s.s5xx {
        return Err(invalid(
            "counters.errors.status_4xx",
            "4xx/5xx errors differ from the 4xx/5xx status counts",
        ));
    }
    let errors = c.errors.checked_total();
    let all = [c.warmup_requests, c.warmup_errors]
        .iter()
        .try_fold(c.requests, |acc, v| acc.checked_add(*v))
        .zip(errors)
        .and_then(|(a, e)| a.checked_add(e));
    match all {
        Some(n) if n <= MAX_TOTAL_COUNT => Ok(()),
        _ => Err(invalid(
            "counters.errors",
            format!("requests, warm-up and error counts add up to more than {MAX_TOTAL_COUNT}"),
        )),
    }
}

/// The summary is the one the histogram gives (never trust percentiles sent beside it).
fn check_latency(l: &LatencySummary, hist: &Histogram<u64>) -> Result<(), InvalidReport> {
    check_latency_at("latency", l, hist)
}

/// [`check_latency`] for a summary at `prefix` (e.g. `latency_probe.latency`): percentiles in
/// order, then every figure equal to the one the histogram gives.
pub(crate) fn check_latency_at(
    prefix: &str,
    l: &LatencySummary,
    hist: &Histogram<u64>,
) -> Result<(), InvalidReport> {
    let ordered = [
        ("min_us", l.min_us),
        ("p50_us", l.p50_us),
        ("p90_us", l.p90_us),
        ("p99_us", l.p99_us),
        ("p999_us", l.p999_us),
        ("max_us", l.max_us),
    ];
    for pair in ordered.windows(2) {
        if let [(lower, a), (name, b)] = pair {
            if b < a {
                return Err(invalid(
                    format!("{prefix}.{name}"),
                    format!("{b} is below {lower} ({a}): percentiles out of order"),
                ));
            }
        }
    }
    let want = LatencySummary::from_histogram(hist);
    let pairs = [
        ("count", l.count, want.count),
        ("min_us", l.min_us, want.min_us),
        ("p50_us", l.p50_us, want.p50_us),
        ("p90_us", l.p90_us, want.p90_us),
        ("p99_us", l.p99_us, want.p99_us),
        ("p999_us", l.p999_us, want.p999_us),
        ("max_us", l.max_us, want.max_us),
    ];
    for (name, got, want) in pairs {
        if got != want {
            return Err(invalid(
                format!("{prefix}.{name}"),
                format!("{got} but the histogram gives {want}"),
            ));
        }
    }
    let mean = format!("{prefix}.mean_us");
    check_number(&mean, l.mean_us, 0.0, f64::MAX)?;
    check_close(&mean, l.mean_us, want.mean_us)?;
    let stdev = format!("{prefix}.stdev_us");
    check_number(&stdev, l.stdev_us, 0.0, f64::MAX)?;
    check_close(&stdev, l.stdev_us, want.stdev_us)
}

fn check_rates(r: &HttpReport) -> Result<(), InvalidReport> {
    check_number("rps", r.rps, 0.0, MAX_RATE)?;
    check_number("bytes_per_sec", r.bytes_per_sec, 0.0, MAX_RATE)?;
    if let Some(rate) = &r.rate {
        check_number("rate.requested_rps", rate.requested_rps, 0.0, MAX_RATE)?;
        check_number("rate.achieved_rps", rate.achieved_rps, 0.0, MAX_RATE)?;
    }
    if r.workers != 1 {
        // A merge sums the rates of runs of different lengths: only the bounds apply.
        return Ok(());
    }
    let secs = r.duration_s.max(1e-9);
    check_close("rps", r.rps, r.counters.requests as f64 / secs)?;
    check_close(
        "bytes_per_sec",
        r.bytes_per_sec,
        r.counters.bytes_read as f64 / secs,
    )?;
    match (r.config.rate, &r.rate) {
        (None, None) => Ok(()),
        (Some(requested), Some(rate)) => {
            check_close("rate.requested_rps", rate.requested_rps, requested)?;
            check_close("rate.achieved_rps", rate.achieved_rps, r.rps)
        }
        _ => Err(invalid(
            "rate",
            "present exactly when config.rate is (open loop)",
        )),
    }
}

/// Per-thread lines: sane numbers, and (when present) they add up to the report's counters.
fn check_threads(r: &HttpReport) -> Result<(), InvalidReport> {
    let (mut requests, mut errors) = (0u64, 0u64);
    for (i, t) in r.per_thread.iter().enumerate() {
        if t.worker >= r.workers {
            return Err(invalid(
                format!("per_thread[{i}].worker"),
                format!(
                    "{} but the report combines {} worker(s)",
                    t.worker, r.workers
                ),
            ));
        }
        check_number(&format!("per_thread[{i}].rps"), t.rps, 0.0, MAX_RATE)?;
        requests = requests.saturating_add(t.requests);
        errors = errors.saturating_add(t.errors);
    }
    if r.per_thread.is_empty() {
        return Ok(());
    }
    if requests != r.counters.requests || Some(errors) != r.counters.errors.checked_total() {
        return Err(invalid(
            "per_thread",
            format!(
                "threads add up to {requests} requests and {errors} errors, the counters say {} and {}",
                r.counters.requests,
                r.counters.errors.total()
            ),
        ));
    }
    Ok(())
}

/// Asserts that `checked` is refused naming `field`, with `needle` in the message.
#[cfg(test)]
pub(crate) fn assert_refused<T: std::fmt::Debug>(
    checked: Result<T, InvalidReport>,
    field: &str,
    needle: &str,
) {
    let e = checked.unwrap_err();
    assert_eq!(e.field, field, "{e}");
    assert!(e.to_string().contains(needle), "{needle:?} not in {e}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::http_report;
    use crate::report::{merge_http, Report, ReportError};

    #[test]
    fn an_engine_report_is_valid_before_and_after_json() {
        let r = http_report(&[100, 200, 300, 5_000, 70_000], 1);
        let h = validate_http(&r).unwrap();
        assert_eq!(h.len(), 5);
        let Report::Http(back) = Report::from_json(&r.to_json()).unwrap();
        validate_http(&back).unwrap();
    }

    #[test]
    fn counts_inconsistent_with_the_histogram_are_refused() {
        let mut r = http_report(&[100, 200, 300], 0);
        r.counters.requests = 4;
        r.counters.status.s2xx = 4;
        assert_refused(
            validate_http(&r),
            "counters.requests",
            "4 requests but the latency histogram holds 3 samples",
        );
        let mut r = http_report(&[100, 200, 300], 1);
        r.counters.status.s5xx = 0;
        assert_refused(
            validate_http(&r),
            "counters.status",
            "do not add up to 3 requests",
        );
        let mut r = http_report(&[100, 200, 300], 1);
        r.counters.errors.status_5xx = 2;
        assert_refused(validate_http(&r), "counters.errors.status_4xx", "differ");
        let mut r = http_report(&[100], 0);
        r.per_thread[1].requests = 7;
        assert_refused(
            validate_http(&r),
            "per_thread",
            "threads add up to 7 requests",
        );
    }

    #[test]
    fn error_counts_that_overflow_when_summed_are_refused() {
        let mut r = http_report(&[100], 0);
        r.counters.errors.connect = u64::MAX;
        r.counters.errors.read = u64::MAX;
        assert_refused(validate_http(&r), "counters.errors", "add up to more than");
    }

    #[test]
    fn impossible_numbers_are_refused() {
        let r0 = http_report(&[100, 200], 0);
        let mut r = r0.clone();
        r.rps = f64::NAN;
        assert_refused(validate_http(&r), "rps", "NaN is not a finite number");
        let mut r = r0.clone();
        r.bytes_per_sec = f64::INFINITY;
        assert_refused(
            validate_http(&r),
            "bytes_per_sec",
            "inf is not a finite number",
        );
        let mut r = r0.clone();
        r.duration_s = -1.0;
        assert_refused(validate_http(&r), "duration_s", "-1 is outside");
        let mut r = r0.clone();
        r.config.duration_s = 1e9;
        assert_refused(validate_http(&r), "config.duration_s", "outside");
        let mut r = r0.clone();
        r.rps = 1e6;
        assert_refused(validate_http(&r), "rps", "does not match 0.2");
        let mut r = r0.clone();
        r.latency.p50_us = 150;
        assert_refused(
            validate_http(&r),
            "latency.p50_us",
            "150 but the histogram gives 100",
        );
        let mut r = r0.clone();
        r.latency.p99_us = 1;
        assert_refused(validate_http(&r), "latency.p99_us", "out of order");
        let mut r = r0.clone();
        r.latency.mean_us = -3.0;
        assert_refused(validate_http(&r), "latency.mean_us", "outside");
        let mut r = r0.clone();
        r.end_unix_ms = 0;
        assert_refused(validate_http(&r), "end_unix_ms", "before start_unix_ms");
        let mut r = r0.clone();
        r.workers = 0;
        assert_refused(validate_http(&r), "workers", "outside 1..=");
        let mut r = r0.clone();
        r.per_thread[0].worker = 1;
        assert_refused(
            validate_http(&r),
            "per_thread[0].worker",
            "1 but the report combines 1 worker(s)",
        );
        let mut r = r0;
        r.histogram = "AAAAAA==".into();
        assert_refused(
            validate_http(&r),
            "histogram",
            "not HDR V2 (cookie 0x00000000",
        );
    }

    #[test]
    fn merges_refuse_invalid_inputs_and_overflowing_sums() {
        let a = http_report(&[100, 200], 0);
        let mut bad = a.clone();
        bad.counters.requests = 9;
        assert!(matches!(
            merge_http(&[a.clone(), bad]),
            Err(ReportError::Invalid(e)) if e.field == "counters.requests"
        ));
        // Near the most bytes a report may claim (the rate cap over the longest window): four
        // of them do not fit a u64.
        let mut big = a.clone();
        (big.duration_s, big.config.duration_s) = (600_000.0, 600_000.0);
        big.counters.bytes_read = 6_000_000_000_000_000_000;
        (big.bytes_per_sec, big.rps) = (MAX_RATE, 2.0 / 600_000.0);
        validate_http(&big).unwrap();
        assert!(matches!(
            merge_http(&[big.clone(), big.clone(), big.clone(), big]),
            Err(ReportError::Overflow("counters"))
        ));
        // A merged report is valid and merges again.
        let m = merge_http(&[a.clone(), a.clone()]).unwrap();
        validate_http(&m).unwrap();
        assert_eq!(merge_http(&[m, a]).unwrap().workers, 3);
    }
}
