//! What the cluster admin allows: the operator's configuration (flags, Helm values), the
//! allow-lists for privileged actions, the caps on what one benchmark may ask for, and the
//! namespaces the operator watches.

pub mod allow;
pub mod caps;
pub mod config;
pub mod scope;
pub mod tolerations;
