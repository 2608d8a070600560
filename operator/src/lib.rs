//! netbench-operator: runs IngressBenchmark and EgressBenchmark objects.
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
