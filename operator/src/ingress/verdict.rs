//! Whether a measured step counts as work done. A step in which no request succeeded, or in
//! which more than the admin's share (`--max-error-ratio`) failed, ends the run Failed (RequestsFailed) with a
//! message naming the dominant error class; its numbers stay in status (they are true). Pure.
//!
//! Counting follows loadgen: `requests` are completed responses (4xx/5xx included, and also
//! counted as status errors); the other classes are requests that got no response.

use crds::ingress::StepResult;
use crds::ErrorCounts;

/// The error classes as (name, count, what it means), in report order.
fn classes(e: &ErrorCounts) -> [(&'static str, u64, &'static str); 7] {
    [
        ("connect", e.connect, "TCP connect or TLS handshake failed"),
        ("timeout", e.timeout, "no response within load.timeout"),
        ("read", e.read, "reading the response failed"),
        ("write", e.write, "sending the request failed"),
        ("status5xx", e.status5xx, "5xx responses"),
        ("status4xx", e.status4xx, "4xx responses"),
        ("parse", e.parse, "the response was not valid HTTP"),
    ]
}

/// "connect 12345 (TCP connect or TLS handshake failed)", then the other classes seen.
pub fn describe_errors(e: &ErrorCounts) -> String {
    let mut seen: Vec<_> = classes(e).into_iter().filter(|c| c.1 > 0).collect();
    // Stable: on a tie the class listed first wins.
    seen.sort_by_key(|c| std::cmp::Reverse(c.1));
    let mut parts = seen.iter();
    let Some((name, count, meaning)) = parts.next() else {
        return "no error recorded".into();
    };
    let mut text = format!("{name} {count} ({meaning})");
    let rest: Vec<String> = parts.map(|(n, c, _)| format!("{n} {c}")).collect();
    if !rest.is_empty() {
        text.push_str(&format!("; also {}", rest.join(", ")));
    }
    text
}

/// Some(why) when the step failed as a whole: nothing measured, nothing succeeded, or a
/// failure share above `max_error_ratio` (1.0 or more turns that last check off).
pub fn failed_requests(s: &StepResult, max_error_ratio: f64) -> Option<String> {
    let e = &s.errors;
    let status = e.status4xx.saturating_add(e.status5xx);
    let unanswered = [e.connect, e.timeout, e.read, e.write, e.parse]
        .into_iter()
        .fold(0u64, u64::saturating_add);
    let succeeded = s.requests.saturating_sub(status);
    let failed = unanswered.saturating_add(status);
    let attempts = succeeded.saturating_add(failed);
    if attempts == 0 {
        return Some("no request completed or failed in the measured time".into());
    }
    if succeeded == 0 {
        return Some(format!(
            "all {failed} requests failed: {}",
            describe_errors(e)
        ));
    }
    let ratio = failed as f64 / attempts as f64;
    (max_error_ratio < 1.0 && ratio > max_error_ratio).then(|| {
        format!(
            "{failed} of {attempts} requests failed ({:.1}%, above the operator's limit of {:.1}%): {}",
            ratio * 100.0,
            max_error_ratio * 100.0,
            describe_errors(e)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(requests: u64, errors: ErrorCounts) -> StepResult {
        StepResult {
            requests,
            errors,
            ..Default::default()
        }
    }

    #[test]
    fn every_request_failing_names_the_dominant_class_and_its_count() {
        let s = step(
            0,
            ErrorCounts {
                connect: 12345,
                ..Default::default()
            },
        );
        assert_eq!(
            failed_requests(&s, 1.0).as_deref(),
            Some("all 12345 requests failed: connect 12345 (TCP connect or TLS handshake failed)")
        );
        let mixed = step(
            0,
            ErrorCounts {
                connect: 3,
                timeout: 40,
                read: 2,
                ..Default::default()
            },
        );
        assert_eq!(
            failed_requests(&mixed, 0.5).as_deref(),
            Some("all 45 requests failed: timeout 40 (no response within load.timeout); also connect 3, read 2")
        );
    }

    #[test]
    fn responses_that_are_all_errors_fail_too() {
        // 5xx responses are completed requests and status errors at once.
        let s = step(
            100,
            ErrorCounts {
                status5xx: 100,
                ..Default::default()
            },
        );
        let m = failed_requests(&s, 1.0).unwrap();
        assert!(
            m.starts_with("all 100 requests failed: status5xx 100"),
            "{m}"
        );
    }

    #[test]
    fn the_error_ratio_is_the_admins_choice() {
        let s = step(
            40,
            ErrorCounts {
                connect: 60,
                ..Default::default()
            },
        );
        let m = failed_requests(&s, 0.5).unwrap();
        assert!(
            m.starts_with("60 of 100 requests failed (60.0%, above the operator's limit of 50.0%): connect 60"),
            "{m}"
        );
        assert_eq!(failed_requests(&s, 0.6), None, "at the limit is fine");
        assert_eq!(failed_requests(&s, 1.0), None, "1.0 turns the check off");
        assert_eq!(
            failed_requests(&step(1000, ErrorCounts::default()), 0.0),
            None
        );
    }

    #[test]
    fn nothing_measured_is_a_failure_and_huge_counts_do_not_overflow() {
        assert!(failed_requests(&step(0, ErrorCounts::default()), 1.0)
            .unwrap()
            .contains("no request"));
        let s = step(
            u64::MAX,
            ErrorCounts {
                connect: u64::MAX,
                timeout: u64::MAX,
                status4xx: u64::MAX,
                status5xx: u64::MAX,
                ..Default::default()
            },
        );
        assert!(failed_requests(&s, 0.5).is_some());
    }
}
