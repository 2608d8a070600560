//! The node's connection tracking table as the client saw it: `nf_conntrack_count` against
//! `nf_conntrack_max`, read in the client's own network namespace (the node's for a
//! hostNetwork client, the pod's otherwise) at the start, once a second and at the end. A
//! full table makes the kernel drop new connections' first packets: tcp-crr at a high rate
//! then shows timeouts (or refusals) that the node caused, not the path. [`conntrack_warnings`]
//! says so when failures coincide with a table at [`NEAR_FULL_PERCENT`] or more, and says when
//! the table could not be read instead of passing over it.

use serde::{Deserialize, Serialize};

use super::report::{RrReport, RrRun};
use crate::report::{check_text, invalid, InvalidReport};

/// Highest count or limit a report may carry (the kernel keeps them in 32 bits).
pub const MAX_CONNTRACK_ENTRIES: u64 = u32::MAX as u64;
/// Use of the table, in percent of its limit, from which failures are blamed on it.
pub const NEAR_FULL_PERCENT: u64 = 90;

/// Entries of the conntrack table during one client's test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConntrackUse {
    /// `nf_conntrack_count` when the test started.
    pub at_start: u64,
    /// `nf_conntrack_count` when the streams had ended.
    pub at_end: u64,
    /// The highest count read (at the start, once a second, at the end).
    pub highest: u64,
    /// `nf_conntrack_max`: the table's limit.
    pub max: u64,
}

impl ConntrackUse {
    /// The highest count reached [`NEAR_FULL_PERCENT`] of the limit.
    pub fn near_full(&self) -> bool {
        self.max > 0
            && u128::from(self.highest) * 100
                >= u128::from(self.max) * u128::from(NEAR_FULL_PERCENT)
    }
}

/// A run's conntrack figures: bounded, the highest count at least the first and last, and
/// either figures or the reason there are none (neither: a report of an older build).
pub(crate) fn check_conntrack(field: &str, run: &RrRun) -> Result<(), InvalidReport> {
    if let Some(note) = &run.conntrack_note {
        check_text(&format!("{field}.conntrack_note"), note)?;
        if run.conntrack.is_some() {
            return Err(invalid(
                format!("{field}.conntrack_note"),
                "present with conntrack figures (a note says why there are none)",
            ));
        }
    }
    let Some(c) = &run.conntrack else {
        return Ok(());
    };
    for (name, v) in [
        ("at_start", c.at_start),
        ("at_end", c.at_end),
        ("highest", c.highest),
        ("max", c.max),
    ] {
        if v > MAX_CONNTRACK_ENTRIES {
            return Err(invalid(
                format!("{field}.conntrack.{name}"),
                format!("{v} is more than {MAX_CONNTRACK_ENTRIES}"),
            ));
        }
    }
    if c.highest < c.at_start.max(c.at_end) {
        return Err(invalid(
            format!("{field}.conntrack.highest"),
            format!(
                "{} but {} and {} were read at the start and the end",
                c.highest, c.at_start, c.at_end
            ),
        ));
    }
    Ok(())
}

/// Warnings for a reader: failures (timeouts, refusals) while a client's conntrack table was
/// near full, naming count and limit; and, for tcp-crr with failures, a client whose table
/// could not be read (with the reason), so that "no warning" never stands for "not known".
pub fn conntrack_warnings(r: &RrReport) -> Vec<String> {
    let e = &r.counts.errors;
    let failures = e.timeout.saturating_add(e.refused);
    if failures == 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for run in &r.runs {
        match (&run.conntrack, &run.conntrack_note) {
            (Some(c), _) if c.near_full() => out.push(format!(
                "{failures} transaction(s) failed (timeout {}, refused {}) while the conntrack \
                 table of client {:.64} held up to {} of its {} entries (nf_conntrack_count vs \
                 nf_conntrack_max, {} % or more): the node most likely dropped the new \
                 connections, not the path; raise net.netfilter.nf_conntrack_max or lower the \
                 rate",
                e.timeout, e.refused, run.client, c.highest, c.max, NEAR_FULL_PERCENT
            )),
            (Some(_), _) => {}
            (None, note) if r.setup.mode.connects_per_transaction() => out.push(format!(
                "{failures} transaction(s) failed and the conntrack use of client {:.64} is \
                 unknown ({:.200}): whether a full conntrack table caused them cannot be told",
                run.client,
                note.as_deref()
                    .unwrap_or("not reported by this client's build")
            )),
            (None, _) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rr::report::fixtures::rr_report;
    use crate::Protocol;

    fn reading(highest: u64, max: u64) -> ConntrackUse {
        ConntrackUse {
            at_start: 10,
            at_end: 20,
            highest,
            max,
        }
    }

    /// A tcp-crr report with `timeouts` failed connects and the client's conntrack figures.
    fn crr(timeouts: u64, conntrack: Option<ConntrackUse>, note: Option<&str>) -> RrReport {
        let mut r = rr_report(Protocol::TcpCrr, &[100, 200], 0);
        r.counts.errors.refused = 0;
        r.counts.errors.timeout = timeouts;
        r.runs[0].conntrack = conntrack;
        r.runs[0].conntrack_note = note.map(str::to_string);
        r
    }

    #[test]
    fn failures_with_a_near_full_table_name_count_and_limit() {
        let w = conntrack_warnings(&crr(7, Some(reading(236_000, 262_144)), None));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("7 transaction(s) failed (timeout 7, refused 0)"),
            "{w:?}"
        );
        assert!(w[0].contains("up to 236000 of its 262144 entries"), "{w:?}");
        // Exactly 90 % counts; just under does not.
        assert_eq!(
            conntrack_warnings(&crr(1, Some(reading(90, 100)), None)).len(),
            1
        );
        assert!(conntrack_warnings(&crr(1, Some(reading(89, 100)), None)).is_empty());
        // A full table without failures, or failures with room in the table: no blame.
        assert!(conntrack_warnings(&crr(0, Some(reading(100, 100)), None)).is_empty());
        assert!(conntrack_warnings(&crr(5, Some(reading(20, 262_144)), None)).is_empty());
        // Absurd figures cannot overflow the comparison; a limit of 0 is never "near full".
        assert!(reading(u64::MAX, u64::MAX).near_full());
        assert!(!reading(5, 0).near_full());
    }

    #[test]
    fn a_table_that_could_not_be_read_is_said_not_passed_over() {
        let why = "no /proc/sys/net/netfilter/nf_conntrack_count: nf_conntrack is not loaded";
        let w = conntrack_warnings(&crr(3, None, Some(why)));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("unknown (no /proc/sys/net/netfilter"),
            "{w:?}"
        );
        let w = conntrack_warnings(&crr(3, None, None));
        assert!(
            w[0].contains("not reported by this client's build"),
            "{w:?}"
        );
        // Nothing failed: nothing to blame or to doubt.
        assert!(conntrack_warnings(&crr(0, None, Some(why))).is_empty());
        // tcp-rr and udp-rr keep one flow per stream: their failures are not the table's.
        let mut rr = crr(3, None, None);
        rr.setup.mode = Protocol::TcpRr;
        assert!(conntrack_warnings(&rr).is_empty());
    }

    #[test]
    fn forged_conntrack_figures_are_refused() {
        let ok = crr(0, Some(reading(30, 262_144)), None);
        check_conntrack("runs[0]", &ok.runs[0]).unwrap();
        let refused = |r: &RrReport, field: &str| {
            let e = check_conntrack("runs[0]", &r.runs[0]).unwrap_err();
            assert_eq!(e.field, field, "{e}");
        };
        refused(
            &crr(0, Some(reading(30, u64::MAX)), None),
            "runs[0].conntrack.max",
        );
        refused(
            &crr(0, Some(reading(15, 100)), None),
            "runs[0].conntrack.highest",
        );
        refused(
            &crr(0, Some(reading(30, 100)), Some("both")),
            "runs[0].conntrack_note",
        );
        refused(
            &crr(0, None, Some(&"x".repeat(10_000))),
            "runs[0].conntrack_note",
        );
    }
}
