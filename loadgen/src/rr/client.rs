//! The client of a request/response test: agrees on the test over the control connection,
//! opens its data path (tcp-rr: one connection per stream; udp-rr: one connected UDP socket
//! per stream; tcp-crr: connections made per transaction), runs one thread per stream until
//! the deadline and the answers in flight are settled, says `done`, reads the server's
//! figures and builds the report, which it validates before returning it (so a report whose
//! counts do not add up, or an open loop that does not account for its schedule, is never
//! returned).

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use protocol::report::histogram::new_latency_histogram;
use protocol::rr::{validate_rr, ConntrackUse, RrCounts, RrReport, RrRun, RrStream};
use protocol::tcp::CpuReport;
use protocol::Protocol;
use serde::Serialize;

use super::config::RrClientConfig;
use super::conntrack::ConntrackWatch;
use super::crr::{self, CrrPlan};
use super::net::udp_connect;
use super::pace::Pacer;
use super::record::{Recorder, StreamOutcome};
use super::tcp_rr::{self, StreamPlan};
use super::udp;
use crate::tcp::client::{
    expect, hello, nap, read_results, unix_ms, HANDSHAKE_TIMEOUT, PROGRESS_INTERVAL,
};
use crate::tcp::cpu::CpuMeter;
use crate::tcp::net::{self, Source};
use crate::tcp::protocol::{write_message, Message, PeerStream, RrParams, TestParams};
use crate::tcp::TcpError;

/// Time to open the control connection and each tcp-rr data connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A snapshot taken every second while the test runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RrProgress {
    pub elapsed_secs: f64,
    /// Transactions completed so far by this client's streams.
    pub transactions: u64,
    /// Over the last interval.
    pub interval_transactions_per_second: f64,
    /// Since the start.
    pub transactions_per_second: f64,
}

/// Receives the per-second progress snapshots.
pub type RrProgressSink<'a> = &'a mut dyn FnMut(&RrProgress);

/// Resolves the server and opens (then closes) one connection to it, so an unreachable
/// server is known before a worker joins the barrier.
pub fn preflight(cfg: &RrClientConfig) -> Result<(), TcpError> {
    let source = source_of(cfg);
    let server = net::resolve(&cfg.host, cfg.port, &source)?;
    net::connect(server, &source, CONNECT_TIMEOUT).map(drop)
}

fn source_of(cfg: &RrClientConfig) -> Source {
    Source {
        addr: cfg.bind_addr,
        device: cfg.bind_device.clone(),
    }
}

/// The data path of each mode, opened before the start.
enum DataPath {
    Tcp(Vec<TcpStream>),
    Crr,
    Udp(Vec<UdpSocket>),
}

/// Runs one test as configured and returns its (validated) report.
pub fn run(
    cfg: &RrClientConfig,
    mut progress: Option<RrProgressSink<'_>>,
) -> Result<RrReport, TcpError> {
    cfg.validate()?;
    let source = source_of(cfg);
    let server = net::resolve(&cfg.host, cfg.port, &source)?;
    let test = TestParams {
        protocol: cfg.protocol,
        streams: cfg.streams,
        duration_ms: u64::try_from(cfg.duration.as_millis()).unwrap_or(u64::MAX),
        len: 1,
        direction: protocol::tcp::Direction::Send,
        rr: Some(RrParams {
            request_size: cfg.request_size,
            response_size: cfg.response_size,
            timeout_ms: cfg.timeout_ms(),
        }),
        probe: None,
        udp: None,
    };
    let (control, cookie) = hello(server, &source, CONNECT_TIMEOUT, test)?;
    // The address the control connection reached (after any NAT decision on its way).
    let reached = control.peer_addr().unwrap_or(server);
    let data = open_data_path(cfg, &cookie, reached, &source)?;
    expect(&control, "start", |m| matches!(m, Message::Start))?;

    let started_at = unix_ms();
    let mut conntrack = ConntrackWatch::start();
    let meter = CpuMeter::start();
    let start = Instant::now();
    let streams = spawn_streams(cfg, data, reached, &source, start)?;
    drive(cfg, &streams, start, progress.as_mut(), &mut conntrack);
    let outcomes = streams.join();
    let client_cpu = meter.stop();
    conntrack.sample();
    let ended_at = unix_ms();

    write_message(&control, &Message::Done)?;
    let (peer, server_cpu) = read_results(&control, HANDSHAKE_TIMEOUT + cfg.timeout)?;
    let run = RunFacts {
        client: control
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        server: server.to_string(),
        started_at,
        ended_at,
        cpu: CpuReport {
            client: client_cpu,
            server: server_cpu,
        },
        conntrack: conntrack.finish(),
    };
    let report = build_report(cfg, run, outcomes, &peer)?;
    validate_rr(&report).map_err(|e| {
        TcpError::Protocol(format!(
            "the test's figures do not add up ({e}); not reporting them"
        ))
    })?;
    Ok(report)
}

fn open_data_path(
    cfg: &RrClientConfig,
    cookie: &str,
    server: SocketAddr,
    source: &Source,
) -> Result<DataPath, TcpError> {
    match cfg.protocol {
        Protocol::TcpRr => {
            let mut conns = Vec::new();
            for id in 0..cfg.streams {
                let conn = net::connect(server, source, CONNECT_TIMEOUT)?;
                write_message(&conn, &Message::data(cookie, id))?;
                conns.push(conn);
            }
            Ok(DataPath::Tcp(conns))
        }
        Protocol::UdpRr => (0..cfg.streams)
            .map(|_| {
                udp_connect(server, source)
                    .map_err(|e| TcpError::io(format!("opening a UDP socket to {server}"), e))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(DataPath::Udp),
        _ => Ok(DataPath::Crr),
    }
}

/// The stream threads of a running test.
struct Streams {
    handles: Vec<JoinHandle<StreamOutcome>>,
    live: Vec<Arc<AtomicU64>>,
    /// Each stream's schedule in open loop (0 in closed loop): all of it counts as skipped
    /// if the stream's thread is lost.
    schedules: Vec<u64>,
}

impl Streams {
    fn transactions(&self) -> u64 {
        self.live
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .fold(0, u64::saturating_add)
    }

    fn all_finished(&self) -> bool {
        self.handles.iter().all(JoinHandle::is_finished)
    }

    fn join(self) -> Vec<StreamOutcome> {
        self.handles
            .into_iter()
            .zip(self.schedules)
            .map(|(h, schedule)| {
                h.join().unwrap_or_else(|_| StreamOutcome {
                    counts: RrCounts {
                        skipped: schedule,
                        ..RrCounts::default()
                    },
                    error: Some("stream thread panicked".into()),
                    ..StreamOutcome::default()
                })
            })
            .collect()
    }
}

fn spawn_streams(
    cfg: &RrClientConfig,
    data: DataPath,
    server: SocketAddr,
    source: &Source,
    start: Instant,
) -> Result<Streams, TcpError> {
    let deadline = start + cfg.duration;
    let n = usize::try_from(cfg.streams).unwrap_or(1);
    let pacer = |id: usize| match cfg.rate_per_stream {
        Some(rate) => Pacer::open(start, rate, id as f64 / n as f64),
        None => Pacer::closed(),
    };
    let mut streams = Streams {
        handles: Vec::with_capacity(n),
        live: Vec::with_capacity(n),
        schedules: Vec::with_capacity(n),
    };
    let mut spawn = |id: usize, body: Box<dyn FnOnce(Recorder) -> StreamOutcome + Send>| {
        let live = Arc::new(AtomicU64::new(0));
        streams.live.push(live.clone());
        streams.schedules.push(pacer(id).skip_until(deadline));
        thread::Builder::new()
            .name(format!("nb-rr-{id}"))
            .spawn(move || body(Recorder::new(live).window_ends_at(deadline)))
            .map(|h| streams.handles.push(h))
            .map_err(|e| TcpError::io("starting a stream thread", e))
    };
    // A tcp-rr or udp-rr stream's plan.
    let plan = |id: usize| StreamPlan {
        request_size: cfg.request_size,
        response_size: cfg.response_size,
        window: usize::try_from(cfg.window()).unwrap_or(usize::MAX),
        deadline,
        timeout: cfg.timeout,
        pacer: pacer(id),
    };
    match data {
        DataPath::Tcp(conns) => {
            for (id, conn) in conns.into_iter().enumerate() {
                let plan = plan(id);
                spawn(id, Box::new(move |rec| tcp_rr::run_client(conn, plan, rec)))?;
            }
        }
        DataPath::Udp(socks) => {
            for (id, sock) in socks.into_iter().enumerate() {
                let plan = plan(id);
                spawn(id, Box::new(move |rec| udp::run_client(&sock, plan, rec)))?;
            }
        }
        DataPath::Crr => {
            for id in 0..n {
                let plan = CrrPlan {
                    server,
                    source: source.clone(),
                    request_size: cfg.request_size,
                    response_size: cfg.response_size,
                    deadline,
                    timeout: cfg.timeout,
                    pacer: pacer(id),
                };
                spawn(id, Box::new(move |rec| crr::run_client(plan, rec)))?;
            }
        }
    }
    Ok(streams)
}

/// Reports progress and reads the conntrack table every second until every stream has ended
/// (each ends by itself: at the deadline plus, at most, twice the timeout for its answers in
/// flight).
fn drive(
    cfg: &RrClientConfig,
    streams: &Streams,
    start: Instant,
    mut progress: Option<&mut RrProgressSink<'_>>,
    conntrack: &mut ConntrackWatch,
) {
    let deadline = start + cfg.duration;
    let mut next_tick = start + PROGRESS_INTERVAL;
    let mut last = (start, 0u64);
    while !streams.all_finished() {
        let now = Instant::now();
        if now >= next_tick && now < deadline {
            conntrack.sample();
            if let Some(sink) = progress.as_mut() {
                let done = streams.transactions();
                let rate = |n: u64, since: Instant| {
                    let secs = (now - since).as_secs_f64();
                    if secs > 0.0 {
                        n as f64 / secs
                    } else {
                        0.0
                    }
                };
                sink(&RrProgress {
                    elapsed_secs: (now - start).as_secs_f64(),
                    transactions: done,
                    interval_transactions_per_second: rate(done.saturating_sub(last.1), last.0),
                    transactions_per_second: rate(done, start),
                });
                last = (now, done);
            }
            next_tick += PROGRESS_INTERVAL;
        }
        nap(now, deadline, next_tick);
    }
}

/// What the report says about the run besides the streams' figures.
struct RunFacts {
    client: String,
    server: String,
    started_at: u64,
    ended_at: u64,
    cpu: CpuReport,
    /// The client's conntrack table, or why it could not be read.
    conntrack: (Option<ConntrackUse>, Option<String>),
}

fn build_report(
    cfg: &RrClientConfig,
    facts: RunFacts,
    outcomes: Vec<StreamOutcome>,
    peer: &[PeerStream],
) -> Result<RrReport, TcpError> {
    let overflow = || TcpError::Protocol("the test's counts overflow".into());
    let mut hist: Histogram<u64> = new_latency_histogram();
    let mut counts = RrCounts::default();
    let mut in_window = 0u64;
    let mut per_stream = Vec::with_capacity(outcomes.len());
    for (id, o) in (0u32..).zip(outcomes) {
        in_window = in_window
            .checked_add(o.answered_in_window.min(o.counts.transactions))
            .ok_or_else(overflow)?;
        hist.add(&o.hist)
            .map_err(|e| TcpError::Protocol(format!("merging latencies: {e:?}")))?;
        counts = counts.checked_add(&o.counts).ok_or_else(overflow)?;
        per_stream.push(RrStream {
            run: 0,
            id,
            attempted: o.counts.attempted,
            skipped: Some(o.counts.skipped),
            transactions: o.counts.transactions,
            failed: o.counts.checked_failed().ok_or_else(overflow)?,
            error: o.error,
        });
    }
    let server_answered = peer
        .iter()
        .try_fold(0u64, |acc, p| acc.checked_add(p.transactions))
        .ok_or_else(overflow)?;
    let duration_secs = cfg.duration.as_secs_f64();
    let run = RrRun {
        client: facts.client,
        server: facts.server,
        streams: cfg.streams,
        duration_secs,
        started_at_unix_ms: facts.started_at,
        ended_at_unix_ms: facts.ended_at,
        transactions: counts.transactions,
        // Answers of the drain after the window are transactions (latency, loss), not rate.
        transactions_in_window: Some(in_window),
        transactions_per_second: in_window as f64 / duration_secs,
        server_answered,
        cpu: facts.cpu,
        conntrack: facts.conntrack.0,
        conntrack_note: facts.conntrack.1,
    };
    RrReport::single(cfg.setup(), run, counts, &hist, per_stream).map_err(TcpError::Protocol)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One stream of a 2 s test: `answered` transactions, `in_window` of them by the deadline.
    fn outcome(answered: u64, in_window: u64) -> StreamOutcome {
        let mut o = StreamOutcome::default();
        for _ in 0..answered {
            o.hist.record(100).unwrap();
        }
        o.counts.attempted = answered;
        o.counts.transactions = answered;
        o.answered_in_window = in_window;
        o
    }

    #[test]
    fn answers_of_the_drain_do_not_inflate_the_rate() {
        // Closed loop, 2 s, a 60 s timeout: 1000 answered in the window, and 500 in flight at
        // the deadline answered during the drain (as a slow server under a long timeout does).
        let cfg = RrClientConfig {
            duration: Duration::from_secs(2),
            timeout: Duration::from_secs(60),
            streams: 2,
            burst: 249,
            ..RrClientConfig::new(Protocol::TcpRr, "h")
        };
        let facts = RunFacts {
            client: "c".into(),
            server: "s".into(),
            started_at: 1_000,
            ended_at: 63_000,
            cpu: CpuReport::default(),
            conntrack: (None, Some("not read in this test".into())),
        };
        let peer = [0, 1].map(|id| PeerStream {
            id,
            bytes: 0,
            seconds: 2.0,
            tcp: None,
            error: None,
            transactions: 750,
        });
        let outcomes = vec![outcome(750, 500), outcome(750, 500)];
        let r = build_report(&cfg, facts, outcomes, &peer).unwrap();
        validate_rr(&r).unwrap();
        assert_eq!(
            r.counts.transactions, 1500,
            "drain answers are transactions"
        );
        assert_eq!(r.latency.count, 1500);
        assert_eq!(r.runs[0].transactions_in_window, Some(1000));
        assert_eq!(
            r.transactions_per_second, 500.0,
            "1000 in the window over 2 s"
        );
    }
}
