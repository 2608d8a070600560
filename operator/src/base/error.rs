//! Errors of a reconcile. Each has a stable category: it is the `error` label of
//! `netbench_reconcile_errors_total` and the reason of the Warning Event, and it says whether a
//! retry can help (transient) or only a change of the object can (permanent).

use std::time::Duration;

use kube::runtime::finalizer;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(Box<finalizer::Error<Error>>),
    /// A wait on the cluster took longer than the operator allows it.
    #[error("{what} took longer than {after:?}")]
    TimedOut { what: &'static str, after: Duration },
    /// Something the operator stored or changed is not as it left it (a restore record, a sweep
    /// target): the source is the owning module's own error type (it converts with `?`).
    #[error(transparent)]
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

/// How soon a failed reconcile is tried again (the schedule is `policy::backoff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// The API server refused the request (400/403/404/422: RBAC, an admission policy or
    /// webhook, an invalid write), had a conflict, was overloaded or failed (409, 429, 5xx), or
    /// did not answer: backoff capped at seconds. A refusal is often lifted without a change of
    /// the object (a policy removed, a permission granted), and a change wakes it at once anyway.
    Soon,
    /// Something the operator stored or changed is not as it left it, or a wait timed out:
    /// backoff up to minutes.
    Slowly,
}

impl Error {
    /// Every value of [`Error::category`], so the metric's series exist at 0 from the start.
    /// ("Report" is kept for dashboards and alerts that name it; no error of today has it.)
    pub const CATEGORIES: [&'static str; 7] = [
        "KubeApi",
        "KubeConflict",
        "KubeRefused",
        "KubeTransport",
        "Finalizer",
        "Report",
        "Internal",
    ];

    /// Stable category of what failed: the metric label and the Event reason. A failure inside
    /// the finalizer's Apply/Cleanup is categorised by its cause, not as "finalizer".
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(e) => kube_category(e),
            Error::Finalizer(e) => match e.as_ref() {
                finalizer::Error::ApplyFailed(inner) | finalizer::Error::CleanupFailed(inner) => {
                    inner.category()
                }
                finalizer::Error::AddFinalizer(e) | finalizer::Error::RemoveFinalizer(e) => {
                    kube_category(e)
                }
                _ => "Finalizer",
            },
            Error::TimedOut { .. } | Error::Internal(_) => "Internal",
        }
    }

    pub fn retry(&self) -> Retry {
        // An object the operator cannot decode (e.g. one an author wrote into a list it reads)
        // stays so until someone changes it: no fast loop over it.
        if matches!(self, Error::Kube(kube::Error::SerdeError(_))) {
            return Retry::Slowly;
        }
        match self.category() {
            "KubeApi" | "KubeConflict" | "KubeRefused" | "KubeTransport" => Retry::Soon,
            _ => Retry::Slowly,
        }
    }
}

fn kube_category(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::Api(s) if s.code == 409 => "KubeConflict",
        // Refusals that a retry of the same request will meet again (invalid, forbidden).
        kube::Error::Api(s) if matches!(s.code, 400 | 403 | 404 | 422) => "KubeRefused",
        kube::Error::Api(_) => "KubeApi",
        _ => "KubeTransport",
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16) -> Error {
        Error::Kube(kube::Error::Api(
            Status::failure("m", "r").with_code(code).boxed(),
        ))
    }

    #[test]
    fn categories_are_listed_and_finalizer_errors_show_their_cause() {
        for e in [
            api(409),
            api(422),
            api(500),
            Error::TimedOut {
                what: "x",
                after: Duration::ZERO,
            },
            Error::Internal("x".into()),
        ] {
            assert!(Error::CATEGORIES.contains(&e.category()), "{e}");
        }
        let wrapped = Error::Finalizer(Box::new(finalizer::Error::ApplyFailed(api(500))));
        assert_eq!(wrapped.category(), "KubeApi");
        let wrapped = Error::Finalizer(Box::new(finalizer::Error::CleanupFailed(Error::Internal(
            "x".into(),
        ))));
        assert_eq!(wrapped.category(), "Internal");
    }

    #[test]
    fn api_errors_are_retried_soon_the_operators_own_slowly() {
        for code in [400, 403, 404, 409, 422, 429, 500, 503] {
            assert_eq!(api(code).retry(), Retry::Soon, "{code}");
        }
        let transport = Error::Kube(kube::Error::LinesCodecMaxLineLengthExceeded);
        assert_eq!(transport.retry(), Retry::Soon);
        let undecodable = serde_json::from_str::<u8>("x").unwrap_err();
        assert_eq!(
            Error::Kube(kube::Error::SerdeError(undecodable)).retry(),
            Retry::Slowly
        );
        let refused_in_cleanup =
            Error::Finalizer(Box::new(finalizer::Error::CleanupFailed(api(403))));
        assert_eq!(refused_in_cleanup.retry(), Retry::Soon);
        assert_eq!(Error::Internal("x".into()).retry(), Retry::Slowly);
        let timed_out = Error::TimedOut {
            what: "x",
            after: Duration::ZERO,
        };
        assert_eq!(timed_out.retry(), Retry::Slowly);
    }
}
