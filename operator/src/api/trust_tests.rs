//! A worker speaks only for itself, through the real router: a server registers only its own
//! pod's address and the port the plan gave it, and every worker only its pod's node; a
//! refusal is counted, says why, wakes the run (which then fails with that cause) and leaves
//! other runs alone.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use axum::http::StatusCode;
use protocol::worker::*;
use tokio::sync::mpsc::UnboundedReceiver;

use super::tests::{get, http_report, post, rejected, report_body, setup_with_runs};
use super::*;
use crate::store::registry::Registry;
use crate::store::registry::{Listen, ListenHost, Pairing, RunSpec};
use crate::testing::{run_spec, FixedTokens, MemorySink};

/// Run "eg": client c0 paired with server s0 (pod 10.0.0.10, port 5201); server s6 on the host
/// network at pair index 2 (node fd00::6 and 10.0.1.6, port 5203), paired with c6.
fn egress_spec() -> RunSpec {
    let listen = |port| Listen {
        host: ListenHost::Own,
        port,
    };
    let workers = [
        ("c0", Role::Client),
        ("s0", Role::Server),
        ("c6", Role::Client),
        ("s6", Role::Server),
    ];
    RunSpec {
        kind: "EgressBenchmark".into(),
        benchmark: "e".into(),
        uid: "ue".into(),
        pairing: Pairing {
            peers: BTreeMap::from([("c0".into(), "s0".into()), ("c6".into(), "s6".into())]),
            offsets_ms: BTreeMap::new(),
            listen: BTreeMap::from([("s0".into(), listen(5201)), ("s6".into(), listen(5203))]),
        },
        ..run_spec(&workers)
    }
}

struct Setup {
    app: Router,
    sink: Arc<MemorySink>,
    metrics: Arc<Metrics>,
    runs: Arc<Registry>,
    woken: UnboundedReceiver<crate::context::Wake>,
}

fn setup() -> Setup {
    // Run "run1" of the other tests (worker w0, token "tok") shares the API.
    let (_, _, _, runs) = setup_with_runs();
    runs.announce("eg", egress_spec());
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let tokens = FixedTokens::new([
        ("tok", "w0"),
        ("tok-c0", "c0"),
        ("tok-s0", "s0"),
        ("tok-c6", "c6"),
        ("tok-s6", "s6"),
    ])
    .with_pod("c0", Some("n-c0"), &[ip("10.0.0.20")])
    .with_pod("s0", Some("n-s0"), &[ip("10.0.0.10")])
    .with_pod("c6", Some("n-c6"), &[ip("fd00::16")])
    .with_pod("s6", Some("n-s6"), &[ip("fd00::6"), ip("10.0.1.6")]);
    let sink = Arc::new(MemorySink::default());
    let metrics = Arc::new(Metrics::new());
    let (wake, woken) = tokio::sync::mpsc::unbounded_channel();
    let state = ApiState {
        auth: Arc::new(tokens),
        runs: runs.clone(),
        metrics: metrics.clone(),
        sink: sink.clone(),
        wake,
        ready: Arc::new(AtomicBool::new(true)),
        barrier_wait: super::tests::BARRIER_WAIT,
    };
    Setup {
        app: router(state),
        sink,
        metrics,
        runs,
        woken,
    }
}

fn registering(worker: &str, role: Role, node: Option<&str>, listen: Option<&str>) -> Vec<u8> {
    serde_json::to_vec(&RegisterRequest {
        version: PROTOCOL_VERSION,
        worker: worker.into(),
        node: node.map(str::to_string),
        step: 0,
        role,
        listen: listen.map(str::to_string),
        preflight_error: None,
    })
    .unwrap()
}

async fn register(t: &Setup, run: &str, token: &str, body: Vec<u8>) -> (StatusCode, String) {
    post(&t.app, &format!("/v1/runs/{run}/register"), token, body).await
}

fn error_of(body: &str) -> String {
    serde_json::from_str::<ApiError>(body)
        .map(|e| e.error)
        .unwrap_or_else(|_| body.to_string())
}

#[tokio::test]
async fn a_server_registering_another_address_or_port_is_refused_and_ends_its_run() {
    let mut t = setup();
    for (listen, says) in [
        (
            "10.9.9.9:5201",
            "listen \"10.9.9.9:5201\" is not server s0's own address: the operator expects its pod's 10.0.0.10, port 5201",
        ),
        (
            "10.0.0.10:6379",
            "listen \"10.0.0.10:6379\": the operator gave server s0 port 5201, not 6379",
        ),
        ("kubernetes.default.svc:443", "port 5201"),
    ] {
        let body = registering("s0", Role::Server, None, Some(listen));
        let (code, text) = register(&t, "eg", "tok-s0", body).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{listen}: {text}");
        assert!(error_of(&text).contains(says), "{listen}: {text}");
        let wake = t.woken.try_recv().expect("the run is woken to end");
        assert_eq!((wake.kind.as_str(), wake.name.as_str()), ("EgressBenchmark", "e"));
    }
    assert_eq!(rejected(&t.metrics, "listen_not_own"), 3);
    // The run ends with the cause (the driver reads it like a failed preflight).
    let failures = t.runs.preflight_failures("eg");
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].0, "s0");
    assert!(
        failures[0].1.contains("the operator refused it: listen"),
        "{failures:?}"
    );
    // Its client never learns an address.
    let body = registering("c0", Role::Client, None, None);
    assert_eq!(register(&t, "eg", "tok-c0", body).await.0, StatusCode::OK);
    let (_, text) = get(&t.app, "/v1/runs/eg/barrier?worker=c0&step=0", "tok-c0").await;
    let b: BarrierResponse = serde_json::from_str(&text).unwrap();
    assert!(
        b.servers.is_empty() && b.start_at_unix_ms.is_none(),
        "{b:?}"
    );
    // Another run is not disturbed.
    let (code, _) = register(&t, "run1", "tok", super::tests::register_body("w0")).await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = get(&t.app, "/v1/runs/run1/barrier?worker=w0&step=0", "tok").await;
    assert_eq!(code, StatusCode::OK, "run1's barrier opened");
    assert!(t.runs.preflight_failures("run1").is_empty());
}

#[tokio::test]
async fn honest_servers_are_given_to_their_clients() {
    let t = setup();
    // IPv4 on its pod's address; IPv6 on its node's (host network), port + pair index.
    for (worker, token, listen) in [
        ("s0", "tok-s0", "10.0.0.10:5201"),
        ("s6", "tok-s6", "[fd00::6]:5203"),
    ] {
        let body = registering(
            worker,
            Role::Server,
            Some(&format!("n-{worker}")),
            Some(listen),
        );
        let (code, text) = register(&t, "eg", token, body).await;
        assert_eq!(code, StatusCode::OK, "{listen}: {text}");
    }
    for (worker, token) in [("c0", "tok-c0"), ("c6", "tok-c6")] {
        let body = registering(worker, Role::Client, None, None);
        assert_eq!(register(&t, "eg", token, body).await.0, StatusCode::OK);
    }
    for (worker, token, server) in [
        ("c0", "tok-c0", "10.0.0.10:5201"),
        ("c6", "tok-c6", "[fd00::6]:5203"),
    ] {
        let uri = format!("/v1/runs/eg/barrier?worker={worker}&step=0");
        let (code, text) = get(&t.app, &uri, token).await;
        assert_eq!(code, StatusCode::OK, "{text}");
        let b: BarrierResponse = serde_json::from_str(&text).unwrap();
        assert_eq!(b.servers, [server]);
    }
    assert_eq!(rejected(&t.metrics, "listen_not_own"), 0);
    assert!(t.runs.preflight_failures("eg").is_empty());
}

#[tokio::test]
async fn a_worker_claiming_another_node_is_refused() {
    let mut t = setup();
    // At registration.
    let body = registering("c0", Role::Client, Some("n-s0"), None);
    let (code, text) = register(&t, "eg", "tok-c0", body).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{text}");
    assert!(
        error_of(&text)
            .contains("worker c0 says it runs on node \"n-s0\", but its pod runs on node \"n-c0\""),
        "{text}"
    );
    assert!(t.woken.try_recv().is_ok());
    // In its report: refused, counted, nothing stored, the run ends with why.
    let mut claim =
        serde_json::from_slice::<FinalReport>(&report_body("c6", http_report())).unwrap();
    claim.node = Some("n-s6".into());
    let body = serde_json::to_vec(&claim).unwrap();
    let (code, text) = post(&t.app, "/v1/runs/eg/report", "tok-c6", body).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{text}");
    assert!(
        error_of(&text).contains("its pod runs on node \"n-c6\""),
        "{text}"
    );
    assert!(t.sink.0.lock().unwrap().is_empty());
    assert!(t.woken.try_recv().is_ok());
    assert_eq!(rejected(&t.metrics, "node_not_own"), 2);
    let failed: Vec<String> = t
        .runs
        .preflight_failures("eg")
        .into_iter()
        .map(|f| f.0)
        .collect();
    assert_eq!(failed, ["c0", "c6"]);
    // No claim, or its own node: stored with its pod's node.
    for claimed in [None, Some("n-c6")] {
        claim.node = claimed.map(str::to_string);
        let body = serde_json::to_vec(&claim).unwrap();
        let (code, text) = post(&t.app, "/v1/runs/eg/report", "tok-c6", body).await;
        assert_eq!(code, StatusCode::NO_CONTENT, "{text}");
    }
    let stored: Vec<Option<String>> = t
        .sink
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.node.clone())
        .collect();
    assert_eq!(stored, [Some("n-c6".to_string()), Some("n-c6".to_string())]);
}

#[tokio::test]
async fn the_barrier_opening_wakes_the_run_and_nothing_before_it_does() {
    let mut t = setup();
    // One of eg's four workers: nothing to wake.
    let body = registering("c0", Role::Client, None, None);
    assert_eq!(register(&t, "eg", "tok-c0", body).await.0, StatusCode::OK);
    assert!(t.woken.try_recv().is_err());
    // run1's only worker opens its barrier: its benchmark looks at the start instant now.
    let (code, _) = register(&t, "run1", "tok", super::tests::register_body("w0")).await;
    assert_eq!(code, StatusCode::OK);
    let wake = t.woken.try_recv().expect("woken as its barrier opened");
    let spec = t.runs.spec("run1").unwrap();
    assert_eq!(
        (wake.namespace, wake.name),
        (spec.namespace.clone(), spec.benchmark.clone())
    );
}
