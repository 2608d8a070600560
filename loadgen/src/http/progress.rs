//! Progress snapshots for a caller (CLI line, operator worker) about once per second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::stats::{new_interval_histogram, LiveCounters};

/// Time between two progress snapshots.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);

/// Latency of the responses of the last interval, merged over all threads (warm-up included).
/// A thread hands its interval over with its first response after each tick, so a thread that
/// completes nothing around a tick reports into the next interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalLatency {
    /// Responses in the interval.
    pub responses: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl IntervalLatency {
    fn from_histogram(h: &Histogram<u64>) -> Option<IntervalLatency> {
        let ms = |us: u64| us as f64 / 1000.0;
        (!h.is_empty()).then(|| IntervalLatency {
            responses: h.len(),
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
        })
    }
}

/// A progress snapshot, delivered about once per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Since the start of the run (warm-up included).
    pub elapsed: Duration,
    /// Responses completed so far (warm-up included).
    pub requests: u64,
    /// Failed requests so far (warm-up included; status errors are responses, not here).
    pub errors: u64,
    /// Responses per second over the last interval.
    pub rps: f64,
    /// Failed requests plus 4xx/5xx responses per second over the last interval (what the
    /// report's error count and error ratio count).
    pub errors_per_second: f64,
    /// Latency of the last interval; None when no response completed in it.
    pub latency: Option<IntervalLatency>,
    /// Still in the warm-up.
    pub warming_up: bool,
}

/// Receives progress snapshots on the calling thread of [`run`].
pub type ProgressSink = Box<dyn FnMut(&Progress) + Send>;

/// Calls the sink about once per second until every thread has finished.
pub(crate) fn report_progress(
    done_rx: &mpsc::Receiver<()>,
    threads: usize,
    start: Instant,
    measure_start: Instant,
    live: &[Arc<LiveCounters>],
    mut sink: Option<&mut ProgressSink>,
) {
    let mut finished = 0;
    let mut last = Totals {
        at: start,
        completed: 0,
        errors: 0,
        status_errors: 0,
    };
    let mut next_tick = start + INTERVAL;
    let mut merged = new_interval_histogram();
    while finished < threads {
        let wait = next_tick.saturating_duration_since(Instant::now());
        match done_rx.recv_timeout(wait) {
            Ok(()) => finished += 1,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                next_tick += INTERVAL;
                let Some(sink) = sink.as_mut() else { continue };
                // Latencies first, then the totals: every response in the histogram is
                // already in the counts.
                merged.reset();
                for l in live {
                    l.drain_latency_into(&mut merged);
                }
                let now = Totals::read(live);
                let dt = now.at.duration_since(last.at).as_secs_f64().max(1e-9);
                let per_second = |a: u64, b: u64| a.saturating_sub(b) as f64 / dt;
                sink(&Progress {
                    elapsed: now.at.duration_since(start),
                    requests: now.completed,
                    errors: now.errors,
                    rps: per_second(now.completed, last.completed),
                    errors_per_second: per_second(
                        now.errors + now.status_errors,
                        last.errors + last.status_errors,
                    ),
                    latency: IntervalLatency::from_histogram(&merged),
                    warming_up: now.at < measure_start,
                });
                last = now;
            }
        }
    }
}

/// The threads' totals at one instant.
#[derive(Debug, Clone, Copy)]
struct Totals {
    at: Instant,
    completed: u64,
    errors: u64,
    status_errors: u64,
}

impl Totals {
    fn read(live: &[Arc<LiveCounters>]) -> Totals {
        let sum = |f: fn(&LiveCounters) -> &AtomicU64| {
            live.iter().map(|l| f(l).load(Ordering::Relaxed)).sum()
        };
        Totals {
            at: Instant::now(),
            completed: sum(|l| &l.completed),
            errors: sum(|l| &l.errors),
            status_errors: sum(|l| &l.status_errors),
        }
    }
}

/// Signals the progress loop when a thread ends, even by panic.
pub(crate) struct DoneGuard(pub mpsc::Sender<()>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}
