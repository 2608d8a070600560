//! Timing helpers that reuse one timer per connection instead of registering one per request.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::task::Poll;

use tokio::time::{sleep_until, Instant, Sleep};

/// Races futures against a deadline. The timer is re-armed lazily: request deadlines only move
/// forward, so a timer set for an earlier deadline fires early at worst and is then pushed to
/// the current one: about one timer-wheel update per timeout period, not one per request.
pub(crate) struct Deadline {
    sleep: Pin<Box<Sleep>>,
    armed: bool,
}

impl Deadline {
    pub(crate) fn new() -> Self {
        Deadline {
            sleep: Box::pin(sleep_until(
                Instant::now() + std::time::Duration::from_secs(3600),
            )),
            armed: false,
        }
    }

    /// `Some(output)`, or `None` if `deadline` passed first.
    pub(crate) async fn run<F: Future>(
        &mut self,
        deadline: std::time::Instant,
        fut: F,
    ) -> Option<F::Output> {
        let deadline = Instant::from_std(deadline);
        let mut fut = pin!(fut);
        poll_fn(|cx| {
            if let Poll::Ready(v) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(v));
            }
            if !self.armed || self.sleep.deadline() > deadline {
                self.sleep.as_mut().reset(deadline);
                self.armed = true;
            }
            loop {
                match self.sleep.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) if Instant::now() >= deadline => {
                        self.armed = false;
                        return Poll::Ready(None);
                    }
                    Poll::Ready(()) => self.sleep.as_mut().reset(deadline),
                }
            }
        })
        .await
    }
}

/// When the next request is due: now (closed loop) or on a fixed per-connection schedule
/// (open loop, so latency counts from the intended send time).
pub(crate) struct Pacer {
    end: std::time::Instant,
    schedule: Option<(std::time::Instant, std::time::Duration)>,
    sleep: Pin<Box<Sleep>>,
}

impl Pacer {
    pub(crate) fn new(
        end: std::time::Instant,
        schedule: Option<(std::time::Instant, std::time::Duration)>,
    ) -> Self {
        Pacer {
            end,
            schedule,
            sleep: Box::pin(sleep_until(Instant::now())),
        }
    }

    /// `(counts_from, now)` for the next request, or `None` when the run is over. Latency counts
    /// from the first (the intended send time in open loop); timeouts from the second.
    pub(crate) async fn next(&mut self) -> Option<(std::time::Instant, std::time::Instant)> {
        let now = std::time::Instant::now();
        match &mut self.schedule {
            None => (now < self.end).then_some((now, now)),
            Some((next, interval)) => {
                let due = *next;
                if due >= self.end {
                    return None;
                }
                *next += *interval;
                if due > now {
                    self.sleep.as_mut().reset(Instant::from_std(due));
                    self.sleep.as_mut().await;
                    return Some((due, due));
                }
                Some((due, now))
            }
        }
    }
}
