//! Test support for the operator's unit and integration tests. Always compiled (a few dozen
//! lines): `cfg(test)` is off when integration tests build this library, and a feature for it
//! would need a self-dev-dependency or a flag on every `cargo test`. The test-support crate
//! cannot hold it: it must not depend on this crate.

mod doubles;
pub mod fake_api;
mod fixtures;
pub mod log_capture;
pub mod reports;
pub mod results;

pub use doubles::{FixedTokens, MemorySink};
pub use fake_api::{context, FakeApi};
pub use fixtures::{owner, register_request, run_spec, unscheduled_pod};
