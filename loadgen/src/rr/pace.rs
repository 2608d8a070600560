//! When a stream's next transaction is due: at once (closed loop), or on a fixed schedule
//! (open loop), so that latency counts from the intended send time and a slow answer delays
//! the measurement of the requests queued behind it instead of hiding it (coordinated
//! omission corrected, like wrk2 and the HTTP engine).

use std::time::{Duration, Instant};

/// The answer of [`Pacer::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Send now; latency counts from this instant (the intended send time).
    Now(Instant),
    /// Nothing is due before this instant.
    At(Instant),
}

#[derive(Debug, Clone)]
pub struct Pacer {
    /// Open loop: the next intended send time and the interval.
    schedule: Option<(Instant, Duration)>,
}

impl Pacer {
    pub fn closed() -> Self {
        Pacer { schedule: None }
    }

    /// `rate` per second from `start`, shifted by `phase` (0..1) of an interval so that the
    /// streams of a test do not all send at the same instants.
    pub fn open(start: Instant, rate: f64, phase: f64) -> Self {
        let interval = Duration::try_from_secs_f64(1.0 / rate).unwrap_or(Duration::MAX);
        let first = start + interval.mul_f64(phase.clamp(0.0, 1.0));
        Pacer {
            schedule: Some((first, interval)),
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
            Some((next, interval)) => {
                let due = *next;
                if due > now {
                    return Due::At(due);
                }
                *next = due.checked_add(*interval).unwrap_or(due);
                Due::Now(due)
            }
        }
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
}
