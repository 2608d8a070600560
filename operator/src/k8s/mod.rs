//! Cluster helpers that know no benchmark kind: worker pods (their specs, creation, problems),
//! status writes, Events, leader election, pods' CPU and memory from the kubelets.

pub mod creation;
pub mod events;
pub mod leader;
pub mod pods;
pub mod status;
pub mod usage;
pub mod workers;
