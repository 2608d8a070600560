//! A topology's pairs end to end on 127.0.0.1: the operator's plan and pairing of a `pairs: 3`
//! tcp-rr case, the real `netbench-loadgen` as three servers and three clients against the
//! REAL worker API, each client led to its own server at the barrier, and the case's result
//! from the three reports as the operator collects it: the sum of the pairs, a row per pair,
//! and latency percentiles equal to those of one histogram holding every sample.

mod worker_api;

use std::time::Duration;

use crds::EgressBenchmark;
use operator::egress::plan;
use operator::egress::result::{self, PairReport};
use operator::policy::samples::Slot;
use operator::run::Plan;
use protocol::report::histogram;
use protocol::rr::RrReport;
use protocol::worker::{FinalReport, Role};
use worker_api::Api;

const SPEC: &str = r#"
apiVersion: netbench.io/v1alpha1
kind: EgressBenchmark
metadata: {name: e, namespace: ns, uid: u-1}
spec:
  cases:
    - {name: rr, protocol: tcp-rr, duration: 2s, rate: 400, client: {}, server: {}, topology: {pairs: 3}}
"#;

#[test]
fn three_pairs_meet_their_own_servers_and_merge_exactly() {
    let eb: EgressBenchmark = serde_yaml::from_str(SPEC).unwrap();
    let slot = Slot::first(0);
    let plans = plan::workers(&eb, "r1", slot);
    assert_eq!(plans.len(), 6, "a client and a server per pair");
    let roles = plan::worker_roles(&eb, "r1", slot);
    let workers: Vec<(&str, Role)> = roles.iter().map(|(w, r)| (w.as_str(), *r)).collect();
    let pairing = plan::pairing(&eb, "r1", slot);
    assert_eq!(pairing.peers.len(), 3);
    assert!(pairing.offsets_ms.is_empty(), "pairs all start together");
    // The plan gives every server port 5201 of its own pod; here they share 127.0.0.1, so the
    // API gives each a free port instead.
    assert_eq!(pairing.listen.len(), 3, "a listen rule per server");
    let mut shared_host = pairing.clone();
    shared_host.listen.clear();
    let api = Api::start_paired(
        "EgressBenchmark",
        "e",
        &workers,
        eb.measurement(0).report_kind,
        shared_host,
    );

    // Servers on 127.0.0.1 and the ports the API gave them (a pod's is fixed by the plan),
    // then the clients.
    let mut running = vec![];
    for p in plans
        .iter()
        .filter(|p| p.labels["netbench.io/role"] == "server")
    {
        let given = api.port_of(&p.name);
        let mut args: Vec<&str> = p.args.iter().map(String::as_str).collect();
        let port = args.iter().position(|a| *a == "-p").unwrap();
        args[port + 1] = &given;
        args.extend(["-B", "127.0.0.1"]);
        running.push((p.name.clone(), api.worker(&p.name, &args)));
    }
    let mut clients = vec![];
    for p in plans
        .iter()
        .filter(|p| p.labels["netbench.io/role"] == "client")
    {
        let args: Vec<&str> = p.args.iter().map(String::as_str).collect();
        clients.push((p.name.clone(), api.worker(&p.name, &args)));
    }
    // What each server registered, as the barrier shows it to its client.
    let listens: Vec<(String, Vec<String>)> = clients
        .iter()
        .map(|(c, _)| {
            let b = wait_for_barrier(&api, c);
            (c.clone(), b)
        })
        .collect();
    for (name, w) in clients.into_iter().chain(running) {
        let exit = w.wait(Duration::from_secs(60));
        assert!(exit.success, "{name}: {}", exit.stderr);
    }
    for (client, servers) in &listens {
        assert_eq!(
            servers.len(),
            1,
            "{client} is shown its own server only: {servers:?}"
        );
    }
    let distinct: std::collections::BTreeSet<&String> =
        listens.iter().map(|(_, s)| &s[0]).collect();
    assert_eq!(distinct.len(), 3, "three servers, one per client");

    let stored: Vec<FinalReport> = api.sink.0.lock().unwrap().clone();
    assert_eq!(stored.len(), 3, "the clients' reports");
    let by_worker = |w: &str| stored.iter().find(|r| r.worker == w).unwrap();
    let pairs: Vec<PairReport<'_>> = (0..3u32)
        .map(|i| {
            let client = plan::client_name(&eb, "r1", 0, i);
            let report = by_worker(&client);
            // The client measured against the server its pair registered.
            let rr: RrReport = serde_json::from_value(report.report.clone()).unwrap();
            let shown = &listens.iter().find(|(c, _)| *c == client).unwrap().1[0];
            assert_eq!(&rr.runs[0].server, shown, "{client}");
            PairReport {
                pair: i,
                wave: 0,
                client: report,
                client_node: Some(format!("node-{i}")),
                server_node: Some(format!("node-{}", (i + 1) % 3)),
            }
        })
        .collect();
    let measured = plan::case_at(&eb, 0).unwrap();
    let (r, errors) = result::case_result(&measured, &pairs).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(r.pairs.len(), 3);
    let reports: Vec<RrReport> = pairs
        .iter()
        .map(|p| serde_json::from_value(p.client.report.clone()).unwrap())
        .collect();
    // The case's rate is the sum of the pairs' (each rounded to 2 places in status).
    let sum: f64 = reports.iter().map(|r| r.transactions_per_second).sum();
    let tps = r.transactions_per_second.unwrap();
    assert!((tps - sum).abs() < 0.01, "{tps} vs {sum}");
    let agg = r.aggregate.clone().unwrap();
    assert_eq!(agg.pairs, 3);
    let row_sum: f64 = r.pairs.iter().map(|p| p.value).sum();
    assert!((agg.sum - row_sum).abs() < 0.01, "{agg:?}");
    assert!(agg.start_spread_ms < 1000.0, "{agg:?}");
    // Exact: the merged p99 is that of one histogram holding every client's samples.
    let mut all = histogram::new_latency_histogram();
    for rep in &reports {
        all.add(rep.histogram().unwrap()).unwrap();
    }
    let p99_ms = all.value_at_quantile(0.99) as f64 / 1000.0;
    let got = r.latency.clone().unwrap().p99;
    assert!(
        (got - p99_ms).abs() < 1e-3,
        "merged p99 {got} ms vs one histogram {p99_ms} ms"
    );
    assert_eq!(
        all.len(),
        reports
            .iter()
            .map(|r| r.histogram().unwrap().len())
            .sum::<u64>()
    );
}

/// The servers the barrier lists for `client`, once it has opened.
fn wait_for_barrier(api: &Api, client: &str) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(b) = api.barrier(client) {
            if b.start_at_unix_ms.is_some() {
                return b.servers;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{client}: the barrier never opened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
