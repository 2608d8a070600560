//! Every EgressBenchmark protocol the simulator plays: the client arguments the operator's own
//! egress plan writes are read into the right work, the simulated report of that work passes
//! the operator's checks on arrival (`protocol::worker::validate_final` of the case's report
//! kind, then `operator::egress::protocols::check`: the test the case asks for) and reads into
//! a case result (`operator::egress::result::case_result`, with the exact merge of a
//! topology's clients), and a report broken in any of the ways below is refused, so these
//! tests fail when the simulation drifts from what the operator accepts.

use operator::egress::plan;
use operator::egress::protocols;
use operator::egress::result::{case_result, PairReport};
use operator::policy::samples::Slot;
use protocol::rr::RrReport;
use protocol::tcp::{Direction, Flow};
use protocol::udp::UdpReport;
use protocol::worker::{validate_final, CheckedReport, FinalReport, ReportRefusal};
use protocol::{Protocol, ReportKind};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Value};
use sim::args::{work_of, Work};
use sim::record::{read_records, Recorder, Sent, StepKey};
use sim::report::{
    draw_rr, rr_json, rr_report, udp_json, udp_report, udp_streams, LatencyModel, RrShape, UdpShape,
};

const START: u64 = 1_700_000_000_000;
const SERVER: &str = "198.19.240.9:5201";
/// The simulator's defaults (netbench-sim run: --max-samples, --gbps).
const CAP: u64 = 20_000;
const GBPS: f64 = 2.0;

fn benchmark(cases: Value) -> crds::EgressBenchmark {
    serde_json::from_value(json!({
        "apiVersion": "netbench.io/v1alpha1",
        "kind": "EgressBenchmark",
        "metadata": {"name": "e", "namespace": "scale-1", "uid": "u-1"},
        "spec": {"cases": cases},
    }))
    .unwrap()
}

/// The cases measured, each with the arguments of its (first) client as the operator writes
/// them.
fn planned(eb: &crds::EgressBenchmark) -> Vec<(crds::cases::Measured, Vec<String>)> {
    (0..plan::count(eb))
        .map(|i| {
            let case = plan::case_at(eb, i).unwrap();
            let client = plan::workers(eb, "r1", Slot::first(i))
                .into_iter()
                .find(|w| w.labels.get("netbench.io/role").map(String::as_str) == Some("client"))
                .unwrap();
            (case, client.args)
        })
        .collect()
}

/// The report a simulated client of `work` posts, its main figure (what its pair row shows)
/// and its transactions' latencies with their counts (request/response).
fn simulate(work: &Work, seed: u64) -> (Value, f64, Vec<(u64, u64)>) {
    let mut rng = StdRng::seed_from_u64(seed);
    match work {
        Work::Rr(shape) => {
            let draw = draw_rr(shape, &shape.model(&LatencyModel::default()), CAP, &mut rng);
            let r = rr_report(shape, &draw, SERVER, START, &mut rng).unwrap();
            let figure = r.transactions_per_second;
            (rr_json(&r).unwrap(), figure, draw.answered)
        }
        Work::Udp(shape) => {
            let streams = udp_streams(shape, GBPS, &mut rng);
            let r = udp_report(shape, streams, SERVER, START, &mut rng);
            let figure = r.received.bits_per_second;
            (udp_json(&r).unwrap(), figure, vec![])
        }
        other => panic!("not a request/response or udp-stream client: {other:?}"),
    }
}

/// As the operator receives it: through JSON.
fn posted(worker: &str, report: Value) -> FinalReport {
    let fr = FinalReport::new(worker, Some("nb-fake-0"), 0, START, report);
    serde_json::from_str(&serde_json::to_string(&fr).unwrap()).unwrap()
}

fn cases() -> Value {
    json!([
        {"name": "rr", "protocol": "tcp-rr", "burst": 4, "rate": 1000, "duration": "2s",
         "client": {"nodeName": "a"}, "server": {"nodeName": "b"}},
        {"name": "rr-closed", "protocol": "tcp-rr", "streams": 8, "burst": 3, "duration": "3s",
         "requestSize": 64, "responseSize": 1024, "client": {"nodeName": "a"}, "server": {"nodeName": "b"}},
        {"name": "crr", "protocol": "tcp-crr", "duration": "2s",
         "client": {"nodeName": "a"}, "server": {"nodeName": "b", "service": true}},
        {"name": "urr", "protocol": "udp-rr", "timeout": "50ms", "streams": 4, "duration": "2s",
         "client": {"nodeName": "a"}, "server": {"nodeName": "b"}},
        // A timeout within the model's tail: answers later than 1 ms are lost (and late).
        {"name": "urr-tight", "protocol": "udp-rr", "timeout": "1ms", "duration": "2s",
         "client": {"nodeName": "a"}, "server": {"nodeName": "b"}},
        {"name": "urr-open", "protocol": "udp-rr", "rate": 2000, "timeout": "20ms", "streams": 2,
         "duration": "2s", "client": {"nodeName": "a"}, "server": {"nodeName": "b"}},
        {"name": "us", "protocol": "udp-stream", "bitrate": "500M", "messageSize": 1400,
         "duration": "2s", "client": {"nodeName": "a"}, "server": {"nodeName": "b"}},
        {"name": "us-both", "protocol": "udp-stream", "direction": "Both", "packetsPerSecond": 1000,
         "streams": 2, "duration": "2s", "client": {"nodeName": "a"}, "server": {"nodeName": "b"}},
        {"name": "us-fast", "protocol": "udp-stream", "bitrate": "0", "direction": "Receive",
         "duration": "2s", "client": {"nodeName": "a"}, "server": {"nodeName": "b"}},
        {"name": "us-default", "protocol": "udp-stream", "duration": "1s",
         "client": {"nodeName": "a"}, "server": {"nodeName": "b"}},
    ])
}

#[test]
fn every_protocol_the_operator_plans_is_played_and_accepted() {
    let eb = benchmark(cases());
    let planned = planned(&eb);
    assert_eq!(planned.len(), 10);
    for (i, (case, args)) in planned.iter().enumerate() {
        let p = case.spec.protocol;
        let work = work_of(args);
        let (report, figure, _) = simulate(&work, i as u64);
        let fr = posted(&format!("e-r1-s{i}-w0"), report);
        // The worker API's check on arrival, then the case's reader.
        let kind = p.report_kind();
        validate_final(&fr, kind).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        protocols::check(p, &fr).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let pair = PairReport {
            pair: 0,
            wave: 0,
            client: &fr,
            client_node: Some("a".into()),
            server_node: Some("b".into()),
        };
        let (result, errors) = case_result(case, std::slice::from_ref(&pair))
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert!(errors.is_empty(), "{}: {errors:?}", case.name);
        assert_eq!(result.warning, None, "{}", case.name);
        // The report measured what the case asked for.
        match (&work, validate_final(&fr, kind).unwrap()) {
            (Work::Rr(shape), CheckedReport::Rr(r)) => {
                assert_eq!(r.setup.mode, p, "{}", case.name);
                let spec = &case.spec;
                let default = crds::cases::default_rr_size(p);
                assert_eq!(
                    (r.setup.request_size, r.setup.response_size),
                    (
                        spec.request_size.unwrap_or(default),
                        spec.response_size.unwrap_or(default)
                    ),
                    "{}",
                    case.name
                );
                assert_eq!(r.setup.burst, spec.burst.unwrap_or(0));
                assert_eq!(r.setup.rate_per_stream, spec.rate.map(f64::from));
                assert_eq!(r.streams, spec.streams);
                assert_eq!(r.duration_secs, shape.duration_s);
                assert_eq!(result.transactions_per_second, Some(round2(figure)));
                assert!(r.counts.transactions > 0, "{}", case.name);
                assert_eq!(r.loss_percent.is_some(), p == Protocol::UdpRr);
                assert_eq!(result.loss_percent.is_some(), p == Protocol::UdpRr);
                if spec.rate.is_some() {
                    // An open loop sends its whole schedule, on time.
                    assert_eq!(r.counts.skipped, 0);
                    assert_eq!(result.schedule_missed_percent, Some(0.0));
                }
            }
            (Work::Udp(shape), CheckedReport::Udp(u)) => {
                assert_eq!(u.runs[0].len, shape.len);
                let direction = match case.spec.direction {
                    crds::egress::Direction::Send => Direction::Send,
                    crds::egress::Direction::Receive => Direction::Receive,
                    crds::egress::Direction::Both => Direction::Both,
                };
                assert_eq!(u.runs[0].direction, direction);
                assert_eq!(
                    result.receiver_bits_per_second,
                    Some(u.received.bits_per_second.round())
                );
                assert_eq!(figure, u.received.bits_per_second);
                assert!(u.received.packets > 0, "{}", case.name);
                assert!(u.loss_percent < 0.1, "{}: {}", case.name, u.loss_percent);
                assert!(result.jitter_ms.is_some(), "{}", case.name);
            }
            (w, r) => panic!("{}: {w:?} reported {r:?}", case.name),
        }
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

#[test]
fn the_shapes_are_what_the_case_asks_for() {
    let eb = benchmark(cases());
    let work: Vec<Work> = planned(&eb).iter().map(|(_, a)| work_of(a)).collect();
    let Work::Rr(rr) = &work[0] else {
        panic!("{:?}", work[0])
    };
    assert_eq!(
        (rr.mode, rr.burst, rr.rate, rr.timeout_ms),
        (Protocol::TcpRr, 4, Some(1000.0), 10_000)
    );
    let Work::Rr(urr) = &work[3] else {
        panic!("{:?}", work[3])
    };
    assert_eq!(
        (urr.mode, urr.streams, urr.timeout_ms),
        (Protocol::UdpRr, 4, 50)
    );
    assert_eq!((urr.request_size, urr.response_size), (8, 8));
    let Work::Udp(us) = &work[6] else {
        panic!("{:?}", work[6])
    };
    assert_eq!(us.len, 1400);
    assert_eq!(us.packets_per_second, Some(500e6 / (1400.0 * 8.0)));
    let Work::Udp(both) = &work[7] else {
        panic!("{:?}", work[7])
    };
    assert_eq!(
        (both.direction, both.packets_per_second),
        (Direction::Both, Some(1000.0))
    );
    let Work::Udp(fast) = &work[8] else {
        panic!("{:?}", work[8])
    };
    assert_eq!(
        (fast.direction, fast.packets_per_second),
        (Direction::Receive, None)
    );
}

/// The operator's main figure of each pair row sums to what the simulator records for the
/// case (what `netbench-sim check --kind egress` compares), for every protocol, through the
/// exact merge of the clients' reports.
#[test]
fn a_topology_of_simulated_clients_sums_as_recorded() {
    let pairs = 5u32;
    let topology = json!({"pairs": pairs, "clientNodes": {"names": ["c0", "c1"]},
                          "serverNodes": {"names": ["s0", "s1"]}});
    let cases: Vec<Value> = [
        ("rr", json!({"protocol": "tcp-rr", "burst": 2})),
        ("crr", json!({"protocol": "tcp-crr", "rate": 500})),
        ("urr", json!({"protocol": "udp-rr", "timeout": "2ms"})),
        ("us", json!({"protocol": "udp-stream", "bitrate": "100M"})),
        (
            "us-rev",
            json!({"protocol": "udp-stream", "direction": "Receive", "bitrate": "0"}),
        ),
    ]
    .into_iter()
    .map(|(name, mut c)| {
        c["name"] = json!(name);
        c["duration"] = json!("2s");
        c["client"] = json!({});
        c["server"] = json!({});
        c["topology"] = topology.clone();
        c
    })
    .collect();
    let eb = benchmark(Value::Array(cases));
    let dir = std::env::temp_dir().join(format!("nb-sim-protocols-{}", std::process::id()));
    let recorder = Recorder::new(Some(dir.clone())).unwrap();
    for (i, (case, _)) in planned(&eb).iter().enumerate() {
        let clients: Vec<_> = plan::workers(&eb, "r1", Slot::first(i as u32))
            .into_iter()
            .filter(|w| w.labels.get("netbench.io/role").map(String::as_str) == Some("client"))
            .collect();
        assert_eq!(clients.len(), pairs as usize, "{}", case.name);
        let key = StepKey {
            namespace: "scale-1".into(),
            benchmark: "e".into(),
            run: "r1".into(),
            step: i as u32,
        };
        let mut reports = vec![];
        for (k, client) in clients.iter().enumerate() {
            let (report, figure, counted) = simulate(&work_of(&client.args), 100 + k as u64);
            reports.push(posted(&client.name, report));
            recorder
                .add(
                    &key,
                    &Sent {
                        counted: &counted,
                        main_figure: figure,
                        started_at_unix_ms: START + k as u64,
                        pairing: Some(Ok(())),
                        ..Sent::default()
                    },
                )
                .unwrap();
        }
        let rows: Vec<PairReport<'_>> = reports
            .iter()
            .enumerate()
            .map(|(k, fr)| PairReport {
                pair: k as u32,
                wave: 0,
                client: fr,
                client_node: None,
                server_node: None,
            })
            .collect();
        let (result, errors) =
            case_result(case, &rows).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert!(errors.is_empty(), "{}: {errors:?}", case.name);
        let aggregate = result.aggregate.unwrap();
        assert_eq!(aggregate.pairs, pairs);
        let row_sum: f64 = result.pairs.iter().map(|r| r.value).sum();
        let record = read_records(&dir, "scale-1", "e")
            .unwrap()
            .into_iter()
            .find(|r| r.step == i as u32)
            .unwrap();
        assert_eq!(record.reports, pairs);
        // The slack `netbench-sim check` allows: rows rounded to whole bits/s or 0.01
        // transactions/s.
        let slack = 0.5 * f64::from(pairs) + 1e-9 * record.main_figure;
        assert!(
            (row_sum - record.main_figure).abs() <= slack,
            "{}: rows {row_sum}, recorded {}",
            case.name,
            record.main_figure
        );
        assert!((aggregate.sum - row_sum).abs() <= 0.01, "{}", case.name);
        // The merged request/response latency is the one histogram the simulator recorded.
        if let Some(latency) = &result.latency {
            assert_eq!(latency.p99, record.latency.p99_us as f64 / 1000.0);
            assert_eq!(latency.max, record.latency.max_us as f64 / 1000.0);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn shape(mode: Protocol, rate: Option<f64>, timeout_ms: u64) -> RrShape {
    RrShape {
        mode,
        streams: 3,
        duration_s: 2.0,
        request_size: 8,
        response_size: 8,
        burst: 1,
        rate,
        timeout_ms,
    }
}

#[test]
fn drawn_transactions_add_up_however_few_latencies_are_drawn() {
    let mut rng = StdRng::seed_from_u64(7);
    let model = LatencyModel::default();
    // 3 streams x 1000/s x 2 s = 6000 transactions, 250 latencies drawn.
    let s = shape(Protocol::UdpRr, Some(1000.0), 1);
    let d = draw_rr(&s, &model, 250, &mut rng);
    assert_eq!(d.attempted, vec![2000, 2000, 2000]);
    assert_eq!(d.answered.len() as u64 + d.lost / 24, 250);
    assert_eq!(d.transactions() + d.lost, 6000);
    assert!(
        d.late <= d.lost && d.lost > 0,
        "a 1 ms timeout loses the tail"
    );
    assert!(d.answered.iter().all(|&(v, _)| v <= 1000));
    assert_eq!(d.histogram().unwrap().len(), d.transactions());
    // Closed loop: (1 + burst) in flight at the model's mean latency (100 us median here).
    let s = shape(Protocol::TcpRr, None, 10_000);
    let d = draw_rr(&s, &s.model(&model), CAP, &mut rng);
    let per_stream = 2.0 * 1e6 / s.model(&model).mean_us() * 2.0;
    for a in &d.attempted {
        assert!(
            (*a as f64 - per_stream).abs() <= 0.06 * per_stream,
            "{a} vs {per_stream}"
        );
    }
    assert_eq!(d.lost, 0);
    let r = rr_report(&s, &d, SERVER, START, &mut rng).unwrap();
    protocol::rr::validate_rr(&r).unwrap();
    assert!(r.runs[0].transactions_in_window < Some(r.counts.transactions));
}

/// A valid report of each kind, and the field its breakage is refused for.
fn refused(kind: ReportKind, p: Protocol, fr: &FinalReport, what: &str) -> String {
    match validate_final(fr, kind) {
        Err(ReportRefusal::Invalid(e)) => e.field,
        Err(ReportRefusal::Malformed(m)) => format!("malformed: {m}"),
        Ok(_) => match protocols::check(p, fr) {
            Err(e) => format!("case: {e}"),
            Ok(_) => panic!("{what}: accepted"),
        },
    }
}

/// The report of a good case, once `protocols::check` passed it as a report of `p`.
fn passed<T: serde::de::DeserializeOwned>(p: Protocol, good: &FinalReport) -> T {
    protocols::check(p, good).unwrap();
    serde_json::from_value(good.report.clone()).unwrap()
}

/// `good` with `edit` made to its report.
fn edited(good: &FinalReport, edit: &dyn Fn(&mut Value)) -> FinalReport {
    let mut fr = good.clone();
    edit(&mut fr.report);
    fr
}

fn rr_case(mode: Protocol, rate: Option<f64>) -> FinalReport {
    let s = shape(mode, rate, 100);
    let mut rng = StdRng::seed_from_u64(11);
    let d = draw_rr(&s, &s.model(&LatencyModel::default()), CAP, &mut rng);
    let r = rr_report(&s, &d, SERVER, START, &mut rng).unwrap();
    posted("e-r1-s0-w0", rr_json(&r).unwrap())
}

#[test]
fn broken_request_response_reports_are_refused() {
    for mode in [Protocol::TcpRr, Protocol::TcpCrr, Protocol::UdpRr] {
        for rate in [None, Some(500.0)] {
            let good = rr_case(mode, rate);
            let r: RrReport = passed(mode, &good);
            let field = |edit: &dyn Fn(&mut Value), what: &str| {
                refused(ReportKind::Rr, mode, &edited(&good, edit), what)
            };
            let t = r.counts.transactions;
            // A transaction more than the histogram holds; one the streams do not have.
            assert_eq!(
                field(
                    &|v| {
                        v["counts"]["transactions"] = json!(t + 1);
                        v["counts"]["attempted"] = json!(r.counts.attempted + 1);
                    },
                    "count"
                ),
                "report.counts.transactions"
            );
            assert_eq!(
                field(
                    &|v| v["per_stream"][0]["failed"] = json!(1_000_000),
                    "stream"
                ),
                "report.per_stream[0].attempted"
            );
            // Percentiles that are not the histogram's; a rate that is not the count's.
            let e = field(
                &|v| v["latency"]["p99_us"] = json!(r.latency.p99_us * 2 + 5),
                "p99",
            );
            assert!(e.starts_with("report.latency."), "{mode}: {e}");
            assert_eq!(
                field(
                    &|v| v["runs"][0]["transactions_per_second"] = json!(t as f64),
                    "rate"
                ),
                "report.runs[0].transactions_per_second"
            );
            // Another test than the case asks for.
            let other = if mode == Protocol::TcpRr {
                "tcp-crr"
            } else {
                "tcp-rr"
            };
            let e = field(&|v| v["mode"] = json!(other), "mode");
            assert!(
                e.starts_with("case:") || e.starts_with("report."),
                "{mode}: {e}"
            );
            if mode == Protocol::UdpRr {
                assert_eq!(
                    field(&|v| v["loss_percent"] = json!(50.0), "loss"),
                    "report.loss_percent"
                );
                assert_eq!(
                    field(&|v| v["counts"]["late"] = json!(r.counts.lost + 1), "late"),
                    "report.counts.late"
                );
            } else {
                assert_eq!(
                    field(&|v| v["loss_percent"] = json!(0.0), "loss"),
                    "report.loss_percent"
                );
            }
            if rate.is_some() {
                // An open loop that sent less than its schedule without saying so.
                assert_eq!(
                    field(
                        &|v| {
                            v["per_stream"][0]["attempted"] = json!(10);
                            v["per_stream"][0]["transactions"] = json!(10);
                            v["per_stream"][0]["failed"] = json!(0);
                        },
                        "schedule"
                    ),
                    "report.per_stream[0].skipped"
                );
            }
            assert!(
                field(&|v| v["kind"] = json!("udp"), "kind").starts_with("malformed"),
                "{mode}"
            );
        }
    }
}

fn udp_case(direction: Direction, pps: Option<f64>) -> FinalReport {
    let s = UdpShape {
        streams: 2,
        duration_s: 2.0,
        len: 1200,
        direction,
        packets_per_second: pps,
    };
    let mut rng = StdRng::seed_from_u64(12);
    let streams = udp_streams(&s, 0.5, &mut rng);
    let r = udp_report(&s, streams, SERVER, START, &mut rng);
    posted("e-r1-s0-w0", udp_json(&r).unwrap())
}

#[test]
fn broken_udp_stream_reports_are_refused() {
    for direction in [Direction::Send, Direction::Receive, Direction::Both] {
        for pps in [None, Some(5000.0)] {
            let good = udp_case(direction, pps);
            let u: UdpReport = passed(Protocol::UdpStream, &good);
            assert_eq!(u.streams.len(), direction.flows(2).len());
            let field = |edit: &dyn Fn(&mut Value), what: &str| {
                refused(
                    ReportKind::Udp,
                    Protocol::UdpStream,
                    &edited(&good, edit),
                    what,
                )
            };
            let s0 = &u.streams[0];
            assert_eq!(
                field(&|v| v["streams"][0]["lost"] = json!(s0.lost + 1), "lost"),
                "report.streams[0].lost"
            );
            assert_eq!(
                field(
                    &|v| {
                        let more = s0.sent.packets + 1;
                        v["streams"][0]["received"]["packets"] = json!(more);
                        v["streams"][0]["received"]["bytes"] = json!(more * 1200);
                    },
                    "received"
                ),
                "report.streams[0].received.bits_per_second"
            );
            assert_eq!(
                field(
                    &|v| v["streams"][0]["received"]["bytes"] = json!(7),
                    "bytes"
                ),
                "report.streams[0].received.bits_per_second"
            );
            assert_eq!(
                field(&|v| v["streams"][0]["jitter_ms"] = json!(-1.0), "jitter"),
                "report.streams[0].jitter_ms"
            );
            assert_eq!(
                field(&|v| v["loss_percent"] = json!(u.loss_percent + 1.0), "loss"),
                "report.loss_percent"
            );
            let other = match s0.flow {
                Flow::ClientToServer => "server_to_client",
                Flow::ServerToClient => "client_to_server",
            };
            assert_eq!(
                field(&|v| v["streams"][0]["flow"] = json!(other), "flow"),
                "report.streams[0].flow"
            );
            if pps.is_some() {
                // More datagrams than the pace has send times.
                let e = field(
                    &|v| {
                        let n = s0.sent.packets * 2;
                        let sent = &mut v["streams"][0]["sent"];
                        sent["packets"] = json!(n);
                        sent["bytes"] = json!(n * 1200);
                        sent["packets_per_second"] = json!(n as f64 / 2.0);
                        sent["bits_per_second"] = json!(n as f64 * 1200.0 * 8.0 / 2.0);
                    },
                    "pace",
                );
                assert_eq!(e, "report.streams[0].sent.packets");
            } else {
                assert_eq!(
                    field(&|v| v["streams"][0]["sent"]["late"] = json!(1), "late"),
                    "report.streams[0].sent"
                );
            }
            assert!(
                refused(ReportKind::Tcp, Protocol::TcpStream, &good, "kind")
                    .starts_with("malformed"),
                "only as a udp report"
            );
        }
    }
}

#[test]
fn udp_streams_pair_both_ends_views() {
    let s = UdpShape {
        streams: 3,
        duration_s: 2.0,
        len: 1000,
        direction: Direction::Both,
        packets_per_second: Some(1000.0),
    };
    let mut rng = StdRng::seed_from_u64(13);
    let streams = udp_streams(&s, GBPS, &mut rng);
    let flows: Vec<Flow> = streams.iter().map(|s| s.flow).collect();
    assert_eq!(flows, Direction::Both.flows(3));
    for st in &streams {
        assert_eq!(st.sent.packets, 2000);
        assert_eq!(st.lost, st.sent.packets - st.received.packets);
        assert_eq!(st.received.seconds, st.sent.seconds);
    }
    let (bits, loss) = sim::report::udp_progress(&streams);
    assert_eq!(bits, 6.0 * 1000.0 * 1000.0 * 8.0);
    assert!(loss.is_some(), "the client receives half the streams");
    let send_only = UdpShape {
        direction: Direction::Send,
        ..s
    };
    let (_, loss) = sim::report::udp_progress(&udp_streams(&send_only, GBPS, &mut rng));
    assert_eq!(loss, None);
}
