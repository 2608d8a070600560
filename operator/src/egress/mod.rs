//! The EgressBenchmark kind: cases one after another (a swept case once per value), each a
//! server and a client pinned to the case's nodes and running the case's protocol, with the
//! case's offload profile applied by privileged Jobs before and restored after (also on
//! failure and deletion). `kind` is what it adds to the shared run driver (its `run::Plan`
//! and `run::Hooks`); `offload` the Jobs and their records; `service` the Service path;
//! `plan` (worker pods and arguments, case deadlines and the run's budget, its claims in the
//! queue), `limits` (the admin's caps), `validate`, `protocols` (all a protocol family adds: its
//! client's flags, its report read, its figures), `readings` (what their readers share),
//! `result`, `metrics` (its series on /metrics).

pub mod kind;
pub mod limits;
pub mod metrics;
pub mod nodes;
pub mod offload;
pub mod overhead;
pub mod pair;
pub mod plan;
pub mod protocols;
pub mod readings;
pub mod result;
pub mod service;
pub mod topology;
pub mod validate;
