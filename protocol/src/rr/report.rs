//! The rr report's types and the single-run builder ([`RrReport::single`]).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::conntrack::{conntrack_warnings, ConntrackUse};
use super::REPORT_VERSION;
use crate::cpu::{node_cost, process_cost, CpuCost, CpuReport};
use crate::report::histogram;
use crate::report::http::tool_name;
use crate::report::LatencySummary;
use crate::Protocol;
use crate::ReportKind;

/// Failed transactions by cause (one count per transaction, not per connection).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RrErrors {
    /// The server refused: TCP RST to the SYN (nothing listens, or its accept queue
    /// overflowed), or ICMP port unreachable for udp-rr.
    pub refused: u64,
    /// TCP: no connection or no complete answer within the timeout.
    pub timeout: u64,
    /// TCP: the connection was reset or closed mid-transaction.
    pub reset: u64,
    /// EADDRNOTAVAIL: no free local (ephemeral) port for a new connection: port or TIME_WAIT
    /// exhaustion on the client.
    pub address_not_available: u64,
    /// Anything else (the message of the first one is the stream's `error`).
    pub other: u64,
}

impl RrErrors {
    fn all(&self) -> [u64; 5] {
        [
            self.refused,
            self.timeout,
            self.reset,
            self.address_not_available,
            self.other,
        ]
    }

    /// Every failed transaction, or `None` if the sum overflows.
    pub fn checked_total(&self) -> Option<u64> {
        self.all()
            .iter()
            .try_fold(0u64, |acc, v| acc.checked_add(*v))
    }

    pub fn checked_add(&self, o: &RrErrors) -> Option<RrErrors> {
        Some(RrErrors {
            refused: self.refused.checked_add(o.refused)?,
            timeout: self.timeout.checked_add(o.timeout)?,
            reset: self.reset.checked_add(o.reset)?,
            address_not_available: self
                .address_not_available
                .checked_add(o.address_not_available)?,
            other: self.other.checked_add(o.other)?,
        })
    }
}

/// What happened to the transactions of a run (or of a merge of runs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RrCounts {
    /// Transactions started in the measured window: requests sent (tcp-rr, udp-rr) or
    /// connections attempted (tcp-crr).
    pub attempted: u64,
    /// Open loop: intended send times of the measured window that were never used, because
    /// the stream was behind its schedule when the window closed (the client was short of CPU,
    /// every slot of its window was waiting for an answer, or the stream had ended early on an
    /// error). `attempted + skipped` is the schedule: every intended send time in the window.
    /// Always 0 in closed loop. (Absent from reports of older builds, which did not count
    /// them: 0.)
    #[serde(default)]
    pub skipped: u64,
    /// Answered in full: the latency histogram's samples.
    pub transactions: u64,
    pub errors: RrErrors,
    /// udp-rr: requests not answered within the timeout (the stream went on).
    pub lost: u64,
    /// udp-rr: answers that came after their request was counted lost (discarded).
    pub late: u64,
    /// udp-rr: second and later answers to one request (a duplicating network).
    pub duplicate: u64,
    /// udp-rr: datagrams that answer no request sent (wrong sequence number or size).
    pub invalid: u64,
}

impl RrCounts {
    /// Errors of every class plus losses, or `None` if the sum overflows.
    pub fn checked_failed(&self) -> Option<u64> {
        self.errors.checked_total()?.checked_add(self.lost)
    }

    pub fn checked_add(&self, o: &RrCounts) -> Option<RrCounts> {
        Some(RrCounts {
            attempted: self.attempted.checked_add(o.attempted)?,
            skipped: self.skipped.checked_add(o.skipped)?,
            transactions: self.transactions.checked_add(o.transactions)?,
            errors: self.errors.checked_add(&o.errors)?,
            lost: self.lost.checked_add(o.lost)?,
            late: self.late.checked_add(o.late)?,
            duplicate: self.duplicate.checked_add(o.duplicate)?,
            invalid: self.invalid.checked_add(o.invalid)?,
        })
    }

    /// udp-rr: percent of the requests whose fate is known by timing (answered or lost) that
    /// were lost.
    pub fn loss_percent(&self) -> f64 {
        let known = self.transactions.saturating_add(self.lost);
        if known == 0 {
            0.0
        } else {
            self.lost as f64 * 100.0 / known as f64
        }
    }
}

/// What was asked for: the same for every run of a report (a merge refuses to mix them).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RrSetup {
    /// `tcp-rr`, `tcp-crr` or `udp-rr`.
    pub mode: Protocol,
    pub request_size: u32,
    pub response_size: u32,
    /// Requests in flight per stream beyond the first (netperf `-b`): `1 + burst` in flight.
    pub burst: u32,
    /// Open loop: transactions per second asked of each stream (latency then counts from the
    /// intended send time); `None` = closed loop.
    pub rate_per_stream: Option<f64>,
    /// A request (tcp-crr: a connection) not answered within this is lost (udp-rr) or failed.
    pub timeout_ms: u64,
    /// Requests each stream kept in flight at most: `1 + burst`, or for an open-loop udp-rr
    /// the window of two timeouts of its schedule (see [`super::in_flight_window`]), so that a
    /// lost datagram never holds the stream. Absent from reports of older builds (which kept
    /// `1 + burst` in flight in every mode).
    #[serde(default)]
    pub max_in_flight: Option<u32>,
}

/// One client's test against one server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrRun {
    /// The client's address of the control connection.
    pub client: String,
    pub server: String,
    pub streams: u32,
    /// The measured window, from the start to the end of sending.
    pub duration_secs: f64,
    pub started_at_unix_ms: u64,
    pub ended_at_unix_ms: u64,
    pub transactions: u64,
    /// Of `transactions`, those answered by the end of the measured window; the others were
    /// answered in the drain after it (they count for latency and loss, not for the rate).
    /// Absent from reports of older builds, whose rate counted every transaction.
    #[serde(default)]
    pub transactions_in_window: Option<u64>,
    /// `transactions_in_window / duration_secs` (older builds: `transactions /
    /// duration_secs`): transactions completed in the window it is divided by.
    pub transactions_per_second: f64,
    /// Requests the server says it answered (never fewer than the client's transactions).
    pub server_answered: u64,
    /// CPU use of both ends over the test, in percent of one CPU.
    pub cpu: CpuReport,
    /// The client's conntrack table (its network namespace's) during the test; absent when it
    /// could not be read (then `conntrack_note` says why) and in reports of older builds.
    #[serde(default)]
    pub conntrack: Option<ConntrackUse>,
    /// Why `conntrack` is absent.
    #[serde(default)]
    pub conntrack_note: Option<String>,
}

/// One stream (connection, or sequence of connections for tcp-crr).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrStream {
    /// Index into [`RrReport::runs`].
    pub run: u32,
    pub id: u32,
    pub attempted: u64,
    /// Open loop: intended send times never used (see [`RrCounts::skipped`]); 0 in closed
    /// loop. `None` only in a report of an older build, which did not account for its
    /// schedule (so its schedule is not checked).
    #[serde(default)]
    pub skipped: Option<u64>,
    pub transactions: u64,
    /// Errors plus losses.
    pub failed: u64,
    /// Why the stream ended early, or its first error.
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrReport {
    pub version: u32,
    /// Always `"rr"`.
    pub kind: String,
    /// Producer, e.g. "netbench-loadgen 0.1.0".
    pub tool: String,
    #[serde(flatten)]
    pub setup: RrSetup,
    /// Streams of every run.
    pub streams: u32,
    pub started_at_unix_ms: u64,
    pub ended_at_unix_ms: u64,
    /// The longest run's measured window.
    pub duration_secs: f64,
    pub counts: RrCounts,
    /// Sum of the runs' rates (they ran at the same time).
    pub transactions_per_second: f64,
    /// Open loop: the transactions per second asked of all streams of all runs.
    pub requested_per_second: Option<f64>,
    /// udp-rr only: `lost / (transactions + lost)` in percent.
    pub loss_percent: Option<f64>,
    /// A connection failed for want of a local port (see [`RrErrors::address_not_available`]).
    pub port_exhausted: bool,
    /// Exact percentiles in microseconds, from `histogram`.
    pub latency: LatencySummary,
    /// base64(HDR V2 + DEFLATE) of the transactions' latencies in microseconds.
    pub histogram: String,
    /// Sum over runs, in percent of one CPU.
    pub cpu: CpuReport,
    /// CPU time each end's worker PROCESS spent per transaction, in microseconds (its CPU over
    /// its meter's window / the transactions answered in it); absent when there was none. Not
    /// netperf's service demand, which counts the whole node: see `node_cpu_us_per_transaction`.
    pub cpu_us_per_transaction: Option<CpuCost>,
    /// Each end's whole NODE's busy CPU time per transaction, in microseconds (/proc/stat over
    /// the meter's window: netperf's service demand, `-c`/`-C`); only in a report of one run
    /// whose two ends both read their node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_cpu_us_per_transaction: Option<CpuCost>,
    pub runs: Vec<RrRun>,
    pub per_stream: Vec<RrStream>,
}

impl RrReport {
    /// A single client run's report. `hist` holds the latencies of `counts.transactions`.
    pub fn single(
        setup: RrSetup,
        run: RrRun,
        counts: RrCounts,
        hist: &Histogram<u64>,
        per_stream: Vec<RrStream>,
    ) -> Result<RrReport, String> {
        let mut report = RrReport {
            version: REPORT_VERSION,
            kind: ReportKind::Rr.as_str().into(),
            tool: tool_name(),
            setup,
            streams: run.streams,
            started_at_unix_ms: run.started_at_unix_ms,
            ended_at_unix_ms: run.ended_at_unix_ms,
            duration_secs: run.duration_secs,
            counts,
            transactions_per_second: run.transactions_per_second,
            requested_per_second: setup.rate_per_stream.map(|r| r * f64::from(run.streams)),
            loss_percent: None,
            port_exhausted: false,
            latency: LatencySummary::from_histogram(hist),
            histogram: histogram::encode(hist)?,
            cpu: run.cpu,
            cpu_us_per_transaction: None,
            node_cpu_us_per_transaction: None,
            runs: vec![run],
            per_stream,
        };
        report.fill_derived();
        Ok(report)
    }

    /// The figures computed from the others: loss, exhaustion, service demand.
    pub(crate) fn fill_derived(&mut self) {
        self.loss_percent =
            (self.setup.mode == Protocol::UdpRr).then(|| self.counts.loss_percent());
        self.port_exhausted = self.counts.errors.address_not_available > 0;
        self.cpu_us_per_transaction = cpu_per_transaction(&self.runs, self.counts.transactions);
        self.node_cpu_us_per_transaction =
            node_cpu_per_transaction(&self.runs, self.counts.transactions);
    }

    /// Open loop: percent of the schedule never sent (`skipped` over `attempted + skipped`);
    /// None in closed loop (no schedule).
    pub fn missed_percent(&self) -> Option<f64> {
        self.setup.rate_per_stream?;
        Some(crate::report::missed_percent(
            self.counts.skipped,
            self.counts.attempted,
        ))
    }

    /// The latency histogram, decoded (with bounds).
    pub fn histogram(&self) -> Result<Histogram<u64>, String> {
        histogram::decode(&self.histogram)
    }

    /// Stream errors, one line each, for a human.
    pub fn stream_errors(&self) -> Vec<String> {
        self.per_stream
            .iter()
            .filter_map(|s| {
                s.error
                    .as_ref()
                    .map(|e| format!("stream {} (run {}): {e}", s.id, s.run))
            })
            .collect()
    }

    /// Lines a human must read beside the figures (port exhaustion, an open loop that fell
    /// behind its schedule), empty when none.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let c = &self.counts;
        if c.skipped > 0 {
            let scheduled = c.attempted.saturating_add(c.skipped);
            out.push(format!(
                "the open loop fell behind its schedule: {} of {scheduled} intended transactions \
                 were never sent (the client was short of CPU, every request of a stream's \
                 window was waiting for an answer, or a stream ended early on an error); the \
                 rate asked was not offered, and the latency figures leave those transactions \
                 out",
                c.skipped
            ));
        }
        if let Some((per_timeout, window)) = super::window_shortfall(&self.setup) {
            out.push(format!(
                "the rate asks for {per_timeout:.0} requests per stream within one {} ms timeout; \
                 a udp-rr stream keeps at most {window} in flight (two timeouts' worth is \
                 wanted): when its window is full of requests waiting for answers the stream falls behind its schedule \
                 (counted as skipped), and an answer late by more than a timeout may count as \
                 invalid rather than late; spread the rate over more streams or shorten the \
                 timeout",
                self.setup.timeout_ms
            ));
        }
        out.extend(conntrack_warnings(self));
        let e = &self.counts.errors;
        if self.port_exhausted {
            out.push(format!(
                "ephemeral ports exhausted: {} connection attempt(s) found no free local port \
                 (EADDRNOTAVAIL); the transaction rate is limited by the client's port range and \
                 TIME_WAIT, not by the path",
                e.address_not_available
            ));
        }
        out
    }
}

/// The worker processes' CPU microseconds of all runs (each over its meter's window) per
/// transaction.
pub(crate) fn cpu_per_transaction(runs: &[RrRun], transactions: u64) -> Option<CpuCost> {
    let runs = runs.iter().map(|r| (&r.cpu, r.duration_secs));
    process_cost(runs, transactions as f64, 1e6)
}

/// The nodes' busy CPU microseconds per transaction (one run only: see [`node_cost`]).
pub(crate) fn node_cpu_per_transaction(runs: &[RrRun], transactions: u64) -> Option<CpuCost> {
    let cpus: Vec<&CpuReport> = runs.iter().map(|r| &r.cpu).collect();
    node_cost(&cpus, transactions as f64, 1e6)
}

#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use crate::report::histogram::new_latency_histogram;

    /// A single-run udp-rr report as the client builds it: two streams, `latencies` answered
    /// (split between them), `lost` lost on stream 1, one late answer.
    pub(crate) fn rr_report(mode: Protocol, latencies: &[u64], lost: u64) -> RrReport {
        let mut h = new_latency_histogram();
        for &v in latencies {
            h.record(v).unwrap();
        }
        let n = latencies.len() as u64;
        let udp = mode == Protocol::UdpRr;
        let (lost, late) = if udp { (lost, lost.min(1)) } else { (0, 0) };
        let errors = RrErrors {
            refused: 1,
            ..RrErrors::default()
        };
        let counts = RrCounts {
            attempted: n + lost + 1,
            skipped: 0,
            transactions: n,
            errors,
            lost,
            late,
            duplicate: 0,
            invalid: 0,
        };
        let first = n / 2;
        let per_stream = vec![
            RrStream {
                run: 0,
                id: 0,
                attempted: first + 1,
                skipped: Some(0),
                transactions: first,
                failed: 1,
                error: Some("connection refused".into()),
            },
            RrStream {
                run: 0,
                id: 1,
                attempted: n - first + lost,
                skipped: Some(0),
                transactions: n - first,
                failed: lost,
                error: None,
            },
        ];
        let usage = |total: f64| crate::cpu::test_usage(total / 4.0, total * 3.0 / 4.0, total);
        let run = RrRun {
            client: "198.18.0.1:40000".into(),
            server: "198.18.0.2:5201".into(),
            streams: 2,
            duration_secs: 2.0,
            started_at_unix_ms: 1_000,
            ended_at_unix_ms: 3_100,
            transactions: n,
            transactions_in_window: Some(n),
            transactions_per_second: n as f64 / 2.0,
            server_answered: n + late,
            cpu: CpuReport {
                client: usage(40.0),
                server: usage(20.0),
            },
            conntrack: Some(ConntrackUse {
                at_start: 3,
                at_end: 5,
                highest: 9,
                max: 262_144,
            }),
            conntrack_note: None,
        };
        let setup = RrSetup {
            mode,
            request_size: 8,
            response_size: 64,
            burst: 1,
            rate_per_stream: None,
            timeout_ms: 100,
            max_in_flight: Some(2),
        };
        RrReport::single(setup, run, counts, &h, per_stream).unwrap()
    }
}
