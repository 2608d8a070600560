//! Every EgressBenchmark protocol end to end on 127.0.0.1, from the spec to the case's status:
//! the operator's plan gives the worker arguments of each case, the real `netbench-loadgen`
//! runs them as the server and the client worker against the operator's REAL worker API (which
//! takes only the report kind the case's protocol delivers), and the stored report is read into
//! the case result and its figures as the operator does when it collects.

mod worker_api;

use std::time::Duration;

use crds::egress::Protocol;
use crds::EgressBenchmark;
use operator::egress::{plan, result};
use operator::policy::samples::Slot;
use operator::run::Plan;
use protocol::worker::{FinalReport, Role};
use worker_api::Api;

const SPEC: &str = r#"
apiVersion: netbench.io/v1alpha1
kind: EgressBenchmark
metadata: {name: e, namespace: ns, uid: u-1}
spec:
  cases:
    - {name: bulk, duration: 2s, streams: 2, latencyProbe: 50, client: {}, server: {}}
    - {name: rr, protocol: tcp-rr, duration: 2s, burst: 2, requestSize: 64, responseSize: 512, client: {}, server: {}}
    - {name: crr, protocol: tcp-crr, duration: 2s, client: {}, server: {}}
    - {name: urr, protocol: udp-rr, duration: 2s, timeout: 200ms, client: {}, server: {}}
    - {name: dgrams, protocol: udp-stream, duration: 2s, bitrate: 20M, messageSize: 1000, client: {}, server: {}}
    - {name: flood, protocol: udp-stream, duration: 2s, packetsPerSecond: 10000000, messageSize: 32, client: {}, server: {}}
"#;

/// Runs case `index` of SPEC through the worker API; returns its result and figure names.
fn run_case(index: u32) -> (crds::egress::CaseResult, Vec<String>) {
    let (r, names, _) = run_case_keeping_report(index);
    (r, names)
}

/// [`run_case`], with the client's stored report.
fn run_case_keeping_report(index: u32) -> (crds::egress::CaseResult, Vec<String>, FinalReport) {
    let eb: EgressBenchmark = serde_yaml::from_str(SPEC).unwrap();
    let slot = Slot::first(index);
    let plans = plan::workers(&eb, "r1", slot);
    let (client, server) = (&plans[0], &plans[1]);
    let kind = eb.measurement(index).report_kind;
    let api = Api::start_taking(
        "EgressBenchmark",
        "e",
        &[
            (server.name.as_str(), Role::Server),
            (client.name.as_str(), Role::Client),
        ],
        kind,
    );
    // The plan's server arguments, on 127.0.0.1 and the port the API gave it (a pod's is
    // fixed by the plan).
    let given = api.port_of(&server.name);
    let mut server_args: Vec<&str> = server.args.iter().map(String::as_str).collect();
    let port = server_args.iter().position(|a| *a == "-p").unwrap();
    server_args[port + 1] = &given;
    server_args.extend(["-B", "127.0.0.1"]);
    let server_worker = api.worker(&server.name, &server_args);
    let client_args: Vec<&str> = client.args.iter().map(String::as_str).collect();
    let client_worker = api.worker(&client.name, &client_args);
    let client_exit = client_worker.wait(Duration::from_secs(90));
    assert!(
        client_exit.success,
        "case {index} client: {}",
        client_exit.stderr
    );
    let server_exit = server_worker.wait(Duration::from_secs(30));
    assert!(
        server_exit.success,
        "case {index} server: {}",
        server_exit.stderr
    );

    let stored: Vec<FinalReport> = api.sink.0.lock().unwrap().clone();
    assert_eq!(stored.len(), 1, "the client's report only");
    assert_eq!(stored[0].report["kind"], kind.as_str());
    let measured = plan::case_at(&eb, index).unwrap();
    let pair = result::PairReport {
        pair: 0,
        wave: 0,
        client: &stored[0],
        client_node: None,
        server_node: Some("node-b".into()),
    };
    let (r, errors) =
        result::case_result(&measured, &[pair]).unwrap_or_else(|e| panic!("case {index}: {e}"));
    assert_eq!(errors, Vec::<String>::new(), "case {index}");
    assert_eq!(result::nothing_transferred(&r), None, "case {index}: {r:?}");
    let names = result::figures(&r)
        .iter()
        .map(|f| f.name.to_string())
        .collect();
    (r, names, stored[0].clone())
}

#[test]
fn tcp_stream_with_a_latency_probe() {
    let (r, figures) = run_case(0);
    assert_eq!(r.protocol, Some(Protocol::TcpStream));
    assert!(r.receiver_bits_per_second.is_some_and(|b| b > 1e6), "{r:?}");
    // One pair: each end's node read over the same window (on this machine, one node).
    assert!(r.node_cpu_seconds_per_gb.is_some_and(|c| c > 0.0), "{r:?}");
    assert!(r.client_node_cpu_percent.is_some_and(|p| p > 0.0), "{r:?}");
    let probe = r.probe_latency.clone().expect("the probe's latency");
    assert!(
        probe.p50 > 0.0 && probe.p50 <= probe.p99 && probe.p99 <= probe.max,
        "{probe:?}"
    );
    assert!(r.cpu_seconds_per_gb.is_some_and(|c| c > 0.0), "{r:?}");
    assert_eq!(
        &figures[..3],
        [
            "receiverBitsPerSecond",
            "senderBitsPerSecond",
            "retransmits"
        ]
    );
    assert!(figures.contains(&"probeP99Ms".to_string()));
    assert_eq!(
        (r.streams, r.message_size, r.path.as_deref()),
        (Some(2), Some(131072), Some("pod"))
    );
}

#[test]
fn tcp_rr_counts_transactions_and_latency() {
    let (r, figures, report) = run_case_keeping_report(1);
    assert_eq!(r.protocol, Some(Protocol::TcpRr));
    let tps = r.transactions_per_second.unwrap();
    assert!(tps > 100.0, "{r:?}");
    let l = r.latency.clone().unwrap();
    assert!(
        l.p50 > 0.0 && l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.p999 && l.p999 <= l.max,
        "{l:?}"
    );
    assert_eq!(r.failures, Some(0));
    // Payload both ways: (64 + 512) bytes per transaction, computed and named so; never shown
    // as a measured sender or receiver rate.
    let bits = tps * 576.0 * 8.0;
    let payload = r.payload_bits_per_second.expect("payload bits/s");
    assert!((payload - bits).abs() <= bits * 0.01 + 1.0, "{r:?}");
    assert_eq!(
        (r.sender_bits_per_second, r.receiver_bits_per_second),
        (None, None)
    );
    assert!(
        r.client_cpu_us_per_transaction.is_some_and(|c| c > 0.0),
        "{r:?}"
    );
    // The node's CPU per transaction (netperf's service demand): more than nothing, and never
    // more than every CPU of the node busy for the whole meter window. (Not compared with the
    // process figure: /proc/stat's tick sampling can read a ping-pong's short bursts as idle,
    // as it does for netperf; bench/rr-vs-peers.sh shows both.)
    let node = r
        .client_node_cpu_us_per_transaction
        .expect("node CPU per tx");
    let client = &report.report["runs"][0]["cpu"]["client"];
    let cpus = client["node"]["cpus"].as_f64().expect("the node's CPUs");
    let window = client["seconds"].as_f64().expect("the meter's window");
    let tx = report.report["counts"]["transactions"].as_f64().unwrap();
    let all_busy = cpus * window * 1e6 / tx;
    assert!(
        node > 0.0 && node <= all_busy * 1.001,
        "{node} of at most {all_busy}: {r:?}"
    );
    assert!(r.server_node_cpu_us_per_transaction.is_some(), "{r:?}");
    assert_eq!(r.schedule_missed_percent, None, "closed loop");
    assert_eq!(figures[0], "transactionsPerSecond");
    assert!(
        figures.contains(&"p99Ms".to_string())
            && figures.contains(&"serverCpuUsPerTransaction".to_string())
    );
    assert_eq!(r.message_size, Some(64));
}

#[test]
fn tcp_crr_opens_a_connection_per_transaction() {
    let (r, _) = run_case(2);
    assert_eq!(r.protocol, Some(Protocol::TcpCrr));
    assert!(r.transactions_per_second.unwrap() > 10.0, "{r:?}");
    assert!(r.latency.is_some());
}

#[test]
fn udp_rr_reports_loss() {
    let (r, figures, report) = run_case_keeping_report(3);
    refuses_forged(&report, 3, |j| j["loss_percent"] = serde_json::json!(150.0));
    assert_eq!(r.protocol, Some(Protocol::UdpRr));
    assert!(r.transactions_per_second.unwrap() > 100.0, "{r:?}");
    let loss = r.loss_percent.expect("udp-rr reports loss");
    assert!(
        (0.0..1.0).contains(&loss),
        "loopback loses (almost) nothing: {loss}"
    );
    assert!(figures.contains(&"lossPercent".to_string()));
}

#[test]
fn udp_stream_holds_its_rate_and_reports_loss_and_jitter() {
    let (r, figures, report) = run_case_keeping_report(4);
    refuses_forged(&report, 4, |j| j["jitter_ms"] = serde_json::json!(-1.0));
    refuses_forged(&report, 4, |j| {
        j["received"]["packets"] = serde_json::json!(u64::MAX)
    });
    assert_eq!(r.protocol, Some(Protocol::UdpStream));
    // 20 Mbit/s paced, on loopback: never above; near it unless a sender starved of CPU gave
    // up send times (counted as skipped in the report, seen under load).
    let skipped = report.report["sent"]["skipped"].as_u64().unwrap_or(0);
    let floor = if skipped == 0 { 15e6 } else { 0.0 };
    let received = r.receiver_bits_per_second.unwrap_or(0.0);
    assert!((floor..=21e6).contains(&received), "{received}");
    // What was asked, what was sent, and how much of the schedule went unsent.
    assert_eq!(r.offered_bits_per_second, Some(20e6));
    assert!(
        r.sender_bits_per_second.is_some_and(|s| s <= 20e6 * 1.001),
        "{r:?}"
    );
    assert_eq!(r.skipped_sends, Some(skipped));
    assert!(
        r.late_sends.is_some() && r.schedule_missed_percent.is_some(),
        "{r:?}"
    );
    assert_eq!(r.stream_jitter_ms.len(), 1, "one stream, one jitter");
    assert_eq!(r.jitter_max_ms, r.jitter_ms, "one stream: mean = worst");
    assert!(
        r.loss_percent.is_some() && r.jitter_ms.is_some() && r.out_of_order.is_some(),
        "{r:?}"
    );
    assert_eq!(
        &figures[..6],
        [
            "receiverBitsPerSecond",
            "senderBitsPerSecond",
            "offeredBitsPerSecond",
            "scheduleMissedPercent",
            "lossPercent",
            "jitterMs"
        ]
    );
    assert_eq!(r.message_size, Some(1000));
}

/// A rate no sender here can keep (10 million datagrams/s): whatever the loss of what was
/// sent, the case says the load was not offered, and a loss gate that any loss would pass fails
/// with that cause.
#[test]
fn a_rate_the_sender_cannot_keep_is_said_and_fails_a_loss_gate() {
    use operator::policy::gates::{sample_breaches, SCHEDULE_MISSED};
    let (r, figures, report) = run_case_keeping_report(5);
    let skipped = report.report["sent"]["skipped"].as_u64().unwrap_or(0);
    let sent = report.report["sent"]["packets"].as_u64().unwrap_or(0);
    eprintln!("sent {sent}, skipped {skipped}: {r:?}");
    assert!(skipped > sent / 100, "sent {sent}, skipped {skipped}");
    assert_eq!(r.offered_bits_per_second, Some(10e6 * 32.0 * 8.0));
    let sender = r.sender_bits_per_second.unwrap_or(f64::MAX);
    assert!(sender < 0.99 * 10e6 * 32.0 * 8.0, "{r:?}");
    let missed = r.schedule_missed_percent.expect("the missed share");
    assert!(missed > 1.0, "{r:?}");
    let warning = r.warning.clone().expect("a warning");
    assert!(
        warning.contains("of their schedule") && warning.contains("bit/s offered"),
        "{warning}"
    );
    assert!(figures.iter().any(|f| f == SCHEDULE_MISSED));
    let gate: crds::gates::Gate =
        serde_yaml::from_str("{figure: lossPercent, max: 100, name: any loss}").unwrap();
    let breaches = sample_breaches(&[gate], &result::figures(&r), "case flood", false);
    let message = breaches.first().map(|b| b.message()).unwrap_or_default();
    assert!(
        message.contains("cannot pass") && message.contains("was not offered"),
        "{message}"
    );
}

/// The API takes only the kind of report the case's protocol delivers: a tcp-stream client in
/// a tcp-rr step is refused (its report never reaches the store) and says so.
#[test]
fn a_report_of_another_protocol_is_refused() {
    let eb: EgressBenchmark = serde_yaml::from_str(SPEC).unwrap();
    let plans = plan::workers(&eb, "r1", Slot::first(0));
    let (client, server) = (&plans[0], &plans[1]);
    let api = Api::start_taking(
        "EgressBenchmark",
        "e",
        &[
            (server.name.as_str(), Role::Server),
            (client.name.as_str(), Role::Client),
        ],
        eb.measurement(1).report_kind,
    );
    let port = api.port_of(&server.name);
    let srv = api.worker(&server.name, &["server", "-B", "127.0.0.1", "-p", &port]);
    let cli = api.worker(&client.name, &["tcp-client", "-t", "1", "--output", "json"]);
    let exit = cli.wait(Duration::from_secs(60));
    assert!(
        !exit.success,
        "the client's report was refused: {}",
        exit.stderr
    );
    assert!(
        exit.stderr.contains("expected a rr report"),
        "{}",
        exit.stderr
    );
    assert!(api.sink.0.lock().unwrap().is_empty(), "nothing stored");
    drop(srv);
}

/// A real report with one impossible figure (`forge`), posted by the case's client worker: the
/// API refuses it naming the field (400), counts it, and stores nothing.
fn refuses_forged(real: &FinalReport, index: u32, forge: impl Fn(&mut serde_json::Value)) {
    let eb: EgressBenchmark = serde_yaml::from_str(SPEC).unwrap();
    let client = &plan::workers(&eb, "r1", Slot::first(index))[0];
    let api = Api::start_taking(
        "EgressBenchmark",
        "e",
        &[(client.name.as_str(), Role::Client)],
        eb.measurement(index).report_kind,
    );
    let worker = loadgen::worker::WorkerClient::new(loadgen::worker::WorkerEnv {
        operator_url: api.url.clone(),
        run: worker_api::RUN.into(),
        credential: loadgen::worker::Credential::Token(worker_api::token_of(&client.name)),
        worker: client.name.clone(),
        node: None,
        step: 0,
    });
    let mut forged = real.report.clone();
    forge(&mut forged);
    let err = worker.report(1, forged).unwrap_err().to_string();
    assert!(err.contains("400") || err.contains("invalid"), "{err}");
    let rejected = api
        .metrics
        .family::<operator::api::metrics::ApiMetrics>()
        .rejected
        .with_label_values(&["invalid_report"])
        .get();
    assert_eq!(rejected, 1, "counted once: {err}");
    assert!(api.sink.0.lock().unwrap().is_empty(), "nothing stored");
}
