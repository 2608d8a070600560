//! A worker speaks only for itself, with the real `netbench-loadgen` against the operator's
//! REAL worker API on 127.0.0.1 (see worker_api; each worker "pod" there has the addresses
//! 127.0.0.1 and ::1 and runs on node "node-of-<name>"): a server that advertises another
//! address or port is refused and its run ends with why; an honest IPv6 server is given to its
//! client; a worker that claims another node is refused.

mod worker_api;

use std::time::Duration;

use operator::api::metrics::ApiMetrics;
use protocol::worker::Role;
use worker_api::{token_of, Api, RUN};

fn rejected(api: &Api, reason: &str) -> u64 {
    api.metrics
        .family::<ApiMetrics>()
        .rejected
        .with_label_values(&[reason])
        .get()
}

const PAIR: [(&str, Role); 2] = [("server-0", Role::Server), ("client-0", Role::Client)];

#[test]
fn a_server_advertising_another_address_is_refused_and_says_why() {
    let api = Api::start("EgressBenchmark", "egress", &PAIR);
    let port = api.port_of("server-0");
    let server = api
        .worker(
            "server-0",
            &["tcp-server", "-p", &port, "--advertise", "198.51.100.7"],
        )
        .wait(Duration::from_secs(30));
    assert!(!server.success, "the server cannot start");
    let expected = format!(
        "listen \"198.51.100.7:{port}\" is not server server-0's own address: the operator expects its pod's 127.0.0.1, ::1, port {port}"
    );
    assert!(
        server.stderr.contains("HTTP 403") && server.stderr.contains(&expected),
        "{}",
        server.stderr
    );
    assert_eq!(rejected(&api, "listen_not_own"), 1);
    // The run ends with the cause (the driver reads this list on its next pass).
    let failures = api.runs.preflight_failures(RUN);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].1.contains(&expected), "{failures:?}");
    // A port other than the one given: refused too.
    let other = api.worker("server-0", &["tcp-server", "-B", "127.0.0.1", "-p", "0"]);
    let exit = other.wait(Duration::from_secs(30));
    assert!(!exit.success);
    assert!(
        exit.stderr
            .contains(&format!("the operator gave server server-0 port {port}")),
        "{}",
        exit.stderr
    );
    assert_eq!(rejected(&api, "listen_not_own"), 2);
}

#[test]
fn an_ipv6_server_is_given_to_its_client() {
    let api = Api::start("EgressBenchmark", "egress", &PAIR);
    let port = api.port_of("server-0");
    let server = api.worker("server-0", &["tcp-server", "-B", "::1", "-p", &port]);
    let client = api.worker("client-0", &["tcp-client", "-t", "1", "--output", "json"]);
    let client = client.wait(Duration::from_secs(60));
    assert!(client.success, "client failed: {}", client.stderr);
    let server = server.wait(Duration::from_secs(30));
    assert!(server.success, "server failed: {}", server.stderr);
    let barrier = api.barrier("client-0").expect("client registered");
    assert_eq!(barrier.servers, [format!("[::1]:{port}")]);
    let stored = api.sink.0.lock().unwrap().clone();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].node.as_deref(), Some("node-of-client-0"));
    assert_eq!(rejected(&api, "listen_not_own"), 0);
}

#[test]
fn a_worker_claiming_another_node_is_refused() {
    let api = Api::start("EgressBenchmark", "egress", &[("client-0", Role::Client)]);
    // Its environment lies: registration is refused, the run ends with why.
    let client = api
        .worker_with(
            "client-0",
            &["tcp-client", "-c", "127.0.0.1", "-p", "9", "-t", "1"],
            &[("NETBENCH_NODE", "node-of-someone-else")],
        )
        .wait(Duration::from_secs(30));
    assert!(!client.success);
    let says = "worker client-0 says it runs on node \"node-of-someone-else\", but its pod runs on node \"node-of-client-0\"";
    assert!(client.stderr.contains(says), "{}", client.stderr);
    // A report naming another node is refused as well; nothing is stored.
    let worker = loadgen::worker::WorkerClient::new(loadgen::worker::WorkerEnv {
        operator_url: api.url.clone(),
        run: RUN.into(),
        credential: loadgen::worker::Credential::Token(token_of("client-0")),
        worker: "client-0".into(),
        node: Some("node-of-someone-else".into()),
        step: 0,
    });
    let err = worker
        .report(1, serde_json::json!({}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("HTTP 403") && err.contains(says), "{err}");
    assert!(api.sink.0.lock().unwrap().is_empty());
    assert_eq!(rejected(&api, "node_not_own"), 2);
    assert_eq!(api.runs.preflight_failures(RUN).len(), 1);
}
