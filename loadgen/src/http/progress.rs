//! Progress snapshots for a caller (CLI line, operator worker) about once per second.

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::stats::LiveCounters;

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
    let mut last = (start, 0u64);
    let mut next_tick = start + Duration::from_secs(1);
    while finished < threads {
        let wait = next_tick.saturating_duration_since(Instant::now());
        match done_rx.recv_timeout(wait) {
            Ok(()) => finished += 1,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                next_tick += Duration::from_secs(1);
                let Some(sink) = sink.as_mut() else { continue };
                let requests: u64 = live
                    .iter()
                    .map(|l| l.completed.load(Ordering::Relaxed))
                    .sum();
                let errors: u64 = live.iter().map(|l| l.errors.load(Ordering::Relaxed)).sum();
                let dt = now.duration_since(last.0).as_secs_f64().max(1e-9);
                sink(&Progress {
                    elapsed: now.duration_since(start),
                    requests,
                    errors,
                    rps: requests.saturating_sub(last.1) as f64 / dt,
                    warming_up: now < measure_start,
                });
                last = (now, requests);
            }
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
