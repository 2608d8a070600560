//! netbench-sim: plays the worker pods the real operator creates on kwok fake nodes (where
//! nothing runs), speaking the real worker protocol for many workers in one process, so the
//! real operator and API server see hundreds of workers on one machine
//! (`bench/operator-scale.sh`). The messages, reports and their checks are the `protocol`
//! crate's; the pods' identity is a real pod-bound ServiceAccount token.
//!
//! - [`pod`]: a worker pod read as the kubelet would start it (env, args, labels);
//! - [`args`]: what its `netbench-loadgen` arguments ask for;
//! - [`report`]: realistic reports built with the protocol's constructors;
//! - [`worker`]: one worker's session (and its lies, on purpose);
//! - [`record`]: every sample sent, per step, in one histogram, to compare with status.
#![forbid(unsafe_code)]

pub mod args;
pub mod client;
pub mod pod;
pub mod record;
pub mod report;
pub mod worker;
