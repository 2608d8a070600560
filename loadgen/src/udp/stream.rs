//! The data path: one thread per stream and one socket each (connected to the other end), one
//! buffer allocated per stream. A sender stamps a sequence number and its clock into each
//! datagram and sends it, paced by [`Pacer`] or as fast as the socket takes them; a receiver
//! takes up to 32 queued datagrams per call (recvmmsg, with a short timeout) and hands each to
//! its [`Tally`] with the kernel's arrival time (SO_TIMESTAMPNS) and the time it was read.
//! The only shared state in the loops is a relaxed flag and relaxed counters for progress.
//!
//! A sender ends at the test's duration and then sends [`END_COPIES`] end markers; a receiver
//! ends [`DRAIN`] after the first end marker (datagrams reordered behind it still count), or
//! [`LINGER`] after the test's duration if every marker was lost.

use std::io;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use ::protocol::udp::{Received, Sent};
use serde::{Deserialize, Serialize};

use super::datagram::{Header, Kind, HEADER_LEN};
use super::net;
use super::pacer::{Pacer, Step};
use super::sys::{self, RecvBatch};
use super::tally::Tally;
use crate::tcp::TcpError;

/// End markers a sender sends (any one suffices).
pub(crate) const END_COPIES: u32 = 3;
/// How long a receiver keeps reading after the first end marker.
pub(crate) const DRAIN: Duration = Duration::from_millis(250);
/// How long after the test's duration a receiver that saw no end marker gives up.
pub(crate) const LINGER: Duration = Duration::from_secs(2);
/// How often a waiting receiver looks at its deadline and the abort flag.
const RECV_POLL: Duration = Duration::from_millis(20);
/// Most datagrams taken from the socket per receive call (recvmmsg).
const RECV_BATCH: usize = 32;
/// A sender whose sends have all failed for this long gives up.
const FAILING_FOR: Duration = Duration::from_secs(1);
/// Send times past the test's duration by more than this are not of this test.
const SEND_TIME_SLACK: Duration = Duration::from_secs(60);

/// What every stream of a test shares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Plan {
    pub tag: u64,
    /// Bytes per datagram.
    pub len: usize,
    pub duration: Duration,
    /// Datagrams per second of each sending stream; None: as fast as possible.
    pub packets_per_second: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Sender,
    Receiver,
}

/// One end's view of one stream (the server's travels to the client in its results).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct StreamSide {
    /// Present on the sending end.
    pub sent: Option<Sent>,
    /// Present on the receiving end.
    pub received: Option<Received>,
    pub jitter_ms: Option<f64>,
    pub rcvbuf_bytes: Option<u64>,
    pub error: Option<String>,
}

/// Counters the progress reporter samples.
#[derive(Debug, Default)]
struct Live {
    bytes: AtomicU64,
    packets: AtomicU64,
    /// Receivers: one past the highest sequence number received.
    expected: AtomicU64,
}

/// Sums over this end's streams so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LiveTotals {
    /// Bytes sent by senders plus bytes received by receivers.
    pub bytes: u64,
    /// Receivers: unique datagrams received, and the sequence numbers they imply were sent.
    pub received: u64,
    pub expected: u64,
}

/// The streams of one end of a test, running.
pub(crate) struct RunningStreams {
    handles: Vec<JoinHandle<StreamSide>>,
    live: Vec<(Role, Arc<Live>)>,
    abort: Arc<AtomicBool>,
}

impl RunningStreams {
    /// Starts one thread per socket; `sockets[i]` is stream `i`. `start` is the instant the
    /// test began for this end.
    pub fn spawn(
        sockets: Vec<(UdpSocket, Role)>,
        plan: Plan,
        start: Instant,
    ) -> Result<Self, TcpError> {
        let abort = Arc::new(AtomicBool::new(false));
        let mut running = RunningStreams {
            handles: Vec::with_capacity(sockets.len()),
            live: Vec::with_capacity(sockets.len()),
            abort: abort.clone(),
        };
        for (id, (sock, role)) in sockets.into_iter().enumerate() {
            let stream = u16::try_from(id)
                .map_err(|_| TcpError::Config(format!("too many udp streams ({id})")))?;
            let live = Arc::new(Live::default());
            running.live.push((role, live.clone()));
            let abort = abort.clone();
            let handle = thread::Builder::new()
                .name(format!("nb-udp-{id}"))
                .spawn(move || match role {
                    Role::Sender => send(&sock, stream, plan, start, &abort, &live),
                    Role::Receiver => receive(&sock, stream, plan, start, &abort, &live),
                })
                .map_err(|e| TcpError::io("starting a stream thread", e))?;
            running.handles.push(handle);
        }
        Ok(running)
    }

    pub fn live(&self) -> LiveTotals {
        self.live
            .iter()
            .fold(LiveTotals::default(), |mut t, (role, live)| {
                t.bytes = t.bytes.saturating_add(live.bytes.load(Ordering::Relaxed));
                if *role == Role::Receiver {
                    t.received = t
                        .received
                        .saturating_add(live.packets.load(Ordering::Relaxed));
                    t.expected = t
                        .expected
                        .saturating_add(live.expected.load(Ordering::Relaxed));
                }
                t
            })
    }

    pub fn all_finished(&self) -> bool {
        self.handles.iter().all(JoinHandle::is_finished)
    }

    /// Ends every stream within [`RECV_POLL`]: senders stop without end markers.
    pub fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }

    /// Waits for every stream thread; outcomes in stream order.
    pub fn join(mut self) -> Vec<StreamSide> {
        std::mem::take(&mut self.handles)
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| StreamSide {
                    error: Some("stream thread panicked".into()),
                    ..StreamSide::default()
                })
            })
            .collect()
    }
}

/// Streams dropped without [`RunningStreams::join`] (an early error return) must not keep
/// sending in detached threads.
impl Drop for RunningStreams {
    fn drop(&mut self) {
        self.abort();
    }
}

fn nanos_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The kernel's arrival stamps' clock (CLOCK_REALTIME) now, in ns since the Unix epoch.
fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn send(
    sock: &UdpSocket,
    stream: u16,
    plan: Plan,
    start: Instant,
    abort: &AtomicBool,
    live: &Live,
) -> StreamSide {
    // Best effort: without it sleeps overshoot by up to 50 us, which the pacer absorbs.
    let _ = sys::tight_timer_slack();
    let mut buf = vec![0u8; plan.len.max(HEADER_LEN)];
    let header = Header {
        kind: Kind::Data,
        stream,
        tag: plan.tag,
        seq: 0,
        sent_ns: 0,
    };
    header.write(&mut buf);
    let end_ns = u64::try_from(plan.duration.as_nanos()).unwrap_or(u64::MAX);
    let mut pacer = plan.packets_per_second.map(|pps| Pacer::new(pps, end_ns));
    let mut out = SendLoop {
        sock,
        buf: &mut buf,
        start,
        live,
        packets: 0,
        errors: 0,
        last_sent_ns: 0,
        failing_since: None,
        last_error: None,
    };
    let mut error = None;
    while !abort.load(Ordering::Relaxed) {
        let now = nanos_since(start);
        if now >= end_ns {
            break;
        }
        let due = match pacer.as_mut().map(|p| p.step(now)) {
            None => 1,
            Some(Step::Send(n)) => n,
            Some(Step::WaitUntil(t)) => {
                thread::sleep(Duration::from_nanos(t.min(end_ns).saturating_sub(now)));
                continue;
            }
            Some(Step::Done) => break,
        };
        for _ in 0..due {
            let sent_ns = out.send_one();
            if let Some(p) = pacer.as_mut() {
                p.sent(sent_ns);
            }
        }
        live.bytes.store(
            out.packets.saturating_mul(plan.len as u64),
            Ordering::Relaxed,
        );
        if let Some(e) = out.given_up() {
            error = Some(e);
            break;
        }
    }
    if !abort.load(Ordering::Relaxed) && error.is_none() {
        let mut end = [0u8; HEADER_LEN];
        let marker = Header {
            kind: Kind::End,
            seq: out.packets,
            sent_ns: nanos_since(start),
            ..header
        };
        marker.write(&mut end);
        for _ in 0..END_COPIES {
            let _ = sock.send(&end);
        }
    }
    // The window the rate is over: the test's duration (a paced schedule that used up its send
    // times early still ran that long), or until the stream stopped early; never before the
    // last send (a burst due before the end may finish just after it).
    let stopped_early = abort.load(Ordering::Relaxed) || error.is_some();
    let window_ns = if stopped_early {
        nanos_since(start).min(end_ns)
    } else {
        end_ns
    }
    .max(out.last_sent_ns);
    let (skipped, late) = pacer.map_or((0, 0), |mut p| {
        p.finish();
        (p.skipped, p.late)
    });
    let packets = out.packets;
    let sent = Sent {
        late,
        skipped,
        errors: out.errors,
        last_send_seconds: Some(out.last_sent_ns as f64 / 1e9),
        ..Sent::new(
            packets,
            packets.saturating_mul(plan.len as u64),
            window_ns as f64 / 1e9,
        )
    };
    StreamSide {
        sent: Some(sent),
        error,
        ..StreamSide::default()
    }
}

/// The sender's counters and its one buffer.
struct SendLoop<'a> {
    sock: &'a UdpSocket,
    buf: &'a mut [u8],
    start: Instant,
    live: &'a Live,
    packets: u64,
    errors: u64,
    last_sent_ns: u64,
    failing_since: Option<Instant>,
    last_error: Option<io::Error>,
}

impl SendLoop<'_> {
    /// Stamps and sends the next datagram; returns the time it was stamped with.
    fn send_one(&mut self) -> u64 {
        let now = nanos_since(self.start);
        Header::stamp(self.buf, self.packets, now);
        match self.sock.send(self.buf) {
            Ok(_) => {
                self.packets += 1;
                self.last_sent_ns = now;
                self.failing_since = None;
                self.live.packets.store(self.packets, Ordering::Relaxed);
            }
            // The datagram was not sent; its sequence number goes to the next one.
            Err(e) => {
                self.errors += 1;
                self.failing_since.get_or_insert_with(Instant::now);
                self.last_error = Some(e);
            }
        }
        now
    }

    /// Why to stop: every send failed for [`FAILING_FOR`].
    fn given_up(&self) -> Option<String> {
        let since = self.failing_since?;
        (since.elapsed() >= FAILING_FOR).then(|| {
            let why = self
                .last_error
                .as_ref()
                .map_or_else(|| "unknown error".to_string(), ToString::to_string);
            format!("every send failed for {} s: {why}", FAILING_FOR.as_secs())
        })
    }
}

fn receive(
    sock: &UdpSocket,
    stream: u16,
    plan: Plan,
    start: Instant,
    abort: &AtomicBool,
    live: &Live,
) -> StreamSide {
    let max_sent = plan.duration.saturating_add(SEND_TIME_SLACK);
    let mut tally = Tally::new(
        plan.tag,
        stream,
        plan.len,
        u64::try_from(max_sent.as_nanos()).unwrap_or(u64::MAX),
    );
    let rcvbuf_bytes = net::recv_buffer(sock);
    let hard_end = start + plan.duration + LINGER;
    // Without the kernel's arrival times, jitter falls back to the times datagrams are read.
    let stamped = sys::enable_arrival_times(sock).is_ok();
    let wall_start = wall_ns().saturating_sub(nanos_since(start));
    // One byte more than a datagram: a longer one reads as len + 1 bytes and is invalid.
    let mut batch = RecvBatch::new(RECV_BATCH, plan.len + 1);
    let mut error = sock
        .set_read_timeout(Some(RECV_POLL))
        .err()
        .map(|e| format!("setting the receive timeout: {e}"));
    let mut drain_until: Option<Instant> = None;
    while error.is_none() && !abort.load(Ordering::Relaxed) {
        match batch.recv(sock) {
            Ok(n) => {
                let read = nanos_since(start);
                for (datagram, at) in (0..n).filter_map(|i| batch.datagram(i)) {
                    let at = at.filter(|_| stamped).map(|t| t.saturating_sub(wall_start));
                    tally.on_datagram(datagram, read, at);
                }
                live.packets.store(tally.received, Ordering::Relaxed);
                live.expected.store(tally.expected(), Ordering::Relaxed);
                live.bytes.store(
                    tally.received.saturating_mul(plan.len as u64),
                    Ordering::Relaxed,
                );
                if tally.end_seen && drain_until.is_none() {
                    drain_until = Some(Instant::now() + DRAIN);
                }
            }
            Err(e) if is_timeout(&e) => {}
            // An ICMP error for this connected socket (nothing listened for a marker or an
            // earlier datagram of ours): not a reason to stop receiving.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => error = Some(e.to_string()),
        }
        let now = Instant::now();
        if drain_until.is_some_and(|t| now >= t) || now >= hard_end {
            break;
        }
    }
    if abort.load(Ordering::Relaxed) && error.is_none() {
        error = Some("aborted".into());
    }
    let len = plan.len as u64;
    let received = Received {
        out_of_order: tally.out_of_order,
        duplicates: tally.duplicates,
        invalid: tally.invalid,
        kernel_drops: sys::socket_drops(sock).ok(),
        ..Received::new(
            tally.received,
            tally.received.saturating_mul(len),
            tally.last_arrival_ns as f64 / 1e9,
        )
    };
    StreamSide {
        received: Some(received),
        jitter_ms: tally.jitter_ms(),
        rcvbuf_bytes,
        error,
        ..StreamSide::default()
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
