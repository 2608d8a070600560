//! The TCP report: versioned JSON (`"version": 1, "kind": "tcp"`), mergeable across concurrent
//! clients with [`merge`].

use serde::{Deserialize, Serialize};

use super::{Direction, Flow};
use crate::cpu::{node_cost, process_cost, CpuCost, CpuReport};
use crate::report::{concat_runs, time_span};
use crate::rr::LatencyProbe;
use crate::ReportKind;

pub const REPORT_VERSION: u32 = 1;

/// A throughput figure: `bits_per_second` = `bytes` * 8 / `seconds`, except in merged totals,
/// where it is the exact sum of the merged rates (concurrent clients add up).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    pub bytes: u64,
    pub seconds: f64,
    pub bits_per_second: f64,
}

impl Throughput {
    pub fn new(bytes: u64, seconds: f64) -> Self {
        let bits_per_second = if seconds > 0.0 {
            bytes as f64 * 8.0 / seconds
        } else {
            0.0
        };
        Throughput {
            bytes,
            seconds,
            bits_per_second,
        }
    }

    /// Streams of one run run side by side: bytes add up over the longest stream's time.
    fn total_of(parts: impl Iterator<Item = Throughput>) -> Self {
        let (bytes, seconds) = parts.fold((0u64, 0f64), |(b, s), t| {
            (b.saturating_add(t.bytes), s.max(t.seconds))
        });
        Throughput::new(bytes, seconds)
    }

    /// Runs of different clients at the same time: rates add up exactly.
    fn sum_of(parts: impl Iterator<Item = Throughput>) -> Self {
        parts.fold(Throughput::default(), |acc, t| Throughput {
            bytes: acc.bytes.saturating_add(t.bytes),
            seconds: acc.seconds.max(t.seconds),
            bits_per_second: acc.bits_per_second + t.bits_per_second,
        })
    }
}

/// TCP_INFO of a sending socket, taken when it stopped sending (retransmits are the socket's
/// `total_retrans`, the congestion window is `snd_cwnd * snd_mss`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpInfoSnapshot {
    pub retransmits: u64,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_cwnd_bytes: u64,
    pub pmtu: u32,
}

/// One data connection, seen from both ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    /// Index into [`TcpReport::runs`].
    pub run: u32,
    pub id: u32,
    pub flow: Flow,
    pub sender: Throughput,
    pub receiver: Throughput,
    /// TCP_INFO of the sending socket.
    pub tcp: Option<TcpInfoSnapshot>,
    /// Why the stream ended early, if it did (either end).
    pub error: Option<String>,
}

/// One client's test against one server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The client's address of the control connection (shows the source binding in effect).
    pub client: String,
    pub server: String,
    pub streams: u32,
    pub duration_secs: f64,
    pub len: usize,
    pub direction: Direction,
    pub started_at_unix_ms: u64,
    pub ended_at_unix_ms: u64,
    pub cpu: CpuReport,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcpReport {
    pub version: u32,
    pub kind: String,
    pub started_at_unix_ms: u64,
    pub ended_at_unix_ms: u64,
    /// Bytes written by the senders.
    pub sender: Throughput,
    /// Bytes read by the receivers (the figure to quote, as with iperf3).
    pub receiver: Throughput,
    pub retransmits: u64,
    /// Mean smoothed RTT of the sending sockets.
    pub mean_rtt_us: Option<f64>,
    /// Summed over runs (in a merged report: CPU of all ends together).
    pub cpu: CpuReport,
    /// One entry per client test; more than one after [`merge`].
    pub runs: Vec<RunSummary>,
    pub streams: Vec<StreamReport>,
    /// CPU seconds each end's worker process spent per gigabyte (1e9 bytes) the receivers read
    /// (process CPU over its meter's window / bytes); absent when nothing was received, and in
    /// older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds_per_gb: Option<CpuCost>,
    /// The same for each end's whole node (/proc/stat, every CPU: netperf's definition); only
    /// in a report of one run whose two ends both read their node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_cpu_seconds_per_gb: Option<CpuCost>,
    /// Latency under load: the request/response probe that ran beside the streams, when one
    /// was asked for (`--latency-probe RATE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_probe: Option<LatencyProbe>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MergeError {
    #[error("nothing to merge")]
    Empty,
    #[error("cannot merge a report of version {0} (this build reads version {REPORT_VERSION})")]
    Version(u32),
    #[error("cannot merge a report of kind {0:?} into a tcp report")]
    Kind(String),
    #[error(transparent)]
    Invalid(#[from] crate::report::InvalidReport),
    #[error("merging overflows the run index")]
    Overflow,
    #[error("latency probe: {0}")]
    Probe(String),
}

impl TcpReport {
    /// Builds the totals of a single client run from its streams.
    pub fn single(run: RunSummary, streams: Vec<StreamReport>) -> Self {
        let cpu = run.cpu;
        let mut report = TcpReport {
            version: REPORT_VERSION,
            kind: ReportKind::Tcp.as_str().into(),
            started_at_unix_ms: run.started_at_unix_ms,
            ended_at_unix_ms: run.ended_at_unix_ms,
            sender: Throughput::total_of(streams.iter().map(|s| s.sender)),
            receiver: Throughput::total_of(streams.iter().map(|s| s.receiver)),
            retransmits: 0,
            mean_rtt_us: None,
            cpu,
            runs: vec![run],
            streams,
            cpu_seconds_per_gb: None,
            node_cpu_seconds_per_gb: None,
            latency_probe: None,
        };
        report.fill_tcp_totals();
        report
    }

    /// The report with the latency probe that ran beside its streams.
    pub fn with_probe(mut self, probe: LatencyProbe) -> Self {
        self.latency_probe = Some(probe);
        self
    }

    fn fill_tcp_totals(&mut self) {
        let infos: Vec<&TcpInfoSnapshot> =
            self.streams.iter().filter_map(|s| s.tcp.as_ref()).collect();
        // Saturating: the server's figures come from the network.
        self.retransmits = infos
            .iter()
            .fold(0u64, |acc, i| acc.saturating_add(i.retransmits));
        self.mean_rtt_us = (!infos.is_empty())
            .then(|| infos.iter().map(|i| f64::from(i.rtt_us)).sum::<f64>() / infos.len() as f64);
        self.cpu_seconds_per_gb = cpu_per_gb(&self.runs, self.receiver.bytes);
        self.node_cpu_seconds_per_gb = node_cpu_per_gb(&self.runs, self.receiver.bytes);
    }

    /// Stream errors, one line each, for a human.
    pub fn stream_errors(&self) -> Vec<String> {
        self.streams
            .iter()
            .filter_map(|s| {
                s.error
                    .as_ref()
                    .map(|e| format!("stream {} (run {}): {e}", s.id, s.run))
            })
            .collect()
    }
}

/// CPU seconds of all runs (each over its meter's window) per gigabyte received; `None` when
/// nothing was.
pub(crate) fn cpu_per_gb(runs: &[RunSummary], received: u64) -> Option<CpuCost> {
    let runs = runs.iter().map(|r| (&r.cpu, r.duration_secs));
    process_cost(runs, received as f64, 1e9)
}

/// The nodes' busy CPU seconds per gigabyte received (one run only: see [`node_cost`]).
pub(crate) fn node_cpu_per_gb(runs: &[RunSummary], received: u64) -> Option<CpuCost> {
    let cpus: Vec<&CpuReport> = runs.iter().map(|r| &r.cpu).collect();
    node_cost(&cpus, received as f64, 1e9)
}

/// Combines reports of clients that ran AT THE SAME TIME into one: throughput rates and bytes add
/// up exactly, streams and runs are concatenated (stream `run` indices renumbered), CPU figures
/// are summed, the time span covers all runs, latency probes merge exactly.
pub fn merge(reports: &[TcpReport]) -> Result<TcpReport, MergeError> {
    if reports.is_empty() {
        return Err(MergeError::Empty);
    }
    for r in reports {
        if r.version != REPORT_VERSION {
            return Err(MergeError::Version(r.version));
        }
        if r.kind != ReportKind::Tcp.as_str() {
            return Err(MergeError::Kind(r.kind.clone()));
        }
        super::validate::validate_tcp(r)?;
    }
    let parts = reports.iter().map(|r| (&r.runs[..], &r.streams[..]));
    let (runs, streams) = concat_runs(parts, |s| &mut s.run).ok_or(MergeError::Overflow)?;
    let (started_at_unix_ms, ended_at_unix_ms) = time_span(
        reports
            .iter()
            .map(|r| (r.started_at_unix_ms, r.ended_at_unix_ms)),
    );
    let mut merged = TcpReport {
        version: REPORT_VERSION,
        kind: ReportKind::Tcp.as_str().into(),
        started_at_unix_ms,
        ended_at_unix_ms,
        sender: Throughput::sum_of(reports.iter().map(|r| r.sender)),
        receiver: Throughput::sum_of(reports.iter().map(|r| r.receiver)),
        retransmits: 0,
        mean_rtt_us: None,
        cpu: reports
            .iter()
            .fold(CpuReport::default(), |acc, r| acc.sum(&r.cpu)),
        runs,
        streams,
        cpu_seconds_per_gb: None,
        node_cpu_seconds_per_gb: None,
        latency_probe: LatencyProbe::merge(reports.iter().filter_map(|r| r.latency_probe.as_ref()))
            .map_err(MergeError::Probe)?,
    };
    merged.fill_tcp_totals();
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    // A single-run report: streams of 1 and 3 MB x scale, 2 s, 50 % of a CPU each end.
    use crate::tcp::validate::tests::tcp_report as report;

    #[test]
    fn single_run_totals_add_streams_over_the_longest_time() {
        let r = report(1000, 1);
        assert_eq!(r.sender.bytes, 4_000_000);
        assert_eq!(r.sender.seconds, 2.0);
        assert_eq!(r.sender.bits_per_second, 16_000_000.0);
        assert_eq!(r.receiver.bytes, 3_998_000);
        assert_eq!(r.retransmits, 4);
        assert_eq!(r.mean_rtt_us, Some(200.0));
    }

    #[test]
    fn merge_sums_concurrent_clients_exactly() {
        let a = report(1000, 1);
        let b = report(1500, 3);
        let m = merge(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(
            m.sender.bits_per_second,
            a.sender.bits_per_second + b.sender.bits_per_second
        );
        assert_eq!(
            m.receiver.bits_per_second,
            a.receiver.bits_per_second + b.receiver.bits_per_second
        );
        assert_eq!(m.sender.bytes, a.sender.bytes + b.sender.bytes);
        assert_eq!(m.retransmits, 8);
        assert_eq!(m.runs.len(), 2);
        assert_eq!(m.streams.len(), 4);
        assert_eq!(
            m.streams.iter().map(|s| s.run).collect::<Vec<_>>(),
            vec![0, 0, 1, 1]
        );
        assert_eq!((m.started_at_unix_ms, m.ended_at_unix_ms), (1000, 3500));
        assert_eq!(m.cpu.client.total_percent, 100.0);
        // Merging is associative: a merged report merges again without loss.
        let again = merge(&[merge(std::slice::from_ref(&a)).unwrap(), b.clone()]).unwrap();
        assert_eq!(again, m);
    }

    #[test]
    fn merge_refuses_foreign_reports() {
        assert_eq!(merge(&[]), Err(MergeError::Empty));
        let mut other = report(0, 1);
        other.version = 2;
        assert_eq!(merge(&[report(0, 1), other]), Err(MergeError::Version(2)));
        let mut http = report(0, 1);
        http.kind = "http".into();
        assert_eq!(merge(&[http]), Err(MergeError::Kind("http".into())));
    }

    #[test]
    fn json_envelope_is_versioned_and_round_trips() {
        let r = report(1000, 1);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["version"], 1);
        assert_eq!(json["kind"], "tcp");
        assert_eq!(json["streams"][0]["flow"], "client_to_server");
        let back: TcpReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
    }
}
