//! The receiver's accounting of one stream (pure: datagrams and arrival times in, counts out).
//!
//! - A sequence number counts once: `received` holds unique datagrams, a repeat is a duplicate.
//! - A datagram whose sequence number is below the highest seen so far (and not a repeat) is
//!   out of order; it still counts as received, so a reordered datagram is never also lost.
//! - Repeats are recognised within the last [`WINDOW`] sequence numbers (a bitmap); an older
//!   datagram cannot be told from a repeat and is counted as invalid, as are foreign, truncated
//!   or wrong-length datagrams, another test's or stream's, and send times past the test.
//! - Jitter is RFC 3550's interarrival jitter over the datagrams received (in arrival order,
//!   duplicates left out): D = (R_j - R_i) - (S_j - S_i), J += (|D| - J) / 16, with S the
//!   sender's send time and R the arrival time: the kernel's, where it stamps datagrams (so a
//!   receiver that waits for the CPU does not add to it), else when the receiver read it. Only
//!   differences matter, so the two ends' clocks need no common origin.

use super::datagram::{Header, Kind};

/// How far back (in sequence numbers) repeats are recognised.
pub(crate) const WINDOW: u64 = 1 << 16;
const WINDOW_WORDS: u64 = WINDOW / 64;
const WORDS: usize = WINDOW_WORDS as usize;

/// What a datagram was to the tally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Data, counted as received (first time this sequence number arrived).
    Counted,
    /// Data whose sequence number had arrived before.
    Duplicate,
    /// The sender's end marker.
    End,
    /// A stream set-up datagram of this test (late retransmissions are harmless).
    Open,
    Invalid,
}

#[derive(Debug, Clone)]
pub(crate) struct Tally {
    tag: u64,
    stream: u16,
    len: usize,
    /// Data datagrams sent later than this (sender's clock) are not of this test.
    max_sent_ns: u64,
    /// One past the highest sequence number received.
    next: u64,
    /// Bit s % WINDOW is set when sequence number s (next - WINDOW <= s < next) arrived.
    window: Vec<u64>,
    pub received: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    pub invalid: u64,
    pub end_seen: bool,
    /// When the last datagram counted was read (receiver's clock since its start).
    pub last_arrival_ns: u64,
    jitter_ns: f64,
    last_transit_ns: Option<i128>,
}

impl Tally {
    pub fn new(tag: u64, stream: u16, len: usize, max_sent_ns: u64) -> Tally {
        Tally {
            tag,
            stream,
            len,
            max_sent_ns,
            next: 0,
            window: vec![0; WORDS],
            received: 0,
            out_of_order: 0,
            duplicates: 0,
            invalid: 0,
            end_seen: false,
            last_arrival_ns: 0,
            jitter_ns: 0.0,
            last_transit_ns: None,
        }
    }

    /// Accounts for one datagram read at `read_ns` (receiver's clock since its start), which the
    /// kernel stamped `stamped_ns` (any clock that does not jump; None: jitter uses `read_ns`).
    pub fn on_datagram(&mut self, datagram: &[u8], read_ns: u64, stamped_ns: Option<u64>) -> Seen {
        let seen = self.classify(datagram, read_ns, stamped_ns.unwrap_or(read_ns));
        if seen == Seen::Invalid {
            self.invalid = self.invalid.saturating_add(1);
        }
        seen
    }

    fn classify(&mut self, datagram: &[u8], read_ns: u64, arrival_ns: u64) -> Seen {
        let Ok(h) = Header::read(datagram) else {
            return Seen::Invalid;
        };
        if h.tag != self.tag || h.stream != self.stream {
            return Seen::Invalid;
        }
        match h.kind {
            Kind::Open => return Seen::Open,
            Kind::End => {
                self.end_seen = true;
                return Seen::End;
            }
            Kind::Data => {}
        }
        if datagram.len() != self.len || h.sent_ns > self.max_sent_ns || h.seq == u64::MAX {
            return Seen::Invalid;
        }
        if h.seq >= self.next {
            self.clear(self.next, h.seq);
            self.set(h.seq);
            self.next = h.seq + 1;
        } else {
            if self.next - h.seq > WINDOW {
                return Seen::Invalid;
            }
            if self.is_set(h.seq) {
                self.duplicates = self.duplicates.saturating_add(1);
                return Seen::Duplicate;
            }
            self.set(h.seq);
            self.out_of_order += 1;
        }
        self.received += 1;
        self.last_arrival_ns = read_ns;
        let transit = i128::from(arrival_ns) - i128::from(h.sent_ns);
        if let Some(last) = self.last_transit_ns {
            let d = (transit - last).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit_ns = Some(transit);
        Seen::Counted
    }

    /// One past the highest sequence number received: what the sender has sent at least.
    pub fn expected(&self) -> u64 {
        self.next
    }

    /// RFC 3550 jitter in milliseconds; None until two datagrams were counted.
    pub fn jitter_ms(&self) -> Option<f64> {
        (self.received >= 2).then(|| self.jitter_ns / 1e6)
    }

    fn slot(seq: u64) -> (usize, u64) {
        // Below WORDS, so always an index of the window.
        let word = usize::try_from((seq / 64) % WINDOW_WORDS).unwrap_or(0);
        (word, 1u64 << (seq % 64))
    }

    fn set(&mut self, seq: u64) {
        let (i, bit) = Self::slot(seq);
        if let Some(w) = self.window.get_mut(i) {
            *w |= bit;
        }
    }

    fn is_set(&self, seq: u64) -> bool {
        let (i, bit) = Self::slot(seq);
        self.window.get(i).is_some_and(|w| w & bit != 0)
    }

    /// Marks `from..=to` as not arrived (they enter the window as gaps), a word at a time.
    fn clear(&mut self, from: u64, to: u64) {
        if to - from >= WINDOW {
            self.window.iter_mut().for_each(|w| *w = 0);
            return;
        }
        let mut s = from;
        while s <= to {
            let (i, bit) = Self::slot(s);
            if s.is_multiple_of(64) && to - s >= 63 {
                if let Some(w) = self.window.get_mut(i) {
                    *w = 0;
                }
                s += 64;
            } else {
                if let Some(w) = self.window.get_mut(i) {
                    *w &= !bit;
                }
                s += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::datagram::HEADER_LEN;

    const TAG: u64 = 0xfeed;
    const LEN: usize = 64;

    fn datagram(kind: Kind, stream: u16, seq: u64, sent_ns: u64) -> Vec<u8> {
        let mut buf = vec![0u8; LEN];
        Header {
            kind,
            stream,
            tag: TAG,
            seq,
            sent_ns,
        }
        .write(&mut buf);
        buf
    }

    fn data(seq: u64, sent_ns: u64) -> Vec<u8> {
        datagram(Kind::Data, 3, seq, sent_ns)
    }

    fn tally() -> Tally {
        Tally::new(TAG, 3, LEN, 10_000_000_000)
    }

    #[test]
    fn gaps_swaps_and_repeats_give_exact_counts() {
        let mut t = tally();
        // Sent 0..=9. Arrived: 0 1 3 2 (swap) 5 (4 lost) 5 (repeat) 7 6 (swap) 9 (8 lost) 1 (old
        // repeat) -> 8 unique of 10 sent, 2 out of order, 2 duplicates.
        let order = [0u64, 1, 3, 2, 5, 5, 7, 6, 9, 1];
        let seen: Vec<Seen> = order
            .iter()
            .enumerate()
            .map(|(i, &s)| t.on_datagram(&data(s, s * 1000), i as u64 * 1000, None))
            .collect();
        assert_eq!(t.received, 8);
        assert_eq!(t.out_of_order, 2);
        assert_eq!(t.duplicates, 2);
        assert_eq!(t.invalid, 0);
        assert_eq!(t.expected(), 10);
        assert_eq!(10 - t.received, 2, "lost: 4 and 8");
        assert_eq!(seen[5], Seen::Duplicate);
        assert_eq!(seen[9], Seen::Duplicate);
        assert_eq!(seen[3], Seen::Counted);
    }

    #[test]
    fn jitter_follows_rfc_3550_by_hand() {
        let mut t = tally();
        // Send times 0, 20, 40, 60 ms; arrivals 5, 27, 44, 70 ms (ns below).
        // Transits 5, 7, 4, 10 ms; |D| = 2, 3, 6 ms.
        // J1 = 0 + (2 - 0)/16 = 0.125; J2 = 0.125 + (3 - 0.125)/16 = 0.3046875;
        // J3 = 0.3046875 + (6 - 0.3046875)/16 = 0.660644531 ms.
        let ms = 1_000_000u64;
        for (seq, (sent, arrived)) in [(0, 5), (20, 27), (40, 44), (60, 70)].iter().enumerate() {
            t.on_datagram(&data(seq as u64, sent * ms), arrived * ms, None);
        }
        let j = t.jitter_ms().unwrap();
        assert!((j - 0.660_644_531_25).abs() < 1e-12, "{j}");
        // A duplicate changes nothing; a reordered datagram takes part (arrival order).
        let before = t.jitter_ms();
        t.on_datagram(&data(2, 40 * ms), 90 * ms, None);
        assert_eq!(t.jitter_ms(), before);
    }

    #[test]
    fn jitter_uses_the_kernels_arrival_times_where_there_are_some() {
        // Read together (a receiver that waited for the CPU), stamped 5, 27, 44, 70 ms by the
        // kernel: the jitter of the stamps, as in the hand-computed case above.
        let ms = 1_000_000u64;
        let mut t = tally();
        for (seq, (sent, stamped)) in [(0, 5), (20, 27), (40, 44), (60, 70)].iter().enumerate() {
            t.on_datagram(&data(seq as u64, sent * ms), 80 * ms, Some(stamped * ms));
        }
        assert!((t.jitter_ms().unwrap() - 0.660_644_531_25).abs() < 1e-12);
        assert_eq!(
            t.last_arrival_ns,
            80 * ms,
            "the read time, for the receiver's seconds"
        );
    }

    #[test]
    fn one_datagram_has_no_jitter_and_a_constant_delay_has_none() {
        let mut t = tally();
        assert_eq!(t.jitter_ms(), None);
        t.on_datagram(&data(0, 100), 5_000_100, None);
        assert_eq!(t.jitter_ms(), None);
        for s in 1..100u64 {
            t.on_datagram(&data(s, 100 + s * 777), 5_000_100 + s * 777, None);
        }
        assert_eq!(t.jitter_ms(), Some(0.0));
    }

    #[test]
    fn foreign_truncated_and_stale_datagrams_are_invalid_and_ignored() {
        let mut t = tally();
        t.on_datagram(&data(0, 0), 0, None);
        let mut other_test = data(1, 0);
        other_test[8] ^= 1;
        let cases: Vec<Vec<u8>> = vec![
            b"GET / HTTP/1.1\r\n".to_vec(),
            vec![],
            data(1, 0)[..LEN - 1].to_vec(),
            data(1, 0)[..HEADER_LEN - 1].to_vec(),
            other_test,
            datagram(Kind::Data, 4, 1, 0),
            data(1, u64::MAX),
            data(u64::MAX, 0),
            {
                let mut longer = data(1, 0);
                longer.push(0);
                longer
            },
        ];
        for c in &cases {
            assert_eq!(t.on_datagram(c, 1, None), Seen::Invalid, "{c:?}");
        }
        assert_eq!(t.invalid, cases.len() as u64);
        assert_eq!((t.received, t.expected()), (1, 1));
        // Far ahead is fine (a long loss); far behind cannot be told from a repeat.
        assert_eq!(t.on_datagram(&data(WINDOW * 3, 0), 2, None), Seen::Counted);
        assert_eq!(t.on_datagram(&data(WINDOW * 2, 0), 3, None), Seen::Invalid);
        assert_eq!(
            t.on_datagram(&data(WINDOW * 2 + 1, 0), 3, None),
            Seen::Counted
        );
        assert_eq!(t.out_of_order, 1);
        // Set-up and end markers are recognised, not counted.
        assert_eq!(
            t.on_datagram(&datagram(Kind::Open, 3, 0, 0), 4, None),
            Seen::Open
        );
        assert!(!t.end_seen);
        assert_eq!(
            t.on_datagram(&datagram(Kind::End, 3, 9, 0), 5, None),
            Seen::End
        );
        assert!(t.end_seen);
        assert_eq!(t.received, 3);
    }

    #[test]
    fn the_window_forgets_gaps_only_when_they_leave_it() {
        let mut t = tally();
        // 0..200 with every 7th missing, then the missing ones late: all out of order, none lost.
        for s in (0..200u64).filter(|s| s % 7 != 0) {
            t.on_datagram(&data(s, 0), 0, None);
        }
        for s in (0..200u64).filter(|s| s % 7 == 0) {
            assert_eq!(t.on_datagram(&data(s, 0), 0, None), Seen::Counted, "{s}");
        }
        assert_eq!((t.received, t.out_of_order, t.duplicates), (200, 29, 0));
        // A jump across many words clears them: repeats of the old numbers are still caught
        // while in the window, the skipped numbers arrive as new.
        t.on_datagram(&data(1000, 0), 0, None);
        assert_eq!(t.on_datagram(&data(199, 0), 0, None), Seen::Duplicate);
        for s in 200..1000u64 {
            assert_eq!(t.on_datagram(&data(s, 0), 0, None), Seen::Counted, "{s}");
        }
        assert_eq!(t.received, 1001);
    }
}

/// Property tests: whatever arrives, the tally never panics and its counts hold together.
#[cfg(test)]
mod props {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    const TAG: u64 = 7;
    const LEN: usize = 48;

    /// A datagram of this stream (any sequence number near a few bases, any send time), or
    /// arbitrary bytes.
    fn datagram() -> impl Strategy<Value = Vec<u8>> {
        let ours = (
            prop_oneof![Just(0u64), Just(WINDOW), Just(u64::MAX - 3)],
            0u64..300,
            any::<u64>(),
            0u8..4,
        )
            .prop_map(|(base, offset, sent_ns, kind)| {
                let mut d = vec![0u8; LEN];
                Header {
                    kind: [Kind::Data, Kind::Data, Kind::Open, Kind::End][usize::from(kind % 4)],
                    stream: 1,
                    tag: TAG,
                    seq: base.wrapping_add(offset),
                    sent_ns: sent_ns % 2_000_000_000,
                }
                .write(&mut d);
                d
            });
        prop_oneof![4 => ours, 1 => vec(any::<u8>(), 0..80)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_sequence_keeps_the_counts_consistent(
            arrivals in vec((datagram(), any::<u32>(), proptest::option::of(any::<u32>())), 0..400)
        ) {
            let mut t = Tally::new(TAG, 1, LEN, 1_000_000_000);
            let mut seen_data = 0u64;
            for (d, read, stamp) in &arrivals {
                let before = (t.received, t.duplicates, t.invalid);
                let seen = t.on_datagram(d, u64::from(*read), stamp.map(u64::from));
                match seen {
                    Seen::Counted => prop_assert_eq!(t.received, before.0 + 1),
                    Seen::Duplicate => prop_assert_eq!(t.duplicates, before.1 + 1),
                    Seen::Invalid => prop_assert_eq!(t.invalid, before.2 + 1),
                    Seen::Open | Seen::End => prop_assert_eq!((t.received, t.duplicates, t.invalid), before),
                }
                seen_data += u64::from(matches!(seen, Seen::Counted | Seen::Duplicate));
            }
            prop_assert!(t.out_of_order <= t.received);
            prop_assert!(t.received + t.duplicates == seen_data);
            prop_assert!(t.received <= t.expected() || t.received == 0);
            if let Some(j) = t.jitter_ms() {
                prop_assert!(j.is_finite() && j >= 0.0);
            }
        }
    }
}
