//! SLO gates' bounds, from the API server's side (the CEL rules, with kube's local evaluator)
//! and the operator's (crds::bounds): absurd limits are refused by both, with the same
//! message; sensible ones pass both.
mod support;

use serde_json::{json, Value};

fn ingress(gates: Value) -> Value {
    let mut obj = support::benchmark(
        "IngressBenchmark",
        r#"
  target: {url: "http://nginx.default.svc:8080/"}
  load: {connections: 10, threads: 2, duration: 60s}
"#,
    );
    obj["spec"]["gates"] = gates;
    obj
}

fn egress(gates: Value) -> Value {
    let mut obj = support::benchmark(
        "EgressBenchmark",
        r#"
  cases:
    - {name: a, client: {nodeName: n1}, server: {nodeName: n2}}
"#,
    );
    obj["spec"]["gates"] = gates;
    obj
}

fn operator_says(obj: &Value) -> Result<(), String> {
    match obj["kind"].as_str() {
        Some("IngressBenchmark") => {
            let spec: crds::IngressBenchmarkSpec =
                serde_json::from_value(obj["spec"].clone()).unwrap();
            crds::bounds::ingress(&spec)
        }
        _ => {
            let spec: crds::EgressBenchmarkSpec =
                serde_json::from_value(obj["spec"].clone()).unwrap();
            crds::bounds::egress(&spec)
        }
    }
}

fn both_refuse(obj: &Value, message: &str) {
    let errors = support::cel_errors(obj);
    assert!(
        errors.iter().any(|e| e == message),
        "CEL: expected {message:?}, got {errors:?} for {obj}"
    );
    let err = operator_says(obj).unwrap_err();
    assert!(
        err.contains(message),
        "operator said {err:?}, want {message:?}"
    );
}

fn both_accept(obj: &Value) {
    assert_eq!(support::cel_errors(obj), Vec::<String>::new(), "{obj}");
    assert_eq!(operator_says(obj), Ok(()), "{obj}");
}

#[test]
fn sensible_gates_pass() {
    both_accept(&ingress(json!([
        {"figure": "p99Ms", "max": 250, "abortOnFail": true, "abortAfter": "10s"},
        {"figure": "p999Ms", "max": 0.5},
        {"figure": "rps", "min": 1000, "scope": "Run", "name": "throughput floor"},
        {"figure": "errorRate", "max": 0.01},
        {"figure": "errorRate", "max": 1}
    ])));
    both_accept(&egress(json!([
        {"figure": "receiverBitsPerSecond", "min": 9.0e9, "abortOnFail": true},
        {"figure": "lossPercent", "max": 100},
        {"figure": "jitterMs", "max": 2},
        {"figure": "retransmits", "max": 0},
        {"figure": "transactionsPerSecond", "min": 5000}
    ])));
}

#[test]
fn absurd_gate_values_are_refused_by_the_schema_and_the_operator() {
    let cases: [(Value, &str); 12] = [
        (
            json!({"figure": "p99Ms", "max": -1}),
            "a gate's limit must not be negative",
        ),
        (
            json!({"figure": "rps", "min": -0.5}),
            "a gate's limit must not be negative",
        ),
        (
            json!({"figure": "errorRate", "max": 1.5}),
            "an errorRate gate's limit is a ratio: at most 1",
        ),
        (
            json!({"figure": "errorRate", "max": 5}),
            "an errorRate gate's limit is a ratio: at most 1",
        ),
        (
            json!({"figure": "p99Ms", "max": 3_600_001}),
            "a latency gate's limit must be at most 3600000 (1h in ms)",
        ),
        (
            json!({"figure": "p50Ms", "max": 1e300}),
            "a latency gate's limit must be at most 3600000 (1h in ms)",
        ),
        (
            json!({"figure": "rps", "min": 2e9}),
            "a gate's limit on a rate must be at most 1e9",
        ),
        (
            json!({"figure": "p99Ms"}),
            "a gate sets exactly one of max and min",
        ),
        (
            json!({"figure": "p99Ms", "max": 1, "min": 0}),
            "a gate sets exactly one of max and min",
        ),
        (
            json!({"figure": "p99Ms", "max": 1, "abortOnFail": true, "abortAfter": "500ms"}),
            "a gate's abortAfter must be between 1s and 1h",
        ),
        (
            json!({"figure": "p99Ms", "max": 1, "abortAfter": "2h"}),
            "a gate's abortAfter must be between 1s and 1h",
        ),
        (
            json!({"figure": "p99Ms", "max": 1, "abortOnFail": true, "scope": "Run"}),
            "abortOnFail needs scope Each",
        ),
    ];
    for (gate, message) in cases {
        both_refuse(&ingress(json!([gate])), message);
    }
    let egress_cases: [(Value, &str); 4] = [
        (
            json!({"figure": "lossPercent", "max": 101}),
            "a percent gate's limit is a percentage: at most 100",
        ),
        (
            json!({"figure": "receiverBitsPerSecond", "min": 1e14}),
            "a bits/s gate's limit must be at most 1e13 (10 Tbit/s)",
        ),
        (
            json!({"figure": "retransmits", "max": 1e13}),
            "a count gate's limit must be at most 1e12",
        ),
        (
            json!({"figure": "cpuSecondsPerGb", "max": 1e7}),
            "a CPU per GB gate's limit must be at most 1e6",
        ),
    ];
    for (gate, message) in egress_cases {
        both_refuse(&egress(json!([gate])), message);
    }
}

#[test]
fn an_ingress_gate_names_an_ingress_figure() {
    both_refuse(
        &ingress(json!([{"figure": "receiverBitsPerSecond", "min": 1}])),
        crds::gates::INGRESS_RULE_MESSAGE,
    );
    both_accept(&egress(json!([{"figure": "p99Ms", "max": 1}])));
}

#[test]
fn unknown_figures_and_too_many_gates_are_refused_by_the_schema() {
    // The figure is an enum in the schema; the operator cannot even read another name.
    let schema = support::schema_of("IngressBenchmark");
    let gates = &schema["properties"]["spec"]["properties"]["gates"];
    assert_eq!(gates["maxItems"], json!(16));
    let figures = gates["items"]["properties"]["figure"]["enum"]
        .as_array()
        .unwrap();
    assert_eq!(figures.len(), crds::gates::GateFigure::ALL.len());
    assert!(!figures.contains(&json!("p98Ms")));
    let limit = &gates["items"]["properties"]["max"];
    assert_eq!(
        (limit["minimum"].as_f64(), limit["maximum"].as_f64()),
        (Some(0.0), Some(1e13))
    );
    let bad = ingress(json!([{"figure": "p98Ms", "max": 1}]));
    assert!(serde_json::from_value::<crds::IngressBenchmarkSpec>(bad["spec"].clone()).is_err());
    // Seventeen gates: the schema's maxItems, and the operator for objects stored before it.
    let many: Vec<Value> = (0..17)
        .map(|_| json!({"figure": "rps", "min": 1}))
        .collect();
    let obj = ingress(Value::Array(many));
    let err = operator_says(&obj).unwrap_err();
    assert!(err.contains("gates must list at most 16"), "{err}");
}
