//! Validation of a worker's [`FinalReport`] (pure): the envelope's fields, then the engine report
//! it carries, which must be of the expected kind, cover exactly one run and pass its kind's
//! validation ([`crate::report::validate_http`] / [`crate::tcp::validate_tcp`] /
//! [`crate::rr::validate_rr`] / [`crate::udp::validate_udp`], dispatched per kind by the
//! registration, `crate::protocols::check_kind`, with the helpers below).
//! The operator runs this when a report arrives and again before it merges stored reports.

use crate::protocols::check_kind;
use crate::report::{invalid, HttpReport, InvalidReport, Report};
use crate::{CheckedReport, ReportKind};

use super::{FinalReport, PROTOCOL_VERSION};

/// Longest pod or node name (a DNS subdomain).
const MAX_NAME: usize = 253;

/// Why a final report is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportRefusal {
    /// Not a report of the expected kind and shape (unparseable, wrong kind or version).
    #[error("{0}")]
    Malformed(String),
    /// Parsed, but its numbers break an invariant.
    #[error(transparent)]
    Invalid(#[from] InvalidReport),
}

/// Validates `r`, whose engine report must be of `kind`.
pub fn validate_final(r: &FinalReport, kind: ReportKind) -> Result<CheckedReport, ReportRefusal> {
    if r.version != PROTOCOL_VERSION {
        return Err(invalid(
            "version",
            format!("{} (this build speaks {PROTOCOL_VERSION})", r.version),
        )
        .into());
    }
    check_name("worker", &r.worker)?;
    if let Some(node) = &r.node {
        check_name("node", node)?;
    }
    if let Some(host) = &r.host {
        host.validate()?;
    }
    let got = r.report.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    if got != kind.as_str() {
        return Err(ReportRefusal::Malformed(format!(
            "expected a {kind} report, got {got:?}"
        )));
    }
    check_kind(&r.report, kind)
}

/// An engine report's own problem, named under `report.`.
pub(crate) fn in_report(e: InvalidReport) -> InvalidReport {
    invalid(format!("report.{}", e.field), e.problem)
}

/// `report` if it passes `validate` and covers exactly one run (`runs` counts them).
pub(crate) fn one_run<T, Checked>(
    report: T,
    validate: impl Fn(&T) -> Result<Checked, InvalidReport>,
    runs: impl Fn(&T) -> usize,
) -> Result<Box<T>, InvalidReport> {
    validate(&report).map_err(in_report)?;
    if runs(&report) != 1 {
        return Err(invalid("report.runs", "a worker reports exactly one run"));
    }
    Ok(Box::new(report))
}

fn check_name(field: &str, name: &str) -> Result<(), InvalidReport> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(allowed) {
        return Err(invalid(
            field,
            format!("{name:.64?} is not a Kubernetes name (1..={MAX_NAME} of a-z 0-9 - .)"),
        ));
    }
    Ok(())
}

fn version_of(report: &serde_json::Value, ours: u32) -> Result<(), ReportRefusal> {
    match report.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(ours) => Ok(()),
        Some(v) => Err(ReportRefusal::Malformed(format!(
            "unsupported report version {v} (this build reads version {ours})"
        ))),
        None => Err(ReportRefusal::Malformed(
            "report has no \"version\" field".into(),
        )),
    }
}

pub(crate) fn parse<T: serde::de::DeserializeOwned>(
    report: &serde_json::Value,
    version: u32,
) -> Result<T, ReportRefusal> {
    version_of(report, version)?;
    serde_json::from_value(report.clone())
        .map_err(|e| ReportRefusal::Malformed(format!("report: {e}")))
}

pub(crate) fn http_of(report: &serde_json::Value) -> Result<HttpReport, ReportRefusal> {
    version_of(report, crate::report::REPORT_VERSION)?;
    match serde_json::from_value::<Report>(report.clone()) {
        Ok(Report::Http(h)) => Ok(h),
        Err(e) => Err(ReportRefusal::Malformed(format!("report: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::http_report;
    use crate::tcp::validate::tests::tcp_report;
    use crate::udp::report::tests::udp_report;

    fn final_report(report: serde_json::Value) -> FinalReport {
        FinalReport::new("bench-abc-w0", Some("node-1"), 0, 5, report)
    }

    fn http_json() -> serde_json::Value {
        serde_json::from_str(&http_report(&[100, 250], 0).to_json()).unwrap()
    }

    /// A valid single-run worker report of `kind`.
    fn report_of(kind: ReportKind) -> FinalReport {
        use crate::rr::report_fixture;
        final_report(match kind {
            ReportKind::Http => http_json(),
            ReportKind::Tcp => serde_json::to_value(tcp_report(0, 1)).unwrap(),
            ReportKind::Rr => {
                serde_json::to_value(report_fixture(crate::Protocol::UdpRr, &[100], 0)).unwrap()
            }
            ReportKind::Udp => serde_json::to_value(udp_report(0, 1, 0)).unwrap(),
        })
    }

    #[test]
    fn each_kind_passes_its_own_reports_and_refuses_every_other_kind() {
        for expected in ReportKind::ALL {
            for sent in ReportKind::ALL {
                let got = validate_final(&report_of(sent), expected);
                if sent == expected {
                    let checked = got.unwrap_or_else(|e| panic!("{expected}: {e}"));
                    assert_eq!(checked.kind(), expected);
                } else {
                    assert_eq!(
                        got,
                        Err(ReportRefusal::Malformed(format!(
                            "expected a {expected} report, got \"{sent}\""
                        )))
                    );
                }
            }
        }
    }

    #[test]
    fn worker_reports_of_the_expected_kind_pass() {
        let http = final_report(http_json());
        assert!(matches!(
            validate_final(&http, ReportKind::Http),
            Ok(CheckedReport::Http(_))
        ));
        let tcp = final_report(serde_json::to_value(tcp_report(0, 1)).unwrap());
        assert!(matches!(
            validate_final(&tcp, ReportKind::Tcp),
            Ok(CheckedReport::Tcp(_))
        ));
        assert_eq!(
            validate_final(&tcp, ReportKind::Http),
            Err(ReportRefusal::Malformed(
                "expected a http report, got \"tcp\"".into()
            ))
        );
    }

    #[test]
    fn udp_worker_reports_are_checked_in_full() {
        let udp = final_report(serde_json::to_value(udp_report(0, 2, 7)).unwrap());
        assert!(matches!(
            validate_final(&udp, ReportKind::Udp),
            Ok(CheckedReport::Udp(r)) if r.lost == 15
        ));
        assert!(matches!(
            validate_final(&udp, ReportKind::Tcp),
            Err(ReportRefusal::Malformed(m)) if m.contains("got \"udp\"")
        ));
        let field = |r: &FinalReport| match validate_final(r, ReportKind::Udp) {
            Err(ReportRefusal::Invalid(e)) => e.field,
            other => panic!("expected an invalid report, got {other:?}"),
        };
        let mut r = udp.clone();
        r.report["streams"][1]["loss_percent"] = 101.0.into();
        assert_eq!(field(&r), "report.streams[1].loss_percent");
        let mut r = udp.clone();
        r.report["streams"][0]["jitter_ms"] = (-1.0).into();
        assert_eq!(field(&r), "report.streams[0].jitter_ms");
        let merged = crate::udp::merge(&[udp_report(0, 1, 0), udp_report(0, 1, 0)]).unwrap();
        let r = final_report(serde_json::to_value(merged).unwrap());
        assert_eq!(field(&r), "report.runs");
        let mut r = udp;
        r.report["received"]["packets"] = "many".into();
        assert!(matches!(
            validate_final(&r, ReportKind::Udp),
            Err(ReportRefusal::Malformed(_))
        ));
    }

    #[test]
    fn rr_reports_pass_as_rr_and_only_single_runs() {
        use crate::rr::report_fixture;
        use crate::Protocol;
        let one = report_fixture(Protocol::TcpCrr, &[100, 200], 0);
        let r = final_report(serde_json::to_value(&one).unwrap());
        assert!(matches!(
            validate_final(&r, ReportKind::Rr),
            Ok(CheckedReport::Rr(rr)) if rr.setup.mode == Protocol::TcpCrr
        ));
        assert_eq!(
            validate_final(&r, ReportKind::Tcp),
            Err(ReportRefusal::Malformed(
                "expected a tcp report, got \"rr\"".into()
            ))
        );
        let merged = crate::rr::merge(&[one.clone(), one]).unwrap();
        let r = final_report(serde_json::to_value(merged).unwrap());
        assert!(
            matches!(validate_final(&r, ReportKind::Rr), Err(ReportRefusal::Invalid(e)) if e.field == "report.runs")
        );
        let mut r =
            final_report(serde_json::to_value(report_fixture(Protocol::UdpRr, &[100], 1)).unwrap());
        r.report["counts"]["lost"] = 0.into();
        assert!(
            matches!(validate_final(&r, ReportKind::Rr), Err(ReportRefusal::Invalid(e)) if e.field == "report.counts.attempted")
        );
        r.report["counts"]["lost"] = "many".into();
        assert!(matches!(
            validate_final(&r, ReportKind::Rr),
            Err(ReportRefusal::Malformed(_))
        ));
        r.report["version"] = 9.into();
        assert!(
            matches!(validate_final(&r, ReportKind::Rr), Err(ReportRefusal::Malformed(m)) if m.contains("version 9"))
        );
    }

    #[test]
    fn invalid_fields_are_named() {
        let field = |r: &FinalReport, kind: ReportKind| match validate_final(r, kind) {
            Err(ReportRefusal::Invalid(e)) => e.field,
            other => panic!("expected an invalid report, got {other:?}"),
        };
        let mut r = final_report(http_json());
        r.worker = "../../etc".into();
        assert_eq!(field(&r, ReportKind::Http), "worker");
        let mut r = final_report(http_json());
        r.report["counters"]["requests"] = 3.into();
        assert_eq!(field(&r, ReportKind::Http), "report.counters.requests");
        let mut r = final_report(http_json());
        r.report["workers"] = 2.into();
        assert_eq!(field(&r, ReportKind::Http), "report.workers");
        let merged = crate::tcp::merge(&[tcp_report(0, 1), tcp_report(0, 2)]).unwrap();
        let r = final_report(serde_json::to_value(merged).unwrap());
        assert_eq!(field(&r, ReportKind::Tcp), "report.runs");
    }

    #[test]
    fn unparseable_reports_are_malformed() {
        let mut r = final_report(http_json());
        r.report["rps"] = "fast".into();
        assert!(matches!(
            validate_final(&r, ReportKind::Http),
            Err(ReportRefusal::Malformed(_))
        ));
        r.report = serde_json::json!({"version": 2, "kind": "http"});
        assert!(
            matches!(validate_final(&r, ReportKind::Http), Err(ReportRefusal::Malformed(m)) if m.contains("version 2"))
        );
    }
}
