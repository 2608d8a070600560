//! Test fixtures shared by the workspace's tests: one Debian nginx launcher ([`nginx`]), ports
//! without the bind-probe race ([`ports`]), polling with a deadline ([`poll`]) and, with the
//! `kube` feature, create/wait/assert helpers for tests against the real cluster ([`k8s`]).
//!
//! It depends on neither `loadgen` nor `operator`: a crate's tests that pulled in a crate
//! depending on that crate would build it twice, and its types would not match. Fixtures that
//! need their types (the operator's in-memory report sink) live with those types.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

#[cfg(feature = "kube")]
pub mod k8s;
pub mod nginx;
pub mod poll;
pub mod ports;
