//! Property tests of the rr report (tcp-rr, tcp-crr, udp-rr) as the operator reads it from
//! workers and stored objects: hostile or corrupted JSON is refused or valid, never a panic;
//! what validation lets through merges; and merging reports of split latencies gives exactly
//! the histogram (and percentiles) of all latencies together.

use proptest::collection::vec;
use proptest::prelude::*;
use protocol::report::histogram::{decode, new_latency_histogram, LATENCY_MAX_US};
use protocol::report::LatencySummary;
use protocol::rr::{
    merge, validate_rr, RrCounts, RrErrors, RrMergeError, RrReport, RrRun, RrSetup, RrStream,
};
use protocol::tcp::CpuReport;
use protocol::worker::{validate_final, CheckedReport, FinalReport};

mod support;
use protocol::Protocol;

/// A single-run report of `latencies` on one stream, as the engine builds it.
fn report(mode: Protocol, latencies: &[u64], lost: u64, refused: u64) -> RrReport {
    let mut h = new_latency_histogram();
    for &v in latencies {
        h.record(v).unwrap();
    }
    let n = latencies.len() as u64;
    let lost = if mode == Protocol::UdpRr { lost } else { 0 };
    let attempted = n + lost + refused;
    // Open loop at 1000/s for 3 s: the intended send times not used were skipped.
    let skipped = 3000 - attempted;
    let counts = RrCounts {
        attempted,
        skipped,
        transactions: n,
        errors: RrErrors {
            refused,
            ..RrErrors::default()
        },
        lost,
        ..RrCounts::default()
    };
    let cpu = support::cpu_usage(5.0, 15.0);
    let run = RrRun {
        client: "10.0.0.1:41000".into(),
        server: "10.0.0.2:5201".into(),
        streams: 1,
        duration_secs: 3.0,
        started_at_unix_ms: 10,
        ended_at_unix_ms: 3_010,
        transactions: n,
        transactions_in_window: Some(n),
        transactions_per_second: n as f64 / 3.0,
        server_answered: n,
        cpu: CpuReport {
            client: cpu,
            server: cpu,
        },
        conntrack: None,
        conntrack_note: None,
    };
    let setup = RrSetup {
        mode,
        request_size: 16,
        response_size: 16,
        burst: 0,
        // Open loop: latencies may exceed the timeout (they count from the intended send time).
        rate_per_stream: Some(1000.0),
        timeout_ms: 100,
        max_in_flight: None,
    };
    let stream = RrStream {
        run: 0,
        id: 0,
        attempted: counts.attempted,
        skipped: Some(skipped),
        transactions: n,
        failed: lost + refused,
        error: None,
    };
    RrReport::single(setup, run, counts, &h, vec![stream]).unwrap()
}

fn mode() -> impl Strategy<Value = Protocol> {
    prop_oneof![
        Just(Protocol::TcpRr),
        Just(Protocol::TcpCrr),
        Just(Protocol::UdpRr)
    ]
}

/// Any JSON value, and values an rr report holds: the largest count, another report's kind.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        support::JSON_VALUE_CHOICES => support::json_value(),
        1 => Just(u64::MAX.into()),
        1 => Just("udp-rr".into()),
        1 => Just("tcp-stream".into()),
    ]
}

fn worker_report(json: serde_json::Value) -> FinalReport {
    support::worker_report("w0", json)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}", bytes in vec(any::<u8>(), 0..300)) {
        for t in [text, String::from_utf8_lossy(&bytes).into_owned()] {
            if let Ok(r) = serde_json::from_str::<RrReport>(&t) {
                let _ = validate_rr(&r);
            }
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&t) {
                let _ = validate_final(&worker_report(v), protocol::ReportKind::Rr);
            }
        }
    }

    #[test]
    fn corrupted_reports_are_refused_or_valid_and_mergeable(
        mode in mode(),
        latencies in vec(1u64..10_000_000, 0..40),
        lost in 0u64..5,
        edits in vec((any::<usize>(), json_value()), 1..4),
    ) {
        let mut json = serde_json::to_value(report(mode, &latencies, lost, 1)).unwrap();
        support::corrupt(&mut json, edits);
        let checked = validate_final(&worker_report(json.clone()), protocol::ReportKind::Rr);
        if let Ok(r) = serde_json::from_value::<RrReport>(json) {
            let valid = validate_rr(&r);
            prop_assert_eq!(valid.is_ok() && r.runs.len() == 1, checked.is_ok());
            if let Ok(h) = valid {
                prop_assert_eq!(h.len(), r.counts.transactions);
                match merge(&[r.clone(), r.clone()]) {
                    Ok(m) => {
                        prop_assert_eq!(m.counts.transactions, r.counts.transactions * 2);
                        if let Err(e) = validate_rr(&m) {
                            // Summed rates may pass the per-report cap; nothing else may break.
                            prop_assert!(
                                ["transactions_per_second", "requested_per_second"].contains(&e.field.as_str())
                                    || e.field.starts_with("cpu"),
                                "{e}"
                            );
                        }
                    }
                    Err(e) => prop_assert!(matches!(e, RrMergeError::Overflow(_)), "{e}"),
                }
            }
        }
        if let Ok(CheckedReport::Rr(r)) = checked {
            prop_assert_eq!(r.counts.transactions, decode(&r.histogram).unwrap().len());
        }
    }
}

proptest! {
    // Each case encodes, decodes and merges whole histograms: fewer cases.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn merging_split_latencies_gives_the_histogram_of_all_of_them(
        mode in mode(),
        latencies in vec(1u64..=LATENCY_MAX_US, 0..300),
        cuts in vec(any::<usize>(), 0..4),
    ) {
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (latencies.len() + 1)).collect();
        cuts.sort_unstable();
        let mut parts = Vec::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain([latencies.len()]) {
            parts.push(report(mode, &latencies[from..cut], 1, 0));
            from = cut;
        }
        let merged = merge(&parts).unwrap();
        validate_rr(&merged).unwrap();
        let whole = report(mode, &latencies, 0, 0).histogram().unwrap();
        let got = merged.histogram().unwrap();
        prop_assert_eq!(&got, &whole);
        prop_assert_eq!(merged.latency, LatencySummary::from_histogram(&whole));
        prop_assert_eq!(merged.counts.transactions, latencies.len() as u64);
        prop_assert_eq!(merged.runs.len(), parts.len());
        // Merging is associative: merging the merge with nothing changes nothing.
        prop_assert_eq!(merge(std::slice::from_ref(&merged)).unwrap(), merged);
    }
}
