//! What one stream records: one HDR histogram, the counts of the report, the first error's
//! message, and a live transaction count the progress reporter samples (a relaxed store per
//! transaction, nothing else shared).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use hdrhistogram::Histogram;
use protocol::report::histogram::{new_latency_histogram, LATENCY_MAX_US};
use protocol::rr::RrCounts;

/// Why a transaction failed; the classes of the report's `errors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Refused,
    Timeout,
    Reset,
    /// EADDRNOTAVAIL: no local port left.
    NoLocalPort,
    Other,
}

impl Failure {
    /// The class of an I/O error of a connect, read or write.
    pub fn of(e: &io::Error) -> Failure {
        match e.kind() {
            io::ErrorKind::ConnectionRefused => Failure::Refused,
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Failure::Timeout,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof => Failure::Reset,
            io::ErrorKind::AddrNotAvailable => Failure::NoLocalPort,
            // bind() of an explicit source address with port 0 says EADDRINUSE when every
            // port of that address is taken.
            io::ErrorKind::AddrInUse => Failure::NoLocalPort,
            _ => Failure::Other,
        }
    }
}

/// One line for a human, without the OS error's code suffix noise of timeouts.
pub fn describe(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => "timed out".into(),
        _ => e.to_string(),
    }
}

/// What one stream saw.
#[derive(Debug, Clone)]
pub struct StreamOutcome {
    pub hist: Histogram<u64>,
    pub counts: RrCounts,
    /// Of `counts.transactions`, those answered by the end of the measured window (the rest
    /// were answered in the drain after it): what the rate counts.
    pub answered_in_window: u64,
    /// Why the stream ended early, or its first failure.
    pub error: Option<String>,
}

impl Default for StreamOutcome {
    fn default() -> Self {
        StreamOutcome {
            hist: new_latency_histogram(),
            counts: RrCounts::default(),
            answered_in_window: 0,
            error: None,
        }
    }
}

/// A stream's recorder.
pub struct Recorder {
    pub out: StreamOutcome,
    live: Arc<AtomicU64>,
    /// The end of the measured window; `None`: every answer counts as in it.
    window_end: Option<Instant>,
}

impl Recorder {
    pub fn new(live: Arc<AtomicU64>) -> Self {
        Recorder {
            out: StreamOutcome::default(),
            live,
            window_end: None,
        }
    }

    /// Answers that arrive at or after `end` are transactions of the drain: counted, but not
    /// in [`StreamOutcome::answered_in_window`].
    pub fn window_ends_at(mut self, end: Instant) -> Self {
        self.window_end = Some(end);
        self
    }

    /// A transaction started (request handed to the kernel, or connect begun).
    pub fn attempted(&mut self, n: u64) {
        self.out.counts.attempted = self.out.counts.attempted.saturating_add(n);
    }

    /// Open loop: `n` intended send times of the window were never used (see
    /// [`super::pace::Pacer::skip_until`]).
    pub fn skipped(&mut self, n: u64) {
        self.out.counts.skipped = self.out.counts.skipped.saturating_add(n);
    }

    /// A transaction answered in full at `now`; latency counts from `from` (the intended send
    /// time in open loop).
    pub fn answered(&mut self, from: Instant, now: Instant) {
        let us = u64::try_from(now.saturating_duration_since(from).as_micros()).unwrap_or(u64::MAX);
        self.out.hist.saturating_record(us.clamp(1, LATENCY_MAX_US));
        if self.window_end.is_none_or(|end| now < end) {
            self.out.answered_in_window = self.out.answered_in_window.saturating_add(1);
        }
        let c = &mut self.out.counts;
        c.transactions = c.transactions.saturating_add(1);
        self.live.store(c.transactions, Ordering::Relaxed);
    }

    /// `n` transactions failed for `class`; `why` is kept if it is the stream's first error.
    pub fn failed(&mut self, n: u64, class: Failure, why: impl FnOnce() -> String) {
        let e = &mut self.out.counts.errors;
        let slot = match class {
            Failure::Refused => &mut e.refused,
            Failure::Timeout => &mut e.timeout,
            Failure::Reset => &mut e.reset,
            Failure::NoLocalPort => &mut e.address_not_available,
            Failure::Other => &mut e.other,
        };
        *slot = slot.saturating_add(n);
        self.note(why);
    }

    /// Keeps `why` as the stream's error if it has none yet.
    pub fn note(&mut self, why: impl FnOnce() -> String) {
        if self.out.error.is_none() {
            self.out.error = Some(why());
        }
    }

    pub fn finish(self) -> StreamOutcome {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn io_errors_fall_into_the_report_classes() {
        let class = |kind| Failure::of(&io::Error::from(kind));
        assert_eq!(class(io::ErrorKind::ConnectionRefused), Failure::Refused);
        assert_eq!(class(io::ErrorKind::WouldBlock), Failure::Timeout);
        assert_eq!(class(io::ErrorKind::ConnectionReset), Failure::Reset);
        assert_eq!(class(io::ErrorKind::UnexpectedEof), Failure::Reset);
        assert_eq!(class(io::ErrorKind::AddrNotAvailable), Failure::NoLocalPort);
        assert_eq!(class(io::ErrorKind::PermissionDenied), Failure::Other);
        let raw = io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
        assert_eq!(Failure::of(&raw), Failure::NoLocalPort);
    }

    #[test]
    fn counts_and_the_first_error_are_kept() {
        let live = Arc::new(AtomicU64::new(0));
        let mut r = Recorder::new(live.clone());
        let t0 = Instant::now();
        r.attempted(3);
        r.skipped(2);
        r.answered(t0, t0 + Duration::from_micros(250));
        r.failed(1, Failure::Reset, || "first".into());
        r.failed(1, Failure::Refused, || "second".into());
        let out = r.finish();
        assert_eq!((out.counts.attempted, out.counts.skipped), (3, 2));
        assert_eq!(out.counts.transactions, 1);
        assert_eq!(out.counts.errors.reset + out.counts.errors.refused, 2);
        assert_eq!(out.error.as_deref(), Some("first"));
        assert_eq!(out.hist.max(), 250);
        assert_eq!(live.load(Ordering::Relaxed), 1);
        assert_eq!(
            out.answered_in_window, 1,
            "no window end: every answer is in it"
        );
    }

    #[test]
    fn answers_in_the_drain_are_transactions_but_not_in_the_window() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut r = Recorder::new(Arc::new(AtomicU64::new(0))).window_ends_at(t0 + ms(1000));
        r.answered(t0, t0 + ms(10));
        r.answered(t0 + ms(990), t0 + ms(999));
        // Sent in the window, answered at its end or in the drain.
        r.answered(t0 + ms(995), t0 + ms(1000));
        r.answered(t0 + ms(999), t0 + ms(3000));
        let out = r.finish();
        assert_eq!(out.counts.transactions, 4);
        assert_eq!(out.answered_in_window, 2);
        assert_eq!(out.hist.len(), 4, "drain answers keep their latency");
    }
}
