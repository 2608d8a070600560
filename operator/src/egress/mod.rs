//! The EgressBenchmark kind: cases one after another, each a server and a client pinned to the
//! case's nodes, with the case's offload profile applied by privileged Jobs before and restored
//! after (also on failure and deletion). `kind` is what it adds to the shared run driver
//! (crate::driver); `offload` the Jobs and their records; `plan`, `validate`, `result`.

pub mod kind;
pub mod offload;
pub mod plan;
pub mod result;
pub mod validate;
