//! Property tests of the UDP report as the operator reads it: whatever JSON a worker sends
//! (arbitrary, or a valid report with one value replaced), parsing and validating it never
//! panics; valid reports pass; merging is exact, consistent and associative.

use proptest::collection::vec;
use proptest::prelude::*;
use protocol::tcp::{CpuReport, Direction, Flow};
use protocol::udp::{
    merge, validate_udp, CpuSeconds, Rate, Received, Sent, UdpReport, UdpRun, UdpStream,
};
use protocol::worker::{validate_final, FinalReport};

mod support;

/// One stream's figures: datagrams sent, of which lost, reordered, duplicated, invalid.
#[derive(Debug, Clone)]
struct StreamFigures {
    sent: u64,
    lost: u64,
    reordered: u64,
    duplicates: u64,
    invalid: u64,
    late: u64,
    jitter_us: u32,
    millis: u32,
}

fn stream_figures() -> impl Strategy<Value = StreamFigures> {
    (
        0u64..100_000,
        any::<u64>(),
        any::<u64>(),
        0u64..1000,
        0u64..1000,
        any::<u64>(),
        0u32..10_000_000,
        1u32..20_000,
    )
        .prop_map(
            |(sent, lost, reordered, duplicates, invalid, late, jitter_us, millis)| {
                let lost = lost % (sent + 1);
                let received = sent - lost;
                StreamFigures {
                    sent,
                    lost,
                    reordered: reordered % (received + 1),
                    duplicates,
                    invalid,
                    late: late % (sent + 1),
                    jitter_us,
                    millis,
                }
            },
        )
}

/// A run as the client builds it: paced fast enough for any count drawn, `len` bytes.
fn run_report(
    start: u64,
    len: usize,
    direction: Direction,
    figures: &[StreamFigures],
) -> UdpReport {
    let streams = u32::try_from(figures.len()).unwrap();
    let streams = if direction == Direction::Both {
        streams / 2
    } else {
        streams
    };
    let pps = 1e6;
    let usage = support::cpu_usage(5.0, 20.5);
    let run = UdpRun {
        client: "10.0.0.1:1234".into(),
        server: "10.0.0.2:5201".into(),
        streams,
        duration_secs: 20.0,
        len,
        direction,
        target: Some(Rate {
            bits_per_second: pps * len as f64 * 8.0,
            packets_per_second: pps,
        }),
        started_at_unix_ms: start,
        ended_at_unix_ms: start + 20_000,
        cpu: CpuReport {
            client: usage,
            server: usage,
        },
        cpu_seconds: CpuSeconds {
            client: 5.1,
            server: 5.1,
        },
    };
    let flows = direction.flows(streams);
    let streams = figures
        .iter()
        .zip(flows)
        .enumerate()
        .map(|(id, (f, flow))| {
            let len = len as u64;
            let secs = f64::from(f.millis) / 1000.0;
            let received_packets = f.sent - f.lost;
            let sent = Sent {
                late: f.late,
                ..Sent::new(f.sent, f.sent * len, secs)
            };
            let received = Received {
                out_of_order: f.reordered,
                duplicates: f.duplicates,
                invalid: f.invalid,
                kernel_drops: (flow == Flow::ClientToServer).then_some(f.lost / 2),
                ..Received::new(received_packets, received_packets * len, secs)
            };
            UdpStream {
                jitter_ms: (received_packets >= 2).then(|| f64::from(f.jitter_us) / 1000.0),
                ..UdpStream::new(u32::try_from(id).unwrap(), flow, sent, received)
            }
        })
        .collect();
    UdpReport::single(run, streams)
}

fn report() -> impl Strategy<Value = UdpReport> {
    let direction = prop_oneof![
        Just(Direction::Send),
        Just(Direction::Receive),
        Just(Direction::Both)
    ];
    (
        0u64..1 << 40,
        32usize..=65_507,
        direction,
        vec(stream_figures(), 1..6),
    )
        .prop_map(|(start, len, direction, mut figures)| {
            if direction == Direction::Both && figures.len() % 2 == 1 {
                figures.push(figures[0].clone());
            }
            run_report(start, len, direction, &figures)
        })
}

/// Every place a value can sit in `v`, as a JSON pointer.
fn pointers(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                pointers(x, format!("{at}/{k}"), out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                pointers(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

fn hostile_value() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        Just(serde_json::json!(u64::MAX)),
        Just(serde_json::json!(1e308)),
        Just(serde_json::json!(-0.0)),
        any::<f64>().prop_map(serde_json::Value::from),
        "\\PC{0,20}".prop_map(serde_json::Value::from),
        Just(serde_json::json!([])),
        Just(serde_json::json!({})),
    ]
}

fn worker_report(report: serde_json::Value) -> FinalReport {
    support::worker_report("w-0", report)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn engine_built_reports_are_valid_and_survive_json(r in report()) {
        prop_assert_eq!(validate_udp(&r), Ok(()));
        let json = serde_json::to_value(&r).unwrap();
        prop_assert!(validate_final(&worker_report(json.clone()), protocol::ReportKind::Udp).is_ok());
        let back: UdpReport = serde_json::from_value(json).unwrap();
        prop_assert_eq!(validate_udp(&back), Ok(()));
    }

    #[test]
    fn merging_is_exact_and_associative(a in report(), b in report(), c in report()) {
        let ab_c = merge(&[merge(&[a.clone(), b.clone()]).unwrap(), c.clone()]).unwrap();
        let a_bc = merge(&[a.clone(), merge(&[b.clone(), c.clone()]).unwrap()]).unwrap();
        let abc = merge(&[a.clone(), b.clone(), c.clone()]).unwrap();
        prop_assert_eq!(&ab_c, &abc);
        prop_assert_eq!(&a_bc, &abc);
        prop_assert_eq!(validate_udp(&abc), Ok(()));
        prop_assert_eq!(abc.sent.packets, a.sent.packets + b.sent.packets + c.sent.packets);
        prop_assert_eq!(abc.lost, a.lost + b.lost + c.lost);
        prop_assert_eq!(abc.received.duplicates,
            a.received.duplicates + b.received.duplicates + c.received.duplicates);
        let rate = a.received.bits_per_second + b.received.bits_per_second
            + c.received.bits_per_second;
        prop_assert!((abc.received.bits_per_second - rate).abs() <= 1e-9 * rate.max(1.0));
        prop_assert!(abc.loss_percent >= 0.0 && abc.loss_percent <= 100.0);
        prop_assert_eq!(abc.runs.len(), 3);
    }

    #[test]
    fn one_replaced_value_is_refused_or_valid_never_a_panic(
        r in report(),
        pick in any::<prop::sample::Index>(),
        value in hostile_value(),
    ) {
        let mut json = serde_json::to_value(&r).unwrap();
        let mut all = Vec::new();
        pointers(&json, String::new(), &mut all);
        let at = pick.get(&all).clone();
        if let Some(slot) = json.pointer_mut(&at) {
            *slot = value;
        }
        let _ = validate_final(&worker_report(json.clone()), protocol::ReportKind::Udp);
        if let Ok(parsed) = serde_json::from_value::<UdpReport>(json) {
            if validate_udp(&parsed).is_ok() {
                // Whatever passes can be merged and stays valid.
                let merged = merge(&[parsed.clone(), parsed]).unwrap();
                prop_assert_eq!(validate_udp(&merged), Ok(()));
            }
        }
    }

    #[test]
    fn arbitrary_json_never_panics(text in "\\PC{0,400}") {
        let _ = serde_json::from_str::<UdpReport>(&text).map(|r| validate_udp(&r));
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) {
            let _ = validate_final(&worker_report(value), protocol::ReportKind::Udp);
        }
    }
}
