//! A request/response client as a worker, against a small fake of the operator's worker API on
//! 127.0.0.1 (register, barrier naming the server, progress, report) and the real server
//! serving exactly one test as a server worker does (`TcpServer::serve_one`). The report that
//! reaches the operator is of kind "rr" and passes the operator's own check
//! (`protocol::worker::validate_final`); progress carries transactions per second.
//! (The operator's real API still takes only tcp reports from an EgressBenchmark: wiring the
//! protocol per case is the operator's part.)

mod support;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use clap::Parser;
use loadgen::tcp::cli::ClientArgs;
use loadgen::tcp::server::TcpServer;
use loadgen::tcp::TcpServerConfig;
use loadgen::worker::tcp::run_client_worker;
use loadgen::worker::{Credential, WorkerClient, WorkerEnv};
use protocol::worker::{validate_final, CheckedReport, FinalReport, ProgressUpdate};
use support::operator;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    client: ClientArgs,
}

/// What the fake operator received.
#[derive(Default)]
struct Received {
    paths: Vec<String>,
    progress: Vec<ProgressUpdate>,
    reports: Vec<FinalReport>,
}

/// Answers every request of the worker protocol until the report arrives; the barrier opens at
/// once and names `server`.
fn fake_operator(server: String) -> (String, Arc<Mutex<Received>>, thread::JoinHandle<()>) {
    let (listener, url) = operator::listen();
    let received = Arc::new(Mutex::new(Received::default()));
    let seen = received.clone();
    let handle = thread::spawn(move || loop {
        let (conn, path, body) = operator::accept_request(&listener);
        let (status, answer) = operator::run_answer(&path, &server);
        let mut got = seen.lock().unwrap();
        got.paths.push(path.clone());
        if path.ends_with("/progress") {
            got.progress.push(serde_json::from_slice(&body).unwrap());
        }
        let done = path.ends_with("/report");
        if done {
            got.reports.push(serde_json::from_slice(&body).unwrap());
        }
        drop(got);
        operator::respond(conn, status, &answer).unwrap();
        if done {
            return;
        }
    });
    (url, received, handle)
}

#[test]
fn an_rr_client_worker_delivers_an_rr_report_and_pushes_transactions_per_second() {
    let server = TcpServer::bind(&TcpServerConfig {
        bind_addr: Some("127.0.0.1".parse().unwrap()),
        port: 0,
        one_off: true,
        ..TcpServerConfig::default()
    })
    .unwrap();
    let listen = server.local_addr().unwrap().to_string();
    let serving =
        thread::spawn(move || server.serve_one(Duration::from_secs(30), &AtomicBool::new(false)));
    let (url, received, operator) = fake_operator(listen.clone());
    let worker = WorkerClient::new(WorkerEnv {
        operator_url: url,
        run: "run-1".into(),
        credential: Credential::Token("t".into()),
        worker: "client-0".into(),
        node: Some("node-a".into()),
        step: 0,
    });
    // No -c: the server comes from the barrier, as in a cluster.
    let args = Cli::try_parse_from([
        "x",
        "--protocol",
        "udp-rr",
        "--streams",
        "2",
        "--duration",
        "2.2s",
        "--json",
    ])
    .unwrap()
    .client;
    let report =
        run_client_worker(&args, &worker, &loadgen::rr::cli::CLIENT).expect("the worker's test");
    operator.join().unwrap();
    serving
        .join()
        .unwrap()
        .expect("the server served exactly one test and ended");
    assert_eq!(report.runs[0].server, listen, "the barrier's server");

    let got = received.lock().unwrap();
    assert!(got.paths[0].ends_with("/register"), "{:?}", got.paths);
    let [stored] = &got.reports[..] else {
        panic!("one report: {:?}", got.paths);
    };
    assert_eq!(stored.report["kind"], "rr");
    assert_eq!(stored.report["mode"], "udp-rr");
    match validate_final(stored, protocol::ReportKind::Rr) {
        // (Floats may lose their last digit through JSON: compare what is exact.)
        Ok(CheckedReport::Rr(r)) => {
            assert_eq!((r.counts, &r.histogram), (report.counts, &report.histogram));
            assert_eq!(r.per_stream, report.per_stream);
        }
        other => panic!("the operator's check refused it: {other:?}"),
    }
    assert!(!got.progress.is_empty(), "a 2 s test pushes progress");
    for p in &got.progress {
        let tps = p
            .transactions_per_second
            .expect("rr progress carries transactions/s");
        assert!(tps > 0.0, "{p:?}");
        assert_eq!((p.worker.as_str(), p.bits_per_second), ("client-0", 0.0));
    }
}
