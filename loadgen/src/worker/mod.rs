//! Worker mode: every engine can run standalone (JSON on stdout) or as a worker of the
//! operator: register, wait at the barrier, push progress every second, push the final report.
pub mod client;
pub mod http;
pub mod protocol;
pub mod tcp;
pub mod validate;

pub use client::{now_unix_ms, Credential, WorkerClient, WorkerEnv, WorkerError};
pub use validate::{validate_final, CheckedReport, ReportRefusal};
