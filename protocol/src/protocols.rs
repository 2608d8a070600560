//! The registration of every protocol and report kind, the one place each is named in this
//! crate: [`Protocol`] (which test a server runs for a client) with its facts (the kind of report
//! it sends, its transport, the message size it uses by default, the figures a report shows
//! first), and [`ReportKind`] (which engine report a worker sends) with its facts (the live
//! figures its workers push, how a report of it is checked: [`check_kind`], [`CheckedReport`]).
//! Every match on them here is exhaustive: a new variant is a compile error where it must be
//! said what it is.
//!
//! Wire forms: a protocol is kebab-case (`"tcp-stream"`, `"tcp-rr"`, ...), the same in the
//! control protocol, in reports and in the CRD; `tcp-stream` is the default, so objects and test
//! requests written before the field existed keep their meaning. A report kind is the `"kind"`
//! field of every report (`{"version": 1, "kind": "tcp", ...}`), one kind per report type,
//! several protocols may share one ([`Protocol::report_kind`]: tcp-rr, tcp-crr and udp-rr all
//! report `"rr"`). Reports keep `kind` as a string on the wire, so a report of a kind this build
//! does not know is refused with a message naming it; `ReportKind::as_str` is that string.

use serde::{Deserialize, Serialize};

use crate::report::{invalid, validate_http, HttpReport};
use crate::rr::{validate_rr, RrReport};
use crate::tcp::{validate_tcp, TcpReport};
use crate::udp::{validate_udp, UdpReport};
use crate::wire_names::wire_names;
use crate::worker::validate::{http_of, in_report, one_run, parse};
use crate::worker::ReportRefusal;

/// The test a client asks a server for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// TCP bulk throughput, iperf3-style (netperf TCP_STREAM).
    #[default]
    TcpStream,
    /// TCP request/response on long-lived connections (netperf TCP_RR).
    TcpRr,
    /// TCP connect, one request/response, close, per transaction (netperf TCP_CRR).
    TcpCrr,
    /// UDP request/response with a per-request timeout (netperf UDP_RR, without its stall).
    UdpRr,
    /// UDP datagrams at a target rate: loss, reordering, jitter (iperf3 -u).
    UdpStream,
}

wire_names!(Protocol, UnknownProtocol, {
    TcpStream => "tcp-stream",
    TcpRr => "tcp-rr",
    TcpCrr => "tcp-crr",
    UdpRr => "udp-rr",
    UdpStream => "udp-stream",
});

/// A name that is not one of [`Protocol::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown protocol {0:.64?} (expected one of tcp-stream, tcp-rr, tcp-crr, udp-rr, udp-stream)"
)]
pub struct UnknownProtocol(pub String);

/// Default write size of tcp-stream (iperf3's 128 KiB).
pub const DEFAULT_STREAM_MESSAGE_SIZE: u32 = 128 * 1024;
/// Default request and response size of tcp-rr and tcp-crr.
pub const DEFAULT_RR_SIZE: u32 = 1;
/// Smallest (and default) request and response of udp-rr: its 8-byte sequence number.
pub const MIN_UDP_RR_SIZE: u32 = 8;

/// Names of the figures a result holds (a BenchmarkResult's metrics, as the operator writes
/// them) that [`Protocol::main_figures`] names.
const RECEIVER_BITS: &str = "receiverBitsPerSecond";
const TRANSACTIONS: &str = "transactionsPerSecond";
const P99: &str = "p99Ms";
const LOSS: &str = "lossPercent";

impl Protocol {
    /// The kind of report a worker running this test sends.
    pub fn report_kind(self) -> ReportKind {
        match self {
            Protocol::TcpStream => ReportKind::Tcp,
            Protocol::TcpRr | Protocol::TcpCrr | Protocol::UdpRr => ReportKind::Rr,
            Protocol::UdpStream => ReportKind::Udp,
        }
    }

    /// A request/response test (its report is of kind `"rr"`).
    pub fn is_request_response(self) -> bool {
        self.report_kind() == ReportKind::Rr
    }

    /// Carried over UDP (the server's UDP port has the number of its TCP port).
    pub fn is_udp(self) -> bool {
        match self {
            Protocol::TcpStream | Protocol::TcpRr | Protocol::TcpCrr => false,
            Protocol::UdpRr | Protocol::UdpStream => true,
        }
    }

    /// The sizes a request or response of a request/response protocol may have, in bytes
    /// (`min..=max`; both ends refuse others); None for a stream protocol.
    pub fn rr_message_sizes(self) -> Option<(u32, u32)> {
        match self {
            Protocol::TcpRr | Protocol::TcpCrr => Some((1, crate::rr::MAX_TCP_MESSAGE)),
            Protocol::UdpRr => Some((crate::rr::SEQUENCE_BYTES, crate::rr::MAX_UDP_MESSAGE)),
            Protocol::TcpStream | Protocol::UdpStream => None,
        }
    }

    /// Keeps requests in flight beyond the first on a stream (a case's `burst`, the client's
    /// `--burst`).
    pub fn takes_burst(self) -> bool {
        match self {
            Protocol::TcpRr | Protocol::UdpRr => true,
            Protocol::TcpStream | Protocol::TcpCrr | Protocol::UdpStream => false,
        }
    }

    /// Opens a connection per transaction (connect, request, response, close), each left in
    /// TIME_WAIT and tracked by the node's conntrack.
    pub fn connects_per_transaction(self) -> bool {
        match self {
            Protocol::TcpCrr => true,
            Protocol::TcpStream | Protocol::TcpRr | Protocol::UdpRr | Protocol::UdpStream => false,
        }
    }

    /// The message size a case of this protocol uses when it sets none, in bytes:
    /// tcp-stream's write size, the request and response size of a request/response protocol;
    /// None for udp-stream (its engine fits the datagram to the path's MTU).
    pub fn default_message_size(self) -> Option<u32> {
        match self {
            Protocol::TcpStream => Some(DEFAULT_STREAM_MESSAGE_SIZE),
            Protocol::TcpRr | Protocol::TcpCrr => Some(DEFAULT_RR_SIZE),
            Protocol::UdpRr => Some(MIN_UDP_RR_SIZE),
            Protocol::UdpStream => None,
        }
    }

    /// The figures a report of this protocol's results shows first, headline first (names of
    /// a result's figures; the operator writes each of them for a case of this protocol).
    pub fn main_figures(self) -> &'static [&'static str] {
        match self {
            Protocol::TcpStream => &[RECEIVER_BITS],
            Protocol::TcpRr | Protocol::TcpCrr | Protocol::UdpRr => &[TRANSACTIONS, P99],
            Protocol::UdpStream => &[RECEIVER_BITS, LOSS],
        }
    }
}

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

/// Which figures of a [`crate::worker::ProgressUpdate`] the workers of a report kind measure;
/// the others they leave at 0 or absent (a request/response worker's bits/s, a TCP worker's
/// requests/s), or push without them being what a gate reads (a UDP sender's rate is not what
/// its receiver got).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveFigures {
    /// `rps`, `errors_per_second`, `latency`.
    pub requests: bool,
    /// `bits_per_second`.
    pub bits: bool,
    /// `loss_percent`.
    pub loss: bool,
    /// `transactions_per_second`.
    pub transactions: bool,
}

impl ReportKind {
    /// The live figures its workers measure.
    pub fn live_figures(self) -> LiveFigures {
        let none = LiveFigures {
            requests: false,
            bits: false,
            loss: false,
            transactions: false,
        };
        match self {
            ReportKind::Http => LiveFigures {
                requests: true,
                ..none
            },
            ReportKind::Tcp => LiveFigures { bits: true, ..none },
            ReportKind::Udp => LiveFigures { loss: true, ..none },
            ReportKind::Rr => LiveFigures {
                transactions: true,
                ..none
            },
        }
    }
}

/// The engine report of a valid [`crate::worker::FinalReport`], parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckedReport {
    Http(Box<HttpReport>),
    Tcp(Box<TcpReport>),
    Udp(Box<UdpReport>),
    /// tcp-rr, tcp-crr, udp-rr (`kind: "rr"`, the test in its `mode`).
    Rr(Box<RrReport>),
}

impl CheckedReport {
    /// The kind of report it is.
    pub fn kind(&self) -> ReportKind {
        match self {
            CheckedReport::Http(_) => ReportKind::Http,
            CheckedReport::Tcp(_) => ReportKind::Tcp,
            CheckedReport::Udp(_) => ReportKind::Udp,
            CheckedReport::Rr(_) => ReportKind::Rr,
        }
    }

    /// The latency histogram the report carries (base64 HDR, microseconds): an HTTP report's,
    /// a request/response report's, a TCP stream report's latency probe's; none for udp.
    pub fn latency_histogram(self) -> Option<String> {
        match self {
            CheckedReport::Http(h) => Some(h.histogram),
            CheckedReport::Rr(r) => Some(r.histogram),
            CheckedReport::Tcp(t) => t.latency_probe.map(|p| p.histogram),
            CheckedReport::Udp(_) => None,
        }
    }
}

/// `report` (whose `"kind"` the caller has found to be `kind`'s) parsed as a report of `kind`,
/// validated, and covering exactly one run.
pub(crate) fn check_kind(
    report: &serde_json::Value,
    kind: ReportKind,
) -> Result<CheckedReport, ReportRefusal> {
    Ok(match kind {
        ReportKind::Tcp => CheckedReport::Tcp(one_run(
            parse(report, crate::tcp::REPORT_VERSION)?,
            validate_tcp,
            |t: &TcpReport| t.runs.len(),
        )?),
        ReportKind::Udp => CheckedReport::Udp(one_run(
            parse(report, crate::udp::REPORT_VERSION)?,
            validate_udp,
            |u: &UdpReport| u.runs.len(),
        )?),
        ReportKind::Rr => CheckedReport::Rr(one_run(
            parse(report, crate::rr::REPORT_VERSION)?,
            validate_rr,
            |rr: &RrReport| rr.runs.len(),
        )?),
        ReportKind::Http => {
            let http = http_of(report)?;
            validate_http(&http).map_err(in_report)?;
            if http.workers != 1 {
                return Err(invalid("report.workers", "a worker reports exactly one run").into());
            }
            CheckedReport::Http(Box::new(http))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::http_report;
    use crate::rr::report_fixture;
    use crate::tcp::validate::tests::tcp_report;
    use crate::udp::report::tests::udp_report;

    /// Each protocol's value of `f`, in the order of `Protocol::ALL`.
    fn each<T>(f: impl Fn(Protocol) -> T) -> Vec<T> {
        Protocol::ALL.into_iter().map(f).collect()
    }

    /// The protocols for which `f` holds, in the order of `Protocol::ALL`.
    fn those(f: impl Fn(Protocol) -> bool) -> Vec<Protocol> {
        Protocol::ALL.into_iter().filter(|p| f(*p)).collect()
    }

    #[test]
    fn wire_names_are_kebab_case_and_round_trip() {
        for p in Protocol::ALL {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.as_str()));
            assert_eq!(serde_json::from_str::<Protocol>(&json).unwrap(), p);
            assert_eq!(p.as_str().parse::<Protocol>().unwrap(), p);
            assert_eq!(p.to_string(), p.as_str());
        }
        assert_eq!(Protocol::default(), Protocol::TcpStream);
        assert!(serde_json::from_str::<Protocol>("\"tcp_rr\"").is_err());
        let e = "TCP-RR".parse::<Protocol>().unwrap_err().to_string();
        assert!(e.contains("\"TCP-RR\"") && e.contains("udp-stream"), "{e}");
    }

    #[test]
    fn classes() {
        let rr = those(Protocol::is_request_response);
        assert_eq!(rr, [Protocol::TcpRr, Protocol::TcpCrr, Protocol::UdpRr]);
        let udp = those(Protocol::is_udp);
        assert_eq!(udp, [Protocol::UdpRr, Protocol::UdpStream]);
    }

    #[test]
    fn report_kinds() {
        let kinds = each(Protocol::report_kind);
        assert_eq!(
            kinds,
            [
                ReportKind::Tcp,
                ReportKind::Rr,
                ReportKind::Rr,
                ReportKind::Rr,
                ReportKind::Udp
            ]
        );
        for p in Protocol::ALL {
            assert_eq!(p.is_request_response(), p.report_kind() == ReportKind::Rr);
        }
    }

    #[test]
    fn request_response_facts() {
        let burst = those(Protocol::takes_burst);
        assert_eq!(burst, [Protocol::TcpRr, Protocol::UdpRr]);
        let crr = those(Protocol::connects_per_transaction);
        assert_eq!(crr, [Protocol::TcpCrr]);
        let sizes = each(Protocol::rr_message_sizes);
        let tcp = Some((1, 1 << 20));
        assert_eq!(sizes, [None, tcp, tcp, Some((8, 65_507)), None]);
        for p in Protocol::ALL {
            assert_eq!(p.rr_message_sizes().is_some(), p.is_request_response());
        }
    }

    #[test]
    fn default_message_sizes_and_main_figures() {
        let sizes = each(Protocol::default_message_size);
        assert_eq!(sizes, [Some(131_072), Some(1), Some(1), Some(8), None]);
        let rr: &[&str] = &["transactionsPerSecond", "p99Ms"];
        let main = each(Protocol::main_figures);
        assert_eq!(
            main,
            [
                &["receiverBitsPerSecond"][..],
                rr,
                rr,
                rr,
                &["receiverBitsPerSecond", "lossPercent"],
            ]
        );
    }

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
