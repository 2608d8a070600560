//! Realistic worker reports, built with the `protocol` crate's own types and constructors
//! (`HttpReport::from_run`, `TcpReport::single`, `RrReport::single`, `UdpReport::single`, as the
//! real loadgen builds them), so they pass the operator's `protocol::worker::validate_final` for
//! the same reasons a real worker's do: every sample is one request and one histogram count,
//! the summaries are the histogram's, the rates are the counts over the window, every request
//! or datagram is answered, lost or failed. Nothing here copies a protocol rule.

use std::f64::consts::PI;

use hdrhistogram::Histogram;
use protocol::report::histogram::{new_latency_histogram, LATENCY_MAX_US};
use protocol::report::{Counters, HttpReport, HttpRunConfig, Report, StatusCounts, ThreadSummary};
use protocol::rr::{in_flight_window, ConntrackUse, RrCounts, RrReport, RrRun, RrSetup, RrStream};
use protocol::tcp::{
    CpuReport, CpuUsage, Direction, Flow, RunSummary, StreamReport, TcpInfoSnapshot, TcpReport,
    Throughput,
};
use protocol::udp::{CpuSeconds, Rate, Received, Sent, UdpReport, UdpRun, UdpStream};
use protocol::Protocol;
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

/// What an HTTP worker was asked to do (from its `netbench-loadgen http ...` arguments): the
/// run configuration its report carries (`rate`, open loop: this worker's requests per second).
pub type HttpShape = HttpRunConfig;

/// How many requests a worker of this shape completes in its measured window: closed loop,
/// each connection one request at a time at the model's mean latency; open loop, the rate.
/// At most `cap` (the simulator's CPU is shared by hundreds of workers), at least 1.
pub fn http_requests(shape: &HttpShape, model: &LatencyModel, cap: u64) -> u64 {
    let per_second = match shape.rate {
        Some(rate) => rate,
        None => shape.connections as f64 * 1e6 / model.mean_us().max(1.0),
    };
    let n = (per_second * shape.duration_s).round();
    if n.is_finite() && n >= 1.0 {
        (n as u64).min(cap.max(1))
    } else {
        1
    }
}

/// The requests of the warm-up (counted, never in the histogram).
fn warmup_requests(shape: &HttpShape, measured: u64) -> u64 {
    if shape.duration_s <= 0.0 {
        return 0;
    }
    let n = (measured as f64 * shape.warmup_s / shape.duration_s).round();
    if n.is_finite() && n >= 0.0 {
        n as u64
    } else {
        0
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
        warmup_requests: warmup_requests(shape, n),
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
        connections: shape.connections.max(threads),
        threads,
        ..shape.clone()
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

/// The client's address of the control connection, as the reports name it.
const CLIENT: &str = "sim:40000";

/// One end's CPU use: `busy` percent of one CPU over a meter window of `seconds`.
fn usage(busy: f64, seconds: f64) -> CpuUsage {
    CpuUsage {
        user_percent: busy * 0.2,
        system_percent: busy * 0.8,
        total_percent: busy,
        seconds: Some(seconds),
        ..CpuUsage::default()
    }
}

/// Unix ms `secs` after `start`.
fn after(start: u64, secs: f64) -> u64 {
    start.saturating_add((secs * 1000.0).round() as u64)
}

/// What a request/response client was asked to do (`netbench-loadgen tcp-client --protocol
/// tcp-rr|tcp-crr|udp-rr ...`).
#[derive(Clone, Debug, PartialEq)]
pub struct RrShape {
    pub mode: Protocol,
    pub streams: u32,
    pub duration_s: f64,
    pub request_size: u32,
    pub response_size: u32,
    /// Requests in flight per stream beyond the first (netperf `-b`).
    pub burst: u32,
    /// Open loop: transactions per second of each stream; None: closed loop.
    pub rate: Option<f64>,
    /// udp-rr: an answer later than this is lost; TCP: a slower answer failed.
    pub timeout_ms: u64,
}

/// Share of udp-rr requests or answers the simulated network drops (never answered).
const UDP_RR_DROP_SHARE: f64 = 1e-4;

impl RrShape {
    /// What the report says was asked for, with the window the loadgen keeps in flight.
    pub fn setup(&self) -> RrSetup {
        let mut setup = RrSetup {
            mode: self.mode,
            request_size: self.request_size,
            response_size: self.response_size,
            burst: self.burst,
            rate_per_stream: self.rate,
            timeout_ms: self.timeout_ms,
            max_in_flight: None,
        };
        setup.max_in_flight = Some(in_flight_window(&setup));
        setup
    }

    /// The latency of one transaction: a round trip without the HTTP target's work behind it,
    /// an eighth of `http`'s median (100 µs at the default 800 µs), with its spread and tail;
    /// three round trips for tcp-crr (handshake, request and answer, close).
    pub fn model(&self, http: &LatencyModel) -> LatencyModel {
        let trips = if self.mode.connects_per_transaction() {
            3.0
        } else {
            1.0
        };
        LatencyModel {
            median_us: (http.median_us / 8.0 * trips).max(1.0),
            ..*http
        }
    }

    /// Requests each stream keeps in flight on average: `1 + burst` in closed loop; in open
    /// loop the rate times a mean latency of `mean_us`, within the window.
    fn in_flight(&self, mean_us: f64) -> u64 {
        let window = u64::from(in_flight_window(&self.setup()));
        match self.rate {
            None => u64::from(self.burst) + 1,
            Some(rate) => ((rate * mean_us / 1e6).ceil() as u64).clamp(1, window.max(1)),
        }
    }
}

/// A request/response client's measurement, drawn before the barrier (that CPU work must not
/// delay the start).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RrDraw {
    /// Transactions each stream started in the window (open loop: its whole schedule).
    pub attempted: Vec<u64>,
    /// The answered transactions: a latency in µs and how many transactions it stands for. At
    /// most `cap` latencies are drawn however many transactions the streams made (hundreds of
    /// workers share this process's CPU); each stands for an equal share of them, give or take
    /// one, so the counts add up to what was attempted and not lost.
    pub answered: Vec<(u64, u64)>,
    /// udp-rr: requests not answered within the timeout (dropped, or answered too late)...
    pub lost: u64,
    /// ...and of those, the ones whose answer came after the timeout.
    pub late: u64,
}

impl RrDraw {
    /// Transactions answered.
    pub fn transactions(&self) -> u64 {
        self.answered
            .iter()
            .fold(0u64, |acc, (_, n)| acc.saturating_add(*n))
    }

    /// The latency histogram of the answered transactions, each latency with its count.
    pub fn histogram(&self) -> Result<Histogram<u64>, String> {
        let mut h = new_latency_histogram();
        for &(v, n) in &self.answered {
            h.record_n(v, n)
                .map_err(|e| format!("cannot record {n} x {v} us: {e:?}"))?;
        }
        Ok(h)
    }

    /// Mean latency of the answered transactions, µs (0 without any).
    fn mean_us(&self) -> f64 {
        let n = self.transactions();
        if n == 0 {
            return 0.0;
        }
        let sum: f64 = self
            .answered
            .iter()
            .map(|&(v, count)| v as f64 * count as f64)
            .sum();
        sum / n as f64
    }
}

/// Draws what a client of `shape` measures with transactions of `model`'s latency: closed
/// loop, each stream keeps `1 + burst` requests in flight for the window (give or take 5 %;
/// udp-rr's dropped requests hold theirs for the timeout);
/// open loop, each stream sends its whole schedule (`rate` x the window). udp-rr loses a
/// request the network drops, or whose answer comes after the timeout (then also counted
/// late); TCP answers every one (within its timeout: the loadgen's default 10 s is far beyond
/// the model's tail).
pub fn draw_rr<R: Rng>(shape: &RrShape, model: &LatencyModel, cap: u64, rng: &mut R) -> RrDraw {
    let secs = shape.duration_s.max(1e-3);
    let timeout_us = shape.timeout_ms.saturating_mul(1000);
    let udp = shape.mode.is_udp();
    // Closed loop, a dropped udp-rr request holds its slot for the whole timeout.
    let cost_us = model.mean_us()
        + if udp {
            UDP_RR_DROP_SHARE * timeout_us as f64
        } else {
            0.0
        };
    let per_stream = |rng: &mut R| -> u64 {
        let n = match shape.rate {
            Some(rate) => (rate * secs).round(),
            None => {
                let per_second = shape.in_flight(model.mean_us()) as f64 * 1e6 / cost_us.max(1.0);
                (per_second * secs * (0.95 + 0.1 * rng.random::<f64>()))
                    .round()
                    .max(1.0)
            }
        };
        // Saturating; NaN (never: validated shapes) is 0.
        n as u64
    };
    let attempted: Vec<u64> = (0..shape.streams.max(1)).map(|_| per_stream(rng)).collect();
    let total = attempted.iter().fold(0u64, |acc, n| acc.saturating_add(*n));
    let drawn = total.min(cap.max(1));
    let mut draw = RrDraw {
        attempted,
        ..RrDraw::default()
    };
    if drawn == 0 {
        return draw;
    }
    let (each, rest) = (total / drawn, total % drawn);
    for i in 0..drawn {
        let count = each + u64::from(i < rest);
        let latency = model.sample(rng);
        if udp && rng.random::<f64>() < UDP_RR_DROP_SHARE {
            draw.lost += count;
        } else if udp && latency > timeout_us {
            draw.lost += count;
            draw.late += count;
        } else {
            draw.answered.push((latency.min(timeout_us.max(1)), count));
        }
    }
    draw
}

/// Splits `total` over parts of at most `caps[i]` each, in proportion to the caps (largest
/// share first for the remainder). `total` must not exceed the caps' sum.
fn split_within(total: u64, caps: &[u64]) -> Vec<u64> {
    let sum: u128 = caps.iter().map(|c| u128::from(*c)).sum();
    if sum == 0 {
        return vec![0; caps.len()];
    }
    let mut out: Vec<u64> = caps
        .iter()
        .map(|c| {
            let share = u128::from(total) * u128::from(*c) / sum;
            u64::try_from(share).unwrap_or(u64::MAX).min(*c)
        })
        .collect();
    let mut left = total.saturating_sub(out.iter().sum());
    for (o, c) in out.iter_mut().zip(caps) {
        let room = c.saturating_sub(*o).min(left);
        *o += room;
        left -= room;
    }
    out
}

/// The rr report of one client of `shape` that measured `draw` against `server` from
/// `start_unix_ms`, as the loadgen's client builds it (loadgen/src/rr/client.rs): the streams'
/// counts, the transactions answered in the drain after the window left out of the rate, the
/// server's count of answers (late ones included), both ends' CPU and the client's conntrack
/// table.
pub fn rr_report<R: Rng>(
    shape: &RrShape,
    draw: &RrDraw,
    server: &str,
    start_unix_ms: u64,
    rng: &mut R,
) -> Result<RrReport, String> {
    let secs = shape.duration_s.max(1e-3);
    let hist = draw.histogram()?;
    let transactions = hist.len();
    let failed = split_within(draw.lost, &draw.attempted);
    let in_flight = shape.in_flight(draw.mean_us());
    let mut drained = 0u64;
    let per_stream: Vec<RrStream> = draw
        .attempted
        .iter()
        .zip(&failed)
        .enumerate()
        .map(|(id, (&attempted, &failed))| {
            let answered = attempted.saturating_sub(failed);
            drained = drained.saturating_add(answered.min(in_flight));
            RrStream {
                run: 0,
                id: u32::try_from(id).unwrap_or(u32::MAX),
                attempted,
                skipped: Some(0),
                transactions: answered,
                failed,
                error: None,
            }
        })
        .collect();
    let attempted = draw
        .attempted
        .iter()
        .fold(0u64, |acc, n| acc.saturating_add(*n));
    let counts = RrCounts {
        attempted,
        transactions,
        lost: draw.lost,
        late: draw.late,
        ..RrCounts::default()
    };
    let in_window = transactions.saturating_sub(drained);
    let streams = u64::from(shape.streams.max(1));
    let at_start: u64 = rng.random_range(300..3000);
    // tcp-crr leaves every connection in TIME_WAIT (tracked for 120 s): one entry each.
    let entries = if shape.mode.connects_per_transaction() {
        attempted
    } else {
        streams
    };
    const CONNTRACK_MAX: u64 = 262_144;
    let highest = at_start.saturating_add(entries).min(CONNTRACK_MAX);
    let busy = |base: f64, rng: &mut R| (base + 10.0 * rng.random::<f64>()) * streams.min(4) as f64;
    let drain_ms = hist.max() / 1000 + 1;
    let run = RrRun {
        client: CLIENT.into(),
        server: server.to_string(),
        streams: shape.streams.max(1),
        duration_secs: secs,
        started_at_unix_ms: start_unix_ms,
        ended_at_unix_ms: after(start_unix_ms, secs).saturating_add(drain_ms),
        transactions,
        transactions_in_window: Some(in_window),
        transactions_per_second: in_window as f64 / secs,
        server_answered: transactions.saturating_add(draw.late),
        cpu: CpuReport {
            client: usage(busy(30.0, rng), secs),
            server: usage(busy(20.0, rng), secs),
        },
        conntrack: Some(ConntrackUse {
            at_start,
            at_end: highest,
            highest,
            max: CONNTRACK_MAX,
        }),
        conntrack_note: None,
    };
    RrReport::single(shape.setup(), run, counts, &hist, per_stream)
}

/// What a UDP stream client was asked to do (`netbench-loadgen tcp-client --protocol
/// udp-stream ...`).
#[derive(Clone, Debug, PartialEq)]
pub struct UdpShape {
    pub streams: u32,
    pub duration_s: f64,
    /// Bytes of UDP payload per datagram.
    pub len: usize,
    pub direction: Direction,
    /// The pace of each sending stream, datagrams per second; None: as fast as possible.
    pub packets_per_second: Option<f64>,
}

impl UdpShape {
    /// Datagrams per second of each sending stream: its pace, or as fast as possible `gbps`
    /// Gbit/s over all of them.
    fn pace(&self, gbps: f64) -> f64 {
        self.packets_per_second.unwrap_or_else(|| {
            let flows = self.direction.flows(self.streams.max(1)).len().max(1);
            gbps * 1e9 / 8.0 / self.len.max(1) as f64 / flows as f64
        })
    }
}

/// The streams of a UDP client of `shape`, drawn before the barrier: each sender keeps its
/// pace (a few sends more than 1 ms late) or, unpaced, sends about `gbps` Gbit/s over all
/// streams; the network loses up to 0.05 % and reorders a few; the receiver's jitter is some
/// µs. Each stream as the client pairs both ends' views (loadgen/src/udp/client.rs).
pub fn udp_streams<R: Rng>(shape: &UdpShape, gbps: f64, rng: &mut R) -> Vec<UdpStream> {
    let secs = shape.duration_s.max(1e-3);
    let len = shape.len as u64;
    let pps = shape.pace(gbps);
    let paced = shape.packets_per_second.is_some();
    shape
        .direction
        .flows(shape.streams.max(1))
        .into_iter()
        .enumerate()
        .map(|(id, flow)| {
            let packets = if paced {
                (pps * secs).floor()
            } else {
                (pps * secs * (0.9 + 0.2 * rng.random::<f64>())).round()
            } as u64;
            let late = if paced {
                rng.random_range(0..=packets / 500)
            } else {
                0
            };
            let last = match packets {
                0 => None,
                n if paced => Some(((n - 1) as f64 / pps).min(secs)),
                _ => Some(secs),
            };
            let sent = Sent {
                late,
                last_send_seconds: last,
                ..Sent::new(packets, packets.saturating_mul(len), secs)
            };
            let lost = (packets as f64 * 0.0005 * rng.random::<f64>()).round() as u64;
            let got = packets.saturating_sub(lost);
            // Both rates over the window the datagrams were sent in, as the client reports them.
            let received = Received {
                out_of_order: rng.random_range(0..=got / 5000),
                kernel_drops: Some(0),
                ..Received::new(got, got.saturating_mul(len), sent.seconds)
            };
            UdpStream {
                jitter_ms: (got >= 2).then(|| 0.002 + 0.02 * rng.random::<f64>()),
                rcvbuf_bytes: Some(8 << 20),
                ..UdpStream::new(u32::try_from(id).unwrap_or(u32::MAX), flow, sent, received)
            }
        })
        .collect()
}

/// The udp report of one client of `shape` whose `streams` ran against `server` from
/// `start_unix_ms`.
pub fn udp_report<R: Rng>(
    shape: &UdpShape,
    streams: Vec<UdpStream>,
    server: &str,
    start_unix_ms: u64,
    rng: &mut R,
) -> UdpReport {
    let secs = shape.duration_s.max(1e-3);
    let (client, server_busy) = (
        15.0 + 10.0 * rng.random::<f64>(),
        20.0 + 10.0 * rng.random::<f64>(),
    );
    let run = UdpRun {
        client: CLIENT.into(),
        server: server.to_string(),
        streams: shape.streams.max(1),
        duration_secs: secs,
        len: shape.len,
        direction: shape.direction,
        target: shape.packets_per_second.map(|pps| Rate {
            bits_per_second: pps * shape.len as f64 * 8.0,
            packets_per_second: pps,
        }),
        started_at_unix_ms: start_unix_ms,
        ended_at_unix_ms: after(start_unix_ms, secs).saturating_add(1),
        cpu: CpuReport {
            client: usage(client, secs),
            server: usage(server_busy, secs),
        },
        cpu_seconds: CpuSeconds {
            client: client / 100.0 * secs,
            server: server_busy / 100.0 * secs,
        },
    };
    UdpReport::single(run, streams)
}

/// Bits per second the streams send, and the loss (percent) of those the client receives
/// (None where it only sends): what a udp-stream worker's progress says.
pub fn udp_progress(streams: &[UdpStream]) -> (f64, Option<f64>) {
    let bits = streams.iter().map(|s| s.sent.bits_per_second).sum();
    let (sent, lost) = streams
        .iter()
        .filter(|s| s.flow == Flow::ServerToClient)
        .fold((0u64, 0u64), |(sent, lost), s| {
            (
                sent.saturating_add(s.sent.packets),
                lost.saturating_add(s.lost),
            )
        });
    let has_incoming = streams.iter().any(|s| s.flow == Flow::ServerToClient);
    let loss = has_incoming.then(|| {
        if sent == 0 {
            0.0
        } else {
            lost as f64 * 100.0 / sent as f64
        }
    });
    (bits, loss)
}

/// The engine report as the worker sends it (`{"version":1,"kind":...}`).
pub fn http_json(report: &HttpReport) -> Result<serde_json::Value, String> {
    serde_json::to_value(Report::Http(report.clone())).map_err(|e| e.to_string())
}

pub fn tcp_json(report: &TcpReport) -> Result<serde_json::Value, String> {
    serde_json::to_value(report).map_err(|e| e.to_string())
}

pub fn rr_json(report: &RrReport) -> Result<serde_json::Value, String> {
    serde_json::to_value(report).map_err(|e| e.to_string())
}

pub fn udp_json(report: &UdpReport) -> Result<serde_json::Value, String> {
    serde_json::to_value(report).map_err(|e| e.to_string())
}
