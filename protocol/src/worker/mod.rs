//! The worker <-> operator protocol (version 1), shared by `netbench-loadgen` in worker mode
//! and `netbench-operator`'s worker API. JSON over HTTP, `Authorization: Bearer <token>`, the
//! token being the worker pod's projected ServiceAccount token (audience `netbench`).
//!
//! ```text
//! POST {base}/v1/runs/{run}/register   RegisterRequest          -> 200 RegisterResponse
//!      (with `preflightError`: the worker cannot reach its target and will not start; the
//!      barrier stays closed and the operator ends the run Failed with that cause)
//! GET  {base}/v1/runs/{run}/barrier?worker=W&step=N[&waitMs=M]  -> 200 BarrierResponse (released)
//!                                                               -> 202 BarrierResponse (waiting)
//!      (with `waitMs`, a closed barrier answers when it opens or after at most M ms, less
//!      if the operator allows less: a worker learns the start at once instead of at its next
//!      poll)
//! POST {base}/v1/runs/{run}/progress   ProgressUpdate           -> 204
//!      (fields added later are optional with defaults, so the version stays 1)
//! POST {base}/v1/runs/{run}/report     FinalReport              -> 204 (stored durably)
//! ```
//! Errors are 4xx with an `ApiError` body: 400 a report that fails validation (the message
//! names the field, see [`validate_final`]), 401 no or bad token, 403 not a worker of the
//! run or speaking for another worker (or, for a server, registering a `listen` that is not its
//! own pod's address and the port it was given; for any worker, naming another node than its
//! pod's: the run then fails with that cause), 404 unknown run or worker, 408 request too slow,
//! 409 wrong step or duplicate report, 413 body too large, 422 malformed body, 503 the
//! operator cannot check the caller yet (retry).

use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub mod host;
pub(crate) mod validate;

pub use crate::protocols::CheckedReport;
pub use validate::{validate_final, ReportRefusal};

/// Version of this protocol; both sides put it in every body and reject other versions.
pub const PROTOCOL_VERSION: u32 = 1;

/// Wall-clock now in Unix milliseconds, the clock of every `*_unix_ms` field (0 if the clock
/// is before 1970).
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Path prefix of every protocol endpoint for one run.
pub fn run_path(run: &str) -> String {
    format!("/v1/runs/{run}")
}

/// How long a worker asks a closed barrier to hold its answer, in ms (the operator may hold
/// it less): well inside a worker's request timeout and the operator's.
pub const BARRIER_WAIT_MS: u64 = 5_000;

/// The barrier's path after [`run_path`] for `worker` at `step`, holding a closed barrier's
/// answer up to [`BARRIER_WAIT_MS`].
pub fn barrier_tail(worker: &str, step: u32) -> String {
    format!("/barrier?worker={worker}&step={step}&waitMs={BARRIER_WAIT_MS}")
}

/// What a worker does in a run.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Generates load (HTTP client, TCP client).
    Client,
    /// Receives load (TCP server); registers the address clients must connect to.
    Server,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RegisterRequest {
    pub version: u32,
    /// The worker's pod name.
    pub worker: String,
    /// The node the worker runs on (the downward API's spec.nodeName). The operator keeps its
    /// pod's node and refuses a claim of another.
    #[serde(default)]
    pub node: Option<String>,
    pub step: u32,
    pub role: Role,
    /// For servers: "host:port" ("[v6]:port") the clients connect to. The operator accepts
    /// only its pod's address (the node's on the host network), its Service's name or the
    /// case's bindAddress, with the port it gave the server.
    #[serde(default)]
    pub listen: Option<String>,
    /// Set when the worker's check before the barrier failed (target unresolvable,
    /// unreachable, bad options): why, in one line. Absent from older workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight_error: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RegisterResponse {
    pub version: u32,
    /// Workers registered / expected for this step.
    pub registered: u32,
    pub expected: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BarrierResponse {
    pub version: u32,
    /// Set once every expected worker registered: all start at this wall-clock instant.
    #[serde(default)]
    pub start_at_unix_ms: Option<u64>,
    pub registered: u32,
    pub expected: u32,
    /// Addresses registered by server workers ("host:port"), for clients.
    #[serde(default)]
    pub servers: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ProgressUpdate {
    pub version: u32,
    pub worker: String,
    pub step: u32,
    pub elapsed_s: f64,
    /// HTTP: completed requests so far and requests per second over the last second.
    #[serde(default)]
    pub requests: u64,
    #[serde(default)]
    pub errors: u64,
    #[serde(default)]
    pub rps: f64,
    /// TCP: bits per second over the last second.
    #[serde(default)]
    pub bits_per_second: f64,
    /// HTTP: failed requests plus 4xx/5xx responses per second over the last second (absent
    /// from TCP workers and from workers older than this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors_per_second: Option<f64>,
    /// HTTP: latency of the last second's responses; absent when none completed in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LiveLatency>,
    /// UDP: datagrams lost over the last second, in percent, where the worker receives them
    /// (sequence gaps; absent where it only sends, and from other workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_percent: Option<f64>,
    /// tcp-rr, tcp-crr, udp-rr: transactions per second over the last second (absent from
    /// other workers and from workers older than this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions_per_second: Option<f64>,
}

/// Latency quantiles of one interval, in milliseconds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LiveLatency {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FinalReport {
    pub version: u32,
    pub worker: String,
    /// As in [`RegisterRequest::node`]: stored as the pod's node, another is refused.
    #[serde(default)]
    pub node: Option<String>,
    pub step: u32,
    /// When this worker actually started after the barrier (for the start skew).
    pub started_at_unix_ms: u64,
    /// The engine's report (`{"version":1,"kind":"http"|"tcp",...}`); kept as JSON so the
    /// operator stores exactly what the worker measured.
    pub report: serde_json::Value,
    /// The CPU model and interfaces the worker saw (absent from older workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<host::HostFacts>,
}

impl FinalReport {
    /// `report` as worker `worker` (on `node`, when it says) posts it at the end of `step`, in
    /// this build's protocol version, without host facts.
    pub fn new(
        worker: &str,
        node: Option<&str>,
        step: u32,
        started_at_unix_ms: u64,
        report: serde_json::Value,
    ) -> FinalReport {
        FinalReport {
            version: PROTOCOL_VERSION,
            worker: worker.to_string(),
            node: node.map(str::to_string),
            step,
            started_at_unix_ms,
            report,
            host: None,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ApiError {
    pub error: String,
}

/// "host:port", with brackets around an IPv6 address.
pub fn join_host_port(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
        _ => format!("{host}:{port}"),
    }
}

/// Splits "host:port" or "[v6]:port".
pub fn split_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = s.rsplit_once(':')?;
    let port = port.parse().ok()?;
    let host = match host.strip_prefix('[') {
        Some(rest) => rest.strip_suffix(']')?,
        None if host.contains(':') => return None,
        None => host,
    };
    (!host.is_empty()).then(|| (host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_round_trips_with_brackets_for_ipv6() {
        assert_eq!(join_host_port("10.0.0.1", 5201), "10.0.0.1:5201");
        assert_eq!(join_host_port("fd00::1", 5201), "[fd00::1]:5201");
        assert_eq!(join_host_port("node-1.example", 80), "node-1.example:80");
        assert_eq!(
            split_host_port("[fd00::1]:5201"),
            Some(("fd00::1".into(), 5201))
        );
        assert_eq!(
            split_host_port("10.0.0.1:5201"),
            Some(("10.0.0.1".into(), 5201))
        );
        for bad in [
            "10.0.0.1",
            "fd00::1:5201",
            ":5201",
            "h:port",
            "[fd00::1:5201",
            "h:70000",
        ] {
            assert_eq!(split_host_port(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_preflight_error_is_optional_both_ways() {
        let old = r#"{"version":1,"worker":"w","step":0,"role":"client"}"#;
        let r: RegisterRequest = serde_json::from_str(old).unwrap();
        assert_eq!(r.preflight_error, None);
        assert!(!serde_json::to_string(&r).unwrap().contains("preflight"));
        let failed = RegisterRequest {
            preflight_error: Some("cannot resolve host 'nginx.nowhere'".into()),
            ..r
        };
        let json = serde_json::to_string(&failed).unwrap();
        assert!(
            json.contains(r#""preflightError":"cannot resolve"#),
            "{json}"
        );
        assert_eq!(
            serde_json::from_str::<RegisterRequest>(&json).unwrap(),
            failed
        );
    }

    #[test]
    fn progress_fields_added_later_are_optional_both_ways() {
        // A worker from before the live latency/error fields still parses...
        let old = r#"{"version":1,"worker":"w","step":0,"elapsedS":1.0,"requests":5,"rps":5.0}"#;
        let u: ProgressUpdate = serde_json::from_str(old).unwrap();
        assert_eq!((u.errors_per_second, u.latency), (None, None));
        assert_eq!(u.transactions_per_second, None);
        // ...and an update without them serializes without them (older operators ignore
        // unknown fields anyway).
        assert!(!serde_json::to_string(&u).unwrap().contains("latency"));
        let new = ProgressUpdate {
            errors_per_second: Some(2.5),
            latency: Some(LiveLatency {
                p50_ms: 0.2,
                p99_ms: 1.5,
                max_ms: 9.0,
            }),
            ..u
        };
        let json = serde_json::to_string(&new).unwrap();
        assert!(
            json.contains(r#""latency":{"p50Ms":0.2,"p99Ms":1.5,"maxMs":9.0}"#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<ProgressUpdate>(&json).unwrap(), new);
        let rr = ProgressUpdate {
            transactions_per_second: Some(12_500.5),
            ..ProgressUpdate::default()
        };
        let json = serde_json::to_string(&rr).unwrap();
        assert!(
            json.contains(r#""transactionsPerSecond":12500.5"#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<ProgressUpdate>(&json).unwrap(), rr);
    }
}
