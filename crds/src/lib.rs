//! netbench API types (`netbench.io/v1alpha1`): IngressBenchmark, EgressBenchmark and
//! BenchmarkResult.
//!
//! The CRD manifests in crds/manifests/ are generated from these types by the `crdgen` binary;
//! a test fails when they drift.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod bounds;
pub mod cases;
pub mod changepoint;
pub mod common;
pub mod duration;
pub mod egress;
pub mod environment;
pub mod gates;
pub mod history;
pub mod ingress;
pub mod manifests;
pub mod result;
pub mod stats;
pub mod topology;

pub use common::{
    BenchmarkRef, CleanupPolicy, Duration, ErrorCounts, LatencyMillis, Phase, QueueStatus,
    RunStatus,
};
pub use egress::{EgressBenchmark, EgressBenchmarkSpec, EgressBenchmarkStatus};
pub use ingress::{IngressBenchmark, IngressBenchmarkSpec, IngressBenchmarkStatus};
pub use result::{BenchmarkResult, BenchmarkResultSpec};
