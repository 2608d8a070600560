//! Per-thread recording: one HDR histogram and one set of counters per OS thread, shared by that
//! thread's connection tasks (single-threaded runtime, so a `RefCell` suffices), merged at the end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use hdrhistogram::Histogram;

use crate::report::histogram::{new_latency_histogram, LATENCY_MAX_US};
use crate::report::Counters;

/// Why a request failed (status classes are counted from completed responses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    Connect,
    Timeout,
    Read,
    Write,
    Parse,
}

/// Live totals of one thread, read by the progress reporter (single writer, relaxed stores).
#[derive(Debug, Default)]
pub(crate) struct LiveCounters {
    pub completed: AtomicU64,
    pub errors: AtomicU64,
}

pub(crate) struct ThreadStats {
    pub hist: Histogram<u64>,
    pub counters: Counters,
    measure_start: Instant,
    live: Arc<LiveCounters>,
    completed: u64,
    failed: u64,
}

impl ThreadStats {
    pub(crate) fn new(measure_start: Instant, live: Arc<LiveCounters>) -> Self {
        ThreadStats {
            hist: new_latency_histogram(),
            counters: Counters::default(),
            measure_start,
            live,
            completed: 0,
            failed: 0,
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
        let us = now.saturating_duration_since(started).as_micros();
        let us = (us as u64).clamp(1, LATENCY_MAX_US);
        self.hist.saturating_record(us);
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
