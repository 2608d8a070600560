//! Admin caps: what one benchmark may ask for, set by the cluster admin (operator flags, Helm
//! values `caps.*` and `targets.*`) and checked before anything is created for a run.
//!
//! `limits`: workers, connections and run duration (pure). `destinations`: the allow and deny
//! lists of target hosts and addresses (pure). `lookup`: resolving a target host and finding
//! the API server's addresses (API calls and DNS, each with a deadline). The limit on
//! concurrent runs per namespace is a queue rule (`crate::policy::queue::wait`).

pub mod destinations;
pub mod limits;
pub mod lookup;

/// Why a benchmark cannot run: `reason` is the Invalid condition's reason.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    /// The spec is fine, but the cluster admin does not allow it.
    pub fn not_permitted(message: String) -> Refusal {
        Refusal {
            reason: "NotPermitted",
            message,
        }
    }
    /// The spec cannot run as written.
    pub fn invalid(message: String) -> Refusal {
        Refusal {
            reason: "InvalidSpec",
            message,
        }
    }
}
