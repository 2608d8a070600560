//! Leaves: what every layer above uses and that uses nothing of the operator.

pub mod clock;
pub mod conditions;
pub mod error;
pub mod events;
pub mod labels;
pub mod memo;
pub mod metrics;
pub mod outcome;
pub mod own_task;
pub mod own_thread;
pub mod soon;
pub mod text;
