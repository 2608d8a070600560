//! netbench-operator: runs IngressBenchmark and EgressBenchmark objects.
//!
//! Concerns, one module each: `config` (what the cluster admin allows), `context` (shared
//! handles), `ingress` (the IngressBenchmark controller: validate -> plan -> apply -> observe
//! -> status), `workers` (worker pod specs), `runs` (in-memory barrier state), `reports`
//! (durable worker reports in the operator's namespace), `resume` (what a new leader does
//! first), `api` (the worker HTTP API, metrics and health), `metrics`,
//! `leader` (Lease-based leader election), `conditions`.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod api;
pub mod children;
pub mod conditions;
pub mod config;
pub mod context;
pub mod controller;
pub mod egress;
pub mod error;
pub mod ingress;
pub mod labels;
pub mod leader;
pub mod lifecycle;
pub mod metrics;
pub mod queue;
pub mod reports;
pub mod resume;
pub mod runs;
pub mod target;
pub mod workers;
