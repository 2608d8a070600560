//! What a step of a run comes to. Every hook a kind adds to the driver, and every check the
//! driver makes, answers with one [`Step`]: done, wait (and come back), or fail the run with a
//! [`Failure`]. A failure names its [`Reason`], one of a closed list: the reason of the run's
//! Ready condition (and of Invalid, for a refused spec) and of its Failed Event.
//!
//! A new failure reason is a new variant of [`Reason`] (and its string in `as_str`); the
//! strings are part of the API (users, alerts, the e2e tests and the docs match them) and
//! never change.

use std::fmt;
use std::time::Duration;

/// How often a measurement, a rollout or a Job under way is checked (worker reports also wake
/// the controller at once).
pub const POLL: Duration = Duration::from_secs(2);

/// Why a run ended Failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    // The spec and the status.
    /// The spec cannot run as written.
    InvalidSpec,
    /// The spec is fine, but the cluster admin does not allow it.
    NotPermitted,
    /// spec.schedule is not a schedule the operator accepts.
    InvalidSchedule,
    /// The status names a measurement or sample the spec does not have (written elsewhere).
    InvalidStatus,
    /// The run outlived the deadline its spec allows.
    DeadlineExceeded,

    // Workers.
    /// The API server refused a worker pod (quota, admission, invalid quantity).
    PodCreationRefused,
    /// Worker pods could not be created within the worker start timeout.
    PodCreationTimeout,
    /// A worker's check before the barrier failed (its target does not resolve or answer).
    PreflightFailed,
    /// A worker pod failed, or a server pod is gone.
    WorkerFailed,
    /// The node of a worker that has not reported is gone or not ready.
    NodeLost,
    /// Workers did not report within the measurement's deadline.
    WorkerTimeout,
    /// A report cannot be made into a result.
    BadReport,

    // What a kind prepares before a measurement.
    /// An offload profile could not be applied.
    OffloadFailed,
    /// The sweep target could not be patched for a step.
    TargetPatchFailed,
    /// The sweep target did not roll out within the rollout timeout.
    RolloutTimeout,
    /// An earlier run's change of the sweep target is not written back yet.
    TargetNotRestored,
    /// The sweep target cannot be read.
    TargetUnavailable,
    /// A Service of the name a case's Service path needs exists and is not this benchmark's.
    ServiceConflict,
    /// The API server refused a case's Service.
    ServiceRefused,
    /// A controller's HTTPRoute could not be created, or its Gateway did not accept it.
    RouteRefused,
    /// A controller's HTTPRoute was not accepted within the rollout timeout.
    RouteTimeout,

    // What a kind judges of a measurement.
    /// Too many of a step's requests failed.
    RequestsFailed,
    /// Streams of a case ended early.
    StreamFailed,
    /// A case transferred nothing.
    NothingTransferred,
    /// An SLO gate (`spec.gates`) was broken: on the live figures (abortOnFail), by a sample,
    /// or when the run ended.
    GateFailed,
}

impl Reason {
    /// Every reason, in the order above.
    pub const ALL: [Reason; 25] = [
        Reason::InvalidSpec,
        Reason::NotPermitted,
        Reason::InvalidSchedule,
        Reason::InvalidStatus,
        Reason::DeadlineExceeded,
        Reason::PodCreationRefused,
        Reason::PodCreationTimeout,
        Reason::PreflightFailed,
        Reason::WorkerFailed,
        Reason::NodeLost,
        Reason::WorkerTimeout,
        Reason::BadReport,
        Reason::OffloadFailed,
        Reason::TargetPatchFailed,
        Reason::RolloutTimeout,
        Reason::TargetNotRestored,
        Reason::TargetUnavailable,
        Reason::ServiceConflict,
        Reason::ServiceRefused,
        Reason::RouteRefused,
        Reason::RouteTimeout,
        Reason::RequestsFailed,
        Reason::StreamFailed,
        Reason::NothingTransferred,
        Reason::GateFailed,
    ];

    /// The reason as status, Events and users see it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::InvalidSpec => "InvalidSpec",
            Reason::NotPermitted => "NotPermitted",
            Reason::InvalidSchedule => "InvalidSchedule",
            Reason::InvalidStatus => "InvalidStatus",
            Reason::DeadlineExceeded => "DeadlineExceeded",
            Reason::PodCreationRefused => "PodCreationRefused",
            Reason::PodCreationTimeout => "PodCreationTimeout",
            Reason::PreflightFailed => "PreflightFailed",
            Reason::WorkerFailed => "WorkerFailed",
            Reason::NodeLost => "NodeLost",
            Reason::WorkerTimeout => "WorkerTimeout",
            Reason::BadReport => "BadReport",
            Reason::OffloadFailed => "OffloadFailed",
            Reason::TargetPatchFailed => "TargetPatchFailed",
            Reason::RolloutTimeout => "RolloutTimeout",
            Reason::TargetNotRestored => "TargetNotRestored",
            Reason::TargetUnavailable => "TargetUnavailable",
            Reason::ServiceConflict => "ServiceConflict",
            Reason::ServiceRefused => "ServiceRefused",
            Reason::RouteRefused => "RouteRefused",
            Reason::RouteTimeout => "RouteTimeout",
            Reason::RequestsFailed => "RequestsFailed",
            Reason::StreamFailed => "StreamFailed",
            Reason::NothingTransferred => "NothingTransferred",
            Reason::GateFailed => "GateFailed",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a run ends Failed, and what its status says about it.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub reason: Reason,
    pub message: String,
}

impl Failure {
    pub fn new(reason: Reason, message: impl Into<String>) -> Failure {
        Failure {
            reason,
            message: message.into(),
        }
    }

    /// The spec cannot run as written.
    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(Reason::InvalidSpec, message)
    }

    /// The spec is fine, but the cluster admin does not allow it.
    pub fn not_permitted(message: impl Into<String>) -> Failure {
        Failure::new(Reason::NotPermitted, message)
    }

    /// The same failure, its message prefixed with what it is about ("step 1: ...").
    pub fn about(self, what: &str) -> Failure {
        Failure {
            message: format!("{what}: {}", self.message),
            ..self
        }
    }
}

/// The longest single wait while something settles (a sweep target, a created route).
pub const MAX_SETTLE_WAIT: Duration = Duration::from_secs(30);

/// What one step of a run says: the one outcome of every hook.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Done: the run goes on.
    Done,
    /// Not yet: show `message` (when there is one) and come back after `after`.
    Wait {
        message: Option<String>,
        after: Duration,
    },
    /// The run ends Failed.
    Fail(Failure),
}

impl Step {
    /// Not yet: show `message`, come back after [`POLL`].
    pub fn wait(message: impl Into<String>) -> Step {
        Step::Wait {
            message: Some(message.into()),
            after: POLL,
        }
    }

    /// Done once `waited` reached `settle`; until then, show `message` and come back when the
    /// settle time is over, or after [`MAX_SETTLE_WAIT`] (the run's deadline is checked
    /// meanwhile, and a far-off instant must never reach the timer).
    pub fn settling(waited: Duration, settle: Duration, message: impl Into<String>) -> Step {
        match settle.checked_sub(waited).filter(|left| !left.is_zero()) {
            Some(left) => Step::Wait {
                message: Some(message.into()),
                after: left.min(MAX_SETTLE_WAIT),
            },
            None => Step::Done,
        }
    }

    /// The run ends Failed with `reason` and `message`.
    pub fn fail(reason: Reason, message: impl Into<String>) -> Step {
        Step::Fail(Failure::new(reason, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settling_waits_what_is_left_never_more_than_the_longest_wait() {
        let s = |secs| Duration::from_secs(secs);
        let left = |step| match step {
            Step::Wait { after, .. } => Some(after),
            _ => None,
        };
        assert_eq!(left(Step::settling(s(3), s(10), "m")), Some(s(7)));
        assert_eq!(
            left(Step::settling(s(0), s(3600), "m")),
            Some(MAX_SETTLE_WAIT)
        );
        assert_eq!(Step::settling(s(10), s(10), "m"), Step::Done);
        assert_eq!(Step::settling(s(11), s(10), "m"), Step::Done);
        assert_eq!(Step::settling(s(0), s(0), "m"), Step::Done);
    }

    #[test]
    fn every_reason_is_listed_once_with_its_own_string() {
        let names: std::collections::BTreeSet<&str> =
            Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), Reason::ALL.len());
        for r in Reason::ALL {
            assert_eq!(
                format!("{r:?}"),
                r.as_str(),
                "the string is the variant's name"
            );
        }
    }
}
