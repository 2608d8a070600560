//! The HTTP report (kind `"http"`).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::answers::Answers;
use super::histogram;

/// What was asked for (copied from the run's configuration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpRunConfig {
    pub url: String,
    pub method: String,
    /// Total connections (summed over merged workers).
    pub connections: u64,
    /// Total threads (summed over merged workers).
    pub threads: u64,
    pub duration_s: f64,
    pub warmup_s: f64,
    /// Requested total rate (open loop), `None` for closed loop. Summed over merged workers.
    pub rate: Option<f64>,
    pub keepalive: bool,
    pub http2: bool,
    pub timeout_s: f64,
}

/// Responses by status class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCounts {
    #[serde(rename = "1xx")]
    pub s1xx: u64,
    #[serde(rename = "2xx")]
    pub s2xx: u64,
    #[serde(rename = "3xx")]
    pub s3xx: u64,
    #[serde(rename = "4xx")]
    pub s4xx: u64,
    #[serde(rename = "5xx")]
    pub s5xx: u64,
    pub other: u64,
}

impl StatusCounts {
    pub fn count(&mut self, status: u16) {
        match status / 100 {
            1 => self.s1xx += 1,
            2 => self.s2xx += 1,
            3 => self.s3xx += 1,
            4 => self.s4xx += 1,
            5 => self.s5xx += 1,
            _ => self.other += 1,
        }
    }

    /// The sum, or `None` if a class would overflow.
    pub fn checked_add(&self, o: &StatusCounts) -> Option<StatusCounts> {
        Some(StatusCounts {
            s1xx: self.s1xx.checked_add(o.s1xx)?,
            s2xx: self.s2xx.checked_add(o.s2xx)?,
            s3xx: self.s3xx.checked_add(o.s3xx)?,
            s4xx: self.s4xx.checked_add(o.s4xx)?,
            s5xx: self.s5xx.checked_add(o.s5xx)?,
            other: self.other.checked_add(o.other)?,
        })
    }
}

/// Errors by class. `status_4xx`/`status_5xx` are completed responses (also in `requests` and
/// in the latency histogram, as wrk counts them); the other classes are failed requests, which
/// are never retried and never enter the latency figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts {
    /// TCP connect (or TLS/HTTP2 handshake) failed.
    pub connect: u64,
    /// No complete response within the per-request timeout.
    pub timeout: u64,
    /// Reading the response failed or the server closed the connection mid-response.
    pub read: u64,
    /// Writing the request failed.
    pub write: u64,
    pub status_4xx: u64,
    pub status_5xx: u64,
    /// The response was not valid HTTP.
    pub parse: u64,
}

impl ErrorCounts {
    fn failed(&self) -> [u64; 5] {
        [
            self.connect,
            self.timeout,
            self.read,
            self.write,
            self.parse,
        ]
    }

    /// Every error (saturating; a validated report never saturates, see `checked_total`).
    pub fn total(&self) -> u64 {
        self.transport()
            .saturating_add(self.status_4xx)
            .saturating_add(self.status_5xx)
    }

    /// Every error, or `None` if the sum overflows.
    pub fn checked_total(&self) -> Option<u64> {
        self.failed()
            .iter()
            .chain([self.status_4xx, self.status_5xx].iter())
            .try_fold(0u64, |acc, v| acc.checked_add(*v))
    }

    /// Failed requests (everything but status errors), saturating.
    pub fn transport(&self) -> u64 {
        self.failed()
            .iter()
            .fold(0u64, |acc, v| acc.saturating_add(*v))
    }

    /// The sum, or `None` if a class would overflow.
    pub fn checked_add(&self, o: &ErrorCounts) -> Option<ErrorCounts> {
        Some(ErrorCounts {
            connect: self.connect.checked_add(o.connect)?,
            timeout: self.timeout.checked_add(o.timeout)?,
            read: self.read.checked_add(o.read)?,
            write: self.write.checked_add(o.write)?,
            status_4xx: self.status_4xx.checked_add(o.status_4xx)?,
            status_5xx: self.status_5xx.checked_add(o.status_5xx)?,
            parse: self.parse.checked_add(o.parse)?,
        })
    }
}

/// Counters of one thread, one run or a merge of runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Completed responses (any status) whose request started in the measured window.
    pub requests: u64,
    /// Completed responses during the warm-up (not in latency or rates).
    pub warmup_requests: u64,
    /// Failed requests during the warm-up.
    pub warmup_errors: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub status: StatusCounts,
    pub errors: ErrorCounts,
}

impl Counters {
    /// The sum, or `None` if any counter would overflow (merges of outside reports use this).
    pub fn checked_add(&self, o: &Counters) -> Option<Counters> {
        Some(Counters {
            requests: self.requests.checked_add(o.requests)?,
            warmup_requests: self.warmup_requests.checked_add(o.warmup_requests)?,
            warmup_errors: self.warmup_errors.checked_add(o.warmup_errors)?,
            bytes_read: self.bytes_read.checked_add(o.bytes_read)?,
            bytes_written: self.bytes_written.checked_add(o.bytes_written)?,
            status: self.status.checked_add(&o.status)?,
            errors: self.errors.checked_add(&o.errors)?,
        })
    }
}

/// Latency percentiles in microseconds, computed from the histogram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_us: u64,
    pub mean_us: f64,
    pub stdev_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl LatencySummary {
    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            min_us: h.min(),
            mean_us: h.mean(),
            stdev_us: h.stdev(),
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

/// Open loop: requested vs achieved rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateSummary {
    pub requested_rps: f64,
    pub achieved_rps: f64,
}

/// One thread's share of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadSummary {
    /// Index of the worker report this thread came from (0 for an unmerged report).
    pub worker: u32,
    pub thread: u32,
    pub connections: u64,
    pub requests: u64,
    pub errors: u64,
    pub bytes_read: u64,
    pub rps: f64,
}

/// The HTTP report. Serialize it through [`super::Report`] so it carries its `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpReport {
    pub version: u32,
    /// Producer, e.g. "netbench-loadgen 0.1.0".
    pub tool: String,
    /// How many worker reports this one combines (1 for a single run).
    pub workers: u32,
    pub config: HttpRunConfig,
    /// Wall clock (Unix ms) at the start and end of the measured window.
    pub start_unix_ms: u64,
    pub end_unix_ms: u64,
    /// Length of the measured window in seconds (max over merged workers).
    pub duration_s: f64,
    pub counters: Counters,
    /// Completed requests per second (sum over concurrently running workers).
    pub rps: f64,
    /// Response bytes read per second (sum over workers).
    pub bytes_per_sec: f64,
    pub rate: Option<RateSummary>,
    pub latency: LatencySummary,
    /// base64(HDR histogram V2 deflate) of latencies in microseconds.
    pub histogram: String,
    pub per_thread: Vec<ThreadSummary>,
    /// Which answers were seen when (recorded when the run asks for it: route changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<Answers>,
}

impl HttpReport {
    /// Assembles a single-run report; rates are computed over `duration_s`.
    pub fn from_run(
        config: HttpRunConfig,
        start_unix_ms: u64,
        end_unix_ms: u64,
        duration_s: f64,
        counters: Counters,
        hist: &Histogram<u64>,
        per_thread: Vec<ThreadSummary>,
    ) -> Result<HttpReport, String> {
        let secs = duration_s.max(1e-9);
        let rps = counters.requests as f64 / secs;
        let rate = config.rate.map(|requested_rps| RateSummary {
            requested_rps,
            achieved_rps: rps,
        });
        Ok(HttpReport {
            version: super::REPORT_VERSION,
            tool: tool_name(),
            workers: 1,
            config,
            start_unix_ms,
            end_unix_ms,
            duration_s,
            counters,
            rps,
            bytes_per_sec: counters.bytes_read as f64 / secs,
            rate,
            latency: LatencySummary::from_histogram(hist),
            histogram: histogram::encode(hist)?,
            per_thread,
            answers: None,
        })
    }

    /// The latency histogram, decoded.
    pub fn histogram(&self) -> Result<Histogram<u64>, String> {
        histogram::decode(&self.histogram)
    }

    /// Serializes with the `kind` tag.
    pub fn to_json(&self) -> String {
        super::Report::Http(self.clone()).to_json()
    }
}

/// The producer named in reports; the workspace's version, which loadgen shares.
pub(crate) fn tool_name() -> String {
    format!("netbench-loadgen {}", env!("CARGO_PKG_VERSION"))
}
