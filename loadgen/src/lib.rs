//! netbench-loadgen library: load engines and report formats. No Kubernetes dependency.
//!
//! - [`http`]: the HTTP load engine (closed loop like wrk, open loop like wrk2).
//! - [`report`]: the versioned JSON report envelope, the HTTP report and its exact merge.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod http;
pub mod report;
pub mod worker;
