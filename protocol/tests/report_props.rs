//! Property tests of what the operator reads from workers and stored objects: report JSON and the
//! HDR histogram inside it. Arbitrary or corrupted input is refused or decoded consistently, never
//! a panic, and decoding never holds more memory than [`DECODE_MEMORY_CAP`] whatever a header
//! claims. A thread-local counting allocator measures that (its own test binary, so nothing
//! else is counted; thread-local, so parallel tests do not disturb each other).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2Serializer};
use hdrhistogram::Histogram;
use proptest::collection::vec;
use proptest::prelude::*;
use protocol::report::histogram::{
    decode, decode_bytes, encode, new_latency_histogram, LATENCY_MAX_US, MAX_TOTAL_COUNT,
};
use protocol::report::{
    merge_http, validate_http, Counters, HttpReport, HttpRunConfig, LatencySummary, Report,
    ReportError, StatusCounts,
};
use protocol::worker::{validate_final, CheckedReport};
use support::hdr::{b64, deflated, v2};
use support::{corrupt, json_value, worker_report};

mod support;

/// Most memory a decode may hold at once: the counts array of the largest histogram the header
/// checks allow (5 digits, 1 us .. 1 h: 16 MiB) plus the bounded buffers around it.
const DECODE_MEMORY_CAP: usize = 20 << 20;

struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

fn size(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

// SAFETY: delegates every call unchanged to the system allocator; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            note(size(layout.size()));
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            note(size(layout.size()));
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        note(-size(layout.size()));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            note(size(new_size) - size(layout.size()));
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns its result with the most bytes it held at once on this thread.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get) - base;
    (out, usize::try_from(peak).unwrap_or(0))
}

/// Decodes within the memory cap; a decoded histogram is internally consistent. `None`: refused.
fn decode_checked(bytes: &[u8]) -> Result<Option<Histogram<u64>>, TestCaseError> {
    let (out, peak) = peak_during(|| decode_bytes(bytes));
    prop_assert!(peak <= DECODE_MEMORY_CAP, "decode held {peak} bytes");
    let (text_out, peak) = peak_during(|| decode(&b64(bytes)));
    prop_assert!(
        peak <= DECODE_MEMORY_CAP + 2 * bytes.len(),
        "decode held {peak} bytes"
    );
    prop_assert_eq!(out.is_ok(), text_out.is_ok());
    let Ok(h) = out else { return Ok(None) };
    prop_assert!(h.len() <= MAX_TOTAL_COUNT);
    let _ = LatencySummary::from_histogram(&h);
    // Consistent: it encodes and decodes to itself.
    prop_assert_eq!(decode(&encode(&h).unwrap()).unwrap(), h.clone());
    Ok(Some(h))
}

fn histogram() -> impl Strategy<Value = Histogram<u64>> {
    vec((1..=LATENCY_MAX_US, 1u64..1_000_000), 0..200).prop_map(|samples| {
        let mut h = new_latency_histogram();
        for (v, n) in samples {
            h.record_n(v, n).unwrap();
        }
        h
    })
}

#[test]
fn the_largest_histogram_the_checks_allow_stays_within_the_cap() {
    // 5 digits over 1 us .. 1 h: the biggest counts array a header may ask for.
    let bytes = v2(1, 5, 1, LATENCY_MAX_US, &[2]);
    let (h, peak) = peak_during(|| decode_bytes(&bytes));
    assert_eq!(h.unwrap().len(), 1);
    assert!(peak > 16 << 20, "the counter measures: {peak}");
    assert!(peak <= DECODE_MEMORY_CAP, "{peak}");
    // A 4 GiB claim costs nothing.
    let (e, peak) = peak_during(|| decode_bytes(&v2(u32::MAX, 3, 1, LATENCY_MAX_US, &[])));
    assert!(e.unwrap_err().contains("4294967295 bytes"));
    assert!(peak < 64 << 10, "{peak}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_are_refused_or_decoded_within_the_cap(
        bytes in vec(any::<u8>(), 0..600),
        text in "\\PC{0,200}",
    ) {
        decode_checked(&bytes)?;
        let _ = decode(&text);
    }

    #[test]
    fn arbitrary_headers_are_refused_or_decoded_within_the_cap(
        claimed in prop_oneof![Just(u32::MAX), 0u32..64],
        digits in 0u32..8,
        low in prop_oneof![Just(0u64), 1u64..2000, Just(u64::MAX)],
        high in prop_oneof![Just(u64::MAX), 1u64..=LATENCY_MAX_US, Just(LATENCY_MAX_US)],
        payload in vec(any::<u8>(), 0..64),
        compress in any::<bool>(),
    ) {
        let plain = v2(claimed, digits, low, high, &payload);
        let bytes = if compress { deflated(&plain) } else { plain };
        decode_checked(&bytes)?;
    }
}

proptest! {
    // Each case encodes and decodes whole histograms (slow in a debug build): fewer cases.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn valid_histograms_round_trip(h in histogram()) {
        prop_assert_eq!(decode(&encode(&h).unwrap()).unwrap(), h.clone());
        let mut plain = Vec::new();
        V2Serializer::new().serialize(&h, &mut plain).unwrap();
        prop_assert_eq!(decode_bytes(&plain).unwrap(), h);
    }

    #[test]
    fn mutated_encodings_are_refused_or_decoded_consistently(
        h in histogram(),
        flips in vec((any::<usize>(), 1u8..=255), 1..4),
        cut in any::<Option<usize>>(),
        compress in any::<bool>(),
    ) {
        let mut bytes = Vec::new();
        if compress {
            bytes = base64::engine::general_purpose::STANDARD.decode(encode(&h).unwrap()).unwrap();
        } else {
            V2Serializer::new().serialize(&h, &mut bytes).unwrap();
        }
        for (at, bits) in flips {
            let at = at % bytes.len();
            bytes[at] ^= bits;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        decode_checked(&bytes)?;
    }
}

/// A single-run report of `latencies`, consistent as the engine makes it.
fn report(latencies: &[u64]) -> HttpReport {
    let mut h = new_latency_histogram();
    for &v in latencies {
        h.record(v).unwrap();
    }
    let n = latencies.len() as u64;
    let counters = Counters {
        requests: n,
        bytes_read: n * 512,
        status: StatusCounts {
            s2xx: n,
            ..StatusCounts::default()
        },
        ..Counters::default()
    };
    let config = HttpRunConfig {
        url: "http://127.0.0.1/".into(),
        method: "GET".into(),
        connections: 8,
        threads: 2,
        duration_s: 5.0,
        warmup_s: 0.0,
        rate: None,
        keepalive: true,
        http2: false,
        timeout_s: 2.0,
    };
    HttpReport::from_run(config, 10, 5_010, 5.0, counters, &h, vec![]).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_report_text_never_panics(text in "\\PC{0,300}", bytes in vec(any::<u8>(), 0..300)) {
        let _ = Report::from_json(&text);
        let _ = Report::from_json(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn corrupted_reports_are_refused_or_valid_and_mergeable(
        latencies in vec(1u64..10_000_000, 0..50),
        edits in vec((any::<usize>(), json_value()), 1..4),
    ) {
        let mut json: serde_json::Value = serde_json::from_str(&report(&latencies).to_json()).unwrap();
        corrupt(&mut json, edits);
        let checked = validate_final(&worker_report("w0", json.clone()), protocol::ReportKind::Http);
        if let Ok(Report::Http(r)) = Report::from_json(&json.to_string()) {
            let valid = validate_http(&r);
            prop_assert_eq!(valid.is_ok() && r.workers == 1, checked.is_ok());
            if valid.is_ok() {
                // What validation lets through merges exactly, or is refused as too big.
                match merge_http(&[r.clone(), r.clone()]) {
                    Ok(merged) => {
                        prop_assert_eq!(merged.counters.requests, r.counters.requests * 2);
                        if let Err(e) = validate_http(&merged) {
                            // Summed rates may pass the per-report cap; nothing else may break.
                            prop_assert!(["rps", "bytes_per_sec"].contains(&e.field.as_str()), "{e}");
                        }
                    }
                    Err(e) => prop_assert!(matches!(e, ReportError::Overflow(_)), "{e}"),
                }
            }
        }
        if let Ok(CheckedReport::Http(r)) = checked {
            prop_assert_eq!(r.counters.requests, decode(&r.histogram).unwrap().len());
        }
    }

}

proptest! {
    // Each case builds, encodes and validates a whole report twice: fewer cases.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn engine_shaped_reports_always_pass(latencies in vec(1u64..=LATENCY_MAX_US, 0..300)) {
        let r = report(&latencies);
        let h = validate_http(&r).unwrap();
        prop_assert_eq!(h.len(), latencies.len() as u64);
        let Report::Http(back) = Report::from_json(&r.to_json()).unwrap();
        validate_http(&back).unwrap();
    }
}
