//! Test fixtures shared by the workspace's tests: one Debian nginx launcher ([`nginx`]), ports
//! without the bind-probe race ([`ports`]), polling with a deadline ([`poll`]) and, with the
//! `kube` feature, create/wait/assert helpers for tests against the real cluster ([`k8s`]),
//! and with the `netns` feature, delay and loss on chosen packets of a network namespace
//! ([`impair`]).
//!
//! It depends on neither `loadgen` nor `operator`: a crate's tests that pulled in a crate
//! depending on that crate would build it twice, and its types would not match. Fixtures that
//! need their types (the operator's in-memory report sink) live with those types.
#![deny(rust_2018_idioms)]
// Only `impair` speaks to the kernel (setns, SCHED_FIFO, ppoll), each call with its SAFETY note.
#![deny(unsafe_code)]

#[cfg(feature = "netns")]
#[allow(unsafe_code)]
pub mod impair;
#[cfg(feature = "kube")]
pub mod k8s;
pub mod nginx;
pub mod poll;
pub mod ports;
