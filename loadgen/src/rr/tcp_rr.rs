//! tcp-rr on one connection: the client keeps `1 + burst` requests in flight (netperf `-b`),
//! the server answers each complete request with one response. Also the latency probe of a
//! stream test (one request in flight, open loop).
//!
//! Requests and responses are counted by bytes: a read may complete several responses (a
//! pipeline) or part of one; answers come back in order, so the oldest request outstanding is
//! the one a completed response answers. Blocking I/O on one thread per connection: in closed
//! loop the client blocks in `read` until the answer comes (no poll in between); in open loop
//! it waits in `poll` for an answer or the next due time, whichever comes first.

use std::collections::VecDeque;
use std::io::Read;
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use super::pace::{Due, Pacer};
use super::record::{describe, Failure, Recorder, StreamOutcome};
use super::wire::{filler, write_filler, FILL_CHUNK, REQUEST_FILL, RESPONSE_FILL};
use crate::tcp::sys::wait_readable;

/// One stream's part of a test (tcp-rr, and udp-rr's [`super::udp::UdpPlan`]).
#[derive(Debug, Clone)]
pub struct StreamPlan {
    pub request_size: u32,
    pub response_size: u32,
    /// Requests in flight at most: 1 + burst, or for udp-rr in open loop two timeouts of the
    /// schedule (see [`protocol::rr::in_flight_window`]).
    pub window: usize,
    /// No request is sent from this instant on; the ones in flight are waited for.
    pub deadline: Instant,
    /// tcp-rr: a read that waits this long for an answer fails the requests in flight. udp-rr:
    /// a request unanswered this long after it was sent is lost.
    pub timeout: Duration,
    pub pacer: Pacer,
}

/// Runs the client side of one tcp-rr connection until the deadline, then waits for the
/// answers in flight (at most `timeout` for each read) and half-closes the connection so the
/// server's responder ends. Open loop: intended send times it did not get to before the
/// deadline count as skipped.
pub fn run_client(sock: TcpStream, mut plan: StreamPlan, mut rec: Recorder) -> StreamOutcome {
    let setup = sock
        .set_nodelay(true)
        .and_then(|()| sock.set_read_timeout(Some(plan.timeout)))
        .and_then(|()| sock.set_write_timeout(Some(plan.timeout)));
    if let Err(e) = setup {
        rec.note(|| format!("configuring the connection: {e}"));
        rec.skipped(plan.pacer.skip_until(plan.deadline));
        return rec.finish();
    }
    let request = u64::from(plan.request_size);
    let response = u64::from(plan.response_size).max(1);
    let fill = filler(REQUEST_FILL, request.saturating_mul(plan.window as u64));
    let mut buf = vec![0u8; FILL_CHUNK];
    let mut outstanding: VecDeque<Instant> = VecDeque::with_capacity(plan.window);
    // Bytes of the response now arriving.
    let mut partial = 0u64;
    let mut drain_until: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if drain_until.is_none() && now >= plan.deadline {
            drain_until = Some(now + plan.timeout);
        }
        if let Some(until) = drain_until {
            if outstanding.is_empty() {
                break;
            }
            if now >= until {
                let n = outstanding.len() as u64;
                rec.failed(n, Failure::Timeout, || "no answer before the end".into());
                break;
            }
        }
        // Queue what is due, then write it in one go.
        let mut next_due = None;
        let mut queued = 0u64;
        if drain_until.is_none() {
            while outstanding.len() < plan.window {
                match plan.pacer.poll(now) {
                    Due::Now(intended) => {
                        outstanding.push_back(intended);
                        queued += 1;
                    }
                    Due::At(at) => {
                        next_due = Some(at);
                        break;
                    }
                }
            }
        }
        if queued > 0 {
            rec.attempted(queued);
            if let Err(e) = write_filler(&sock, &fill, queued.saturating_mul(request)) {
                let n = outstanding.len() as u64;
                rec.failed(n, Failure::of(&e), || format!("sending: {}", describe(&e)));
                break;
            }
        }
        // Open loop with a free slot: wait for an answer or the next due time.
        if let Some(due) = next_due {
            let wait = due.min(plan.deadline).saturating_duration_since(now);
            match wait_readable(&sock, wait) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    let n = outstanding.len() as u64;
                    rec.failed(n, Failure::Other, || format!("waiting: {e}"));
                    break;
                }
            }
        } else if outstanding.is_empty() {
            continue;
        }
        let n = match (&sock).read(&mut buf) {
            Ok(0) => {
                let n = outstanding.len() as u64;
                rec.failed(n, Failure::Reset, || {
                    "the server closed the connection".into()
                });
                break;
            }
            Ok(n) => n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let n = outstanding.len() as u64;
                rec.failed(n, Failure::of(&e), || {
                    format!("receiving: {}", describe(&e))
                });
                break;
            }
        };
        let now = Instant::now();
        partial = partial.saturating_add(n);
        while partial >= response {
            let Some(intended) = outstanding.pop_front() else {
                break;
            };
            partial -= response;
            rec.answered(intended, now);
        }
        if outstanding.is_empty() && partial > 0 {
            rec.note(|| format!("the server sent {partial} bytes nobody asked for; stream ended"));
            break;
        }
    }
    let _ = sock.shutdown(Shutdown::Write);
    // Open loop: what the stream never got to send before the deadline (behind its schedule,
    // or ended early) is counted, not dropped.
    rec.skipped(plan.pacer.skip_until(plan.deadline));
    rec.finish()
}

/// Server side of one tcp-rr connection: answers every complete request with one response
/// until the client half-closes (or the connection is shut down to end the test). Returns the
/// requests answered and the error that ended it, if any.
pub fn respond(sock: &TcpStream, request_size: u32, response_size: u32) -> (u64, Option<String>) {
    if let Err(e) = sock.set_nodelay(true) {
        return (0, Some(format!("configuring the connection: {e}")));
    }
    let request = u64::from(request_size).max(1);
    let response = u64::from(response_size);
    let fill = filler(RESPONSE_FILL, response);
    let mut buf = vec![0u8; FILL_CHUNK];
    let (mut partial, mut answered) = (0u64, 0u64);
    loop {
        let n = match (&*sock).read(&mut buf) {
            Ok(0) => return (answered, None),
            Ok(n) => n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return (answered, Some(describe(&e))),
        };
        partial = partial.saturating_add(n);
        let complete = partial / request;
        partial %= request;
        if complete == 0 {
            continue;
        }
        if let Err(e) = write_filler(sock, &fill, complete.saturating_mul(response)) {
            return (answered, Some(format!("answering: {}", describe(&e))));
        }
        answered = answered.saturating_add(complete);
    }
}
