//! tcp-crr: per transaction, connect, send one request, read one response, close (netperf
//! TCP_CRR: the cost of the handshake, conntrack, NAT and socket set-up and teardown).
//!
//! Who closes first: the SERVER. It closes right after writing the response (as an HTTP/1.0
//! server without keep-alive does); the client reads the response, then the server's FIN, then
//! closes. The side that closes first keeps the connection in TIME_WAIT for 60 s, so TIME_WAIT
//! piles up on the server, where it costs no ephemeral port (the server's port is fixed and
//! Linux accepts a new SYN for a 4-tuple in TIME_WAIT), while the client's local port is free
//! again one round trip after its own close. A client closing first would hold every port it
//! used for 60 s and run out of ports at about range/60 connections per second (470/s with the
//! default 28 232 ports) per server address: that limit would be measured instead of the path.
//!
//! When the client does run out of local ports (a small `ip_local_port_range`, very many
//! streams, other users of the range), connect fails with EADDRNOTAVAIL: every such attempt
//! counts as a failed transaction of class `address_not_available`, the report sets
//! `port_exhausted` and says so in words; the stream pauses 1 ms after each such failure
//! rather than spinning, and that pause is part of what the report flags.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::net::connect_once;
use super::pace::{Due, Pacer};
use super::record::{describe, Failure, Recorder, StreamOutcome};
use super::wire::{filler, write_filler, FILL_CHUNK, REQUEST_FILL, RESPONSE_FILL};
use crate::tcp::net::Source;

/// Pause after a connect that found no local port, so a stream does not spin.
const NO_PORT_PAUSE: Duration = Duration::from_millis(1);
/// Requests up to this size go out in one segment, which Nagle's algorithm never holds back
/// (nothing is unacknowledged yet): no TCP_NODELAY call needed for them.
const ONE_SEGMENT: u32 = 1024;

/// One stream's part of a tcp-crr test.
#[derive(Debug, Clone)]
pub struct CrrPlan {
    pub server: SocketAddr,
    pub source: Source,
    pub request_size: u32,
    pub response_size: u32,
    pub deadline: Instant,
    /// Connect and each read or write must complete within this.
    pub timeout: Duration,
    pub pacer: Pacer,
}

/// Runs transactions one after another until the deadline (the last one started before it
/// completes or fails). Open loop: intended send times it did not get to before the deadline
/// count as skipped.
pub fn run_client(mut plan: CrrPlan, mut rec: Recorder) -> StreamOutcome {
    let request = u64::from(plan.request_size);
    let fill = filler(REQUEST_FILL, request);
    let mut buf = vec![0u8; FILL_CHUNK];
    loop {
        let now = Instant::now();
        if now >= plan.deadline {
            break;
        }
        let intended = match plan.pacer.poll(now) {
            Due::Now(t) => t,
            Due::At(t) => {
                thread::sleep(t.min(plan.deadline).saturating_duration_since(now));
                continue;
            }
        };
        rec.attempted(1);
        match transaction(&plan, &fill, &mut buf) {
            Ok(done) => rec.answered(intended, done),
            Err((class, why)) => {
                rec.failed(1, class, || why);
                if class == Failure::NoLocalPort {
                    thread::sleep(NO_PORT_PAUSE);
                }
            }
        }
    }
    rec.skipped(plan.pacer.skip_until(plan.deadline));
    rec.finish()
}

/// One connect-request-response-close; the instant the response was complete.
fn transaction(plan: &CrrPlan, fill: &[u8], buf: &mut [u8]) -> Result<Instant, (Failure, String)> {
    let fail = |what: &str, e: io::Error| (Failure::of(&e), format!("{what}: {}", describe(&e)));
    let nodelay = plan.request_size > ONE_SEGMENT;
    let sock = connect_once(plan.server, &plan.source, plan.timeout, nodelay)
        .map_err(|e| fail("connecting", e))?;
    write_filler(&sock, fill, u64::from(plan.request_size)).map_err(|e| fail("sending", e))?;
    let mut left = u64::from(plan.response_size);
    while left > 0 {
        let want = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
        let chunk = buf.get_mut(..want).unwrap_or_default();
        match (&sock).read(chunk) {
            Ok(0) => {
                return Err((
                    Failure::Reset,
                    "the server closed the connection before its response was complete".into(),
                ))
            }
            Ok(n) => left = left.saturating_sub(n as u64),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(fail("receiving", e)),
        }
    }
    let done = Instant::now();
    // The server closes first (see the module documentation): wait for its FIN, so this side
    // never holds the connection in TIME_WAIT. Whatever else it sends is not read.
    let _ = (&sock).read(buf);
    Ok(done)
}

/// Server side: one of the threads that accept the test's connections, in blocking `accept`
/// calls that return at least every `POLL` (the listener's SO_RCVTIMEO, see
/// [`Listening::for_crr`]). Each connection gets its response and is closed at once (the server
/// closes first). A connection whose first byte is 0 is a control frame: another client asking
/// for a test, told the server is busy. Returns the responses written.
pub fn serve_connections(
    listener: &TcpListener,
    request_size: u32,
    response_size: u32,
    stop: &AtomicBool,
    busy: impl Fn(&TcpStream),
) -> u64 {
    let fill = filler(RESPONSE_FILL, u64::from(response_size));
    let mut buf = vec![0u8; FILL_CHUNK];
    let mut answered = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let conn = match listener.accept() {
            Ok((conn, _)) => conn,
            Err(e)
                if e.raw_os_error() == Some(libc::EMFILE)
                    || e.raw_os_error() == Some(libc::ENFILE) =>
            {
                // The connection stays queued: do not spin on it.
                thread::sleep(Duration::from_millis(50));
                continue;
            }
            Err(_) => continue,
        };
        match answer(&conn, request_size, response_size, &fill, &mut buf) {
            Answer::Done => answered = answered.saturating_add(1),
            Answer::ControlFrame => busy(&conn),
            Answer::Failed(why) => tracing::debug!("a tcp-crr connection failed: {why}"),
        }
    }
    answered
}

enum Answer {
    Done,
    ControlFrame,
    Failed(String),
}

/// How long a tcp-crr connection may take to send its request or take its answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// A listener set up for tcp-crr: blocking, its `accept` bounded by SO_RCVTIMEO (one system
/// call per connection, no poll); put back as it was (non-blocking, no timeout) on drop.
pub struct Listening<'a>(&'a TcpListener);

impl<'a> Listening<'a> {
    pub fn for_crr(listener: &'a TcpListener, poll: Duration) -> io::Result<Self> {
        listener.set_nonblocking(false)?;
        if let Err(e) = socket2::SockRef::from(listener).set_read_timeout(Some(poll)) {
            let _ = listener.set_nonblocking(true);
            return Err(e);
        }
        Ok(Listening(listener))
    }
}

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        let _ = socket2::SockRef::from(self.0).set_read_timeout(None);
        let _ = self.0.set_nonblocking(true);
    }
}

fn answer(
    conn: &TcpStream,
    request_size: u32,
    response_size: u32,
    fill: &[u8],
    buf: &mut [u8],
) -> Answer {
    // A response of one segment is the first data the server sends: Nagle never holds it, so
    // TCP_NODELAY (a system call per connection) only for longer ones.
    let setup = conn
        .set_read_timeout(Some(ANSWER_TIMEOUT))
        .and_then(|()| conn.set_write_timeout(Some(ANSWER_TIMEOUT)))
        .and_then(|()| {
            if response_size > ONE_SEGMENT {
                conn.set_nodelay(true)
            } else {
                Ok(())
            }
        });
    if let Err(e) = setup {
        return Answer::Failed(e.to_string());
    }
    let mut left = u64::from(request_size);
    let mut first = true;
    while left > 0 {
        let want = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
        let chunk = buf.get_mut(..want).unwrap_or_default();
        match (&*conn).read(chunk) {
            Ok(0) => return Answer::Failed("closed before its request was complete".into()),
            Ok(n) => {
                if first && chunk.first() == Some(&0) {
                    return Answer::ControlFrame;
                }
                first = false;
                left = left.saturating_sub(n as u64);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Answer::Failed(describe(&e)),
        }
    }
    match write_filler(conn, fill, u64::from(response_size)) {
        Ok(()) => Answer::Done,
        Err(e) => Answer::Failed(describe(&e)),
    }
}
