//! `client --protocol udp-stream`: runs one test against the common server and builds the
//! report from both ends' view of every stream.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use ::protocol::tcp::{CpuReport, CpuUsage, Flow};
use ::protocol::udp::{CpuSeconds, Rate, Received, UdpReport, UdpRun, UdpStream, MIN_LEN};
use ::protocol::worker::now_unix_ms;
use ::protocol::Protocol;
use serde::Serialize;

use super::config::UdpClientConfig;
use super::datagram::{tag_of, Header, Kind, HEADER_LEN};
use super::net;
use super::stream::{LiveTotals, Plan, Role, RunningStreams, StreamSide, DRAIN, LINGER};
use super::{UdpParams, DEFAULT_LEN};
use crate::tcp::client::{expect, hello, nap, read_reply, stream_error, PROGRESS_INTERVAL};
use crate::tcp::cpu::CpuMeter;
use crate::tcp::net::{connect, resolve, Source};
use crate::tcp::protocol::{Message, TestParams};
use crate::tcp::sys::wait_readable;
use crate::tcp::TcpError;

/// Time the server gets to answer the hello, and to confirm the streams.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(15);
/// How often open datagrams are sent again until the server confirms every stream.
const OPEN_RESEND: Duration = Duration::from_millis(100);

/// A snapshot taken every second while the test runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UdpProgress {
    pub elapsed_secs: f64,
    /// Bytes this client's streams sent or received so far.
    pub bytes: u64,
    /// Rate over the last interval.
    pub interval_bits_per_second: f64,
    /// Loss over the last interval, where this client receives (its streams' sequence gaps;
    /// datagrams still in flight count as lost until they arrive). None where it only sends.
    pub interval_loss_percent: Option<f64>,
}

/// Receives the per-second progress snapshots.
pub type ProgressSink<'a> = &'a mut dyn FnMut(&UdpProgress);

/// Resolves the server and opens (then closes) one control connection, so an unreachable
/// server is known before a worker joins the barrier.
pub fn preflight(cfg: &UdpClientConfig) -> Result<(), TcpError> {
    let source = source_of(cfg);
    let server = resolve(&cfg.host, cfg.port, &source)?;
    connect(server, &source, cfg.connect_timeout).map(drop)
}

fn source_of(cfg: &UdpClientConfig) -> Source {
    Source {
        addr: cfg.bind_addr,
        device: cfg.bind_device.clone(),
    }
}

/// Runs one test as configured and returns its report.
pub fn run(
    cfg: &UdpClientConfig,
    progress: Option<ProgressSink<'_>>,
) -> Result<UdpReport, TcpError> {
    cfg.validate()?;
    let test = Opened::open(cfg)?;
    let started_at = now_unix_ms();
    let meter = CpuMeter::start();
    let start = Instant::now();
    let roles = test.flows.iter().map(|f| match f {
        Flow::ClientToServer => Role::Sender,
        Flow::ServerToClient => Role::Receiver,
    });
    let streams = RunningStreams::spawn(
        test.sockets.into_iter().zip(roles).collect(),
        test.plan,
        start,
    )?;
    drive(&streams, test.plan.duration, start, progress);
    let local = streams.join();
    let client_cpu = meter.stop();
    let client_seconds = client_cpu.cpu_seconds(start.elapsed().as_secs_f64());
    let ended_at = now_unix_ms();

    let (peer, server_cpu, server_seconds) = read_results(&test.control)?;
    let reports = stream_reports(&test.flows, local, peer)?;
    let plan = test.plan;
    let run = UdpRun {
        client: test
            .control
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        server: test.server.to_string(),
        streams: cfg.streams,
        duration_secs: cfg.duration.as_secs_f64(),
        len: plan.len,
        direction: cfg.direction,
        target: plan.packets_per_second.map(|pps| Rate {
            bits_per_second: pps * plan.len as f64 * 8.0,
            packets_per_second: pps,
        }),
        started_at_unix_ms: started_at,
        ended_at_unix_ms: ended_at,
        cpu: CpuReport {
            client: client_cpu,
            server: server_cpu,
        },
        cpu_seconds: CpuSeconds {
            client: client_seconds,
            server: server_seconds,
        },
    };
    Ok(UdpReport::single(run, reports))
}

/// A test the server accepted, with every stream opened and the start signal received.
struct Opened {
    server: SocketAddr,
    control: TcpStream,
    flows: Vec<Flow>,
    sockets: Vec<UdpSocket>,
    plan: Plan,
}

impl Opened {
    fn open(cfg: &UdpClientConfig) -> Result<Opened, TcpError> {
        let source = source_of(cfg);
        let server = resolve(&cfg.host, cfg.port, &source)?;
        let flows = cfg.direction.flows(cfg.streams);
        // The sockets first: the default length is what fits the path MTU of one of them.
        let mut sockets = Vec::with_capacity(flows.len());
        for flow in &flows {
            let sock = net::client_socket(server, &source)?;
            if *flow == Flow::ServerToClient {
                net::grow_recv_buffer(&sock, cfg.rcvbuf.unwrap_or(net::DEFAULT_RECV_BUFFER));
            }
            sockets.push(sock);
        }
        let len = cfg.len.unwrap_or_else(|| {
            sockets
                .first()
                .and_then(|s| net::fitting_len(s, DEFAULT_LEN))
                .unwrap_or(DEFAULT_LEN)
                .max(MIN_LEN)
        });
        let params = UdpParams {
            packets_per_second: cfg.pace.packets_per_second(len),
            rcvbuf: cfg.rcvbuf,
        };
        super::config::validate_udp(&params, len)?;

        let test = TestParams {
            protocol: Protocol::UdpStream,
            streams: cfg.streams,
            duration_ms: u64::try_from(cfg.duration.as_millis()).unwrap_or(u64::MAX),
            len,
            direction: cfg.direction,
            rr: None,
            probe: None,
            udp: Some(params),
        };
        let (control, cookie) = hello(server, &source, cfg.connect_timeout, test)?;
        let tag = tag_of(&cookie);
        announce_until_started(&control, &sockets, tag)?;
        Ok(Opened {
            server,
            control,
            flows,
            sockets,
            plan: Plan {
                tag,
                len,
                duration: cfg.duration,
                packets_per_second: params.packets_per_second,
            },
        })
    }
}

/// Sends every stream's open datagram, again every [`OPEN_RESEND`] (a datagram may be lost),
/// until the server says `start`.
fn announce_until_started(
    control: &TcpStream,
    sockets: &[UdpSocket],
    tag: u64,
) -> Result<(), TcpError> {
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    loop {
        for (id, sock) in sockets.iter().enumerate() {
            let mut open = [0u8; HEADER_LEN];
            Header {
                kind: Kind::Open,
                stream: u16::try_from(id).unwrap_or(u16::MAX),
                tag,
                seq: 0,
                sent_ns: 0,
            }
            .write(&mut open);
            // A refused send (ICMP from an earlier try) is retried with the next round.
            let _ = sock.send(&open);
        }
        if wait_readable(control, OPEN_RESEND)
            .map_err(|e| TcpError::io("waiting for the server to start", e))?
        {
            return expect(control, "start", |m| matches!(m, Message::Start));
        }
        if Instant::now() >= deadline {
            return Err(TcpError::Protocol(format!(
                "the server confirmed no start within {} s after the udp streams were announced \
                 (are datagrams to its udp port reaching it?)",
                HANDSHAKE_TIMEOUT.as_secs()
            )));
        }
    }
}

/// Reports progress every second until every stream has ended.
fn drive(
    streams: &RunningStreams,
    duration: Duration,
    start: Instant,
    mut progress: Option<ProgressSink<'_>>,
) {
    let deadline = start + duration;
    // Bounded: receivers end at the linger time, senders at the duration.
    let hard_deadline = deadline + LINGER + DRAIN + Duration::from_secs(5);
    let mut next_tick = start + PROGRESS_INTERVAL;
    let mut last = (start, LiveTotals::default());
    loop {
        let now = Instant::now();
        if streams.all_finished() {
            return;
        }
        if now >= hard_deadline {
            streams.abort();
            return;
        }
        if now >= next_tick && now < deadline {
            if let Some(sink) = progress.as_mut() {
                let live = streams.live();
                sink(&interval(
                    now - start,
                    (now - last.0).as_secs_f64(),
                    &last.1,
                    &live,
                ));
                last = (now, live);
            }
            next_tick += PROGRESS_INTERVAL;
        }
        nap(now, deadline, next_tick);
    }
}

fn interval(elapsed: Duration, seconds: f64, before: &LiveTotals, now: &LiveTotals) -> UdpProgress {
    let bytes = now.bytes.saturating_sub(before.bytes);
    let expected = now.expected.saturating_sub(before.expected);
    let received = now.received.saturating_sub(before.received);
    UdpProgress {
        elapsed_secs: elapsed.as_secs_f64(),
        bytes: now.bytes,
        interval_bits_per_second: if seconds > 0.0 {
            bytes as f64 * 8.0 / seconds
        } else {
            0.0
        },
        interval_loss_percent: (expected > 0)
            .then(|| expected.saturating_sub(received) as f64 / expected as f64 * 100.0),
    }
}

fn read_results(control: &TcpStream) -> Result<(Vec<StreamSide>, CpuUsage, f64), TcpError> {
    read_reply(control, "udp results", |m| match m {
        Message::UdpResults {
            streams,
            cpu,
            cpu_seconds,
        } => Ok((streams, cpu, cpu_seconds)),
        other => Err(other.kind()),
    })
}

/// Pairs this side's view of each stream with the server's: the sending end gives `sent`,
/// the receiving end everything it counted.
fn stream_reports(
    flows: &[Flow],
    local: Vec<StreamSide>,
    peer: Vec<StreamSide>,
) -> Result<Vec<UdpStream>, TcpError> {
    if peer.len() != flows.len() || local.len() != flows.len() {
        return Err(TcpError::Protocol(format!(
            "the server reported {} streams, the test has {}",
            peer.len(),
            flows.len()
        )));
    }
    let mut out = Vec::with_capacity(flows.len());
    for (id, ((flow, mine), theirs)) in flows.iter().zip(local).zip(peer).enumerate() {
        let (sender, receiver, server_end) = match flow {
            Flow::ClientToServer => (&mine, &theirs, "receiving"),
            Flow::ServerToClient => (&theirs, &mine, "sending"),
        };
        let missing = || {
            TcpError::Protocol(format!(
                "the server's results lack the {server_end} figures of stream {id}"
            ))
        };
        let sent = sender.sent.ok_or_else(missing)?;
        let got = receiver.received.ok_or_else(missing)?;
        // Both rates over the window the datagrams were sent in (iperf3 divides both by the
        // test's time), so received over sent is exactly the share that arrived.
        let received = Received {
            out_of_order: got.out_of_order,
            duplicates: got.duplicates,
            invalid: got.invalid,
            kernel_drops: got.kernel_drops,
            ..Received::new(got.packets, got.bytes, sent.seconds)
        };
        let error = stream_error(mine.error.as_deref(), theirs.error.as_deref());
        let id = u32::try_from(id).map_err(|_| TcpError::Protocol("too many streams".into()))?;
        out.push(UdpStream {
            jitter_ms: receiver.jitter_ms,
            rcvbuf_bytes: receiver.rcvbuf_bytes,
            error,
            ..UdpStream::new(id, *flow, sent, received)
        });
    }
    Ok(out)
}
