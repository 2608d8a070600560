//! Property tests: any object of the two kinds that deserializes (what the API server can hold,
//! including objects stored before today's schema bounds) goes through the operator's pure
//! stages (bounds, admin checks, planning, pod specs, queue claims, deadlines) without a panic,
//! and whatever the bounds accept is planned within those bounds.

use std::time::Duration;

use proptest::prelude::*;
use serde_json::{json, Value};

use crds::{EgressBenchmark, IngressBenchmark};
use operator::admin::config::{Config, NamespaceList};

/// Duration strings as the schema's pattern allows them, including absurd magnitudes.
fn duration() -> impl Strategy<Value = String> {
    let term = (
        "[0-9]{1,25}",
        proptest::option::of("[0-9]{1,20}"),
        prop_oneof![
            Just("ns"),
            Just("us"),
            Just("µs"),
            Just("ms"),
            Just("s"),
            Just("m"),
            Just("h")
        ],
    )
        .prop_map(|(int, frac, unit)| match frac {
            Some(f) => format!("{int}.{f}{unit}"),
            None => format!("{int}{unit}"),
        });
    prop::collection::vec(term, 1..4).prop_map(|t| t.concat())
}

fn quantity() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[0-9]{1,6}(m|Ki|Mi|Gi)?".prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
    ]
}

fn url() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("http://nginx.default.svc/".to_string()),
        Just("https://[::1]:0/x?y".to_string()),
        Just("http://".to_string()),
        "(http|https|ftp)://[a-z0-9.:\\[\\]-]{0,20}/[ -~]{0,20}",
        ".{0,40}",
    ]
}

prop_compose! {
    fn ingress_spec()(
        url in url(),
        connections in any::<u32>(),
        threads in any::<u32>(),
        durations in (duration(), duration(), duration(), duration(), duration()),
        rate in proptest::option::of(any::<u64>()),
        replicas in proptest::option::of(0u32..200),
        node_names in prop::collection::vec("[a-z0-9-]{0,10}", 0..4),
        cpu in proptest::option::of(quantity()),
        memory in proptest::option::of(quantity()),
        host_network in any::<bool>(),
        steps in proptest::option::of(prop::collection::vec((proptest::option::of(quantity()), proptest::option::of(any::<i32>())), 0..20)),
        thresholds in proptest::option::of((any::<f64>(), any::<f64>())),
    ) -> Value {
        let (duration, warmup, timeout, settle, max_p99) = durations;
        let mut spec = json!({
            "target": {"url": url},
            "load": {"connections": connections, "threads": threads, "duration": duration,
                     "warmup": warmup, "timeout": timeout, "rate": rate},
            "workers": {"replicas": replicas, "nodeNames": node_names, "cpu": cpu,
                        "memory": memory, "hostNetwork": host_network},
        });
        if let Some(steps) = steps {
            let steps: Vec<Value> = steps
                .into_iter()
                .map(|(cpu, replicas)| json!({"cpu": cpu, "replicas": replicas}))
                .collect();
            spec["sweep"] = json!({"targetRef": {"name": "t", "namespace": "ing"}, "steps": steps, "settle": settle});
        }
        if let Some((min_rps, rate)) = thresholds {
            spec["thresholds"] = json!({"minRps": min_rps, "maxP99": max_p99, "maxErrorRate": rate});
        }
        strip_nulls(&mut spec);
        spec
    }
}

prop_compose! {
    fn egress_case()(
        name in "[a-z0-9-]{1,12}",
        streams in any::<u32>(),
        duration in duration(),
        message_size in any::<u32>(),
        port in any::<u16>(),
        address in proptest::option::of("[ -~]{0,30}"),
        client_node in proptest::option::of("[a-z0-9-]{0,10}"),
        host_network in any::<bool>(),
        profile in proptest::option::of(Just("off")),
        protocol in proptest::option::of(prop_oneof![Just("tcp-stream"), Just("tcp-rr"), Just("tcp-crr"), Just("udp-rr"), Just("udp-stream")]),
        (request_size, burst, rate) in (proptest::option::of(any::<u32>()), proptest::option::of(any::<u32>()), proptest::option::of(any::<u32>())),
        (timeout, bitrate, pps, probe) in (proptest::option::of(duration()), proptest::option::of("[0-9kMG.]{0,14}"), proptest::option::of(any::<u32>()), proptest::option::of(any::<u32>())),
        sweep in proptest::option::of((proptest::collection::vec(any::<u32>(), 0..20), proptest::collection::vec(any::<u32>(), 0..20))),
        service in any::<bool>(),
    ) -> Value {
        let mut case = json!({
            "name": name, "streams": streams, "duration": duration, "messageSize": message_size,
            "client": {"nodeName": client_node, "hostNetwork": host_network},
            "server": {"address": address, "port": port, "service": service},
            "offloadProfile": profile,
            "protocol": protocol, "requestSize": request_size, "responseSize": request_size,
            "burst": burst, "rate": rate, "timeout": timeout, "bitrate": bitrate,
            "packetsPerSecond": pps, "latencyProbe": probe,
            "sweep": sweep.map(|(sizes, streams)| json!({"messageSizes": sizes, "streams": streams})),
        });
        strip_nulls(&mut case);
        case
    }
}

fn strip_nulls(v: &mut Value) {
    if let Value::Object(m) = v {
        m.retain(|_, x| !x.is_null());
        m.values_mut().for_each(strip_nulls);
    }
}

fn configs() -> [Config; 2] {
    let mut open = Config::for_tests();
    open.host_network_namespaces = NamespaceList::parse("*");
    open.offload_namespaces = NamespaceList::parse("*");
    open.sweep_targets = operator::admin::allow::SweepPairs::parse("*=*");
    open.offload_interfaces = operator::admin::allow::GlobList::parse("*");
    [Config::for_tests(), open]
}

fn object(kind: &str, spec: Value) -> Value {
    json!({"apiVersion": "netbench.io/v1alpha1", "kind": kind,
           "metadata": {"name": "p", "namespace": "team", "uid": "u"}, "spec": spec})
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn ingress_specs_never_panic_the_operator(spec in ingress_spec()) {
        let Ok(ib) = serde_json::from_value::<IngressBenchmark>(object("IngressBenchmark", spec)) else {
            return Ok(());
        };
        let bounded = crds::bounds::ingress(&ib.spec).is_ok();
        for config in configs() {
            let _ = operator::ingress::validate::permitted(&ib.spec, "team", &config);
        }
        let _ = operator::ingress::plan::contender(&ib);
        let deadline = operator::ingress::plan::step_deadline(&ib.spec, Duration::from_secs(120));
        if bounded {
            // What the bounds accept is planned: within them, and fast.
            prop_assert!(deadline <= Duration::from_secs(120 + 24 * 3600 + 3600 + 300 + 30));
            let steps = operator::ingress::plan::step_count(&ib.spec);
            prop_assert!(steps <= 16);
            let plans = operator::ingress::plan::workers(&ib, "run", operator::policy::samples::Slot::first(0), false);
            prop_assert!(plans.len() <= 64);
            for plan in &plans {
                let _ = operator::k8s::workers::pod(plan, &Config::for_tests());
            }
        }
        if let Some(sweep) = &ib.spec.sweep {
            for step in &sweep.steps {
                if let Some(cpu) = &step.cpu {
                    let _ = operator::ingress::result::millicores(&cpu.0);
                }
            }
        }
    }

    #[test]
    fn egress_specs_never_panic_the_operator(
        cases in prop::collection::vec(egress_case(), 0..20),
        baseline in proptest::option::of("[a-z0-9-]{1,12}"),
        case_index in any::<u32>(),
    ) {
        let mut spec = json!({"cases": cases, "baselineCase": baseline,
            "offload": {"profiles": [{"name": "off", "settings": [{"interface": "vx0", "features": {"tx-checksumming": false}}]}]}});
        strip_nulls(&mut spec);
        let Ok(eb) = serde_json::from_value::<EgressBenchmark>(object("EgressBenchmark", spec)) else {
            return Ok(());
        };
        let bounded = crds::bounds::egress(&eb.spec).is_ok();
        for config in configs() {
            let _ = operator::egress::validate::permitted(&eb.spec, "team", &config);
        }
        let _ = operator::egress::plan::contender(&eb);
        let _ = operator::egress::plan::baseline(&eb);
        // A case index read from status may be anything.
        let _ = operator::egress::plan::workers(&eb, "run", operator::policy::samples::Slot::first(case_index));
        let _ = operator::egress::plan::worker_roles(&eb, "run", operator::policy::samples::Slot::first(case_index));
        if bounded {
            // Every run of every case (sweeps expanded): at most what a result holds.
            let runs = operator::egress::plan::count(&eb);
            prop_assert!(runs as usize <= crds::cases::MAX_MEASURED);
            for index in 0..runs {
                let plans = operator::egress::plan::workers(&eb, "run", operator::policy::samples::Slot::first(index));
                prop_assert!(!plans.is_empty(), "run {index} of {runs} has no client");
            }
            for (i, case) in eb.spec.cases.iter().enumerate() {
                let deadline = operator::egress::plan::case_deadline(case, Duration::from_secs(120));
                // Start, at most 24 h of measurement, up to 10 s for answers in flight, reporting.
                prop_assert!(deadline <= Duration::from_secs(120 + 24 * 3600 + 10 + 30));
                let _ = operator::egress::plan::client_args(case);
                let _ = operator::egress::plan::server_args(case, Some("nb-x"), 0);
                let index = u32::try_from(i).unwrap();
                for plan in operator::egress::plan::workers(&eb, "run", operator::policy::samples::Slot::first(index)) {
                    let _ = operator::k8s::workers::pod(&plan, &Config::for_tests());
                }
            }
        }
    }
}
