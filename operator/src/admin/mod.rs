//! What the cluster admin allows: the operator's configuration (flags, Helm values), the
//! allow-lists for privileged actions, and the caps on what one benchmark may ask for.

pub mod allow;
pub mod caps;
pub mod config;
