//! Recording which answers the clients saw, and when (`--record-answers`): the loadgen side of
//! [`protocol::report::answers`]. An answer is a response's status and the backend that named
//! itself in `X-Netbench-Backend`. Each connection task keeps its current run of equal answers
//! (first and last instant); only when the answer changes, or the task ends, does the run
//! become a [`Sighting`] in its thread's [`Answers`]. So a response whose answer did not change
//! costs a comparison of a few bytes and one monotonic clock read (when its head arrived: a
//! change of answer shows then, however long the body takes), and nothing else: no allocation,
//! no wall-clock syscall (instants become Unix microseconds through one [`WallClock`] anchor
//! when a run ends).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use protocol::report::answers::{
    backend_bytes, backend_name, Answers, Sighting, MAX_BACKEND_BYTES,
};

/// A backend name held inline (no allocation per response): the `X-Netbench-Backend` value cut
/// and checked by the record's rule, or none.
#[derive(Clone, Copy)]
pub(crate) struct Backend {
    len: u8,
    bytes: [u8; MAX_BACKEND_BYTES],
}

impl Backend {
    /// No backend named (or a name the record would not keep).
    pub(crate) const NONE: Backend = Backend {
        len: 0,
        bytes: [0; MAX_BACKEND_BYTES],
    };

    /// The name in a header value, by the record's rule ([`backend_bytes`]).
    pub(crate) fn from_value(value: &[u8]) -> Backend {
        let mut b = Backend::NONE;
        let Some(name) = backend_bytes(value) else {
            return Backend::NONE;
        };
        let Some(into) = b.bytes.get_mut(..name.len()) else {
            return Backend::NONE;
        };
        into.copy_from_slice(name);
        // At most MAX_BACKEND_BYTES (63), so it fits.
        b.len = name.len() as u8;
        b
    }

    fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or_default()
    }

    /// The name as the record keeps it (allocates: called once per run of answers).
    fn name(&self) -> Option<String> {
        backend_name(self.as_bytes())
    }
}

impl PartialEq for Backend {
    fn eq(&self, other: &Backend) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Backend {}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// What one response answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answer {
    pub status: u16,
    pub backend: Backend,
}

/// Wall clock from the monotonic clock: one `SystemTime` read paired with one `Instant` at the
/// run's start; every other instant is an offset from it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WallClock {
    pub instant: Instant,
    pub system: SystemTime,
    unix_us: u64,
}

impl WallClock {
    pub(crate) fn now() -> WallClock {
        let (system, instant) = (SystemTime::now(), Instant::now());
        WallClock::at(system, instant)
    }

    pub(crate) fn at(system: SystemTime, instant: Instant) -> WallClock {
        let unix_us = system
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        WallClock {
            instant,
            system,
            unix_us,
        }
    }

    /// `at` in Unix microseconds.
    pub(crate) fn unix_us(&self, at: Instant) -> u64 {
        let micros = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        match at.checked_duration_since(self.instant) {
            Some(after) => self.unix_us.saturating_add(micros(after)),
            None => self
                .unix_us
                .saturating_sub(micros(self.instant.duration_since(at))),
        }
    }
}

/// A run of equal answers on one connection: the first and the last instant it was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub answer: Answer,
    pub first: Instant,
    pub last: Instant,
}

/// One connection task's current run (across its reconnections: a new TCP connection that
/// gets the same answer continues the run). Failed requests are not answers and do not extend
/// it; they end it (`ConnCtx::failed`).
#[derive(Debug, Default)]
pub(crate) struct ConnRuns {
    current: Option<Run>,
    /// A 2xx naming a backend was seen (`--host-count`: only the first one is kept).
    pub ok_seen: bool,
}

impl ConnRuns {
    /// A response answered `answer` at `at`; returns the run this ends, if the answer changed.
    pub(crate) fn seen(&mut self, answer: Answer, at: Instant) -> Option<Run> {
        if let Some(run) = &mut self.current {
            if run.answer == answer {
                run.last = run.last.max(at);
                return None;
            }
        }
        self.current.replace(Run {
            answer,
            first: at,
            last: at,
        })
    }

    /// The run in progress, ended (the connection task or the run is over).
    pub(crate) fn finish(&mut self) -> Option<Run> {
        self.current.take()
    }
}

/// One thread's record: the sightings of its connections' ended runs.
#[derive(Debug)]
pub(crate) struct ThreadAnswers {
    pub answers: Answers,
    wall: WallClock,
}

impl ThreadAnswers {
    pub(crate) fn new(wall: WallClock) -> ThreadAnswers {
        ThreadAnswers {
            answers: Answers::new(),
            wall,
        }
    }

    /// Adds an ended run as a sighting. A status the record cannot hold (a server may send any
    /// three digits; the record takes 100..=599) is left out, and the record then says it is
    /// incomplete rather than silently missing an answer.
    pub(crate) fn add(&mut self, run: Run) {
        let status = run.answer.status;
        if !(100..=599).contains(&status) {
            self.answers.complete = false;
            return;
        }
        self.answers.add(Sighting {
            status,
            backend: run.answer.backend.name(),
            from_unix_us: self.wall.unix_us(run.first),
            to_unix_us: self.wall.unix_us(run.last),
        });
    }

    /// Hostname `host` answered a 2xx naming a backend at `at`.
    pub(crate) fn first_ok(&mut self, host: usize, at: Instant) {
        self.answers.first_ok(host, self.wall.unix_us(at));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;

    fn answer(status: u16, name: &str) -> Answer {
        Answer {
            status,
            backend: Backend::from_value(name.as_bytes()),
        }
    }

    /// Feeds (answer, ms after t0) to one connection's runs, then ends the task; returns the
    /// thread's record.
    fn record(seq: &[(Answer, u64)]) -> Answers {
        let t0 = Instant::now();
        let wall = WallClock::at(UNIX_EPOCH + Duration::from_secs(1_000), t0);
        let mut thread = ThreadAnswers::new(wall);
        let mut conn = ConnRuns::default();
        for (a, ms) in seq {
            if let Some(ended) = conn.seen(*a, t0 + Duration::from_millis(*ms)) {
                thread.add(ended);
            }
        }
        if let Some(ended) = conn.finish() {
            thread.add(ended);
        }
        thread.answers
    }

    fn sighting(status: u16, name: &str, from_ms: u64, to_ms: u64) -> Sighting {
        let at = |ms: u64| 1_000_000_000 + ms * 1_000;
        Sighting {
            status,
            backend: (!name.is_empty()).then(|| name.to_string()),
            from_unix_us: at(from_ms),
            to_unix_us: at(to_ms),
        }
    }

    #[test]
    fn a_a_b_b_a_gives_three_sightings_with_their_first_and_last_instants() {
        let (a, b) = (answer(200, "web-a"), answer(200, "web-b"));
        let got = record(&[(a, 0), (a, 10), (b, 20), (b, 30), (a, 40)]);
        // The record sorts by answer, then by start.
        assert_eq!(
            got.sightings,
            vec![
                sighting(200, "web-a", 0, 10),
                sighting(200, "web-a", 40, 40),
                sighting(200, "web-b", 20, 30),
            ]
        );
        assert!(got.complete);
    }

    #[test]
    fn the_status_is_part_of_the_answer_and_no_name_is_an_answer_too() {
        let got = record(&[
            (answer(200, "web-a"), 0),
            (answer(503, "web-a"), 5),
            (answer(503, "web-a"), 6),
            (answer(503, ""), 7),
            (answer(503, "not a name"), 8),
        ]);
        assert_eq!(
            got.sightings,
            vec![
                sighting(200, "web-a", 0, 0),
                sighting(503, "", 7, 8),
                sighting(503, "web-a", 5, 6),
            ]
        );
    }

    #[test]
    fn a_status_the_record_cannot_hold_makes_it_incomplete() {
        let got = record(&[(answer(200, "a"), 0), (answer(999, "a"), 1)]);
        assert_eq!(got.sightings, vec![sighting(200, "a", 0, 0)]);
        assert!(!got.complete);
        // The thread's record passes the operator's check.
        got.validate("answers").unwrap();
    }

    #[test]
    fn nothing_seen_is_nothing_recorded() {
        let got = record(&[]);
        assert!(got.sightings.is_empty() && got.complete);
    }

    #[test]
    fn instants_before_and_after_the_anchor_become_unix_microseconds() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let wall = WallClock::at(UNIX_EPOCH + Duration::from_secs(5), t0);
        assert_eq!(wall.unix_us(t0), 5_000_000);
        assert_eq!(wall.unix_us(t0 + Duration::from_micros(1_500)), 5_001_500);
        assert_eq!(wall.unix_us(t0 - Duration::from_millis(2)), 4_998_000);
        assert_eq!(wall.unix_us(t0 - Duration::from_secs(9)), 0);
    }

    #[test]
    fn a_hostile_value_is_looked_at_only_up_to_the_cut() {
        let huge = vec![b'a'; 1 << 20];
        assert_eq!(Backend::from_value(&huge).as_bytes(), &huge[..63]);
        let binary: Vec<u8> = (0..=255).collect();
        assert_eq!(Backend::from_value(&binary), Backend::NONE);
        assert_eq!(Backend::from_value(b""), Backend::NONE);
        assert_eq!(
            Backend::from_value(b" web-a\t").name(),
            Some("web-a".into())
        );
    }

    proptest! {
        /// The inline name is exactly what the record's own rule keeps.
        #[test]
        fn the_inline_name_agrees_with_the_records_rule(
            value in prop::collection::vec(
                prop_oneof![Just(b'a'), Just(b'-'), Just(b'_'), Just(b' '), any::<u8>()],
                0..100,
            ),
        ) {
            let inline = Backend::from_value(&value);
            let expected = backend_name(&value);
            prop_assert_eq!(inline.name(), expected.clone());
            prop_assert_eq!(inline == Backend::NONE, expected.is_none());
        }
    }
}
