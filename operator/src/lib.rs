//! netbench-operator: runs IngressBenchmark and EgressBenchmark objects.
//!
//! Concerns, one module each: `config` (what the cluster admin allows), `context` (shared handles),
//! `driver` (the run's phase machine both kinds share), `ingress` and `egress` (what each kind adds
//! to it: plan, validate, result, sweeps, offload), `workers` (worker pod specs), `runs` (in-memory
//! barrier state), `reports` (durable worker reports in the operator's namespace), `resume` (what a
//! new leader does first), `records` (restore records in the operator's namespace: what a restore
//! needs, never taken from a status), `allow` (the admin's allow-lists: offload
//! interfaces/features/nodes, sweep pairs), `api` (the worker HTTP API, metrics and health),
//! `metrics`, `leader` (Lease-based leader election), `conditions`, `creation` (starting worker
//! pods: refusals fail the run, transient errors retry until the start timeout), `deadline` (every
//! run's overall deadline from its spec), `caps` (the admin's caps on sizes, durations and
//! targets).
//!
//! The worker API messages, the reports workers send (validated in full on arrival and again
//! before a merge, histograms merged exactly) and the offload device state come from the
//! `protocol` crate, shared with netbench-loadgen; the operator links no load engine.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod allow;
pub mod api;
pub mod caps;
pub mod children;
pub mod conditions;
pub mod config;
pub mod context;
pub mod controller;
pub mod creation;
pub mod deadline;
pub mod driver;
pub mod egress;
pub mod error;
pub mod ingress;
pub mod labels;
pub mod leader;
pub mod lifecycle;
#[cfg(test)]
mod log_capture;
pub mod metrics;
pub mod queue;
pub mod records;
pub mod reports;
pub mod results;
pub mod resume;
pub mod runs;
pub mod target;
pub mod testing;
pub mod workers;
