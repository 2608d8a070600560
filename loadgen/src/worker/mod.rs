//! Worker mode: every engine can run standalone (JSON on stdout) or as a worker of the
//! operator: register, wait at the barrier, push progress every second, push the final report.
//! The messages and the report checks are the `protocol` crate's ([`protocol::worker`]).
pub mod client;
pub mod http;
pub mod tcp;

pub use client::{Credential, WorkerClient, WorkerEnv, WorkerError};
