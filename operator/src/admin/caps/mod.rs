//! Admin caps: what one benchmark may ask for, set by the cluster admin (operator flags, Helm
//! values `caps.*` and `targets.*`) and checked before anything is created for a run.
//!
//! `limits`: workers, connections and run duration, the rules every kind's own sum uses
//! (ingress::limits, egress::limits; pure). `destinations`: the allow and deny
//! lists of target hosts and addresses (pure). `lookup`: resolving a target host and finding
//! the API server's addresses (API calls and DNS, each with a deadline). The limit on
//! concurrent runs per namespace is a queue rule (`crate::policy::queue::wait`).

pub mod destinations;
pub mod limits;
pub mod lookup;
