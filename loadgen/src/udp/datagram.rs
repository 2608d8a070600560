//! The datagram format: a 32-byte header, then padding up to the test's length.
//!
//! ```text
//! offset  size  field
//!      0     4  magic "NBUD"
//!      4     1  format version (1)
//!      5     1  kind: 0 data, 1 open (stream set-up), 2 end (the sender is done)
//!      6     2  stream id
//!      8     8  test tag (a hash of the test's cookie: tells this test's datagrams from others)
//!     16     8  sequence number (data: 0, 1, 2, ... per stream, one per datagram sent)
//!     24     8  send time, ns since the sender's start of the test (its own clock)
//! ```
//! All integers big-endian. Reading never panics: anything short, foreign or unknown is an
//! [`Unreadable`] reason, which the receiver counts as invalid.

pub(crate) use ::protocol::udp::MIN_LEN as HEADER_LEN;

const MAGIC: [u8; 4] = *b"NBUD";
const VERSION: u8 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Data,
    Open,
    End,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::Data => 0,
            Kind::Open => 1,
            Kind::End => 2,
        }
    }

    fn from_code(code: u8) -> Option<Kind> {
        match code {
            0 => Some(Kind::Data),
            1 => Some(Kind::Open),
            2 => Some(Kind::End),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub kind: Kind,
    pub stream: u16,
    pub tag: u64,
    pub seq: u64,
    pub sent_ns: u64,
}

/// Why a datagram is not one of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unreadable {
    Short,
    Magic,
    Version,
    Kind,
}

impl Header {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf`; false if it is shorter.
    pub fn write(&self, buf: &mut [u8]) -> bool {
        let Some(head) = buf.get_mut(..HEADER_LEN) else {
            return false;
        };
        head[..4].copy_from_slice(&MAGIC);
        head[4] = VERSION;
        head[5] = self.kind.code();
        head[6..8].copy_from_slice(&self.stream.to_be_bytes());
        head[8..16].copy_from_slice(&self.tag.to_be_bytes());
        head[16..24].copy_from_slice(&self.seq.to_be_bytes());
        head[24..32].copy_from_slice(&self.sent_ns.to_be_bytes());
        true
    }

    /// Rewrites only the sequence number and the send time (the sender's hot path).
    pub fn stamp(buf: &mut [u8], seq: u64, sent_ns: u64) {
        if let Some(head) = buf.get_mut(16..HEADER_LEN) {
            head[..8].copy_from_slice(&seq.to_be_bytes());
            head[8..].copy_from_slice(&sent_ns.to_be_bytes());
        }
    }

    pub fn read(buf: &[u8]) -> Result<Header, Unreadable> {
        let head: &[u8; HEADER_LEN] = buf
            .get(..HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(Unreadable::Short)?;
        let [m0, m1, m2, m3, version, kind, s0, s1, rest @ ..] = *head;
        if [m0, m1, m2, m3] != MAGIC {
            return Err(Unreadable::Magic);
        }
        if version != VERSION {
            return Err(Unreadable::Version);
        }
        let kind = Kind::from_code(kind).ok_or(Unreadable::Kind)?;
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&rest[i * 8..i * 8 + 8]);
            u64::from_be_bytes(b)
        };
        Ok(Header {
            kind,
            stream: u16::from_be_bytes([s0, s1]),
            tag: word(0),
            seq: word(1),
            sent_ns: word(2),
        })
    }
}

/// The test tag of a cookie (64-bit FNV-1a): the same on both ends, different across tests.
pub(crate) fn tag_of(cookie: &str) -> u64 {
    cookie.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_stamps_touch_only_seq_and_time() {
        let h = Header {
            kind: Kind::Data,
            stream: 513,
            tag: tag_of("0123456789abcdef"),
            seq: 7,
            sent_ns: 1_000_000_007,
        };
        let mut buf = vec![0xa5u8; 100];
        assert!(h.write(&mut buf));
        assert_eq!(&buf[..4], b"NBUD");
        assert_eq!(Header::read(&buf), Ok(h));
        Header::stamp(&mut buf, u64::MAX, 42);
        let stamped = Header::read(&buf).unwrap();
        assert_eq!(
            stamped,
            Header {
                seq: u64::MAX,
                sent_ns: 42,
                ..h
            }
        );
        assert_eq!(buf[HEADER_LEN], 0xa5, "padding untouched");
        assert!(!h.write(&mut [0u8; HEADER_LEN - 1]));
    }

    #[test]
    fn foreign_and_short_datagrams_are_named() {
        let mut buf = [0u8; HEADER_LEN];
        let h = Header {
            kind: Kind::End,
            stream: 0,
            tag: 1,
            seq: 2,
            sent_ns: 3,
        };
        h.write(&mut buf);
        assert_eq!(Header::read(&buf[..HEADER_LEN - 1]), Err(Unreadable::Short));
        assert_eq!(Header::read(&[]), Err(Unreadable::Short));
        let mut bad = buf;
        bad[0] = b'X';
        assert_eq!(Header::read(&bad), Err(Unreadable::Magic));
        let mut bad = buf;
        bad[4] = 2;
        assert_eq!(Header::read(&bad), Err(Unreadable::Version));
        let mut bad = buf;
        bad[5] = 9;
        assert_eq!(Header::read(&bad), Err(Unreadable::Kind));
        assert_ne!(tag_of("a"), tag_of("b"));
    }
}
