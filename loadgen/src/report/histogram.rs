//! The latency histogram: microseconds, 3 significant digits, 1 us .. 1 h, serialized as
//! HDR V2 (deflate) + base64 so it travels inside the JSON report.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// Largest recordable latency in microseconds (larger values saturate to it).
pub const LATENCY_MAX_US: u64 = 3_600_000_000;
/// Significant decimal digits kept by the histogram.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// A fresh latency histogram with the report's fixed range.
pub fn new_latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid")
}

/// Serializes to base64(HDR V2 deflate).
pub fn encode(h: &Histogram<u64>) -> Result<String, String> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .map_err(|e| format!("cannot serialize histogram: {e:?}"))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Parses base64(HDR V2 or V2 deflate) into a histogram with the report's fixed range.
pub fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("histogram is not valid base64: {e}"))?;
    let parsed: Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("histogram is not valid HDR V2: {e:?}"))?;
    let mut h = new_latency_histogram();
    h.add(&parsed)
        .map_err(|e| format!("histogram does not fit the latency range: {e:?}"))?;
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_keeps_every_count() {
        let mut h = new_latency_histogram();
        for v in [1u64, 17, 250, 250, 9_999, 1_000_000, LATENCY_MAX_US] {
            h.record(v).unwrap();
        }
        let back = decode(&encode(&h).unwrap()).unwrap();
        assert_eq!(back, h);
        assert!(decode("!!!").is_err());
        assert!(decode("aGVsbG8=").is_err());
    }
}
