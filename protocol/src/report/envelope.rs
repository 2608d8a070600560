//! The report envelope: `{"version": 1, "kind": "...", ...}`.

use serde::{Deserialize, Serialize};

use super::http::HttpReport;

/// Version of the report format; readers reject other versions.
pub const REPORT_VERSION: u32 = 1;

/// Any report, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Report {
    Http(HttpReport),
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("report is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("unsupported report version {0} (this build reads version {REPORT_VERSION})")]
    Version(u64),
    #[error("report has no \"version\" field")]
    NoVersion,
    #[error("bad histogram: {0}")]
    Histogram(String),
    #[error(transparent)]
    Invalid(#[from] super::validate::InvalidReport),
    #[error("merging overflows {0}")]
    Overflow(&'static str),
    #[error("nothing to merge")]
    Empty,
    #[error("cannot merge reports of different kinds ({0} and {1})")]
    MixedKinds(&'static str, &'static str),
}

impl Report {
    /// Parses a report, checking the version before the body.
    pub fn from_json(text: &str) -> Result<Report, ReportError> {
        let value: serde_json::Value = serde_json::from_str(text)?;
        match value.get("version").and_then(|v| v.as_u64()) {
            Some(v) if v == u64::from(REPORT_VERSION) => {}
            Some(v) => return Err(ReportError::Version(v)),
            None => return Err(ReportError::NoVersion),
        }
        Ok(serde_json::from_value(value)?)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("reports always serialize")
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Report::Http(_) => "http",
        }
    }

    /// Merges reports of one kind.
    pub fn merge(reports: &[Report]) -> Result<Report, ReportError> {
        let first = reports.first().ok_or(ReportError::Empty)?;
        let mut http = Vec::with_capacity(reports.len());
        for r in reports {
            if r.kind() != first.kind() {
                return Err(ReportError::MixedKinds(first.kind(), r.kind()));
            }
            match r {
                Report::Http(h) => http.push(h.clone()),
            }
        }
        Ok(Report::Http(super::merge_http(&http)?))
    }
}
