//! netbench: the user command line for netbench benchmarks (reports, compare, watch, JUnit).
//! Everything it reads from a cluster or a file is untrusted input: bounded, never unwrapped.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod app;
pub mod compare;
pub mod egress;
pub mod figures;
pub mod history;
pub mod junit;
pub mod kube_client;
pub mod latency;
pub mod report;
pub mod shown;
pub mod source;
pub mod text;
pub mod watch;
