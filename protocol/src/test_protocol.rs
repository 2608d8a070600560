//! Which test a netbench server runs for a client: [`Protocol`]. One `netbench-loadgen server`
//! serves every protocol on one port; the client names the protocol in its test request, the
//! CRD names it per EgressBenchmark case, and the operator reads it to pick the report kind.
//!
//! The wire form is kebab-case (`"tcp-stream"`, `"tcp-rr"`, ...), the same in the control
//! protocol, in reports and in the CRD. `tcp-stream` is the default, so objects and test
//! requests written before the field existed keep their meaning.

use serde::{Deserialize, Serialize};

use crate::wire_names::wire_names;
use crate::ReportKind;

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
        matches!(self, Protocol::TcpRr | Protocol::TcpCrr | Protocol::UdpRr)
    }

    /// Carried over UDP (the server's UDP port has the number of its TCP port).
    pub fn is_udp(self) -> bool {
        matches!(self, Protocol::UdpRr | Protocol::UdpStream)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let rr: Vec<_> = Protocol::ALL
            .into_iter()
            .filter(|p| p.is_request_response())
            .collect();
        assert_eq!(rr, [Protocol::TcpRr, Protocol::TcpCrr, Protocol::UdpRr]);
        let udp: Vec<_> = Protocol::ALL.into_iter().filter(|p| p.is_udp()).collect();
        assert_eq!(udp, [Protocol::UdpRr, Protocol::UdpStream]);
    }

    #[test]
    fn report_kinds() {
        let kinds: Vec<_> = Protocol::ALL.into_iter().map(|p| p.report_kind()).collect();
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
}
