//! When a stream's next transaction is due: at once (closed loop), or on a fixed schedule
//! (open loop), so that latency counts from the intended send time and a slow answer delays
//! the measurement of the requests queued behind it instead of hiding it (coordinated
//! omission corrected, like wrk2 and the HTTP engine).
//!
//! The open-loop schedule: send `k` (k = 0, 1, ...) is intended at `start + (k + phase) /
//! rate`, computed from `k` (never by adding intervals, so no rounding piles up over a long
//! test). Every intended time before the end of the window is either taken ([`Pacer::poll`])
//! or counted as skipped ([`Pacer::skip_until`]): a stream that falls behind (starved of CPU,
//! or its window full of requests waiting for answers) sends what is due as soon as it can,
//! and what it never got to by the end is reported, never silently left out.

use std::time::{Duration, Instant};

/// The answer of [`Pacer::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Send now; latency counts from this instant (the intended send time).
    Now(Instant),
    /// Nothing is due before this instant.
    At(Instant),
}

/// How far ahead [`Pacer::poll`] says the next send is when the schedule has no more
/// representable instants (a caller waits until its own deadline at the latest).
const NEVER: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone)]
struct Schedule {
    start: Instant,
    /// Sends per second (> 0, finite; [`Pacer::open`] sees to it).
    rate: f64,
    /// Fraction of an interval by which the schedule is shifted, in 0..1.
    phase: f64,
    /// Index of the next intended send.
    next: u64,
}

impl Schedule {
    /// The intended time of send `k`, or `None` past what an `Instant` can hold.
    fn at(&self, k: u64) -> Option<Instant> {
        let secs = (k as f64 + self.phase) / self.rate;
        Duration::try_from_secs_f64(secs)
            .ok()
            .and_then(|d| self.start.checked_add(d))
    }

    /// Whether send `k` is intended before `end`.
    fn before(&self, k: u64, end: Instant) -> bool {
        self.at(k).is_some_and(|t| t < end)
    }

    /// The index of the first send intended at or after `end`.
    fn first_at_or_after(&self, end: Instant) -> u64 {
        let secs = end.saturating_duration_since(self.start).as_secs_f64();
        // (k + phase) / rate >= secs  <=>  k >= secs * rate - phase; then exact, one by one
        // (float rounding moves the estimate by one at most).
        let estimate = (secs * self.rate - self.phase).ceil().max(0.0);
        let mut k = if estimate >= u64::MAX as f64 {
            u64::MAX
        } else {
            estimate as u64
        };
        while k < u64::MAX && self.before(k, end) {
            k += 1;
        }
        while k > 0 && !self.before(k - 1, end) {
            k -= 1;
        }
        k
    }
}

#[derive(Debug, Clone)]
pub struct Pacer {
    /// Open loop only.
    schedule: Option<Schedule>,
}

impl Pacer {
    pub fn closed() -> Self {
        Pacer { schedule: None }
    }

    /// `rate` per second from `start`, shifted by `phase` (0..1) of an interval so that the
    /// streams of a test do not all send at the same instants. A rate that is not a positive
    /// finite number schedules nothing.
    pub fn open(start: Instant, rate: f64, phase: f64) -> Self {
        let rate = if rate.is_finite() && rate > 0.0 {
            rate
        } else {
            f64::MIN_POSITIVE
        };
        let phase = if phase.is_finite() {
            phase.clamp(0.0, 1.0)
        } else {
            0.0
        };
        Pacer {
            schedule: Some(Schedule {
                start,
                rate,
                phase,
                next: 0,
            }),
        }
    }

    pub fn is_open(&self) -> bool {
        self.schedule.is_some()
    }

    /// Takes the next transaction if it is due at `now`. In closed loop it is due at once and
    /// its latency counts from this call (a fresh clock reading, not `now`, which the caller
    /// may have taken a while ago).
    pub fn poll(&mut self, now: Instant) -> Due {
        match &mut self.schedule {
            None => Due::Now(Instant::now().max(now)),
            Some(s) => match s.at(s.next) {
                Some(due) if due <= now => {
                    s.next = s.next.saturating_add(1);
                    Due::Now(due)
                }
                Some(due) => Due::At(due),
                None => Due::At(now.checked_add(NEVER).unwrap_or(now)),
            },
        }
    }

    /// At the end of the window: the intended send times before `end` that were not taken,
    /// which are now given up (0 in closed loop). Sends taken plus these are the schedule.
    pub fn skip_until(&mut self, end: Instant) -> u64 {
        let Some(s) = &mut self.schedule else {
            return 0;
        };
        let end_index = s.first_at_or_after(end);
        let skipped = end_index.saturating_sub(s.next);
        s.next = s.next.max(end_index);
        skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_loop_is_always_due_now() {
        let mut p = Pacer::closed();
        let then = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        let Due::Now(at) = p.poll(then) else {
            panic!("always due");
        };
        assert!(
            at >= then + Duration::from_millis(2),
            "counts from the call, not from then"
        );
        assert!(!p.is_open());
        assert_eq!(p.skip_until(then + Duration::from_secs(1)), 0);
    }

    #[test]
    fn open_loop_keeps_its_schedule_even_when_late() {
        let start = Instant::now();
        let ms = Duration::from_millis;
        let mut p = Pacer::open(start, 100.0, 0.5);
        assert_eq!(p.poll(start), Due::At(start + ms(5)));
        // Late by 30 ms: the missed sends are due at once, each at its intended instant.
        let now = start + ms(30);
        assert_eq!(p.poll(now), Due::Now(start + ms(5)));
        assert_eq!(p.poll(now), Due::Now(start + ms(15)));
        assert_eq!(p.poll(now), Due::Now(start + ms(25)));
        assert_eq!(p.poll(now), Due::At(start + ms(35)));
    }

    #[test]
    fn sends_taken_plus_sends_skipped_are_the_schedule() {
        let start = Instant::now();
        // (rate, phase, window, intended sends in the window: k with (k + phase) / rate < window)
        let cases = [
            (200.0, 0.0, 1.0, 200),
            (200.0, 0.5, 1.0, 200),
            (3.0, 0.5, 1.0, 3),
            (3.0, 0.0, 1.0, 3),
            (7.0, 0.999, 1.0, 7),
            (1e7, 0.25, 3.5, 35_000_000),
            (0.5, 0.5, 1.0, 0),
            (0.5, 0.0, 10.0, 5),
        ];
        for (rate, phase, secs, want) in cases {
            let end = start + Duration::from_secs_f64(secs);
            // A stream that keeps up for a while, then is starved until the end: whatever
            // it took, the rest is skipped.
            for stop_after in [0, 1, 2] {
                let mut p = Pacer::open(start, rate, phase);
                let mut taken = 0u64;
                while taken < stop_after {
                    match p.poll(end - Duration::from_nanos(1)) {
                        Due::Now(t) => {
                            assert!(t < end);
                            taken += 1;
                        }
                        Due::At(_) => break,
                    }
                }
                let skipped = p.skip_until(end);
                assert_eq!(taken + skipped, want, "{rate}/s phase {phase} for {secs} s");
                assert_eq!(p.skip_until(end), 0, "skipped once only");
            }
        }
    }

    #[test]
    fn a_long_open_loop_does_not_drift() {
        // 1/3 ms intervals are not whole nanoseconds: send 3 000 000 of 3000/s is still due
        // exactly 1000 s after the start.
        let start = Instant::now();
        let mut p = Pacer::open(start, 3000.0, 0.0);
        assert_eq!(p.skip_until(start + Duration::from_secs(1000)), 3_000_000);
        assert_eq!(p.poll(start), Due::At(start + Duration::from_secs(1000)));
    }
}
