//! The IngressBenchmark kind: what it adds to the shared run driver (`kind`, see
//! crate::driver), its plan (`plan`), checks (`validate`), the sweep target in a run (`sweep`,
//! with its saved spec in `restore`), and the step results (`result`, `verdict`).

pub mod kind;
pub mod metrics;
pub mod plan;
pub mod restore;
pub mod result;
pub mod sweep;
pub mod target;
pub mod validate;
pub mod verdict;
