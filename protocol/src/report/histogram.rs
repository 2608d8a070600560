//! The latency histogram: microseconds, 3 significant digits, 1 us .. 1 h, serialized as
//! HDR V2 (deflate) + base64 so it travels inside the JSON report.
//!
//! Decoding is bounded, because histograms come from workers and stored objects: hdrhistogram's
//! deserializer allocates whatever a header claims (a payload of up to 4 GiB, a counts array
//! sized from the value range) before it reads anything. [`decode`] therefore refuses, before
//! any allocation of that size: text longer than [`MAX_ENCODED_CHARS`]; a deflated body whose
//! claimed length differs from the bytes present or that inflates beyond
//! [`MAX_PAYLOAD_BYTES`]; a V2 header whose payload length is not exactly the bytes that follow
//! or exceeds [`MAX_PAYLOAD_BYTES`]; significant digits outside 1..=[`MAX_SIGNIFICANT_DIGITS`];
//! a highest trackable value above [`LATENCY_MAX_US`] (1 h, the most the engines record); more
//! than [`MAX_TOTAL_COUNT`] samples. The largest allocation decoding can make is then the counts
//! array of a 5-digit, 1 us .. 1 h histogram (16 MiB); ours (3 digits) need 188 KiB.

use std::borrow::Cow;
use std::io::Read;

use base64::Engine as _;
use flate2::read::ZlibDecoder;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// Largest recordable latency in microseconds (larger values saturate to it).
pub const LATENCY_MAX_US: u64 = 3_600_000_000;
/// Significant decimal digits kept by the histogram.
pub const SIGNIFICANT_DIGITS: u8 = 3;
/// Longest base64 text accepted (a real report's histogram is a few KiB).
pub const MAX_ENCODED_CHARS: usize = 256 * 1024;
/// Largest V2 payload (the encoded counts) accepted, after inflating. Ours stay below 212 KiB
/// even with every bucket filled with 9-byte counts.
pub const MAX_PAYLOAD_BYTES: usize = 512 * 1024;
/// Most significant digits a decoded histogram may have (memory grows tenfold per digit).
pub const MAX_SIGNIFICANT_DIGITS: u8 = 5;
/// Most samples one histogram may hold: over a billion requests a second for 13 days, and far
/// enough below u64::MAX that merging thousands of them cannot overflow.
pub const MAX_TOTAL_COUNT: u64 = 1 << 50;

const V2_COOKIE: u32 = 0x1c84_9313;
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9314;
/// cookie, payload length, normalizing offset, significant digits (4 bytes each), lowest and
/// highest trackable value (8 each), integer-to-double conversion ratio (f64).
const V2_HEADER_BYTES: usize = 40;
/// cookie and compressed length.
const DEFLATE_HEADER_BYTES: usize = 8;

/// A fresh latency histogram with the report's fixed range.
pub fn new_latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid")
}

/// Merges encoded histograms into one, encoded (exact: counts add up). Each input is decoded
/// with the bounds of [`decode`]; None when there is none.
pub fn merge_encoded<'a>(
    texts: impl IntoIterator<Item = &'a str>,
) -> Result<Option<String>, String> {
    let mut merged: Option<Histogram<u64>> = None;
    for text in texts {
        let h = decode(text)?;
        match merged.as_mut() {
            None => merged = Some(h),
            Some(m) => {
                if m.len().saturating_add(h.len()) > MAX_TOTAL_COUNT {
                    return Err("merged histogram would hold too many samples".into());
                }
                m.add(&h)
                    .map_err(|e| format!("cannot merge histograms: {e:?}"))?;
            }
        }
    }
    merged.as_ref().map(encode).transpose()
}

/// Serializes to base64(HDR V2 deflate).
pub fn encode(h: &Histogram<u64>) -> Result<String, String> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .map_err(|e| format!("cannot serialize histogram: {e:?}"))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Parses base64(HDR V2 or V2 deflate) into a histogram with the report's fixed range, within
/// the bounds described in the module documentation.
pub fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let text = text.trim();
    if text.len() > MAX_ENCODED_CHARS {
        return Err(format!(
            "histogram is {} characters long, more than the {MAX_ENCODED_CHARS} allowed",
            text.len()
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("histogram is not valid base64: {e}"))?;
    decode_bytes(&bytes)
}

/// Parses HDR V2 or V2 deflate bytes (see [`decode`]).
pub fn decode_bytes(bytes: &[u8]) -> Result<Histogram<u64>, String> {
    let plain = plain_v2(bytes)?;
    let header = V2Header::parse(&plain)?;
    header.check(plain.len().saturating_sub(V2_HEADER_BYTES))?;
    scan_payload(plain.get(V2_HEADER_BYTES..).unwrap_or_default())?;
    let parsed: Histogram<u64> = Deserializer::new()
        .deserialize(&mut plain.as_ref())
        .map_err(|e| format!("histogram is not valid HDR V2: {e}"))?;
    let mut h = new_latency_histogram();
    h.add(&parsed).map_err(|e| {
        format!("histogram does not fit the latency range 1..={LATENCY_MAX_US} us: {e:?}")
    })?;
    Ok(h)
}

fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn be_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// The uncompressed V2 encoding: the input itself, or its deflated body inflated with a bound.
fn plain_v2(bytes: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    let cookie = be_u32(bytes, 0).ok_or("histogram is shorter than its 4-byte cookie")?;
    match cookie {
        V2_COOKIE => Ok(Cow::Borrowed(bytes)),
        V2_DEFLATE_COOKIE => inflate(bytes).map(Cow::Owned),
        other => Err(format!(
            "histogram is not HDR V2 (cookie {other:#010x}, expected {V2_COOKIE:#010x} or {V2_DEFLATE_COOKIE:#010x})"
        )),
    }
}

fn inflate(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let claimed = be_u32(bytes, 4).ok_or("compressed histogram has no length")?;
    let body = bytes.get(DEFLATE_HEADER_BYTES..).unwrap_or_default();
    if u64::from(claimed) != body.len() as u64 {
        return Err(format!(
            "compressed histogram claims {claimed} bytes but {} follow its header",
            body.len()
        ));
    }
    let limit = V2_HEADER_BYTES + MAX_PAYLOAD_BYTES;
    let mut out = Vec::new();
    ZlibDecoder::new(body)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("compressed histogram does not inflate: {e}"))?;
    if out.len() > limit {
        return Err(format!(
            "compressed histogram inflates to more than the {limit} bytes allowed"
        ));
    }
    Ok(out)
}

/// The fixed-layout V2 header (big-endian).
#[derive(Debug, Clone, Copy, PartialEq)]
struct V2Header {
    payload_len: u32,
    normalizing_offset: u32,
    significant_digits: u32,
    lowest: u64,
    highest: u64,
    conversion_ratio: f64,
}

impl V2Header {
    fn parse(plain: &[u8]) -> Result<V2Header, String> {
        let short = || {
            format!(
                "histogram header is truncated ({} bytes, a V2 header has {V2_HEADER_BYTES})",
                plain.len()
            )
        };
        if be_u32(plain, 0) != Some(V2_COOKIE) {
            return Err("compressed histogram does not hold an HDR V2 histogram".into());
        }
        Ok(V2Header {
            payload_len: be_u32(plain, 4).ok_or_else(short)?,
            normalizing_offset: be_u32(plain, 8).ok_or_else(short)?,
            significant_digits: be_u32(plain, 12).ok_or_else(short)?,
            lowest: be_u64(plain, 16).ok_or_else(short)?,
            highest: be_u64(plain, 24).ok_or_else(short)?,
            conversion_ratio: f64::from_bits(be_u64(plain, 32).ok_or_else(short)?),
        })
    }

    /// Refuses claims the input cannot back and parameters outside what our engines record.
    fn check(&self, present: usize) -> Result<(), String> {
        let claimed = self.payload_len;
        if u64::from(claimed) > MAX_PAYLOAD_BYTES as u64 {
            return Err(format!(
                "histogram claims a payload of {claimed} bytes, more than the {MAX_PAYLOAD_BYTES} allowed"
            ));
        }
        if u64::from(claimed) != present as u64 {
            return Err(format!(
                "histogram claims a payload of {claimed} bytes but {present} follow its header"
            ));
        }
        if self.normalizing_offset != 0 {
            return Err(format!(
                "histogram has a normalizing offset ({}), which is not supported",
                self.normalizing_offset
            ));
        }
        let digits = self.significant_digits;
        if !(1..=u32::from(MAX_SIGNIFICANT_DIGITS)).contains(&digits) {
            return Err(format!(
                "histogram has {digits} significant digits (allowed 1..={MAX_SIGNIFICANT_DIGITS})"
            ));
        }
        let (low, high) = (self.lowest, self.highest);
        if high > LATENCY_MAX_US {
            return Err(format!(
                "histogram's highest trackable value {high} us exceeds {LATENCY_MAX_US} us (1 h)"
            ));
        }
        if low == 0 || low > high / 2 {
            return Err(format!(
                "histogram's lowest trackable value {low} must be at least 1 and at most half its highest ({high})"
            ));
        }
        if self.conversion_ratio != 1.0 {
            return Err(format!(
                "histogram's conversion ratio is {}, only 1 is supported",
                self.conversion_ratio
            ));
        }
        Ok(())
    }
}

/// One LEB128-64b9B number (up to 8 bytes of 7 bits, a 9th of 8): (value, bytes used).
fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().take(9).enumerate() {
        if i == 8 {
            return Some((value | (u64::from(b) << 56), 9));
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Walks the zig-zag encoded counts before the deserializer does: it would negate the one
/// value without a positive counterpart (overflow) and saturate a total beyond u64.
fn scan_payload(mut payload: &[u8]) -> Result<(), String> {
    let mut total = 0u64;
    while !payload.is_empty() {
        let (n, used) = read_varint(payload).ok_or("histogram payload ends inside a number")?;
        payload = payload.get(used..).unwrap_or_default();
        if n == u64::MAX {
            return Err("histogram payload holds an impossible run of zeros".into());
        }
        // Even: a count of n/2; odd: a run of zeros.
        if n & 1 == 0 {
            total = total
                .checked_add(n >> 1)
                .filter(|t| *t <= MAX_TOTAL_COUNT)
                .ok_or_else(|| format!("histogram holds more than {MAX_TOTAL_COUNT} samples"))?;
        }
    }
    Ok(())
}

/// The hand-made encodings the property tests use too.
#[cfg(test)]
#[path = "../../tests/support/hdr.rs"]
mod test_hdr;

#[cfg(test)]
mod tests {
    use super::test_hdr::{b64, deflated, v2};
    use super::*;
    use hdrhistogram::serialization::V2Serializer;
    use std::time::{Duration, Instant};

    #[test]
    fn merging_encoded_histograms_adds_their_counts_exactly() {
        let mut a = new_latency_histogram();
        let mut b = new_latency_histogram();
        a.record(100).unwrap();
        a.record(200).unwrap();
        b.record(5000).unwrap();
        let texts = [encode(&a).unwrap(), encode(&b).unwrap()];
        let merged = merge_encoded(texts.iter().map(String::as_str))
            .unwrap()
            .unwrap();
        let m = decode(&merged).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m.max(), b.max());
        assert_eq!(merge_encoded([]).unwrap(), None);
        assert!(merge_encoded(["not base64"]).is_err());
    }

    fn refused(text: &str, needle: &str) {
        let started = Instant::now();
        let err = decode(text).unwrap_err();
        assert!(err.contains(needle), "{needle:?} not in {err:?}");
        assert!(started.elapsed() < Duration::from_secs(1), "refused slowly");
    }

    #[test]
    fn roundtrip_keeps_every_count() {
        let mut h = new_latency_histogram();
        for v in [1u64, 17, 250, 250, 9_999, 1_000_000, LATENCY_MAX_US] {
            h.record(v).unwrap();
        }
        let back = decode(&encode(&h).unwrap()).unwrap();
        assert_eq!(back, h);
        // The uncompressed V2 form decodes too.
        let mut plain = Vec::new();
        V2Serializer::new().serialize(&h, &mut plain).unwrap();
        assert_eq!(decode(&b64(&plain)).unwrap(), h);
        assert!(decode("!!!").is_err());
        assert!(decode("aGVsbG8=").is_err());
    }

    #[test]
    fn a_claimed_4_gib_payload_is_refused_before_allocating() {
        let claim = v2(u32::MAX, 3, 1, LATENCY_MAX_US, &[]);
        refused(
            &b64(&claim),
            "claims a payload of 4294967295 bytes, more than the 524288 allowed",
        );
        refused(
            &b64(&deflated(&claim)),
            "claims a payload of 4294967295 bytes",
        );
        let mut compressed = deflated(&v2(0, 3, 1, LATENCY_MAX_US, &[]));
        compressed[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        refused(
            &b64(&compressed),
            "compressed histogram claims 4294967295 bytes but",
        );
    }

    #[test]
    fn claims_must_match_the_bytes_present() {
        refused(
            &b64(&v2(10, 3, 1, LATENCY_MAX_US, &[2, 2])),
            "claims a payload of 10 bytes but 2 follow",
        );
        refused(&b64(&V2_COOKIE.to_be_bytes()), "header is truncated");
        // A deflate bomb: far more zeros than any payload may hold.
        let bomb = deflated(&v2(0, 3, 1, LATENCY_MAX_US, &vec![0u8; 4 << 20]));
        refused(&b64(&bomb), "inflates to more than");
        refused(
            &"A".repeat(MAX_ENCODED_CHARS + 4),
            "more than the 262144 allowed",
        );
    }

    #[test]
    fn header_parameters_outside_our_engines_range_are_refused() {
        refused(
            &b64(&v2(0, 6, 1, LATENCY_MAX_US, &[])),
            "6 significant digits",
        );
        refused(
            &b64(&v2(0, 0, 1, LATENCY_MAX_US, &[])),
            "0 significant digits",
        );
        refused(
            &b64(&v2(0, 3, 1, u64::MAX, &[])),
            "highest trackable value 18446744073709551615 us exceeds",
        );
        refused(&b64(&v2(0, 3, 0, 1000, &[])), "lowest trackable value 0");
        refused(
            &b64(&v2(0, 3, 600, 1000, &[])),
            "lowest trackable value 600",
        );
        let mut ratio = v2(0, 3, 1, 1000, &[]);
        ratio[32..40].copy_from_slice(&f64::NAN.to_be_bytes());
        refused(&b64(&ratio), "conversion ratio is NaN");
        refused(&b64(&[0, 1, 2, 3, 4]), "not HDR V2 (cookie 0x00010203");
    }

    #[test]
    fn payloads_the_deserializer_would_mishandle_are_refused() {
        // u64::MAX zig-zag decodes to i64::MIN, which the deserializer negates.
        let mut min = vec![0xff; 9];
        min.push(2);
        refused(&b64(&v2(10, 3, 1, 1000, &min)), "impossible run of zeros");
        // Two counts of 2^62 each: the total would saturate.
        let big = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80];
        let mut two = big.to_vec();
        two.extend_from_slice(&big);
        refused(
            &b64(&v2(18, 3, 1, 1000, &two)),
            "more than 1125899906842624 samples",
        );
        refused(&b64(&v2(1, 3, 1, 1000, &[0x80])), "ends inside a number");
    }
}
