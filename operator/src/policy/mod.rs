//! Pure decisions, no Kubernetes client: the queue, deadlines, samples, the schedule, what a
//! spec measures, how soon a failed reconcile or result write is retried, SLO gates and their
//! early abort. Each is unit-tested from literals.

pub mod backoff;
pub mod deadline;
pub mod gates;
pub mod live;
pub mod queue;
pub mod result_write;
pub mod samples;
pub mod schedule;
pub mod spec;
