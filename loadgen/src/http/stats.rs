//! Per-thread recording: one HDR histogram and one set of counters per OS thread, shared by that
//! thread's connection tasks (single-threaded runtime, so a `RefCell` suffices), merged at the end.
//! For live progress each thread also keeps an interval histogram that it hands to the reporter
//! about once per second (one uncontended lock per second, no allocation per request).
//! With `--record-answers` it also keeps the record of the answers its connections saw.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use protocol::report::histogram::{new_latency_histogram, LATENCY_MAX_US};
use protocol::report::Counters;

use super::answers::{Run, ThreadAnswers, WallClock};
use super::progress::INTERVAL;

/// A thread hands over its interval latencies this long before each progress tick, so the
/// reporter finds the interval in place when it wakes (rather than racing the hand-over).
const FLUSH_LEAD: Duration = Duration::from_millis(20);

/// Why a request failed (status classes are counted from completed responses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    Connect,
    Timeout,
    Read,
    Write,
    Parse,
}

/// An interval latency histogram: microseconds, 2 significant digits (1 % is plenty for a live
/// chart and keeps the per-second merge small), same range as the report's.
pub(crate) fn new_interval_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 2).expect("constant histogram bounds are valid")
}

/// Live figures of one thread, read by the progress reporter: totals (single writer, relaxed
/// stores) and the latencies handed over since the reporter last took them.
#[derive(Debug)]
pub(crate) struct LiveCounters {
    pub completed: AtomicU64,
    /// Failed requests (no response).
    pub errors: AtomicU64,
    /// 4xx/5xx responses (responses, but errors in the report's error count).
    pub status_errors: AtomicU64,
    pub latency: Mutex<Histogram<u64>>,
}

impl Default for LiveCounters {
    fn default() -> Self {
        LiveCounters {
            completed: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            status_errors: AtomicU64::new(0),
            latency: Mutex::new(new_interval_histogram()),
        }
    }
}

impl LiveCounters {
    /// Adds a thread's interval latencies to the hand-over.
    fn hand_over(&self, interval: &Histogram<u64>) {
        let mut h = self.latency.lock().unwrap_or_else(PoisonError::into_inner);
        h.add(interval)
            .expect("interval histograms share their bounds");
    }

    /// Adds the latencies handed over since the last call to `into` and clears them.
    pub(crate) fn drain_latency_into(&self, into: &mut Histogram<u64>) {
        let mut h = self.latency.lock().unwrap_or_else(PoisonError::into_inner);
        into.add(&*h)
            .expect("interval histograms share their bounds");
        h.reset();
    }
}

pub(crate) struct ThreadStats {
    pub hist: Histogram<u64>,
    pub counters: Counters,
    measure_start: Instant,
    live: Arc<LiveCounters>,
    completed: u64,
    failed: u64,
    status_errors: u64,
    /// Latencies since the last hand-over to `live.latency`, due at `next_flush`.
    interval: Histogram<u64>,
    next_flush: Instant,
    /// The answers seen (only when they are recorded).
    pub answers: Option<ThreadAnswers>,
}

impl ThreadStats {
    /// `start`: when the run (and the progress ticks) started; `record_answers`: keep the
    /// record of answers, its instants converted through `start`.
    pub(crate) fn new(
        start: WallClock,
        measure_start: Instant,
        live: Arc<LiveCounters>,
        record_answers: bool,
    ) -> Self {
        ThreadStats {
            answers: record_answers.then(|| ThreadAnswers::new(start)),
            hist: new_latency_histogram(),
            counters: Counters::default(),
            measure_start,
            live,
            completed: 0,
            failed: 0,
            status_errors: 0,
            interval: new_interval_histogram(),
            next_flush: start.instant + INTERVAL - FLUSH_LEAD,
        }
    }

    /// A complete response to a request that started (or was due, in open loop) at `started`.
    pub(crate) fn response(
        &mut self,
        started: Instant,
        now: Instant,
        status: u16,
        read: u64,
        written: u64,
    ) {
        self.completed += 1;
        self.live.completed.store(self.completed, Ordering::Relaxed);
        let us = now.saturating_duration_since(started).as_micros();
        let us = (us as u64).clamp(1, LATENCY_MAX_US);
        // The live figures include the warm-up, like the live request count.
        self.interval.saturating_record(us);
        if matches!(status, 400..=599) {
            self.status_errors += 1;
            self.live
                .status_errors
                .store(self.status_errors, Ordering::Relaxed);
        }
        if now >= self.next_flush {
            self.flush(now);
        }
        if started < self.measure_start {
            self.counters.warmup_requests += 1;
            return;
        }
        let c = &mut self.counters;
        c.requests += 1;
        c.bytes_read += read;
        c.bytes_written += written;
        c.status.count(status);
        match status {
            400..=499 => c.errors.status_4xx += 1,
            500..=599 => c.errors.status_5xx += 1,
            _ => {}
        }
        self.hist.saturating_record(us);
    }

    /// Hands the interval's latencies to the reporter (added, so nothing is lost if it has
    /// not taken the previous ones yet).
    fn flush(&mut self, now: Instant) {
        self.live.hand_over(&self.interval);
        self.interval.reset();
        while self.next_flush <= now {
            self.next_flush += INTERVAL;
        }
    }

    /// A connection's run of equal answers ended (the answer changed, or the connection task
    /// is over).
    pub(crate) fn answers_run(&mut self, run: Run) {
        if let Some(a) = &mut self.answers {
            a.add(run);
        }
    }

    /// Hostname `host` first answered a 2xx naming a backend on some connection at `at`.
    pub(crate) fn first_ok(&mut self, host: usize, at: Instant) {
        if let Some(a) = &mut self.answers {
            a.first_ok(host, at);
        }
    }

    /// A failed request; never retried, never in the latency figures.
    pub(crate) fn error(&mut self, started: Instant, class: ErrorClass) {
        self.failed += 1;
        self.live.errors.store(self.failed, Ordering::Relaxed);
        if started < self.measure_start {
            self.counters.warmup_errors += 1;
            return;
        }
        let e = &mut self.counters.errors;
        match class {
            ErrorClass::Connect => e.connect += 1,
            ErrorClass::Timeout => e.timeout += 1,
            ErrorClass::Read => e.read += 1,
            ErrorClass::Write => e.write += 1,
            ErrorClass::Parse => e.parse += 1,
        }
    }
}
