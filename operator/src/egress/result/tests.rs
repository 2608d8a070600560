//! The case's result from its pairs' reports, their aggregate, a case that moved nothing.

use super::*;

/// A case measured from node a to node b.
pub(in crate::egress) fn case(name: &str, bps: f64) -> CaseResult {
    CaseResult {
        name: name.into(),
        receiver_bits_per_second: Some(bps),
        client_node: Some("a".into()),
        server_node: Some("b".into()),
        ..Default::default()
    }
}

fn tcp_client(worker: &str, bytes: u64, started: u64) -> FinalReport {
    let bits = bytes as f64 * 8.0;
    let t = serde_json::json!({"bytes": bytes, "seconds": 1.0, "bits_per_second": bits});
    let cpu = serde_json::json!({"user_percent": 1.0, "system_percent": 2.0, "total_percent": 3.0});
    let run = serde_json::json!({"client": "a", "server": "b", "streams": 1,
        "duration_secs": 1.0, "len": 1000, "direction": "send", "started_at_unix_ms": started,
        "ended_at_unix_ms": started + 1000, "cpu": {"client": cpu, "server": cpu}});
    let stream = serde_json::json!({"run": 0, "id": 0, "flow": "client_to_server",
        "sender": t, "receiver": t, "tcp": null, "error": null});
    let report = serde_json::json!({"version": 1, "kind": "tcp", "started_at_unix_ms": started,
        "ended_at_unix_ms": started + 1000, "sender": t, "receiver": t, "retransmits": 0,
        "mean_rtt_us": null, "cpu": {"client": cpu, "server": cpu}, "runs": [run],
        "streams": [stream]});
    FinalReport::new(worker, None, 0, started, report)
}

fn one_pair(client: &FinalReport) -> Vec<PairReport<'_>> {
    vec![PairReport {
        pair: 0,
        wave: 0,
        client,
        client_node: None,
        server_node: None,
    }]
}

/// Pair i of `reports`: client i on node "ci", its server on "si", all in wave 0.
fn in_pairs(reports: &[FinalReport]) -> Vec<PairReport<'_>> {
    reports
        .iter()
        .zip(0u32..)
        .map(|(client, i)| PairReport {
            pair: i,
            wave: 0,
            client,
            client_node: Some(format!("c{i}")),
            server_node: Some(format!("s{i}")),
        })
        .collect()
}

#[test]
fn pairs_add_up_with_a_row_each_the_aggregate_and_the_outlier_named() {
    let spec: crds::egress::EgressCase =
        serde_yaml::from_str("{name: p, client: {}, server: {}, topology: {pairs: 3}}").unwrap();
    let case = spec.measured().remove(0);
    let reports = [
        tcp_client("w0", 1000, 5_000),
        tcp_client("w2", 1200, 5_003),
        tcp_client("w4", 100, 5_040),
    ];
    let pairs = in_pairs(&reports);
    let (r, errors) = case_result(&case, &pairs).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    // The case's figure is the exact sum of the pairs' (2300 bytes in 1 s).
    assert_eq!(r.receiver_bits_per_second, Some(18_400.0));
    let values: Vec<f64> = r.pairs.iter().map(|p| p.value).collect();
    assert_eq!(values, [8_000.0, 9_600.0, 800.0]);
    let a = r.aggregate.unwrap();
    assert_eq!((a.pairs, a.sum, a.median), (3, 18_400.0, 8_000.0));
    assert_eq!(
        (a.min, a.max, a.p05, a.p95),
        (800.0, 9_600.0, 800.0, 9_600.0)
    );
    assert_eq!(a.outliers, ["c2->s2"]);
    assert!(r.pairs[2].outlier && !r.pairs[0].outlier);
    let lateness: Vec<f64> = r.pairs.iter().map(|p| p.start_lateness_ms).collect();
    assert_eq!(lateness, [0.0, 3.0, 40.0]);
    assert_eq!(a.start_spread_ms, 40.0);
    assert_eq!(r.pairs[1].client_node.as_deref(), Some("c1"));
    // A client claiming to have started at 1970 cannot make the others late.
    let forged = [
        tcp_client("w0", 1000, 0),
        tcp_client("w2", 1200, 100_003),
        tcp_client("w4", 100, 100_040),
    ];
    let (r, _) = case_result(&case, &in_pairs(&forged)).unwrap();
    let lateness: Vec<f64> = r.pairs.iter().map(|p| p.start_lateness_ms).collect();
    assert_eq!(
        lateness,
        [0.0, 0.0, 37.0],
        "the forged start counts as the median"
    );
    assert_eq!(r.aggregate.unwrap().start_spread_ms, 37.0);
    // Waves are judged apart: a later wave's start is not lateness.
    let mut waved = pairs;
    waved[2].wave = 1;
    let (r, _) = case_result(&case, &waved).unwrap();
    assert_eq!(r.aggregate.unwrap().start_spread_ms, 3.0);
    assert_eq!(r.pairs[2].start_lateness_ms, 0.0);
}

#[test]
fn nearest_rank_percentiles_across_pairs() {
    let mut rows: Vec<PairResult> = (1..=20)
        .map(|v| PairResult {
            value: f64::from(v),
            ..Default::default()
        })
        .collect();
    let a = aggregate(&mut rows, 0.0);
    assert_eq!((a.p05, a.median, a.p95, a.sum), (1.0, 10.0, 19.0, 210.0));
    // Below 80 % of the median (8): 1..=7.
    assert_eq!(rows.iter().filter(|r| r.outlier).count(), 7);
    assert_eq!(a.outliers.len(), 7);
    assert_eq!(aggregate(&mut [], 0.0).median, 0.0);
}

#[test]
fn an_invalid_stored_report_fails_the_case_naming_its_worker() {
    let spec: crds::egress::EgressCase =
        serde_json::from_value(serde_json::json!({"name": "c", "client": {}, "server": {}}))
            .unwrap();
    let case = spec.measured().remove(0);
    let mut client = tcp_client("eb-c0-client", 10, 1);
    let (measured, _) = case_result(&case, &one_pair(&client)).unwrap();
    assert_eq!(measured.receiver_bits_per_second, Some(80.0));
    // A forged throughput that the bytes do not back.
    client.report["receiver"]["bits_per_second"] = 9.4e9.into();
    let err = case_result(&case, &one_pair(&client)).unwrap_err();
    assert!(
        err.contains(
            "report of worker eb-c0-client: invalid report: report.receiver.bits_per_second"
        ),
        "{err}"
    );
}

#[test]
fn a_case_that_moved_nothing_says_so() {
    assert!(nothing_transferred(&case("idle", 0.0))
        .unwrap()
        .contains("no byte"));
    assert!(nothing_transferred(&case("nan", f64::NAN)).is_some());
    assert_eq!(nothing_transferred(&case("ok", 1e6)), None);
    let lost = CaseResult {
        sender_bits_per_second: Some(1e6),
        ..case("lost", 0.0)
    };
    let m = nothing_transferred(&lost).unwrap();
    assert!(m.contains("sender 1.0 Mbit/s"), "{m}");
}
