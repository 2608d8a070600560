//! Realistic worker reports, built with the `protocol` crate's own types and constructors
//! (`HttpReport::from_run`, `TcpReport::single`), so they pass the operator's
//! `protocol::worker::validate_final` for the same reasons a real worker's do: every sample is
//! one request and one histogram count, the summaries are the histogram's, the rates are the
//! counts over the window. Nothing here copies a protocol rule.

use std::f64::consts::PI;

use hdrhistogram::Histogram;
use protocol::report::histogram::{new_latency_histogram, LATENCY_MAX_US};
use protocol::report::{Counters, HttpReport, HttpRunConfig, Report, StatusCounts, ThreadSummary};
use protocol::tcp::{
    CpuReport, CpuUsage, Direction, RunSummary, StreamReport, TcpInfoSnapshot, TcpReport,
    Throughput,
};
use protocol::worker::{FinalReport, PROTOCOL_VERSION};
use rand::Rng;

/// Bytes of one response (status line, a few headers, "hello") and of one request, as the
/// in-cluster nginx target answers `GET /`.
pub const RESPONSE_BYTES: u64 = 238;
pub const REQUEST_BYTES: u64 = 78;

/// Latency of a request: log-normal around `median_us` (`sigma` is the spread of its log),
/// with `tail_share` of the samples `tail_factor` times slower (a retransmit, a GC pause).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyModel {
    pub median_us: f64,
    pub sigma: f64,
    pub tail_share: f64,
    pub tail_factor: f64,
}

impl Default for LatencyModel {
    fn default() -> Self {
        LatencyModel {
            median_us: 800.0,
            sigma: 0.5,
            tail_share: 0.005,
            tail_factor: 20.0,
        }
    }
}

impl LatencyModel {
    /// One latency in microseconds, within the histogram's range.
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        // Box-Muller: a standard normal from two uniforms (u1 in (0, 1]).
        let u1 = 1.0 - rng.random::<f64>();
        let u2 = rng.random::<f64>();
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * PI * u2).cos();
        let mut v = self.median_us * (self.sigma * z).exp();
        if rng.random::<f64>() < self.tail_share {
            v *= self.tail_factor;
        }
        v.round().clamp(1.0, LATENCY_MAX_US as f64) as u64
    }

    /// The mean of the distribution (log-normal mean, with the tail), for request counts.
    pub fn mean_us(&self) -> f64 {
        let body = self.median_us * (self.sigma * self.sigma / 2.0).exp();
        body * (1.0 + self.tail_share * (self.tail_factor - 1.0))
    }
}

/// What an HTTP worker was asked to do (from its `netbench-loadgen http ...` arguments).
#[derive(Clone, Debug, PartialEq)]
pub struct HttpShape {
    pub url: String,
    pub method: String,
    pub connections: u64,
    pub threads: u64,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub timeout_s: f64,
    /// Open loop: this worker's requests per second.
    pub rate: Option<f64>,
    pub keepalive: bool,
    pub http2: bool,
}

impl HttpShape {
    /// How many requests a worker of this shape completes in its measured window: closed loop,
    /// each connection one request at a time at the model's mean latency; open loop, the rate.
    /// At most `cap` (the simulator's CPU is shared by hundreds of workers), at least 1.
    pub fn requests(&self, model: &LatencyModel, cap: u64) -> u64 {
        let per_second = match self.rate {
            Some(rate) => rate,
            None => self.connections as f64 * 1e6 / model.mean_us().max(1.0),
        };
        let n = (per_second * self.duration_s).round();
        if n.is_finite() && n >= 1.0 {
            (n as u64).min(cap.max(1))
        } else {
            1
        }
    }

    /// The requests of the warm-up (counted, never in the histogram).
    fn warmup_requests(&self, measured: u64) -> u64 {
        if self.duration_s <= 0.0 {
            return 0;
        }
        let n = (measured as f64 * self.warmup_s / self.duration_s).round();
        if n.is_finite() && n >= 0.0 {
            n as u64
        } else {
            0
        }
    }
}

/// `n` latencies drawn from `model`.
pub fn sample_latencies<R: Rng>(model: &LatencyModel, n: u64, rng: &mut R) -> Vec<u64> {
    (0..n).map(|_| model.sample(rng)).collect()
}

/// The histogram of `samples`, in the report's fixed range.
pub fn histogram_of(samples: &[u64]) -> Result<Histogram<u64>, String> {
    let mut h = new_latency_histogram();
    for &v in samples {
        h.record(v)
            .map_err(|e| format!("cannot record {v} us: {e:?}"))?;
    }
    Ok(h)
}

/// Splits `total` over `parts` as evenly as whole numbers allow (the first ones get the rest).
fn split(total: u64, parts: u64) -> Vec<u64> {
    let parts = parts.max(1);
    let (each, rest) = (total / parts, total % parts);
    (0..parts).map(|i| each + u64::from(i < rest)).collect()
}

/// The HTTP report of one worker whose measured window began at `start_unix_ms` and whose
/// requests took `samples` (microseconds): every request a 200, split over its threads.
pub fn http_report(
    shape: &HttpShape,
    start_unix_ms: u64,
    samples: &[u64],
) -> Result<HttpReport, String> {
    let hist = histogram_of(samples)?;
    let n = hist.len();
    let counters = Counters {
        requests: n,
        warmup_requests: shape.warmup_requests(n),
        warmup_errors: 0,
        bytes_read: n.saturating_mul(RESPONSE_BYTES),
        bytes_written: n.saturating_mul(REQUEST_BYTES),
        status: StatusCounts {
            s2xx: n,
            ..StatusCounts::default()
        },
        ..Counters::default()
    };
    let threads = shape.threads.max(1);
    let connections = split(shape.connections.max(threads), threads);
    let requests = split(n, threads);
    let secs = shape.duration_s.max(1e-3);
    let per_thread = (0..threads)
        .zip(connections.iter().zip(&requests))
        .map(|(t, (&c, &r))| ThreadSummary {
            worker: 0,
            thread: u32::try_from(t).unwrap_or(u32::MAX),
            connections: c,
            requests: r,
            errors: 0,
            bytes_read: r.saturating_mul(RESPONSE_BYTES),
            rps: r as f64 / secs,
        })
        .collect();
    let config = HttpRunConfig {
        url: shape.url.clone(),
        method: shape.method.clone(),
        connections: shape.connections.max(threads),
        threads,
        duration_s: shape.duration_s,
        warmup_s: shape.warmup_s,
        rate: shape.rate,
        keepalive: shape.keepalive,
        http2: shape.http2,
        timeout_s: shape.timeout_s,
    };
    let end = start_unix_ms.saturating_add((secs * 1000.0).round() as u64);
    HttpReport::from_run(
        config,
        start_unix_ms,
        end,
        secs,
        counters,
        &hist,
        per_thread,
    )
}

/// What a TCP stream client was asked to do (from `netbench-loadgen tcp-client ...`).
#[derive(Clone, Debug, PartialEq)]
pub struct TcpShape {
    pub streams: u32,
    pub duration_s: f64,
    pub len: usize,
    pub direction: Direction,
}

/// The TCP report of one client that sent to `server` for its duration from `start_unix_ms`:
/// about `gbps` Gbit/s over its streams, the receivers a little behind the senders (bytes in
/// flight when the test stopped), a few retransmits, round trips of a few hundred µs.
pub fn tcp_report<R: Rng>(
    shape: &TcpShape,
    server: &str,
    start_unix_ms: u64,
    gbps: f64,
    rng: &mut R,
) -> TcpReport {
    let streams = shape.streams.max(1);
    let secs = shape.duration_s.max(1e-3);
    let flows = shape.direction.flows(streams);
    let per_stream = gbps * 1e9 / 8.0 * secs / flows.len().max(1) as f64;
    let reports = flows
        .iter()
        .enumerate()
        .map(|(i, flow)| {
            let jitter = 0.9 + 0.2 * rng.random::<f64>();
            let sent = (per_stream * jitter).round().max(1.0) as u64;
            let in_flight = (sent / 1000).min(4 << 20);
            StreamReport {
                run: 0,
                id: u32::try_from(i).unwrap_or(u32::MAX),
                flow: *flow,
                sender: Throughput::new(sent, secs),
                receiver: Throughput::new(sent.saturating_sub(in_flight), secs + 0.001),
                tcp: Some(TcpInfoSnapshot {
                    retransmits: rng.random_range(0..20),
                    rtt_us: rng.random_range(80..400),
                    rttvar_us: rng.random_range(10..80),
                    snd_cwnd_bytes: 1 << 20,
                    pmtu: 1450,
                }),
                error: None,
            }
        })
        .collect();
    let usage = |busy: f64| CpuUsage {
        user_percent: busy * 0.2,
        system_percent: busy * 0.8,
        total_percent: busy,
        ..CpuUsage::default()
    };
    let run = RunSummary {
        client: "sim:40000".into(),
        server: server.to_string(),
        streams,
        duration_secs: secs,
        len: shape.len,
        direction: shape.direction,
        started_at_unix_ms: start_unix_ms,
        ended_at_unix_ms: start_unix_ms.saturating_add((secs * 1000.0).round() as u64),
        cpu: CpuReport {
            client: usage(35.0 + 10.0 * rng.random::<f64>()),
            server: usage(45.0 + 10.0 * rng.random::<f64>()),
        },
    };
    TcpReport::single(run, reports)
}

/// The engine report as the worker sends it (`{"version":1,"kind":...}`).
pub fn http_json(report: &HttpReport) -> Result<serde_json::Value, String> {
    serde_json::to_value(Report::Http(report.clone())).map_err(|e| e.to_string())
}

pub fn tcp_json(report: &TcpReport) -> Result<serde_json::Value, String> {
    serde_json::to_value(report).map_err(|e| e.to_string())
}

/// The final report a worker posts.
pub fn final_report(
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
