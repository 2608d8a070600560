//! netbench-loadgen library: load engines and report formats. No Kubernetes dependency.
#![deny(rust_2018_idioms)]
