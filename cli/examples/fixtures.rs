//! Writes the test fixtures of cli/tests/fixtures: BenchmarkResults shaped like the seed
//! reports (an ingress sweep at 1/2/4/8 CPUs, an egress run with vxlan offload on and off),
//! an ingress history, a regressed run, results with hostile names, a one-step ingress run, and
//! an egress run of every protocol with a message-size sweep and a streams sweep (measurements
//! as the operator expands a swept case: parameters case, protocol, messageSize, streams), and
//! two nightly histories for change points (one with a known step, one of noise only).
//! Statistics come from crds::stats and histograms from protocol, as the operator makes them.
//!
//! `cargo run -p cli --example fixtures -- cli/tests/fixtures`

use std::collections::BTreeMap;
use std::path::Path;

use crds::history::{Better, MetricTolerance};
use crds::result::{
    BenchmarkResult, BenchmarkResultSpec, ClusterFacts, InterfaceFacts, Measurement, NodeFacts,
    Verdict,
};
use crds::stats::metric;
use crds::{BenchmarkRef, Phase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

fn time(s: &str) -> Option<Time> {
    Some(Time(s.parse().expect("fixture time")))
}

fn cluster() -> ClusterFacts {
    let node = |name: &str| NodeFacts {
        name: name.into(),
        kernel_version: Some("6.18.0-1-amd64".into()),
        os_image: Some("Debian GNU/Linux 13 (trixie)".into()),
        architecture: Some("amd64".into()),
        kubelet_version: Some("v1.37.2".into()),
        cpus: Some("32".into()),
        cpu_model: Some("Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz".into()),
        interfaces: vec![
            InterfaceFacts {
                name: "eth0".into(),
                mtu: 1500,
            },
            InterfaceFacts {
                name: "vxlan.calico".into(),
                mtu: 1450,
            },
        ],
    };
    ClusterFacts {
        kubernetes_version: Some("v1.37.2".into()),
        nodes: vec![node("worker-1"), node("worker-2")],
        cni: None,
        ingress_controller: None,
    }
}

/// A latency histogram of `requests` requests around `p50_ms`, with a tail to ten times it.
fn histogram(requests: u64, p50_ms: f64) -> String {
    let mut h = protocol::report::histogram::new_latency_histogram();
    let per = (requests / 1000).max(1);
    for k in 0..1000u32 {
        let q = f64::from(k) / 1000.0;
        let ms = p50_ms * (0.5 + q) * (1.0 + 3.0 * q.powi(40));
        h.record_n((ms * 1000.0) as u64, per).expect("in range");
    }
    protocol::report::histogram::encode(&h).expect("encodes")
}

/// A histogram of known samples: `n` latencies rising from `p50_us / 2` through `p50_us` (the
/// median) to a tail of ten times it, one sample each (`n` >= 100000 resolves 99.999 %).
fn known_samples(n: u32, p50_us: f64) -> String {
    let mut h = protocol::report::histogram::new_latency_histogram();
    for k in 0..n {
        let q = f64::from(k) / f64::from(n);
        let us = p50_us * (0.5 + q) * (1.0 + 6.0 * q.powi(200));
        h.record((us.round() as u64).max(1)).expect("in range");
    }
    protocol::report::histogram::encode(&h).expect("encodes")
}

fn step(index: u32, cpu: &str, rps: [f64; 3], p50: f64) -> Measurement {
    let p = |f: f64| vec![p50 * f * 0.98, p50 * f, p50 * f * 1.02];
    let requests = (rps[0] + rps[1] + rps[2]) as u64 * 15;
    Measurement {
        index,
        name: format!("step {index}"),
        parameters: BTreeMap::from([("cpu".to_string(), cpu.to_string())]),
        metrics: vec![
            metric("rps", "req/s", Better::Higher, rps.to_vec()),
            metric("p50Ms", "ms", Better::Lower, p(1.0)),
            metric("p90Ms", "ms", Better::Lower, p(2.1)),
            metric("p99Ms", "ms", Better::Lower, p(4.3)),
            metric("p999Ms", "ms", Better::Lower, p(8.0)),
            metric("errorRate", "ratio", Better::Lower, vec![0.0, 0.0001, 0.0]),
        ],
        histogram: Some(histogram(requests, p50)),
        pairs: vec![],
    }
}

fn ingress(run: &str, start: &str, rps: [[f64; 3]; 4], name: &str) -> BenchmarkResult {
    let cpus = ["1", "2", "4", "8"];
    let p50s = [9.9, 5.6, 3.5, 1.5];
    let measurements: Vec<Measurement> = (0..4)
        .map(|i| step(i as u32, cpus[i], rps[i], p50s[i]))
        .collect();
    let spec = BenchmarkResultSpec {
        benchmark: BenchmarkRef {
            kind: "IngressBenchmark".into(),
            namespace: "team-a".into(),
            name: name.into(),
        },
        benchmark_uid: "6f1c2a9e-0b7d-4c1e-9d7a-3e1f5b2c8a40".into(),
        run_id: run.into(),
        spec_hash: "9c4e1f0b2a7d3e6c8b5a4f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c".into(),
        benchmark_spec: r#"{"target":{"url":"http://ingress-nginx-controller.ingress-nginx/"},"load":{"connections":32,"threads":4,"duration":"15s","keepAlive":false},"sweep":{"targetRef":{"name":"ingress-nginx-controller"},"steps":[{"cpu":"1"},{"cpu":"2"},{"cpu":"4"},{"cpu":"8"}]},"samples":{"count":3}}"#.into(),
        phase: Phase::Succeeded,
        message: Some("4 steps measured".into()),
        start_time: time(start),
        completion_time: time(&start.replace("T10:00", "T10:07")),
        cluster: cluster(),
        environment: None,
        measurements,
        scaling: None,
        summary: None,
        verdict: None,
    };
    object(&format!("{name}-{run}"), spec)
}

fn object(name: &str, spec: BenchmarkResultSpec) -> BenchmarkResult {
    let mut r = BenchmarkResult::new(name, spec);
    r.metadata = ObjectMeta {
        name: Some(name.into()),
        namespace: Some("team-a".into()),
        ..Default::default()
    };
    r
}

fn judged(now: &BenchmarkResult, then: &BenchmarkResult, regressed: &str) -> Verdict {
    let tol = |name: &str, pct: f64| MetricTolerance {
        name: name.into(),
        tolerance_percent: pct,
        better: None,
    };
    let metrics = crds::stats::compare(
        &now.spec.statistics(),
        &then.spec.statistics(),
        &[tol("rps", 10.0), tol("p99Ms", 20.0)],
    );
    Verdict {
        baseline: format!("result {}", then.metadata.name.clone().unwrap_or_default()),
        baseline_results: vec![then.metadata.name.clone().unwrap_or_default()],
        regressed: regressed.into(),
        metrics,
        ..Default::default()
    }
}

const SEED: [[f64; 3]; 4] = [
    [3185.20, 3209.66, 3234.12],
    [5671.30, 5709.07, 5746.84],
    [8950.11, 9005.79, 9061.47],
    [20601.55, 20696.19, 20790.83],
];

fn ingress_files(dir: &Path) {
    let old = [
        ("r1", "2026-11-28T10:00:00Z", 0.97),
        ("r2", "2026-11-29T10:00:00Z", 1.01),
        ("r3", "2026-11-30T10:00:00Z", 0.99),
    ];
    let history: Vec<BenchmarkResult> = old
        .iter()
        .map(|(run, start, f)| ingress(run, start, SEED.map(|s| s.map(|v| v * f)), "web-sweep"))
        .collect();
    write_list(dir, "ingress-history.yaml", &history);

    let mut sweep = ingress("r4", "2026-12-01T10:00:00Z", SEED, "web-sweep");
    sweep.spec.summary = Some("20696.19 ± 235.09 req/s".into());
    sweep.spec.verdict = Some(judged(&sweep, &history[2], "False"));
    write_one(dir, "ingress-sweep.yaml", &sweep);

    // Step 0 within the noise of the sweep, step 3 down by a third.
    let mut rps = SEED;
    rps[0] = [3050.0, 3330.0, 3190.0];
    rps[3] = [14010.5, 14120.0, 14230.3];
    let mut regressed = ingress("r5", "2026-12-02T10:00:00Z", rps, "web-sweep");
    regressed.spec.verdict = Some(judged(&regressed, &sweep, "True"));
    write_one(dir, "ingress-regressed.yaml", &regressed);
}

fn case(
    index: u32,
    name: &str,
    profile: Option<&str>,
    gbit: [f64; 3],
    rtx: [f64; 3],
) -> Measurement {
    let bits: Vec<f64> = gbit.iter().map(|g| g * 1e9).collect();
    let mut parameters = BTreeMap::from([
        ("clientNode".to_string(), "worker-1".to_string()),
        ("serverNode".to_string(), "worker-2".to_string()),
    ]);
    if let Some(p) = profile {
        parameters.insert("offloadProfile".into(), p.into());
    }
    Measurement {
        index,
        name: name.into(),
        parameters,
        metrics: vec![
            metric(
                "receiverBitsPerSecond",
                "bit/s",
                Better::Higher,
                bits.clone(),
            ),
            metric(
                "senderBitsPerSecond",
                "bit/s",
                Better::Higher,
                bits.iter().map(|b| b * 1.001).collect(),
            ),
            metric("retransmits", "count", Better::Lower, rtx.to_vec()),
        ],
        histogram: None,
        pairs: vec![],
    }
}

fn egress(dir: &Path) {
    let spec = BenchmarkResultSpec {
        benchmark: BenchmarkRef {
            kind: "EgressBenchmark".into(),
            namespace: "team-a".into(),
            name: "vxlan-offload".into(),
        },
        benchmark_uid: "0d9e8f7a-6b5c-4d3e-2f1a-0b9c8d7e6f5a".into(),
        run_id: "e1".into(),
        spec_hash: "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809".into(),
        benchmark_spec: r#"{"baselineCase":"node-to-node","cases":[{"name":"node-to-node"},{"name":"vxlan-offload-on","offloadProfile":"vxlan-csum-on"},{"name":"vxlan-offload-off","offloadProfile":"vxlan-csum-off"}],"samples":{"count":3}}"#.into(),
        phase: Phase::Succeeded,
        message: None,
        start_time: time("2026-12-01T11:00:00Z"),
        completion_time: time("2026-12-01T11:02:30Z"),
        cluster: cluster(),
        environment: None,
        measurements: vec![
            case(0, "node-to-node", None, [9.38, 9.41, 9.44], [12.0, 20.0, 15.0]),
            case(1, "vxlan-offload-on", Some("vxlan-csum-on"), [8.85, 8.90, 8.95], [30.0, 41.0, 35.0]),
            case(2, "vxlan-offload-off", Some("vxlan-csum-off"), [2.45, 2.50, 2.55], [3.0, 5.0, 4.0]),
        ],
        scaling: None,
        summary: Some("9.41 ± 0.07 Gbit/s".into()),
        verdict: None,
    };
    write_one(
        dir,
        "egress-offload.yaml",
        &object("vxlan-offload-e1", spec),
    );
}

fn one_step(dir: &Path) {
    let mut r = ingress("s1", "2026-12-04T10:00:00Z", SEED, "web-once");
    r.spec.measurements.truncate(1);
    if let Some(m) = r.spec.measurements.first_mut() {
        m.parameters.clear();
        m.histogram = Some(known_samples(200_000, 4000.0));
    }
    r.spec.benchmark_spec =
        r#"{"target":{"url":"http://web.team-a/"},"load":{"connections":8,"threads":2,"duration":"15s"},"samples":{"count":3}}"#.into();
    write_one(dir, "ingress-one-step.yaml", &r);
}

/// Three samples around a mean: 0.99, 1 and 1.01 of it.
fn around(mean: f64) -> Vec<f64> {
    vec![mean * 0.99, mean, mean * 1.01]
}

/// A request/response measurement (tcp-rr, tcp-crr, udp-rr) with its histogram.
fn rr(index: u32, name: &str, params: &[(&str, &str)], tps: f64, p50_us: f64) -> Measurement {
    let ms = |f: f64| around(p50_us * f / 1000.0);
    let mut parameters = BTreeMap::from([
        ("clientNode".to_string(), "worker-1".to_string()),
        ("serverNode".to_string(), "worker-2".to_string()),
    ]);
    for (k, v) in params {
        parameters.insert(k.to_string(), v.to_string());
    }
    let udp = parameters.get("protocol").is_some_and(|p| p == "udp-rr");
    let mut metrics = vec![
        metric("transactionsPerSecond", "tx/s", Better::Higher, around(tps)),
        metric("p50Ms", "ms", Better::Lower, ms(1.0)),
        metric("p90Ms", "ms", Better::Lower, ms(1.4)),
        metric("p99Ms", "ms", Better::Lower, ms(2.9)),
        metric("p999Ms", "ms", Better::Lower, ms(6.2)),
        metric("maxMs", "ms", Better::Lower, ms(10.5)),
        metric("failures", "count", Better::Lower, vec![0.0, 1.0, 0.0]),
        metric(
            "clientCpuUsPerTransaction",
            "us",
            Better::Lower,
            around(11.5),
        ),
        metric(
            "serverCpuUsPerTransaction",
            "us",
            Better::Lower,
            around(9.8),
        ),
    ];
    if udp {
        metrics.push(metric(
            "lossPercent",
            "%",
            Better::Lower,
            vec![0.01, 0.02, 0.0],
        ));
    }
    Measurement {
        index,
        name: name.into(),
        parameters,
        metrics,
        histogram: Some(known_samples(100_000, p50_us)),
        pairs: vec![],
    }
}

/// A udp-stream measurement.
fn udp_stream(
    index: u32,
    name: &str,
    params: &[(&str, &str)],
    gbit: f64,
    loss: f64,
) -> Measurement {
    let mut m = case(
        index,
        name,
        None,
        [gbit * 0.99, gbit, gbit * 1.01],
        [0.0; 3],
    );
    m.metrics.retain(|f| f.name != "retransmits");
    m.metrics.extend([
        metric("lossPercent", "%", Better::Lower, around(loss)),
        metric("jitterMs", "ms", Better::Lower, around(0.012)),
        metric("cpuSecondsPerGb", "s/GB", Better::Lower, around(0.41)),
    ]);
    for (k, v) in params {
        m.parameters.insert(k.to_string(), v.to_string());
    }
    m
}

fn egress_protocols(dir: &Path) {
    let mut stream = case(0, "pod-stream", None, [9.1, 9.2, 9.3], [3.0, 4.0, 5.0]);
    stream.metrics.extend([
        metric("cpuSecondsPerGb", "s/GB", Better::Lower, around(0.35)),
        metric("probeP50Ms", "ms", Better::Lower, around(0.21)),
        metric("probeP99Ms", "ms", Better::Lower, around(0.93)),
    ]);
    let mut measurements = vec![
        stream,
        rr(1, "pod-rr", &[("protocol", "tcp-rr")], 21_000.0, 46.0),
        rr(2, "service-rr", &[("protocol", "tcp-rr")], 17_500.0, 55.0),
        rr(3, "pod-crr", &[("protocol", "tcp-crr")], 6_200.0, 160.0),
        rr(4, "pod-udp-rr", &[("protocol", "udp-rr")], 23_000.0, 42.0),
        udp_stream(5, "pod-udp", &[("protocol", "udp-stream")], 1.0, 0.02),
    ];
    // The message-size sweep, in the (unsorted) order an expansion might list it.
    for (i, size) in [1024u32, 64, 65536, 256, 16384, 4096]
        .into_iter()
        .enumerate()
    {
        let index = 6 + i as u32;
        let f = f64::from(size).log2();
        let name = format!("rr-sizes/{size}");
        let params = [
            ("protocol", "tcp-rr"),
            ("case", "rr-sizes"),
            ("messageSize", &size.to_string() as &str),
        ];
        measurements.push(rr(
            index,
            &name,
            &params,
            24_000.0 - 900.0 * f,
            40.0 + 3.0 * f,
        ));
    }
    for (i, streams) in [1u32, 2, 4, 8].into_iter().enumerate() {
        let index = 12 + i as u32;
        let name = format!("udp-streams/{streams}");
        let params = [
            ("protocol", "udp-stream"),
            ("case", "udp-streams"),
            ("streams", &streams.to_string() as &str),
        ];
        let s = f64::from(streams);
        measurements.push(udp_stream(index, &name, &params, 0.9 * s, 0.01 * s * s));
    }
    let spec = BenchmarkResultSpec {
        benchmark: BenchmarkRef {
            kind: "EgressBenchmark".into(),
            namespace: "team-a".into(),
            name: "paths".into(),
        },
        benchmark_uid: "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d".into(),
        run_id: "p1".into(),
        spec_hash: "7e6d5c4b3a2918f7e6d5c4b3a2918f7e6d5c4b3a2918f7e6d5c4b3a2918f7e6".into(),
        benchmark_spec: r#"{"baselineCase":"pod-rr","cases":[{"name":"pod-stream"},{"name":"pod-rr","protocol":"tcp-rr"},{"name":"service-rr","protocol":"tcp-rr","server":{"service":true}},{"name":"pod-crr","protocol":"tcp-crr"},{"name":"pod-udp-rr","protocol":"udp-rr"},{"name":"pod-udp","protocol":"udp-stream","rate":"1G"},{"name":"rr-sizes","protocol":"tcp-rr","sweep":{"messageSize":[64,256,1024,4096,16384,65536]}},{"name":"udp-streams","protocol":"udp-stream","sweep":{"streams":[1,2,4,8]}}],"samples":{"count":3}}"#.into(),
        phase: Phase::Succeeded,
        message: None,
        start_time: time("2026-12-05T09:00:00Z"),
        completion_time: time("2026-12-05T09:20:00Z"),
        cluster: cluster(),
        environment: None,
        measurements,
        scaling: None,
        summary: Some("9.20 ± 0.25 Gbit/s".into()),
        verdict: None,
    };
    write_one(dir, "egress-protocols.yaml", &object("paths-p1", spec));
}

/// Run-to-run noise of a nightly history: factors within ±1 %.
const NOISE: [f64; 12] = [
    1.004, 0.993, 1.008, 0.997, 1.002, 0.991, 1.006, 0.995, 1.009, 0.998, 1.001, 0.994,
];

/// Twelve nightly runs of a sweep, day by day, with [`NOISE`]; from run 7 on (`step`), step 3
/// (8 CPUs) serves 12 % fewer requests/s. Besides them, a run of an older spec (faster) before
/// run 1 and a failed run (absurdly slow) between runs 8 and 9: both are left out of the
/// history a change point is looked for in.
fn nightly(name: &str, step: bool) -> Vec<BenchmarkResult> {
    let mut runs: Vec<BenchmarkResult> = NOISE
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut rps = SEED.map(|s| s.map(|v| v * f));
            if step && i >= 6 {
                rps[3] = rps[3].map(|v| v * 0.88);
            }
            let start = format!("2026-11-{:02}T10:00:00Z", i + 1);
            ingress(&format!("r{}", i + 1), &start, rps, name)
        })
        .collect();
    let mut old_spec = ingress(
        "r0",
        "2026-10-31T10:00:00Z",
        SEED.map(|s| s.map(|v| v * 2.0)),
        name,
    );
    old_spec.spec.spec_hash = "0ld5bec0".into();
    let mut failed = ingress(
        "r8b",
        "2026-11-08T22:00:00Z",
        SEED.map(|s| s.map(|v| v * 0.1)),
        name,
    );
    failed.spec.phase = Phase::Failed;
    failed.spec.message = Some("worker lost".into());
    runs.insert(8, failed);
    runs.insert(0, old_spec);
    runs
}

fn nightly_files(dir: &Path) {
    write_list(dir, "ingress-nightly-step.yaml", &nightly("nightly", true));
    write_list(dir, "ingress-nightly-noise.yaml", &nightly("steady", false));
}

const EVIL: &str = "evil<script>&\"quoted\" | pipe\nnext line";

fn hostile(dir: &Path) {
    let mut i = ingress("x1", "2026-12-03T10:00:00Z", SEED, EVIL);
    for m in &mut i.spec.measurements {
        m.name = format!("step <{}> & \"{}\" | x", m.index, m.index);
    }
    i.spec.cluster.nodes[0].name = "node|<1>&\"".into();
    i.spec.message = Some(EVIL.into());
    i.spec.verdict = Some(judged(&i, &i, "False"));
    let mut e = BenchmarkResult::new(
        "evil-egress",
        BenchmarkResultSpec {
            benchmark: BenchmarkRef {
                kind: "EgressBenchmark".into(),
                namespace: "ns<&>".into(),
                name: EVIL.into(),
            },
            ..ingress("x2", "2026-12-03T11:00:00Z", SEED, "x").spec
        },
    );
    e.spec.measurements = vec![
        case(
            0,
            "case <a> & \"b\" | c",
            Some("profile<&\">"),
            [9.0, 9.1, 9.2],
            [1.0, 2.0, 3.0],
        ),
        case(1, "second\ncase", None, [4.0, 4.1, 4.2], [1.0, 2.0, 3.0]),
    ];
    e.metadata.name = Some("evil-egress".into());
    write_list(dir, "hostile.yaml", &[i, e]);
}

fn write_one(dir: &Path, name: &str, r: &BenchmarkResult) {
    let text = serde_yaml::to_string(r).expect("yaml");
    std::fs::write(dir.join(name), text).expect("write fixture");
}

fn write_list(dir: &Path, name: &str, items: &[BenchmarkResult]) {
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let text = serde_yaml::to_string(&list).expect("yaml");
    std::fs::write(dir.join(name), text).expect("write fixture");
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "cli/tests/fixtures".into());
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir).expect("fixture dir");
    ingress_files(dir);
    egress(dir);
    hostile(dir);
    one_step(dir);
    egress_protocols(dir);
    nightly_files(dir);
    println!("fixtures written to {}", dir.display());
}
