//! Shared by the property tests of the reports: corrupting a report's JSON one value at a
//! time, the values put in, and a report as a worker sends it to the operator.
#![allow(dead_code)] // each test binary uses a different subset

pub mod hdr;

use proptest::prelude::*;
use protocol::tcp::CpuUsage;
use protocol::worker::FinalReport;

/// One end's CPU use as a run reports it: `user` and `system` percent, and their sum.
pub fn cpu_usage(user: f64, system: f64) -> CpuUsage {
    CpuUsage {
        user_percent: user,
        system_percent: system,
        total_percent: user + system,
        ..CpuUsage::default()
    }
}

/// How many values `v` holds, itself included.
pub fn nodes(v: &serde_json::Value) -> usize {
    1 + match v {
        serde_json::Value::Object(m) => m.values().map(nodes).sum(),
        serde_json::Value::Array(a) => a.iter().map(nodes).sum(),
        _ => 0,
    }
}

/// Replaces the `n`th value of `v` (depth first, `v` itself is 0) by `with`.
pub fn replace_nth(v: &mut serde_json::Value, n: &mut usize, with: &mut Option<serde_json::Value>) {
    if *n == 0 {
        if let Some(w) = with.take() {
            *v = w;
        }
        return;
    }
    *n -= 1;
    let children: Vec<&mut serde_json::Value> = match v {
        serde_json::Value::Object(m) => m.values_mut().collect(),
        serde_json::Value::Array(a) => a.iter_mut().collect(),
        _ => return,
    };
    for c in children {
        if with.is_none() {
            return;
        }
        replace_nth(c, n, with);
    }
}

/// Each edit (pick, value) in turn replaces the value numbered `pick` (modulo how many `json`
/// holds, see [`replace_nth`]) by `value`.
pub fn corrupt(json: &mut serde_json::Value, edits: Vec<(usize, serde_json::Value)>) {
    for (pick, with) in edits {
        let mut n = pick % nodes(json);
        replace_nth(json, &mut n, &mut Some(with));
    }
}

/// How many values [`json_value`] draws from, each as likely: weigh it so when adding others.
pub const JSON_VALUE_CHOICES: u32 = 8;

/// A JSON value of any type to put in a report: null, booleans, numbers, text, empty array
/// and object.
pub fn json_value() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(Into::into),
        any::<i64>().prop_map(Into::into),
        any::<u64>().prop_map(Into::into),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Into::into),
        "\\PC{0,16}".prop_map(Into::into),
        Just(serde_json::json!([])),
        Just(serde_json::json!({})),
    ]
}

/// `report` as worker `worker` sends it at the end of step 0.
pub fn worker_report(worker: &str, report: serde_json::Value) -> FinalReport {
    FinalReport::new(worker, None, 0, 1, report)
}
