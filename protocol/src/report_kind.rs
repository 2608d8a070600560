//! Which engine report a worker sends: [`ReportKind`], the `"kind"` field of every report
//! (`{"version": 1, "kind": "tcp", ...}`). One kind per report type, several protocols may share
//! one ([`crate::Protocol::report_kind`]: tcp-rr, tcp-crr and udp-rr all report `"rr"`).
//!
//! The reports keep `kind` as a string on the wire, so a report of a kind this build does not know
//! is refused with a message naming it; `ReportKind::as_str` is that string.

use serde::{Deserialize, Serialize};

use crate::wire_names::wire_names;

/// The kind of a worker's engine report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportKind {
    /// [`crate::report::HttpReport`] (ingress benchmarks).
    Http,
    /// [`crate::tcp::TcpReport`] (tcp-stream).
    Tcp,
    /// [`crate::rr::RrReport`] (tcp-rr, tcp-crr, udp-rr).
    Rr,
    /// [`crate::udp::UdpReport`] (udp-stream).
    Udp,
}

wire_names!(ReportKind, UnknownReportKind, {
    Http => "http",
    Tcp => "tcp",
    Rr => "rr",
    Udp => "udp",
});

/// A name that is not one of [`ReportKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown report kind {0:.64?} (expected one of http, tcp, rr, udp)")]
pub struct UnknownReportKind(pub String);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::http_report;
    use crate::rr::report_fixture;
    use crate::tcp::validate::tests::tcp_report;
    use crate::udp::report::tests::udp_report;
    use crate::Protocol;

    /// The `"kind"` field of a report of each kind, as its engine serialises it.
    fn serialised_kind(kind: ReportKind) -> serde_json::Value {
        let json = match kind {
            ReportKind::Http => serde_json::from_str(&http_report(&[100], 0).to_json()).unwrap(),
            ReportKind::Tcp => serde_json::to_value(tcp_report(0, 1)).unwrap(),
            ReportKind::Rr => {
                serde_json::to_value(report_fixture(Protocol::TcpRr, &[100], 0)).unwrap()
            }
            ReportKind::Udp => serde_json::to_value(udp_report(0, 1, 0)).unwrap(),
        };
        json["kind"].clone()
    }

    #[test]
    fn each_name_is_the_kind_its_report_serialises() {
        for kind in ReportKind::ALL {
            assert_eq!(serialised_kind(kind), kind.as_str(), "{kind:?}");
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert_eq!(serde_json::from_str::<ReportKind>(&json).unwrap(), kind);
            assert_eq!(kind.as_str().parse::<ReportKind>().unwrap(), kind);
            assert_eq!(kind.to_string(), kind.as_str());
        }
        let e = "RR".parse::<ReportKind>().unwrap_err().to_string();
        assert!(e.contains("\"RR\"") && e.contains("udp"), "{e}");
        assert!(serde_json::from_str::<ReportKind>("\"Tcp\"").is_err());
    }

    #[test]
    fn the_names_are_distinct() {
        let mut names: Vec<_> = ReportKind::ALL.iter().map(|k| k.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ReportKind::ALL.len());
    }
}
