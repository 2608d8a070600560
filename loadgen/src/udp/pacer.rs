//! The paced sender's schedule (pure: times in, decisions out). Datagram k of a stream is
//! intended at k x interval after the stream's start (open loop: the schedule never waits for
//! the network or the receiver).
//!
//! - A sender that wakes up late sends every datagram that is due at once, but at most
//!   [`MAX_BURST`] back to back: intended times further behind are given up and counted as
//!   skipped (the sender could not keep the rate), so a stall never turns into a burst that
//!   the path would not otherwise see.
//! - A datagram sent more than [`LATE_AFTER_NS`] after its intended time is counted as late.
//! - Only intended times before the end of the test are used; those left unused at the end
//!   count as skipped too ([`Pacer::finish`]).

/// Most datagrams sent back to back to catch up with the schedule.
pub(crate) const MAX_BURST: u64 = 64;
/// Lateness that counts: 1 ms.
pub(crate) const LATE_AFTER_NS: u64 = 1_000_000;

#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    interval_ns: f64,
    /// Intended times at or after this are past the end of the test.
    end_ns: u64,
    /// The next intended time to use (its index).
    next: u64,
    pub skipped: u64,
    pub late: u64,
}

/// What to do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Send this many datagrams now.
    Send(u64),
    /// Nothing is due before this time.
    WaitUntil(u64),
    /// The schedule is used up.
    Done,
}

impl Pacer {
    /// `packets_per_second` > 0 (the caller checks), for `duration_ns`.
    pub fn new(packets_per_second: f64, duration_ns: u64) -> Pacer {
        Pacer {
            interval_ns: 1e9 / packets_per_second,
            end_ns: duration_ns,
            next: 0,
            skipped: 0,
            late: 0,
        }
    }

    /// The intended time of datagram `k`.
    fn at(&self, k: u64) -> u64 {
        let t = k as f64 * self.interval_ns;
        if t >= self.end_ns as f64 {
            u64::MAX
        } else {
            t as u64
        }
    }

    /// What is due at `now_ns`; skips what is too far behind.
    pub fn step(&mut self, now_ns: u64) -> Step {
        let next_at = self.at(self.next);
        if next_at == u64::MAX || self.next >= self.slots() {
            return Step::Done;
        }
        if next_at > now_ns {
            return Step::WaitUntil(next_at);
        }
        // Intended times up to now (and before the end): floor(now / interval) + 1.
        let due_until = ((now_ns as f64 / self.interval_ns).floor() as u64)
            .saturating_add(1)
            .min(self.slots());
        let due = due_until.saturating_sub(self.next);
        if due > MAX_BURST {
            self.skipped += due - MAX_BURST;
            self.next += due - MAX_BURST;
        }
        Step::Send(due.clamp(1, MAX_BURST))
    }

    /// Uses the next intended time for a datagram sent at `sent_ns`.
    pub fn sent(&mut self, sent_ns: u64) {
        let at = self.at(self.next);
        if at != u64::MAX && sent_ns.saturating_sub(at) > LATE_AFTER_NS {
            self.late += 1;
        }
        self.next += 1;
    }

    /// At the end of the test: intended times never used (the sender woke up after the end,
    /// or was stopped) count as skipped, so sent + failed + skipped = the schedule.
    pub fn finish(&mut self) {
        let left = self.slots().saturating_sub(self.next);
        self.skipped = self.skipped.saturating_add(left);
        self.next = self.next.max(self.slots());
    }

    /// How many intended times the test holds: those before its end.
    fn slots(&self) -> u64 {
        (self.end_ns as f64 / self.interval_ns).ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Runs a pacer at 1000/s for `duration_ms`, waking at `wakeups` (ms), sending what is due
    /// instantly; returns (sent, skipped, late).
    fn drive(duration_ms: u64, wakeups: &[u64]) -> (u64, u64, u64) {
        let mut p = Pacer::new(1000.0, duration_ms * MS);
        let mut sent = 0;
        for &w in wakeups {
            if let Step::Send(n) = p.step(w * MS) {
                for _ in 0..n {
                    p.sent(w * MS);
                    sent += 1;
                }
            }
        }
        (sent, p.skipped, p.late)
    }

    #[test]
    fn an_on_time_sender_sends_each_intended_time_once() {
        let wakeups: Vec<u64> = (0..20).collect();
        assert_eq!(drive(10, &wakeups), (10, 0, 0));
        let mut p = Pacer::new(1000.0, 10 * MS);
        assert_eq!(p.step(0), Step::Send(1));
        p.sent(0);
        assert_eq!(p.step(MS / 2), Step::WaitUntil(MS));
        assert_eq!(p.step(MS), Step::Send(1));
    }

    #[test]
    fn a_late_wakeup_catches_up_within_the_burst_bound() {
        // Asleep from 0 to 30 ms: 31 intended times are due (0..=30), sent at once; 29 of
        // them more than 1 ms late (those intended at 0..=28 ms).
        let (sent, skipped, late) = drive(1000, &[30]);
        assert_eq!((sent, skipped, late), (31, 0, 29));
        // Asleep for 100 ms: only 64 go out back to back, the 37 oldest are given up.
        let (sent, skipped, late) = drive(1000, &[100]);
        assert_eq!((sent, skipped), (MAX_BURST, 101 - MAX_BURST));
        assert_eq!(
            late,
            MAX_BURST - 2,
            "intended 37..=98 ms are late at 100 ms"
        );
    }

    #[test]
    fn the_schedule_ends_with_the_test() {
        let mut p = Pacer::new(1000.0, 10 * MS);
        assert_eq!(p.step(50 * MS), Step::Send(10));
        for _ in 0..10 {
            p.sent(50 * MS);
        }
        assert_eq!(p.step(50 * MS), Step::Done);
        // Woken after the end with 3 intended times unused: they are skipped.
        let mut p = Pacer::new(1000.0, 10 * MS);
        assert_eq!(p.step(6 * MS), Step::Send(7));
        (0..7).for_each(|_| p.sent(6 * MS));
        p.finish();
        assert_eq!((p.skipped, p.step(11 * MS)), (3, Step::Done));
        // A rate that does not divide the duration: intended times strictly before its end.
        let mut p = Pacer::new(3.0, 1_000 * MS);
        assert_eq!(p.step(2_000 * MS), Step::Send(3));
    }
}
