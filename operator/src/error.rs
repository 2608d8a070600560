//! Errors of a reconcile, split into what waits for a spec change (permanent) and what is
//! retried with backoff (transient). The variant name is the metric label and Event reason.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(Box<kube::runtime::finalizer::Error<Error>>),
    #[error("report: {0}")]
    Report(String),
    #[error("{0}")]
    Internal(String),
    /// Not an error: a deletion waits for offload settings to be written back.
    #[error("{0}")]
    Pending(String),
}

impl Error {
    /// Every value of [`Error::label`].
    pub const LABELS: [&'static str; 5] = [
        "KubeError",
        "FinalizerError",
        "ReportError",
        "InternalError",
        "Pending",
    ];

    /// Stable label for metrics and Events.
    pub fn label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "KubeError",
            Error::Finalizer(_) => "FinalizerError",
            Error::Report(_) => "ReportError",
            Error::Internal(_) => "InternalError",
            Error::Pending(_) => "Pending",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_lists_every_label() {
        for e in [
            Error::Report(String::new()),
            Error::Internal(String::new()),
            Error::Pending(String::new()),
        ] {
            assert!(Error::LABELS.contains(&e.label()));
        }
    }
}
