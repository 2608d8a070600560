//! What travels on a request/response data path: TCP requests and responses are plain filler
//! bytes (never 0, so a control frame, which starts with 0, is told from a tcp-crr request by
//! its first byte); a udp-rr datagram starts with its sequence number (big-endian u64) and the
//! response echoes it.

use std::io::{self, Write};

use protocol::rr::SEQUENCE_BYTES;

/// Every byte of a TCP request.
pub const REQUEST_FILL: u8 = b'q';
/// Every byte of a TCP response.
pub const RESPONSE_FILL: u8 = b'r';
/// Largest filler buffer kept: longer runs of bytes are written in chunks of it.
pub const FILL_CHUNK: usize = 64 * 1024;
/// Bytes of the sequence number at the start of a udp-rr datagram.
pub const SEQ_LEN: usize = SEQUENCE_BYTES as usize;

/// A buffer of `byte` long enough for `total` bytes (up to [`FILL_CHUNK`]).
pub fn filler(byte: u8, total: u64) -> Vec<u8> {
    let len = usize::try_from(total).map_or(FILL_CHUNK, |t| t.clamp(1, FILL_CHUNK));
    vec![byte; len]
}

/// Writes `total` bytes taken from `fill` (repeatedly, whole writes of at most its length).
pub fn write_filler(mut w: impl Write, fill: &[u8], mut total: u64) -> io::Result<()> {
    while total > 0 {
        let n = usize::try_from(total).map_or(fill.len(), |t| t.min(fill.len()));
        let chunk = fill.get(..n).unwrap_or(fill);
        w.write_all(chunk)?;
        total = total.saturating_sub(chunk.len() as u64);
    }
    Ok(())
}

/// Puts `seq` at the start of a datagram buffer (at least [`SEQ_LEN`] long).
pub fn put_seq(datagram: &mut [u8], seq: u64) {
    if let Some(head) = datagram.get_mut(..SEQ_LEN) {
        head.copy_from_slice(&seq.to_be_bytes());
    }
}

/// The sequence number a datagram starts with, if it is long enough to carry one.
pub fn seq_of(datagram: &[u8]) -> Option<u64> {
    let head: [u8; SEQ_LEN] = datagram.get(..SEQ_LEN)?.try_into().ok()?;
    Some(u64::from_be_bytes(head))
}

/// A datagram of `len` bytes of `fill` (at least [`SEQ_LEN`]), to be numbered with [`put_seq`].
pub fn datagram(fill: u8, len: u32) -> Vec<u8> {
    vec![fill; usize::try_from(len).unwrap_or(SEQ_LEN).max(SEQ_LEN)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filler_writes_exactly_the_total_in_chunks() {
        let fill = filler(REQUEST_FILL, 10);
        assert_eq!(fill.len(), 10);
        let mut out = Vec::new();
        write_filler(&mut out, &fill, 25).unwrap();
        assert_eq!(out.len(), 25);
        assert!(out.iter().all(|b| *b == REQUEST_FILL));
        assert_eq!(filler(RESPONSE_FILL, u64::MAX).len(), FILL_CHUNK);
        assert_eq!(filler(RESPONSE_FILL, 0).len(), 1);
        assert_ne!(REQUEST_FILL, 0, "a control frame starts with 0");
    }

    #[test]
    fn sequence_numbers_round_trip_and_short_datagrams_carry_none() {
        let mut d = datagram(REQUEST_FILL, 64);
        put_seq(&mut d, 0x0102_0304_0506_0708);
        assert_eq!(seq_of(&d), Some(0x0102_0304_0506_0708));
        assert_eq!(d.len(), 64);
        assert_eq!(seq_of(&d[..7]), None);
        assert_eq!(datagram(REQUEST_FILL, 1).len(), SEQ_LEN);
    }
}
