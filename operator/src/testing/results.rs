//! Result specs for the operator's tests.

use crds::result::{BenchmarkResultSpec, Measurement};
use crds::Phase;

/// A Succeeded result of run `run_id` that holds `measurements` and nothing else.
pub fn succeeded(run_id: &str, measurements: Vec<Measurement>) -> BenchmarkResultSpec {
    BenchmarkResultSpec {
        benchmark: Default::default(),
        benchmark_uid: String::new(),
        run_id: run_id.into(),
        spec_hash: String::new(),
        benchmark_spec: "{}".into(),
        phase: Phase::Succeeded,
        message: None,
        start_time: None,
        completion_time: None,
        cluster: Default::default(),
        environment: None,
        measurements,
        scaling: None,
        summary: None,
        verdict: None,
    }
}
