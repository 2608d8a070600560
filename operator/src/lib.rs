//! netbench-operator: runs IngressBenchmark and EgressBenchmark objects.
//!
//! The crate is in layers; a module imports only from its own layer or the ones below, and no
//! two modules depend on each other ([`LAYERS`], checked by tests/layers.rs). From the bottom:
//!
//! - `base`: leaves every layer uses: errors, the outcome of a step (`outcome`: `Step`,
//!   `Failure` and `Reason`, every reason a run fails for), labels, conditions, the metrics
//!   registry, text and clock helpers.
//! - `policy`: pure decisions, no client: the queue, deadlines, samples, the schedule, what a
//!   spec measures.
//! - `admin`: what the cluster admin allows: the operator's configuration, allow-lists, caps.
//! - `k8s`, `store`: the cluster, kind-agnostic: worker pods (specs, creation, problems, the
//!   watches' copies), status writes, Events, leader election; worker reports, run records and
//!   restore records in the operator's namespace, and the in-memory registry of the runs under
//!   way.
//! - `context`: the handles every reconcile shares, and the list of kinds.
//! - `run`: the run model: `Run` (one reconcile's view of a run, fields private) and what a
//!   kind adds to the driver (`Plan`, pure; `Hooks`, its own steps).
//! - `results`: a finished run's BenchmarkResult; reads the run, returns what it recorded.
//! - `driver`, `ingress`, `egress`: the shared phase machine (`driver/mod.rs` is the reconcile,
//!   step by step), and everything each kind adds to it (plan, budget, deadlines, queue
//!   claims, caps, checks, results, metrics; the sweep target, offload).
//! - `api`, `controller`, `resume`: the worker API, the kube-runtime controllers (with the
//!   registration of each kind and the routing of wakes by kind), what a new leader does first.
//!   `main.rs` wires them.
//! - `testing`: the fake API server and test doubles of every operator test.
//!
//! Where things go (docs/architecture.md has each step): a new kind is a folder beside
//! `ingress/` and `egress/` implementing `run::Plan` and `run::Hooks`, registered by one line of
//! main.rs's list of kinds (`controller::kinds`). A new phase is a variant of `crds::Phase`, a
//! file in `driver/phases/` and arms of `driver::machine::{handle, phase_name}`. A new failure
//! reason is a variant of `base::outcome::Reason`, its string and its entry in `Reason::ALL`.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod admin;
pub mod api;
pub mod base;
pub mod context;
pub mod controller;
pub mod driver;
pub mod egress;
pub mod ingress;
pub mod k8s;
pub mod policy;
pub mod results;
pub mod resume;
pub mod run;
pub mod store;
pub mod testing;

/// The layers, lowest first: (name, top-level modules). A module imports only from modules of
/// its own layer or of a lower one, and no import cycle joins two modules (tests/layers.rs).
pub const LAYERS: &[(&str, &[&str])] = &[
    ("leaves", &["base"]),
    ("decisions", &["policy"]),
    ("admin", &["admin"]),
    ("cluster", &["k8s", "store"]),
    ("context", &["context"]),
    ("run model", &["run"]),
    ("results", &["results"]),
    ("run flow", &["driver", "ingress", "egress"]),
    ("serving", &["api", "controller", "resume"]),
    ("tests", &["testing"]),
];
