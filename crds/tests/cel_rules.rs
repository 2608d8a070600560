//! Each CEL rule of the CRDs, proven both ways with kube's local CEL evaluator: a valid object
//! passes, and breaking exactly one thing fails with that rule's message.
mod support;

use serde_json::{json, Value};

fn ingress() -> Value {
    support::benchmark(
        "IngressBenchmark",
        r#"
  target: {url: "http://nginx.default.svc:8080/"}
  load: {connections: 10, threads: 2, duration: 10s, warmup: 2s}
  workers: {replicas: 2, nodeNames: [a, b]}
  sweep:
    targetRef: {name: nginx}
    steps: [{cpu: 500m}, {cpu: "1"}, {cpu: "2"}]
"#,
    )
}

fn egress() -> Value {
    support::benchmark(
        "EgressBenchmark",
        r#"
  baselineCase: a
  offload:
    profiles: [{name: off, settings: [{interface: vx0, features: {tx-checksumming: false}}]}]
  cases:
    - {name: a, client: {nodeName: n1, hostNetwork: true}, server: {nodeName: n2, hostNetwork: true}}
    - {name: b, client: {nodeName: n1}, server: {address: 198.18.0.2}, offloadProfile: off}
"#,
    )
}

/// Set `path` (dot separated, numeric segments index arrays) in a clone of `base`.
fn with(base: &Value, path: &str, new: Value) -> Value {
    let mut out = base.clone();
    let mut cur = &mut out;
    for seg in path.split('.') {
        cur = match seg.parse::<usize>() {
            Ok(i) => &mut cur[i],
            Err(_) => &mut cur[seg],
        };
    }
    *cur = new;
    out
}

fn assert_rejected(object: &Value, message: &str) {
    let errors = support::cel_errors(object);
    assert!(
        errors.iter().any(|e| e == message),
        "expected {message:?}, got {errors:?}"
    );
}

#[test]
fn valid_objects_pass() {
    assert_eq!(support::cel_errors(&ingress()), Vec::<String>::new());
    assert_eq!(support::cel_errors(&egress()), Vec::<String>::new());
}

#[test]
fn url_must_be_http_or_https() {
    let msg = "target.url must be an absolute http:// or https:// URL with a host";
    assert_rejected(
        &with(&ingress(), "spec.target.url", json!("ftp://host/")),
        msg,
    );
    assert_rejected(
        &with(&ingress(), "spec.target.url", json!("nginx:8080")),
        msg,
    );
    assert_rejected(&with(&ingress(), "spec.target.url", json!("http://")), msg);
    // "http:///x" is refused by the API server (Go's URL parser finds no host) but not by the
    // local evaluator (the WHATWG parser reads host "x"): tests/cluster/crd-check.sh covers it.
    let https = with(
        &ingress(),
        "spec.target.url",
        json!("https://host:8443/x?y=1"),
    );
    assert!(support::cel_errors(&https).is_empty());
}

#[test]
fn threads_cannot_exceed_connections() {
    let bad = with(&ingress(), "spec.load.threads", json!(11));
    assert_rejected(
        &bad,
        "load.connections must be at least load.threads (each thread needs a connection)",
    );
}

#[test]
fn duration_must_exceed_warmup() {
    let msg = "load.duration must be longer than load.warmup";
    assert_rejected(&with(&ingress(), "spec.load.warmup", json!("10s")), msg);
    assert_rejected(&with(&ingress(), "spec.load.warmup", json!("1m")), msg);
    // the default warm-up (0s) is shorter than any duration
    let mut no_warmup = ingress();
    no_warmup["spec"]["load"]
        .as_object_mut()
        .unwrap()
        .remove("warmup");
    assert!(support::cel_errors(&no_warmup).is_empty());
}

#[test]
fn replicas_must_match_node_names() {
    let bad = with(&ingress(), "spec.workers.replicas", json!(3));
    assert_rejected(
        &bad,
        "workers.replicas must equal the number of workers.nodeNames when both are set",
    );
}

#[test]
fn sweep_steps_must_be_complete_and_strictly_increasing() {
    let steps = "spec.sweep.steps";
    assert_rejected(
        &with(&ingress(), steps, json!([{}])),
        "each sweep step must set cpu and/or replicas",
    );
    assert_rejected(
        &with(&ingress(), steps, json!([{"cpu": "1"}, {"replicas": 2}])),
        "set cpu on every sweep step or on none",
    );
    let increasing_cpu = "sweep steps must be strictly increasing in cpu";
    assert_rejected(
        &with(&ingress(), steps, json!([{"cpu": "2"}, {"cpu": "1"}])),
        increasing_cpu,
    );
    assert_rejected(
        &with(&ingress(), steps, json!([{"cpu": "1"}, {"cpu": "1000m"}])),
        increasing_cpu,
    );
    let increasing_replicas =
        "sweep steps must be increasing in replicas (strictly, when cpu is not set)";
    assert_rejected(
        &with(&ingress(), steps, json!([{"replicas": 2}, {"replicas": 2}])),
        increasing_replicas,
    );
    assert_rejected(
        &with(&ingress(), steps, json!([{"replicas": 3}, {"replicas": 1}])),
        increasing_replicas,
    );
    // replicas may stay equal while cpu grows
    let both = with(
        &ingress(),
        steps,
        json!([{"cpu": "1", "replicas": 2}, {"cpu": "2", "replicas": 2}]),
    );
    assert!(support::cel_errors(&both).is_empty());
    let seed = with(
        &ingress(),
        steps,
        json!([{"cpu": "1"}, {"cpu": "2"}, {"cpu": "4"}, {"cpu": "8"}]),
    );
    assert!(support::cel_errors(&seed).is_empty());
}

#[test]
fn case_names_must_be_unique() {
    let bad = with(&egress(), "spec.cases.1.name", json!("a"));
    assert_rejected(&bad, "case names must be unique");
}

#[test]
fn baseline_case_must_exist() {
    let bad = with(&egress(), "spec.baselineCase", json!("zzz"));
    assert_rejected(&bad, "baselineCase must name one of the cases");
}

#[test]
fn offload_profile_must_exist() {
    let msg = "every case's offloadProfile must name a profile in offload.profiles";
    assert_rejected(
        &with(&egress(), "spec.cases.1.offloadProfile", json!("on")),
        msg,
    );
    let mut no_offload = egress();
    no_offload["spec"]
        .as_object_mut()
        .unwrap()
        .remove("offload");
    assert_rejected(&no_offload, msg);
}

#[test]
fn offload_profile_names_must_be_unique() {
    let dup = json!([
        {"name": "off", "settings": [{"interface": "vx0", "features": {"tx-checksumming": false}}]},
        {"name": "off", "settings": [{"interface": "vx0", "features": {"tx-checksumming": true}}]}
    ]);
    assert_rejected(
        &with(&egress(), "spec.offload.profiles", dup),
        "offload profile names must be unique",
    );
}

#[test]
fn external_server_excludes_server_pod_fields() {
    let bad = with(&egress(), "spec.cases.1.server.nodeName", json!("n2"));
    assert_rejected(
        &bad,
        "server.address (an external tcp-server) cannot be combined with nodeName, hostNetwork, bindInterface or bindAddress",
    );
}

#[test]
fn bind_interface_and_address_are_exclusive() {
    let both = json!({"nodeName": "n1", "bindInterface": "vx0", "bindAddress": "198.18.0.1"});
    assert_rejected(
        &with(&egress(), "spec.cases.0.client", both),
        "set bindInterface or bindAddress, not both",
    );
}

/// Each duration rule at its edges, and the operator's own check (crds::bounds, which refuses
/// objects stored before a rule existed) agreeing with the API server's rule on every value.
#[test]
fn durations_are_bounded_and_the_operator_agrees() {
    let cases: [(&str, &str, &[&str], &[&str]); 5] = [
        (
            "spec.load.duration",
            "load.duration must be between 1s and 24h",
            &["1s", "10s", "24h", "23h59m59s"],
            &["999ms", "1ns", "24h1ns", "25h", "99999h"],
        ),
        (
            "spec.load.warmup",
            "load.warmup must be at most 1h",
            &["0s", "1s", "9s"],
            &["1h1s", "2h"],
        ),
        (
            "spec.load.timeout",
            "load.timeout must be between 1ms and 5m",
            &["1ms", "2s", "5m"],
            &["0s", "999us", "5m1s"],
        ),
        (
            "spec.sweep.settle",
            "sweep.settle must be at most 1h",
            &["0s", "15s", "1h"],
            &["61m", "1000h"],
        ),
        (
            "spec.thresholds.maxP99",
            "thresholds.maxP99 must be more than 0s and at most 1h",
            &["1ns", "50ms", "1h"],
            &["0s", "1h1ms"],
        ),
    ];
    let base = with(&ingress(), "spec.thresholds", json!({}));
    let base = with(&base, "spec.load.warmup", json!("0s"));
    for (path, message, good, bad) in cases {
        for value in good {
            let obj = with(&base, path, json!(value));
            assert_eq!(
                support::cel_errors(&obj),
                Vec::<String>::new(),
                "{path}={value}"
            );
            let spec: crds::IngressBenchmarkSpec =
                serde_json::from_value(obj["spec"].clone()).unwrap();
            assert_eq!(crds::bounds::ingress(&spec), Ok(()), "{path}={value}");
        }
        for value in bad {
            let obj = with(&base, path, json!(value));
            assert_rejected(&obj, message);
            let spec: crds::IngressBenchmarkSpec =
                serde_json::from_value(obj["spec"].clone()).unwrap();
            let err = crds::bounds::ingress(&spec).unwrap_err();
            assert!(err.starts_with(message), "{path}={value}: {err}");
        }
    }
    let msg = "case duration must be between 1s and 24h";
    for value in ["0s", "500ms", "25h"] {
        let obj = with(&egress(), "spec.cases.0.duration", json!(value));
        assert_rejected(&obj, msg);
        let spec: crds::EgressBenchmarkSpec = serde_json::from_value(obj["spec"].clone()).unwrap();
        assert!(crds::bounds::egress(&spec).unwrap_err().contains(msg));
    }
}

#[test]
fn quantities_must_parse_and_stay_in_range() {
    let cpu = "workers.cpu must be a quantity such as 500m or 2, more than 0 and at most 256";
    for bad in [
        json!("banana"),
        json!("0"),
        json!("-1"),
        json!("257"),
        json!("1Ki"),
    ] {
        assert_rejected(&with(&ingress(), "spec.workers.cpu", bad.clone()), cpu);
        let eg = with(&egress(), "spec.workers", json!({"cpu": bad}));
        assert_rejected(&eg, cpu);
    }
    for good in [json!("500m"), json!("2"), json!(4), json!("256")] {
        let obj = with(&ingress(), "spec.workers.cpu", good.clone());
        assert_eq!(support::cel_errors(&obj), Vec::<String>::new(), "{good}");
    }
    let memory =
        "workers.memory must be a quantity such as 256Mi or 1Gi, more than 0 and at most 1Ti";
    for bad in [json!("lots"), json!("0"), json!("2Ti")] {
        assert_rejected(&with(&ingress(), "spec.workers.memory", bad), memory);
    }
    assert!(
        support::cel_errors(&with(&ingress(), "spec.workers.memory", json!("256Mi"))).is_empty()
    );
    let step = "sweep steps' cpu must be a quantity such as 500m or 2, more than 0 and at most 256";
    assert_rejected(
        &with(&ingress(), "spec.sweep.steps.0.cpu", json!("banana")),
        step,
    );
}

/// An EgressBenchmark whose only case is `base` with `fields` set (and the baseline).
fn one_case(base: Value, fields: Value) -> Value {
    let mut c = base;
    for (k, v) in fields.as_object().unwrap() {
        c[k] = v.clone();
    }
    with(
        &with(&egress(), "spec.cases", json!([c])),
        "spec.baselineCase",
        json!("c"),
    )
}

/// The API server (CEL) refuses `obj` with `message`, and so does the operator (crds::bounds).
fn both_refuse(obj: &Value, message: &str) {
    assert_rejected(obj, message);
    let spec: crds::EgressBenchmarkSpec = serde_json::from_value(obj["spec"].clone()).unwrap();
    let err = crds::bounds::egress(&spec).unwrap_err();
    assert!(
        err.contains(message),
        "operator said {err:?}, want {message:?}"
    );
}

/// Both accept `obj`.
fn both_accept(obj: &Value) {
    assert_eq!(support::cel_errors(obj), Vec::<String>::new(), "{obj}");
    let spec: crds::EgressBenchmarkSpec = serde_json::from_value(obj["spec"].clone()).unwrap();
    assert_eq!(crds::bounds::egress(&spec), Ok(()), "{obj}");
}

/// Each protocol rule, from the API server's side (CEL) and the operator's (crds::bounds): a
/// field of another protocol is refused with the same message by both.
#[test]
fn protocol_fields_go_with_their_protocol_and_the_operator_agrees() {
    let pinned = json!({"name": "c", "client": {"nodeName": "n1"}, "server": {"nodeName": "n2"}});
    let case = |fields: Value| one_case(pinned.clone(), fields);
    let (agree, ok) = (both_refuse, both_accept);
    ok(&case(
        json!({"protocol": "tcp-rr", "requestSize": 64, "responseSize": 1024, "burst": 8, "rate": 1000}),
    ));
    ok(&case(json!({"protocol": "tcp-crr", "requestSize": 1})));
    ok(&case(
        json!({"protocol": "udp-rr", "timeout": "50ms", "burst": 2}),
    ));
    ok(&case(
        json!({"protocol": "udp-stream", "bitrate": "500M", "messageSize": 1400, "direction": "Receive"}),
    ));
    ok(&case(
        json!({"protocol": "udp-stream", "packetsPerSecond": 100000}),
    ));
    ok(&case(json!({"latencyProbe": 10, "messageSize": 65536})));
    ok(&case(
        json!({"protocol": "tcp-rr", "sweep": {"messageSizes": [1, 64, 1024], "streams": [1, 2, 4, 8]}}),
    ));
    ok(&case(
        json!({"protocol": "tcp-rr", "server": {"nodeName": "n2", "service": true}}),
    ));

    let rr_only =
        "requestSize, responseSize and rate apply to protocols tcp-rr, tcp-crr and udp-rr only";
    agree(&case(json!({"requestSize": 64})), rr_only);
    agree(&case(json!({"protocol": "udp-stream", "rate": 5})), rr_only);
    agree(
        &case(json!({"protocol": "tcp-crr", "burst": 4})),
        "burst applies to protocols tcp-rr and udp-rr only",
    );
    agree(
        &case(json!({"protocol": "tcp-rr", "timeout": "1s"})),
        "timeout applies to protocol udp-rr only",
    );
    agree(
        &case(json!({"bitrate": "1G"})),
        "bitrate and packetsPerSecond apply to protocol udp-stream only",
    );
    agree(
        &case(json!({"protocol": "udp-stream", "bitrate": "1G", "packetsPerSecond": 10})),
        "set bitrate or packetsPerSecond, not both",
    );
    agree(
        &case(json!({"protocol": "udp-rr", "latencyProbe": 5})),
        "latencyProbe applies to protocol tcp-stream only",
    );
    agree(&case(json!({"protocol": "tcp-rr", "messageSize": 64})), "messageSize applies to tcp-stream and udp-stream; request/response protocols take requestSize and responseSize");
    agree(
        &case(json!({"protocol": "tcp-rr", "direction": "Receive"})),
        "direction applies to tcp-stream and udp-stream only",
    );
    let udp = "a UDP datagram carries at most 65507 bytes: messageSize, requestSize, responseSize and sweep.messageSizes of udp protocols must be at most 65507";
    agree(
        &case(json!({"protocol": "udp-stream", "messageSize": 65508})),
        udp,
    );
    agree(
        &case(json!({"protocol": "udp-rr", "responseSize": 70000})),
        udp,
    );
    agree(
        &case(json!({"protocol": "udp-rr", "sweep": {"messageSizes": [64, 65536]}})),
        udp,
    );
    let service = "server.service reaches a server pod the operator runs on its pod address: it cannot be combined with server.address, hostNetwork, bindInterface or bindAddress";
    agree(
        &case(json!({"server": {"address": "198.18.0.2", "service": true}})),
        service,
    );
    agree(
        &case(json!({"server": {"nodeName": "n2", "bindInterface": "vx0", "service": true}})),
        service,
    );
    let udp_header = "udp-stream datagrams carry a 32-byte header: messageSize and sweep.messageSizes must be at least 32";
    agree(
        &case(json!({"protocol": "udp-stream", "messageSize": 31})),
        udp_header,
    );
    agree(
        &case(json!({"protocol": "udp-stream", "sweep": {"messageSizes": [32, 8]}})),
        udp_header,
    );
    ok(&case(json!({"protocol": "udp-stream", "messageSize": 32})));
    agree(
        &case(json!({"protocol": "tcp-rr", "sweep": {"messageSizes": [64, 2097152]}})),
        "request/response messages are at most 1048576 bytes (1 MiB): sweep.messageSizes of tcp-rr, tcp-crr and udp-rr must be at most 1048576",
    );
    ok(&case(json!({"sweep": {"messageSizes": [64, 2097152]}})));
    let pipeline = "tcp-rr with burst keeps (burst + 1) requests in flight each way: (burst + 1) times requestSize, responseSize and every sweep.messageSizes must be at most 65536 bytes, or both ends could block on full socket buffers";
    agree(
        &case(json!({"protocol": "tcp-rr", "burst": 1, "responseSize": 32769})),
        pipeline,
    );
    agree(
        &case(json!({"protocol": "tcp-rr", "burst": 3, "sweep": {"messageSizes": [64, 16385]}})),
        pipeline,
    );
    ok(&case(
        json!({"protocol": "tcp-rr", "burst": 3, "sweep": {"messageSizes": [64, 16384]}}),
    ));
    ok(&case(
        json!({"protocol": "tcp-rr", "burst": 0, "requestSize": 1048576}),
    ));
    ok(&case(
        json!({"protocol": "udp-rr", "burst": 8, "requestSize": 65507}),
    ));
    agree(
        &case(json!({"sweep": {}})),
        "sweep must list messageSizes or streams",
    );
    agree(
        &case(json!({"sweep": {"messageSizes": [1, 2, 3, 4, 5], "streams": [1, 2, 3, 4]}})),
        "a sweep runs a case at most 16 times: the number of messageSizes times the number of streams must be at most 16",
    );
    agree(
        &case(json!({"sweep": {"streams": [2, 4, 2]}})),
        "sweep.streams must not repeat a value",
    );
    agree(
        &case(json!({"protocol": "udp-rr", "timeout": "11s"})),
        "timeout must be between 1ms and 10s",
    );
    let seq = "udp-rr carries an 8-byte sequence number in every datagram: requestSize, responseSize and sweep.messageSizes must be at least 8";
    agree(&case(json!({"protocol": "udp-rr", "requestSize": 4})), seq);
    agree(
        &case(json!({"protocol": "udp-rr", "sweep": {"messageSizes": [1, 64]}})),
        seq,
    );
    ok(&case(
        json!({"protocol": "tcp-rr", "sweep": {"messageSizes": [1, 64]}}),
    ));
    // The schema's own bounds (the API server checks them before CEL; tests/cluster/crd-check.sh
    // sends absurd values to the real one): declared for every size and rate.
    let schema = support::schema_of("EgressBenchmark");
    let props = &schema["properties"]["spec"]["properties"]["cases"]["items"]["properties"];
    for (field, max) in [
        ("rate", 1_000_000.0),
        ("burst", 256.0),
        ("requestSize", 1_048_576.0),
        ("responseSize", 1_048_576.0),
        ("packetsPerSecond", 10_000_000.0),
        ("latencyProbe", 1000.0),
        ("messageSize", 16_777_216.0),
    ] {
        assert_eq!(props[field]["maximum"], json!(max), "{field}");
    }
    assert!(props["bitrate"]["pattern"].is_string() && props["bitrate"]["maxLength"] == json!(16));
    let sweep = &props["sweep"]["properties"];
    assert_eq!(
        (
            sweep["messageSizes"]["maxItems"].clone(),
            sweep["streams"]["items"]["maximum"].clone()
        ),
        (json!(16), json!(128.0))
    );
    // The pattern: 0, or at least 1k (four digits, or a suffix).
    for low in ["1", "999", "999.9"] {
        let obj = case(json!({"protocol": "udp-stream", "bitrate": low}));
        let spec: crds::EgressBenchmarkSpec = serde_json::from_value(obj["spec"].clone()).unwrap();
        assert!(
            crds::bounds::egress(&spec)
                .unwrap_err()
                .contains("at least 1k"),
            "{low}"
        );
    }
    for fine in ["0", "1000", "1k", "1.5k", "100G"] {
        ok(&case(json!({"protocol": "udp-stream", "bitrate": fine})));
    }
    let pattern = regex::Regex::new(props["bitrate"]["pattern"].as_str().unwrap()).unwrap();
    for (value, matches) in [
        ("1", false),
        ("999", false),
        ("999.5", false),
        ("0", true),
        ("1000", true),
        ("1.5k", true),
        ("2G", true),
        ("0k", false),
    ] {
        assert_eq!(pattern.is_match(value), matches, "{value}");
    }
    // What the pattern lets through beyond 100G, the operator refuses.
    let obj = case(json!({"protocol": "udp-stream", "bitrate": "999999G"}));
    let spec: crds::EgressBenchmarkSpec = serde_json::from_value(obj["spec"].clone()).unwrap();
    assert!(crds::bounds::egress(&spec)
        .unwrap_err()
        .contains("at most 100G"));
}

/// Across cases the operator counts the runs (no CEL rule can sum them): 64 at most.
#[test]
fn the_operator_refuses_more_runs_than_a_result_holds() {
    let swept = |i: usize| json!({"name": format!("c{i}"), "client": {}, "server": {"nodeName": "n"}, "sweep": {"messageSizes": [1, 2, 3, 4], "streams": [1, 2, 3, 4]}});
    let five: Vec<Value> = (0..5).map(swept).collect();
    let obj = with(
        &with(&egress(), "spec.cases", json!(five)),
        "spec.baselineCase",
        json!("c0"),
    );
    assert_eq!(
        support::cel_errors(&obj),
        Vec::<String>::new(),
        "each case is within its own bound"
    );
    let spec: crds::EgressBenchmarkSpec = serde_json::from_value(obj["spec"].clone()).unwrap();
    assert_eq!(
        crds::bounds::egress(&spec).unwrap_err(),
        "the cases and their sweeps make 80 runs; at most 64 (the measurements one BenchmarkResult holds)"
    );
    let four: Vec<Value> = (0..4).map(swept).collect();
    let spec: crds::EgressBenchmarkSpec =
        serde_json::from_value(with(&obj, "spec.cases", json!(four))["spec"].clone()).unwrap();
    assert_eq!(crds::bounds::egress(&spec), Ok(()));
}

#[test]
fn topologies_are_one_of_four_with_their_nodes_and_the_operator_agrees() {
    let case = |fields: Value| one_case(json!({"name": "c", "client": {}, "server": {}}), fields);
    let (agree, ok) = (both_refuse, both_accept);
    let t = |topology: Value| case(json!({ "topology": topology }));
    ok(&t(json!({"pairs": 4})));
    ok(&t(
        json!({"pairs": 2, "clientNodes": {"selector": {"zone": "a"}}, "serverNodes": {"names": ["n1", "n2"]}}),
    ));
    ok(&t(
        json!({"fanIn": 8, "serverNodes": {"names": ["n1"]}, "clientNodes": {"selector": {"pool": "x"}}}),
    ));
    ok(&t(json!({"fanOut": 3, "clientNodes": {"names": ["n1"]}})));
    ok(&t(
        json!({"matrix": {"concurrency": 1, "sample": 4}, "clientNodes": {"names": ["n1", "n2", "n3"]}}),
    ));
    ok(&case(
        json!({"protocol": "tcp-rr", "topology": {"pairs": 2}, "client": {"hostNetwork": true}}),
    ));

    let one = "topology: set exactly one of pairs, fanIn, fanOut and matrix";
    agree(&t(json!({})), one);
    agree(
        &t(json!({"pairs": 2, "fanOut": 2, "clientNodes": {"names": ["n1"]}})),
        one,
    );
    agree(
        &t(json!({"fanIn": 2, "serverNodes": {"names": ["n1", "n2"]}})),
        "topology.fanIn runs every server on one node: name it in serverNodes.names (exactly one name)",
    );
    agree(
        &t(json!({"fanOut": 2, "clientNodes": {"selector": {"a": "b"}}})),
        "topology.fanOut runs every client on one node: name it in clientNodes.names (exactly one name)",
    );
    ok(&t(
        json!({"matrix": {}, "clientNodes": {"selector": {"a": "b"}}}),
    ));
    ok(&t(
        json!({"matrix": {"sample": 4}, "clientNodes": {"selector": {"a": "b"}}, "serverNodes": {"names": ["n1"]}}),
    ));
    agree(
        &t(json!({"matrix": {}, "serverNodes": {"names": ["n1", "n2"]}})),
        "topology.matrix pairs the nodes of clientNodes (names or a selector) with those of serverNodes, or with each other when serverNodes is absent: set clientNodes",
    );
    agree(
        &t(json!({"pairs": 2, "clientNodes": {"names": ["n1"], "selector": {"a": "b"}}})),
        "a node set lists names or a selector, one of the two",
    );
    agree(
        &t(json!({"pairs": 2, "clientNodes": {"names": ["n1", "n1"]}})),
        "node names must not repeat",
    );
    agree(
        &case(json!({"topology": {"pairs": 2}, "client": {"nodeName": "n1"}})),
        "a case with a topology places its workers with topology.clientNodes and topology.serverNodes, not client.nodeName or server.nodeName",
    );
    let server = "a topology runs a server pod per pair on its pod or host address: server.address and server.service do not go with it";
    agree(
        &case(json!({"topology": {"pairs": 2}, "server": {"address": "198.18.0.2"}})),
        server,
    );
    agree(
        &case(json!({"topology": {"pairs": 2}, "server": {"service": true}})),
        server,
    );
    agree(
        &case(json!({"topology": {"pairs": 2}, "sweep": {"streams": [1, 2]}})),
        "a case with a topology cannot also have a sweep: make one case per value",
    );
    // The schema's ranges (no CEL message): the API server refuses them, so does the operator.
    for bad in [
        json!({"pairs": 0}),
        json!({"pairs": 129}),
        json!({"fanIn": 1, "serverNodes": {"names": ["n1"]}}),
    ] {
        let spec: crds::EgressBenchmarkSpec =
            serde_json::from_value(t(bad.clone())["spec"].clone()).unwrap();
        assert!(crds::bounds::egress(&spec).is_err(), "{bad}");
    }
}

/// An ingress object both the CEL rules and the operator's bounds refuse with `message`.
fn ingress_refuses(obj: &Value, message: &str) {
    assert_rejected(obj, message);
    let spec: crds::IngressBenchmarkSpec = serde_json::from_value(obj["spec"].clone()).unwrap();
    let err = crds::bounds::ingress(&spec).unwrap_err();
    assert!(
        err.contains(message),
        "operator said {err:?}, want {message:?}"
    );
}

/// Ingress without a sweep (controllers cannot be beside one).
fn unswept() -> Value {
    let mut base = ingress();
    base["spec"].as_object_mut().unwrap().remove("sweep");
    base
}

/// Controllers compared side by side, from the API server's side (CEL) and the operator's.
#[test]
fn controllers_are_unique_and_a_sweep_beside_them_scales_their_own_targets_and_the_operator_agrees()
{
    let base = unswept();
    let two = with(
        &base,
        "spec.controllers",
        json!([
            {"name": "traefik", "url": "http://traefik.ingress/"},
            {"name": "traefik-gw", "route": {
                "gateway": {"name": "bench", "namespace": "gw"},
                "hostname": "a.example",
                "backend": {"name": "web", "port": 80}}}
        ]),
    );
    assert_eq!(support::cel_errors(&two), Vec::<String>::new());
    let spec: crds::IngressBenchmarkSpec = serde_json::from_value(two["spec"].clone()).unwrap();
    assert_eq!(crds::bounds::ingress(&spec), Ok(()));

    let same = with(&two, "spec.controllers.1.name", json!("traefik"));
    ingress_refuses(&same, "controllers' names must be unique");
    // A sweep beside controllers scales each controller's own target, never sweep.targetRef.
    let swept = with(&two, "spec.sweep", ingress()["spec"]["sweep"].clone());
    ingress_refuses(&swept, crds::bounds::SWEEP_TARGETS);
    let mut own = with(&swept, "spec.sweep.targetRef", Value::Null);
    own["spec"]["sweep"]
        .as_object_mut()
        .unwrap()
        .remove("targetRef");
    ingress_refuses(&own, crds::bounds::SWEEP_TARGETS);
    let one = with(
        &own,
        "spec.controllers.0.sweepTarget",
        json!({"name": "traefik", "namespace": "ingress"}),
    );
    ingress_refuses(&one, crds::bounds::SWEEP_TARGETS);
    let both = with(
        &one,
        "spec.controllers.1.sweepTarget",
        json!({"name": "envoy", "namespace": "gw"}),
    );
    assert_eq!(support::cel_errors(&both), Vec::<String>::new());
    let spec: crds::IngressBenchmarkSpec = serde_json::from_value(both["spec"].clone()).unwrap();
    assert_eq!(crds::bounds::ingress(&spec), Ok(()));
    let mut unswept_target = with(
        &two,
        "spec.controllers.0.sweepTarget",
        json!({"name": "traefik"}),
    );
    unswept_target["spec"]
        .as_object_mut()
        .unwrap()
        .remove("sweep");
    ingress_refuses(&unswept_target, crds::bounds::SWEEP_TARGET_WITHOUT_SWEEP);
    // Two controllers scaling one workload; more steps than a run holds.
    // (The operator's check alone: the API server's CEL would have to compare optional
    // namespaces, and the namespace left out is only known to be the benchmark's there.)
    let shared = with(
        &both,
        "spec.controllers.1.sweepTarget",
        json!({"name": "traefik", "namespace": "ingress"}),
    );
    let spec: crds::IngressBenchmarkSpec = serde_json::from_value(shared["spec"].clone()).unwrap();
    assert_eq!(
        crds::bounds::ingress(&spec),
        Err(crds::bounds::SHARED_SWEEP_TARGET.to_string())
    );
    let other_ns = with(
        &both,
        "spec.controllers.1.sweepTarget",
        json!({"name": "traefik", "namespace": "gw"}),
    );
    assert_eq!(support::cel_errors(&other_ns), Vec::<String>::new());
    let steps: Vec<Value> = (1..=16)
        .map(|i| json!({"cpu": format!("{i}00m")}))
        .collect();
    let controllers = |n: usize| -> Value {
        (0..n)
            .map(|i| json!({"name": format!("c{i}"), "url": "http://x/", "sweepTarget": {"name": format!("t{i}")}}))
            .collect()
    };
    let most = with(
        &with(&both, "spec.sweep.steps", json!(steps)),
        "spec.controllers",
        controllers(4),
    );
    assert_eq!(support::cel_errors(&most), Vec::<String>::new());
    let many = with(&most, "spec.controllers", controllers(5));
    ingress_refuses(&many, crds::bounds::SWEEP_BESIDE_CONTROLLERS_STEPS);
    let mut alone = ingress();
    alone["spec"]["sweep"]
        .as_object_mut()
        .unwrap()
        .remove("targetRef");
    ingress_refuses(&alone, crds::bounds::SWEEP_TARGETS);
    let mut shared = with(
        &two,
        "spec.controllers.0.route",
        two["spec"]["controllers"][1]["route"].clone(),
    );
    shared = with(&shared, "spec.controllers.0.url", json!("http://other.gw/"));
    ingress_refuses(
        &shared,
        "the routes of controllers must have distinct hostnames (a Gateway gives a hostname to the oldest route)",
    );
    let slow = with(&two, "spec.controllers.1.route.settle", json!("6m"));
    ingress_refuses(&slow, "controllers[].route.settle must be at most 5m");
    let ftp = with(&two, "spec.controllers.0.url", json!("ftp://x/"));
    assert_rejected(
        &ftp,
        "controllers[].url must be an absolute http:// or https:// URL with a host",
    );
}

/// Route changes need routes, a bounded pace and a bounded count, on both sides.
#[test]
fn route_changes_need_routes_and_a_bounded_pace_and_the_operator_agrees() {
    let base = unswept();
    let routed = with(
        &base,
        "spec.controllers",
        json!([{"name": "traefik-gw", "route": {
            "gateway": {"name": "bench", "namespace": "gw"},
            "hostname": "a.example",
            "backend": {"name": "web-a", "port": 80}}}]),
    );
    let changing = with(
        &routed,
        "spec.routeChanges",
        json!({"every": "1s", "swapTo": {"name": "web-b", "port": 80}}),
    );
    assert_eq!(support::cel_errors(&changing), Vec::<String>::new());
    let spec: crds::IngressBenchmarkSpec =
        serde_json::from_value(changing["spec"].clone()).unwrap();
    assert_eq!(crds::bounds::ingress(&spec), Ok(()));
    let defaults: crds::IngressBenchmarkSpec = serde_json::from_value(
        with(
            &routed,
            "spec.routeChanges",
            json!({"swapTo": {"name": "web-b", "port": 80}}),
        )["spec"]
            .clone(),
    )
    .unwrap();
    assert_eq!(
        defaults.route_changes.unwrap().every.as_std(),
        std::time::Duration::from_secs(2)
    );

    let needs =
        "routeChanges needs controllers, each with a route (the run changes the routes it creates)";
    let unrouted = with(
        &changing,
        "spec.controllers",
        json!([{"name": "traefik", "url": "http://traefik.ingress/"}]),
    );
    ingress_refuses(&unrouted, needs);
    let mut alone = changing.clone();
    alone["spec"].as_object_mut().unwrap().remove("controllers");
    ingress_refuses(&alone, needs);
    let fast = with(&changing, "spec.routeChanges.every", json!("100ms"));
    ingress_refuses(&fast, "routeChanges.every must be between 200ms and 5m");
    let slow = with(&changing, "spec.routeChanges.every", json!("6m"));
    ingress_refuses(&slow, "routeChanges.every must be between 200ms and 5m");
    let same = with(&changing, "spec.routeChanges.swapTo.name", json!("web-a"));
    ingress_refuses(&same, crds::bounds::SWAP_TO_DIFFERS);
    // swapTo goes with SwapBackend (the default) and only with it.
    let recreating = with(
        &routed,
        "spec.routeChanges",
        json!({"every": "1s", "action": "DeleteAndCreate"}),
    );
    assert_eq!(support::cel_errors(&recreating), Vec::<String>::new());
    let spec: crds::IngressBenchmarkSpec =
        serde_json::from_value(recreating["spec"].clone()).unwrap();
    assert_eq!(crds::bounds::ingress(&spec), Ok(()));
    let both = with(
        &changing,
        "spec.routeChanges.action",
        json!("DeleteAndCreate"),
    );
    ingress_refuses(&both, crds::bounds::SWAP_TO_NEEDED);
    let nowhere = with(&routed, "spec.routeChanges", json!({"every": "1s"}));
    ingress_refuses(&nowhere, crds::bounds::SWAP_TO_NEEDED);
    let named = with(&nowhere, "spec.routeChanges.action", json!("SwapBackend"));
    ingress_refuses(&named, crds::bounds::SWAP_TO_NEEDED);
    // Gates on route-change figures need the changes that make them.
    let gate = |figure: &str| {
        if figure.ends_with("Shown") {
            json!([{"figure": figure, "min": 0.9}])
        } else {
            json!([{"figure": figure, "max": 500}])
        }
    };
    for (obj, figure) in [
        (&changing, "routeChangeP99Ms"),
        (&changing, "routeChangesShown"),
        (&recreating, "routeDeletionP99Ms"),
        (&recreating, "routeCreationsShown"),
    ] {
        let gated = with(obj, "spec.gates", gate(figure));
        assert_eq!(
            support::cel_errors(&gated),
            Vec::<String>::new(),
            "{figure}"
        );
        let spec: crds::IngressBenchmarkSpec =
            serde_json::from_value(gated["spec"].clone()).unwrap();
        assert_eq!(crds::bounds::ingress(&spec), Ok(()), "{figure}");
    }
    for (obj, figure) in [
        (&recreating, "routeChangeP99Ms"),
        (&changing, "routeCreationP99Ms"),
        (&changing, "routeDeletionsShown"),
        (&base, "routeChangesShown"),
    ] {
        let gated = with(obj, "spec.gates", gate(figure));
        ingress_refuses(&gated, crds::bounds::ROUTE_GATES_NEED_CHANGES);
    }
    let share = with(
        &changing,
        "spec.gates",
        json!([{"figure": "routeChangesShown", "min": 2}]),
    );
    ingress_refuses(
        &share,
        "a route*Shown or routesAnswered gate's limit is a share: at most 1",
    );
    // DeleteAndCreate: room for a deletion and a creation (the operator's count); no error
    // rate, which would count the Gateway's 404s.
    let once = with(
        &recreating,
        "spec.load",
        json!({"duration": "1s", "warmup": "0s"}),
    );
    let spec: crds::IngressBenchmarkSpec = serde_json::from_value(once["spec"].clone()).unwrap();
    let err = crds::bounds::ingress(&spec).unwrap_err();
    assert!(err.contains("room for a deletion and a creation"), "{err}");
    let rated = with(
        &recreating,
        "spec.gates",
        json!([{"figure": "errorRate", "max": 0.01}]),
    );
    ingress_refuses(&rated, crds::bounds::ERROR_RATE_WITH_DELETIONS);
    let thresholded = with(
        &recreating,
        "spec.thresholds",
        json!({"maxErrorRate": 0.01}),
    );
    ingress_refuses(&thresholded, crds::bounds::ERROR_RATE_WITH_DELETIONS);
    let unknown = with(&recreating, "spec.routeChanges.action", json!("Rename"));
    assert!(
        serde_json::from_value::<crds::IngressBenchmarkSpec>(unknown["spec"].clone()).is_err(),
        "an unknown action is refused by the schema's enum and by the operator's parse"
    );
    // The count is the operator's (CEL cannot divide durations): 24h / 200ms, 1s / 2s.
    let spec: crds::IngressBenchmarkSpec = serde_json::from_value(
        with(
            &with(&changing, "spec.routeChanges.every", json!("2s")),
            "spec.load",
            json!({"duration": "1s", "warmup": "0s"}),
        )["spec"]
            .clone(),
    )
    .unwrap();
    let err = crds::bounds::ingress(&spec).unwrap_err();
    assert!(
        err.contains("routeChanges.every must fit in load.duration"),
        "{err}"
    );
    let many = with(
        &with(&changing, "spec.routeChanges.every", json!("200ms")),
        "spec.load.duration",
        json!("24h"),
    );
    let spec: crds::IngressBenchmarkSpec = serde_json::from_value(many["spec"].clone()).unwrap();
    let err = crds::bounds::ingress(&spec).unwrap_err();
    assert!(err.contains("at most 600 changes per sample"), "{err}");
}

/// A route scale: its count bounded by the schema; what CEL cannot see (the connections, the
/// hostnames' length, route changes beside it, gates on its figures) refused by the operator.
#[test]
fn a_route_scale_is_bounded_and_the_operator_refuses_what_cel_cannot_see() {
    let base = unswept();
    let scaled = with(
        &with(
            &base,
            "spec.controllers",
            json!([{"name": "envoy-100", "route": {
                "gateway": {"name": "bench", "namespace": "gw"},
                "hostname": "eg.example",
                "backend": {"name": "web-a", "port": 80},
                "count": 100}}]),
        ),
        "spec.load.connections",
        json!(100),
    );
    assert_eq!(support::cel_errors(&scaled), Vec::<String>::new());
    let spec: crds::IngressBenchmarkSpec = serde_json::from_value(scaled["spec"].clone()).unwrap();
    assert_eq!(crds::bounds::ingress(&spec), Ok(()));
    let gated = with(
        &scaled,
        "spec.gates",
        json!([{"figure": "routesAnswered", "min": 1}, {"figure": "routesAllAnsweredMs", "max": 5000}]),
    );
    assert_eq!(support::cel_errors(&gated), Vec::<String>::new());
    let spec: crds::IngressBenchmarkSpec = serde_json::from_value(gated["spec"].clone()).unwrap();
    assert_eq!(crds::bounds::ingress(&spec), Ok(()));
    // A share at most 1 (CEL and the operator).
    let over = with(&gated, "spec.gates.0.min", json!(2));
    ingress_refuses(
        &over,
        "a route*Shown or routesAnswered gate's limit is a share: at most 1",
    );
    // The operator: what CEL cannot see.
    let operator_refuses = |obj: &Value, message: &str| {
        assert_eq!(support::cel_errors(obj), Vec::<String>::new(), "{message}");
        let spec: crds::IngressBenchmarkSpec = serde_json::from_value(obj["spec"].clone()).unwrap();
        let err = crds::bounds::ingress(&spec).expect_err(message);
        assert!(
            err.contains(message),
            "operator said {err:?}, want {message:?}"
        );
    };
    // 1 to 1000 routes: the schema's minimum and maximum, and the operator's.
    for bad in [0, 1001] {
        let obj = with(&scaled, "spec.controllers.0.route.count", json!(bad));
        operator_refuses(
            &obj,
            "controllers[envoy-100].route.count must be between 1 and 1000",
        );
    }
    let few = with(&scaled, "spec.load.connections", json!(10));
    operator_refuses(
        &few,
        "controllers[envoy-100].route.count 100 needs load.connections at least 100",
    );
    let long = with(
        &scaled,
        "spec.controllers.0.route.hostname",
        json!(format!(
            "{}.example",
            "a".repeat(60) + "." + &"b".repeat(60) + "." + &"c".repeat(60) + "." + &"d".repeat(60)
        )),
    );
    operator_refuses(&long, "is too long for 100 routes");
    let churned = with(
        &scaled,
        "spec.routeChanges",
        json!({"every": "1s", "swapTo": {"name": "web-b", "port": 80}}),
    );
    operator_refuses(&churned, crds::bounds::ROUTE_SCALE_WITH_CHANGES);
    let headed = with(
        &scaled,
        "spec.controllers.0.hostHeader",
        json!("other.example"),
    );
    operator_refuses(&headed, "hostHeader cannot be set with a route scale");
    let tls = with(
        &scaled,
        "spec.controllers.0.url",
        json!("https://gw.example/"),
    );
    operator_refuses(&tls, "a route scale over https is not supported yet");
    // Multi-byte text where a scheme would be: refused by CEL, and no panic in the operator.
    let odd = with(
        &scaled,
        "spec.controllers.0.url",
        json!("httpé://gw.example/"),
    );
    let spec: crds::IngressBenchmarkSpec = serde_json::from_value(odd["spec"].clone()).unwrap();
    let _ = crds::bounds::ingress(&spec);
    let mut squatting = scaled.clone();
    squatting["spec"]["controllers"]
        .as_array_mut()
        .unwrap()
        .push(json!(
        {"name": "other", "url": "http://other.gw/", "route": {
            "gateway": {"name": "bench", "namespace": "gw"},
            "hostname": "r7.eg.example",
            "backend": {"name": "web-a", "port": 80}}}));
    operator_refuses(&squatting, "another controller's route hostname is one of");
    squatting = with(
        &squatting,
        "spec.controllers.1.route.hostname",
        json!("r100.eg.example"),
    );
    let spec: crds::IngressBenchmarkSpec =
        serde_json::from_value(squatting["spec"].clone()).unwrap();
    assert_eq!(
        crds::bounds::ingress(&spec),
        Ok(()),
        "r100 is not one of 100 routes"
    );
    let unscaled = with(&gated, "spec.controllers.0.route.count", json!(1));
    operator_refuses(&unscaled, crds::bounds::SCALE_GATES_NEED_SCALE);
}
