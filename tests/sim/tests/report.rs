//! The simulator's reports are ones the operator accepts (protocol's validate_final, as the
//! worker API runs it on arrival and the results code again before merging), and merging them
//! the operator's way gives exactly the percentiles of one histogram of every sample sent.

use protocol::report::histogram::new_latency_histogram;
use protocol::report::{merge_http, LatencySummary};
use protocol::tcp::Direction;
use protocol::worker::{validate_final, CheckedReport, FinalReport};
use rand::rngs::StdRng;
use rand::SeedableRng;
use sim::record::{read_records, Recorder, Sent, StepKey};
use sim::report::{
    http_json, http_report, http_requests, sample_latencies, tcp_json, tcp_report, HttpShape,
    LatencyModel, TcpShape,
};

fn shape(rate: Option<f64>) -> HttpShape {
    HttpShape {
        url: "http://target.scale-1.svc/".into(),
        method: "GET".into(),
        connections: 10,
        threads: 3,
        duration_s: 2.0,
        warmup_s: 0.5,
        timeout_s: 2.0,
        rate,
        keepalive: true,
        http2: false,
    }
}

#[test]
fn http_reports_pass_the_operators_validation() {
    let mut rng = StdRng::seed_from_u64(1);
    let model = LatencyModel::default();
    for (i, rate) in [None, Some(250.0)].into_iter().enumerate() {
        let s = shape(rate);
        let n = http_requests(&s, &model, 5_000);
        let samples = sample_latencies(&model, n, &mut rng);
        let report = http_report(&s, 1_700_000_000_000, &samples).unwrap();
        let fr = FinalReport::new(
            &format!("b-abc-g1-s0-w{i}"),
            Some("nb-fake-0"),
            0,
            1_700_000_000_000,
            http_json(&report).unwrap(),
        );
        let checked = validate_final(&fr, protocol::ReportKind::Http).unwrap();
        let CheckedReport::Http(h) = checked else {
            panic!("not http")
        };
        assert_eq!(h.counters.requests, n);
        assert_eq!(h.latency.count, n);
        // The same report through JSON, as the operator receives it.
        let back: protocol::worker::FinalReport =
            serde_json::from_str(&serde_json::to_string(&fr).unwrap()).unwrap();
        validate_final(&back, protocol::ReportKind::Http).unwrap();
        assert!(
            validate_final(&fr, protocol::ReportKind::Tcp).is_err(),
            "only as the kind asked"
        );
    }
}

#[test]
fn latencies_look_like_requests() {
    let mut rng = StdRng::seed_from_u64(2);
    let model = LatencyModel::default();
    let samples = sample_latencies(&model, 50_000, &mut rng);
    let mut h = new_latency_histogram();
    for v in &samples {
        h.record(*v).unwrap();
    }
    let p50 = h.value_at_quantile(0.5) as f64;
    assert!((700.0..900.0).contains(&p50), "median near 800 us: {p50}");
    assert!(
        h.value_at_quantile(0.999) > 4 * h.value_at_quantile(0.5),
        "a tail"
    );
    assert!(h.min() >= 1);
}

#[test]
fn merged_percentiles_equal_one_histogram_of_every_sample() {
    let mut rng = StdRng::seed_from_u64(3);
    let model = LatencyModel {
        median_us: 1500.0,
        sigma: 0.8,
        ..LatencyModel::default()
    };
    let (dir, recorder, key) = recording("nb-sim-record", "scale-1");
    let mut reports = vec![];
    let mut record = None;
    for w in 0..64u64 {
        // Workers of different sizes, some with very few requests.
        let n = 1 + (w * 397) % 3000;
        let samples = sample_latencies(&model, n, &mut rng);
        let report = http_report(&shape(None), 1_700_000_000_000 + w, &samples).unwrap();
        let fr = FinalReport::new(
            &format!("b-abc-g1-s0-w{w}"),
            None,
            0,
            1_700_000_000_000 + w,
            http_json(&report).unwrap(),
        );
        let Ok(CheckedReport::Http(h)) = validate_final(&fr, protocol::ReportKind::Http) else {
            panic!("invalid report")
        };
        reports.push(*h);
        record = Some(
            recorder
                .add(
                    &key,
                    &Sent {
                        samples: &samples,
                        start_at_unix_ms: Some(1_700_000_000_000),
                        started_at_unix_ms: 1_700_000_000_000 + w,
                        ..Sent::default()
                    },
                )
                .unwrap(),
        );
    }
    let merged = merge_http(&reports).unwrap();
    let record = record.unwrap();
    assert_eq!(merged.latency.count, record.latency.count);
    let summary = |l: &LatencySummary| {
        (
            l.count, l.min_us, l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us,
        )
    };
    assert_eq!(summary(&merged.latency), summary(&record.latency));
    assert!((merged.latency.mean_us - record.latency.mean_us).abs() < 1e-6);
    assert_eq!(record.start_spread_ms(), Some(63));
    assert_eq!(record.max_lateness_ms(), Some(63));
    // What `netbench-sim check` reads back.
    let back = sim::record::read_records(&dir, "scale-1", "b").unwrap();
    assert_eq!(back, vec![record]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tcp_reports_pass_the_operators_validation() {
    let mut rng = StdRng::seed_from_u64(4);
    for direction in [Direction::Send, Direction::Receive, Direction::Both] {
        let s = TcpShape {
            streams: 4,
            duration_s: 2.5,
            len: 131_072,
            direction,
        };
        let r = tcp_report(&s, "198.19.240.9:5201", 1_700_000_000_000, 2.0, &mut rng);
        let fr = FinalReport::new(
            "e-abc-g1-s0-w0",
            None,
            0,
            1_700_000_000_000,
            tcp_json(&r).unwrap(),
        );
        assert!(
            matches!(
                validate_final(&fr, protocol::ReportKind::Tcp),
                Ok(CheckedReport::Tcp(_))
            ),
            "{direction:?}: {:?}",
            validate_final(&fr, protocol::ReportKind::Tcp)
        );
    }
}

/// A recorder writing into a directory of this test's own (named `dir` and the process id), and
/// the key of step 0 of run abc-g1 of benchmark b in `namespace`.
fn recording(dir: &str, namespace: &str) -> (std::path::PathBuf, Recorder, StepKey) {
    let dir = std::env::temp_dir().join(format!("{dir}-{}", std::process::id()));
    let recorder = Recorder::new(Some(dir.clone())).unwrap();
    let key = StepKey {
        namespace: namespace.into(),
        benchmark: "b".into(),
        run: "abc-g1".into(),
        step: 0,
    };
    (dir, recorder, key)
}

#[test]
fn reports_of_one_step_recorded_at_once_are_all_kept() {
    let (dir, recorder, key) = recording("nb-sim-record-many", "scale-2");
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..64u64)
            .map(|w| {
                let (recorder, key) = (&recorder, &key);
                s.spawn(move || {
                    recorder.add(
                        key,
                        &Sent {
                            main_figure: 1e9,
                            started_at_unix_ms: 1_700_000_000_000 + w,
                            pairing: Some(Ok(())),
                            ..Sent::default()
                        },
                    )
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap().unwrap();
        }
    });
    let records = read_records(&dir, "scale-2", "b").unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!((records[0].reports, records[0].paired), (64, 64));
    assert_eq!(records[0].main_figure, 64e9);
    assert_eq!(records[0].start_spread_ms(), Some(63));
}
