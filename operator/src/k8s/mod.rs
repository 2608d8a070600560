//! Cluster helpers that know no benchmark kind: worker pods (their specs, creation, problems),
//! status writes, Events, leader election, pods' CPU and memory from the kubelets, which
//! version of each benchmark was last seen, nodes' health.

pub mod creation;
pub mod events;
pub mod leader;
pub mod pods;
pub mod requests;
pub mod status;
pub mod usage;
pub mod versions;
pub mod watched_pods;
pub mod workers;
