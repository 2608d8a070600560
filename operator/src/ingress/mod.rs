//! The IngressBenchmark kind, all of it: what it adds to the shared run driver (`kind`: its
//! `run::Plan` and `run::Hooks`), its plan (`plan`: loadgen arguments, worker pods, the step
//! deadline and the run's budget, its claims in the queue), the admin's caps (`limits`),
//! checks (`validate`), the sweep target (`target`) in a run (`sweep`, with its saved spec in
//! `restore`), the HTTPRoutes a run creates for its controllers (`routes`) and changes under load
//! (`churn`), its controllers' CPU and memory during each window (`usage`), the step results
//! (`result`, `verdict`) and their series on /metrics (`metrics`).

pub(crate) mod churn;
pub mod kind;
pub mod limits;
pub mod metrics;
pub mod plan;
pub mod restore;
pub mod result;
pub mod routes;
pub(crate) mod scale;
pub mod sweep;
pub mod target;
pub(crate) mod usage;
pub mod validate;
pub mod verdict;
