//! The EgressBenchmark kind: cases one after another (a swept case once per value), each a
//! server and a client pinned to the case's nodes and running the case's protocol, with the
//! case's offload profile applied by privileged Jobs before and restored after (also on
//! failure and deletion). `kind` is what it adds to the shared run driver (crate::driver);
//! `offload` the Jobs and their records; `service` the Service path; `plan`, `validate`,
//! `readings` (a report per protocol), `result`.

pub mod kind;
pub mod metrics;
pub mod offload;
pub mod plan;
pub mod readings;
pub mod result;
pub mod service;
pub mod validate;
