//! Cluster helpers that know no benchmark kind: worker pods (their specs, creation, problems),
//! status writes, Events, leader election.

pub mod creation;
pub mod events;
pub mod leader;
pub mod pods;
pub mod status;
pub mod workers;
