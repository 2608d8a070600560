//! Hand-made HDR histogram encodings for the decoder's tests: shared by the unit tests of
//! `report::histogram` (through `#[path]`) and the property tests.

use base64::Engine as _;

/// The cookie of an uncompressed V2 histogram.
const V2_COOKIE: u32 = 0x1c84_9313;
/// The cookie of a DEFLATE-compressed V2 histogram.
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9314;

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A V2 header (big-endian fields) claiming `payload_len` payload bytes, followed by `payload`.
pub fn v2(payload_len: u32, digits: u32, low: u64, high: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = V2_COOKIE.to_be_bytes().to_vec();
    out.extend_from_slice(&payload_len.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&digits.to_be_bytes());
    out.extend_from_slice(&low.to_be_bytes());
    out.extend_from_slice(&high.to_be_bytes());
    out.extend_from_slice(&1.0f64.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// `plain` (a V2 encoding) compressed into the V2 DEFLATE form.
pub fn deflated(plain: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut z, plain).unwrap();
    let body = z.finish().unwrap();
    let mut out = V2_DEFLATE_COOKIE.to_be_bytes().to_vec();
    out.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
    out.extend_from_slice(&body);
    out
}
