//! Worker reports for the operator's and the e2e tests, built by the engine's own constructors.

use k8s_openapi::api::core::v1::ConfigMap;
use protocol::report::{Counters, HttpReport, HttpRunConfig, StatusCounts};
use protocol::worker::FinalReport;

use crate::store::reports::{report_object, Owner};

/// An HTTP report (as JSON, as a worker posts it) of one second from `start_unix_ms`: one
/// request of each latency in `latencies_us`, all answered 200.
pub fn http_report(latencies_us: &[u64], start_unix_ms: u64) -> serde_json::Value {
    let mut h = protocol::report::histogram::new_latency_histogram();
    for &us in latencies_us {
        h.record(us).unwrap();
    }
    let requests = latencies_us.len() as u64;
    let config = HttpRunConfig {
        url: "http://x/".into(),
        method: "GET".into(),
        connections: 1,
        threads: 1,
        duration_s: 1.0,
        warmup_s: 0.0,
        rate: None,
        keepalive: true,
        http2: false,
        timeout_s: 2.0,
    };
    let counters = Counters {
        requests,
        status: StatusCounts {
            s2xx: requests,
            ..Default::default()
        },
        ..Default::default()
    };
    let end = start_unix_ms + 1000;
    let r = HttpReport::from_run(config, start_unix_ms, end, 1.0, counters, &h, vec![]).unwrap();
    serde_json::from_str(&r.to_json()).unwrap()
}

/// The object the operator's report store writes for `report` of a worker of `run`, in the
/// operator's namespace `netbench-system`.
pub fn stored_report(owner: &Owner, run: &str, report: &FinalReport) -> ConfigMap {
    report_object("netbench-system", owner, run, report).unwrap()
}
