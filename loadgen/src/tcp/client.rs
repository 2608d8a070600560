//! `tcp-client`: runs one test against a `tcp-server` and builds the report.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ::protocol::tcp::{CpuReport, CpuUsage, Flow, RunSummary, StreamReport, TcpReport, Throughput};
use ::protocol::Protocol;
use serde::Serialize;

use super::config::TcpClientConfig;
use super::cpu::CpuMeter;
use super::net::{self, Source};
use super::protocol::{read_message, write_message, Message, PeerStream, TestParams};
use super::stream::{Role, RunningStreams, StreamOutcome};
use super::TcpError;
use crate::rr::probe::{self, RunningProbe};

/// Time the server gets to answer the hello and to confirm the data connections.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(15);
/// How often progress snapshots are taken (every engine's client).
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// A snapshot taken every second while the test runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TcpProgress {
    pub elapsed_secs: f64,
    /// Bytes moved by this client's streams so far (sent or received, whichever they do).
    pub bytes: u64,
    /// Rate over the last interval.
    pub interval_bits_per_second: f64,
    /// Rate since the start.
    pub bits_per_second: f64,
}

/// Receives the per-second progress snapshots.
pub type ProgressSink<'a> = &'a mut dyn FnMut(&TcpProgress);

/// Runs one test as configured and returns its report.
/// Resolves the server and opens (then closes) one connection to it, so an unreachable server
/// is known before a worker joins the barrier. The server drops a connection that sends no
/// test request (it logs it and carries on).
pub fn preflight(cfg: &TcpClientConfig) -> Result<(), TcpError> {
    let source = Source {
        addr: cfg.bind_addr,
        device: cfg.bind_device.clone(),
    };
    let server = net::resolve(&cfg.host, cfg.port, &source)?;
    net::connect(server, &source, cfg.connect_timeout).map(drop)
}

pub fn run(
    cfg: &TcpClientConfig,
    progress: Option<ProgressSink<'_>>,
) -> Result<TcpReport, TcpError> {
    cfg.validate()?;
    let test = Connected::open(cfg)?;

    let started_at = unix_ms();
    let meter = CpuMeter::start();
    let start = Instant::now();
    let streams = RunningStreams::spawn(test.conns, cfg.len, cfg.idle_timeout, start)?;
    let probe = match (test.probe, cfg.latency_probe) {
        (Some(conn), Some(rate)) => Some(RunningProbe::start(
            conn,
            rate,
            start,
            start + cfg.duration,
        )?),
        _ => None,
    };
    drive(cfg, &streams, start, progress);
    let outcomes = streams.join();
    let probe = probe.map(RunningProbe::finish).transpose()?;
    let client_cpu = meter.stop();
    let ended_at = unix_ms();

    let (peer, server_cpu) = read_results(&test.control, cfg.idle_timeout + HANDSHAKE_TIMEOUT)?;
    let reports = stream_reports(&test.flows, outcomes, peer)?;
    let run = RunSummary {
        client: test
            .control
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        server: test.server.to_string(),
        streams: cfg.streams,
        duration_secs: cfg.duration.as_secs_f64(),
        len: cfg.len,
        direction: cfg.direction,
        started_at_unix_ms: started_at,
        ended_at_unix_ms: ended_at,
        cpu: CpuReport {
            client: client_cpu,
            server: server_cpu,
        },
    };
    let report = TcpReport::single(run, reports);
    Ok(match probe {
        Some(p) => report.with_probe(p),
        None => report,
    })
}

/// A test the server accepted, with every data connection open and the start signal received.
struct Connected {
    server: SocketAddr,
    control: TcpStream,
    flows: Vec<Flow>,
    conns: Vec<(TcpStream, Role)>,
    /// The latency probe's connection (stream id = the number of flows).
    probe: Option<TcpStream>,
}

impl Connected {
    fn open(cfg: &TcpClientConfig) -> Result<Self, TcpError> {
        let source = Source {
            addr: cfg.bind_addr,
            device: cfg.bind_device.clone(),
        };
        let server = net::resolve(&cfg.host, cfg.port, &source)?;
        let test = TestParams {
            protocol: Protocol::TcpStream,
            streams: cfg.streams,
            duration_ms: cfg.duration.as_millis().min(u128::from(u64::MAX)) as u64,
            len: cfg.len,
            direction: cfg.direction,
            rr: None,
            probe: cfg.latency_probe.map(|_| probe::params()),
            udp: None,
        };
        let (control, cookie) = hello(server, &source, cfg.connect_timeout, test)?;

        let flows = cfg.direction.flows(cfg.streams);
        let mut conns = Vec::with_capacity(flows.len());
        for (id, flow) in flows.iter().enumerate() {
            let conn = net::connect(server, &source, cfg.connect_timeout)?;
            write_message(&conn, &Message::data(&cookie, id as u32))?;
            conns.push((conn, client_role(*flow)));
        }
        let probe = match cfg.latency_probe {
            Some(_) => {
                let conn = net::connect(server, &source, cfg.connect_timeout)?;
                let id = u32::try_from(flows.len()).unwrap_or(u32::MAX);
                write_message(&conn, &Message::data(&cookie, id))?;
                Some(conn)
            }
            None => None,
        };
        expect(&control, "start", |m| matches!(m, Message::Start))?;
        Ok(Connected {
            server,
            control,
            flows,
            conns,
            probe,
        })
    }
}

fn client_role(flow: Flow) -> Role {
    match flow {
        Flow::ClientToServer => Role::Sender,
        Flow::ServerToClient => Role::Receiver,
    }
}

/// Reports progress every second, stops the senders at the deadline, waits for every stream.
fn drive(
    cfg: &TcpClientConfig,
    streams: &RunningStreams,
    start: Instant,
    mut progress: Option<ProgressSink<'_>>,
) {
    let deadline = start + cfg.duration;
    // Bounded even if the server stalls: streams end at the idle timeout at the latest.
    let hard_deadline = deadline + cfg.idle_timeout + Duration::from_secs(5);
    let mut next_tick = start + PROGRESS_INTERVAL;
    let mut last = (start, 0u64);
    loop {
        let now = Instant::now();
        if now >= deadline {
            streams.stop_senders();
        }
        if streams.all_finished() {
            return;
        }
        if now >= hard_deadline {
            streams.abort();
            return;
        }
        if now >= next_tick && now < deadline {
            if let Some(sink) = progress.as_mut() {
                let bytes = streams.bytes_so_far();
                sink(&TcpProgress {
                    elapsed_secs: (now - start).as_secs_f64(),
                    bytes,
                    interval_bits_per_second: Throughput::new(
                        bytes - last.1,
                        (now - last.0).as_secs_f64(),
                    )
                    .bits_per_second,
                    bits_per_second: Throughput::new(bytes, (now - start).as_secs_f64())
                        .bits_per_second,
                });
                last = (now, bytes);
            }
            next_tick += PROGRESS_INTERVAL;
        }
        nap(now, deadline, next_tick);
    }
}

/// Sleeps until the next progress tick or the deadline (at least 1 ms, at most a progress
/// interval); after the deadline, only short naps while the streams drain.
pub(crate) fn nap(now: Instant, deadline: Instant, next_tick: Instant) {
    let next_event = if now < deadline {
        next_tick.min(deadline)
    } else {
        now + Duration::from_millis(5)
    };
    thread::sleep(
        next_event
            .saturating_duration_since(now)
            .clamp(Duration::from_millis(1), PROGRESS_INTERVAL),
    );
}

/// Opens the control connection to `server` from `source` (its reads then wait up to
/// [`HANDSHAKE_TIMEOUT`]), asks for `test` and waits until the server accepts it; returns the
/// connection and the cookie that names the test's data connections.
pub(crate) fn hello(
    server: SocketAddr,
    source: &Source,
    connect_timeout: Duration,
    test: TestParams,
) -> Result<(TcpStream, String), TcpError> {
    let control = net::connect_control(server, source, connect_timeout)?;
    control
        .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(|e| TcpError::io("configuring the control connection", e))?;
    let cookie = new_cookie();
    write_message(&control, &Message::hello(&cookie, test))?;
    expect(&control, "accept", |m| matches!(m, Message::Accept { .. }))?;
    Ok((control, cookie))
}

/// Reads the server's results, waiting at most `wait`.
pub(crate) fn read_results(
    control: &TcpStream,
    wait: Duration,
) -> Result<(Vec<PeerStream>, CpuUsage), TcpError> {
    control
        .set_read_timeout(Some(wait))
        .map_err(|e| TcpError::io("configuring the control connection", e))?;
    read_reply(control, "results", |m| match m {
        Message::Results { streams, cpu } => Ok((streams, cpu)),
        other => Err(other.kind()),
    })
}

/// Reads the server's results: what `take` finds in the message it sends. A message `take`
/// refuses (giving its kind) is an error saying `what` was expected; so is an error message,
/// or a closed connection.
pub(crate) fn read_reply<T>(
    control: &TcpStream,
    what: &str,
    take: impl FnOnce(Message) -> Result<T, &'static str>,
) -> Result<T, TcpError> {
    match read_message(control) {
        Ok(Message::Error { message }) => Err(TcpError::Rejected(message)),
        Ok(m) => take(m)
            .map_err(|kind| TcpError::Protocol(format!("expected {what}, got a {kind} message"))),
        Err(TcpError::Io { cause, .. }) if cause.kind() == io::ErrorKind::UnexpectedEof => {
            Err(TcpError::Protocol(
                "the server closed the control connection before sending its results".into(),
            ))
        }
        Err(e) => Err(e),
    }
}

/// Reads the next control message and checks it is the expected step.
pub(crate) fn expect(
    control: &TcpStream,
    what: &str,
    is_expected: impl Fn(&Message) -> bool,
) -> Result<(), TcpError> {
    match read_message(control) {
        Ok(Message::Error { message }) => Err(TcpError::Rejected(message)),
        Ok(m) if is_expected(&m) => Ok(()),
        Ok(m) => Err(TcpError::Protocol(format!("expected {what}, got a {} message", m.kind()))),
        Err(TcpError::Io { cause, .. }) if cause.kind() == io::ErrorKind::UnexpectedEof => Err(TcpError::NotNetbench(
            "the peer closed the connection without answering (is it an iperf3 server, or a different program?)".into(),
        )),
        Err(TcpError::Io { cause, .. }) if matches!(cause.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
            Err(TcpError::Protocol(format!(
                "no {what} from the server within {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            )))
        }
        Err(e) => Err(e),
    }
}

/// Pairs this side's view of each stream with the server's.
fn stream_reports(
    flows: &[Flow],
    local: Vec<StreamOutcome>,
    peer: Vec<PeerStream>,
) -> Result<Vec<StreamReport>, TcpError> {
    if peer.len() != flows.len() {
        return Err(TcpError::Protocol(format!(
            "the server reported {} streams, the test has {}",
            peer.len(),
            flows.len()
        )));
    }
    Ok(flows
        .iter()
        .zip(local)
        .zip(peer)
        .enumerate()
        .map(|(id, ((flow, mine), theirs))| {
            let mine_t = Throughput::new(mine.bytes, mine.seconds);
            let theirs_t = Throughput::new(theirs.bytes, theirs.seconds);
            let (sender, receiver, tcp) = match flow {
                Flow::ClientToServer => (mine_t, theirs_t, mine.tcp),
                Flow::ServerToClient => (theirs_t, mine_t, theirs.tcp),
            };
            let error = stream_error(mine.error.as_deref(), theirs.error.as_deref());
            StreamReport {
                run: 0,
                id: id as u32,
                flow: *flow,
                sender,
                receiver,
                tcp,
                error,
            }
        })
        .collect())
}

/// A stream's error as both ends saw it: the client's, the server's, or both.
pub(crate) fn stream_error(client: Option<&str>, server: Option<&str>) -> Option<String> {
    match (client, server) {
        (None, None) => None,
        (Some(a), None) => Some(format!("client: {a}")),
        (None, Some(b)) => Some(format!("server: {b}")),
        (Some(a), Some(b)) => Some(format!("client: {a}; server: {b}")),
    }
}

/// Tells this test's data connections from strays of earlier tests; not a secret.
pub(crate) fn new_cookie() -> String {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
