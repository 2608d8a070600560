//! The TCP engine's worker mode end to end against the operator's REAL worker API on
//! 127.0.0.1 (see worker_api): the real `netbench-loadgen` binary runs twice, as the server
//! worker and as the client worker, exactly as the EgressBenchmark pods run it.

mod worker_api;

use std::time::{Duration, Instant};

use protocol::tcp::TcpReport;
use protocol::worker::Role;
use worker_api::{token_of, Api, RUN};

#[test]
fn tcp_server_and_client_workers_run_one_test_through_the_operator() {
    let api = Api::start(
        "EgressBenchmark",
        "egress",
        &[("server-0", Role::Server), ("client-0", Role::Client)],
    );
    // The port the operator gave it: the only one it may register.
    let port = api.port_of("server-0");
    let server = api.worker("server-0", &["tcp-server", "-B", "127.0.0.1", "-p", &port]);
    // No -c: the client learns the server's address at the barrier.
    let client = api.worker(
        "client-0",
        &["tcp-client", "-t", "3", "-P", "2", "--output", "json"],
    );

    let client = client.wait(Duration::from_secs(60));
    assert!(client.success, "client failed: {}", client.stderr);
    let server = server.wait(Duration::from_secs(30));
    assert!(server.success, "server failed: {}", server.stderr);
    assert!(
        server.stdout.is_empty(),
        "the server prints nothing: {}",
        server.stdout
    );

    // The server registered the address it advertised (-B) with the port it bound, which the
    // barrier gave the client.
    let barrier = api.barrier("client-0").expect("client registered");
    let [listen] = &barrier.servers[..] else {
        panic!("one server registered: {:?}", barrier.servers);
    };
    assert_eq!(*listen, format!("127.0.0.1:{port}"));
    assert!(barrier.start_at_unix_ms.is_some());

    // Exactly one report, the client's; the server sends none.
    let stored = api.sink.0.lock().unwrap().clone();
    assert_eq!(
        stored.iter().map(|r| r.worker.as_str()).collect::<Vec<_>>(),
        ["client-0"]
    );
    let stored = &stored[0];
    assert_eq!(stored.node.as_deref(), Some("node-of-client-0"));
    assert_eq!(stored.report["kind"], "tcp");
    let report: TcpReport = serde_json::from_value(stored.report.clone()).expect("a tcp report");
    assert!(report.receiver.bytes > 0, "{:?}", report.receiver);
    assert!(
        report.cpu.server.total_percent > 0.0,
        "the server's CPU came over the control connection: {:?}",
        report.cpu
    );
    assert_eq!(report.streams.len(), 2);
    assert_eq!(
        &report.runs[0].server, listen,
        "the client used the registered address"
    );
    assert!(stored.started_at_unix_ms <= report.started_at_unix_ms);
    // The same report is printed on stdout, as in standalone mode.
    let printed: TcpReport = serde_json::from_str(&client.stdout).expect("JSON on stdout");
    assert_eq!(printed, report);
    assert!(
        api.progress_updates() >= 1,
        "a 3 s test pushes progress every second"
    );
}

#[test]
fn a_client_without_a_registered_server_fails_clearly() {
    let api = Api::start("EgressBenchmark", "egress", &[("client-0", Role::Client)]);
    let client = api
        .worker("client-0", &["tcp-client", "-t", "1"])
        .wait(Duration::from_secs(30));
    assert!(!client.success);
    assert!(
        client.stderr.contains("no server registered"),
        "{}",
        client.stderr
    );
    assert!(api.sink.0.lock().unwrap().is_empty());
}

/// After an operator restart the registry is empty until the new leader reconciles the run:
/// a final report answered 404 meanwhile is retried, not lost.
#[test]
fn a_report_waits_for_a_restarted_operator_to_know_the_run() {
    let api = Api::start("EgressBenchmark", "egress", &[("client-0", Role::Client)]);
    let spec = api.runs.spec(RUN).unwrap();
    api.runs.forget(RUN); // what a restart loses
    let client = loadgen::worker::WorkerClient::new(loadgen::worker::WorkerEnv {
        operator_url: api.url.clone(),
        run: RUN.into(),
        credential: loadgen::worker::Credential::Token(token_of("client-0")),
        worker: "client-0".into(),
        node: None,
        step: 0,
    });
    let t = serde_json::json!({"bytes": 10, "seconds": 1.0, "bits_per_second": 80.0});
    let cpu = serde_json::json!({"user_percent": 1.0, "system_percent": 2.0, "total_percent": 3.0});
    // A valid client report: one run with one stream (the operator validates it).
    let run = serde_json::json!({"client": "a", "server": "b", "streams": 1, "duration_secs": 1.0,
        "len": 1000, "direction": "send", "started_at_unix_ms": 1, "ended_at_unix_ms": 2,
        "cpu": {"client": cpu, "server": cpu}});
    let stream = serde_json::json!({"run": 0, "id": 0, "flow": "client_to_server", "sender": t,
        "receiver": t, "tcp": null, "error": null});
    let report = serde_json::json!({"version": 1, "kind": "tcp", "started_at_unix_ms": 1,
        "ended_at_unix_ms": 2, "sender": t, "receiver": t, "retransmits": 0, "mean_rtt_us": null,
        "cpu": {"client": cpu, "server": cpu}, "runs": [run], "streams": [stream]});
    let sender = std::thread::spawn(move || client.report(1, report));
    // Answered 404 (run unknown) and tried again: the worker keeps retrying.
    let deadline = Instant::now() + Duration::from_secs(30);
    while api.requests("report", "404") < 2 {
        assert!(
            Instant::now() < deadline,
            "the report was not retried after a 404"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        api.sink.0.lock().unwrap().is_empty(),
        "nothing stored while the run is unknown"
    );
    api.runs.announce(RUN, (*spec).clone()); // the new leader reconciles the benchmark
    sender
        .join()
        .unwrap()
        .expect("the report is delivered once the run is known");
    assert_eq!(api.sink.0.lock().unwrap().len(), 1);
}
