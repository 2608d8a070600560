//! udp-rr: numbered request datagrams, each answered by one numbered response. A request not
//! answered within the timeout is LOST and its slot goes on at once (netperf's UDP_RR waits
//! forever for a lost datagram; this one never stalls). An answer that comes later is LATE and
//! discarded; a second answer to one request is a DUPLICATE; a datagram that answers nothing
//! sent (unknown or future sequence number, wrong size) is INVALID. Every request sent is
//! accounted for exactly once: answered, failed to send, or lost.
//!
//! In flight: closed loop keeps `1 + burst` requests in flight (netperf `-b`). Open loop sends
//! each request at its intended time whatever is still unanswered (UDP has no head-of-line
//! blocking; sockperf's under-load mode does the same): its window holds two timeouts of the
//! schedule (bounded; see [`protocol::rr::in_flight_window`]), so a loss costs one lost
//! transaction, never a timeout of the stream and a backlog in the latencies.
//!
//! Timing: a request is lost `timeout` after it was sent. In closed loop the client blocks in
//! `recv` with the timeout as SO_RCVTIMEO (no poll per transaction); a stray datagram restarts
//! that wait, so a loss may be noticed up to one more timeout late, which delays the stream
//! but never changes how a datagram is classified (that is decided from the send and arrival
//! instants). In open loop it waits in `poll` for the next due time, the next expiry or an
//! answer, whichever comes first.

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use protocol::rr::MAX_OPEN_LOOP_WINDOW;

use super::pace::Due;
use super::record::{describe, Failure, Recorder, StreamOutcome};
use super::wire::{datagram, put_seq, seq_of, REQUEST_FILL, RESPONSE_FILL};
use crate::tcp::sys::wait_readable;

/// How many recent sequence numbers' fates are remembered (to tell late and duplicate answers
/// apart); an answer to an older one is invalid. Twice the largest window, so that an answer
/// up to one more timeout late than a full window is still told late.
const REMEMBERED: u64 = 1 << 16;
const _: () = assert!(REMEMBERED >= 2 * MAX_OPEN_LOOP_WINDOW as u64);
/// In-flight slots allocated up front (a large open-loop window grows only if it fills).
const PREALLOCATED_IN_FLIGHT: usize = 1024;
/// Largest datagram read (bigger ones are truncated and then invalid by their size).
const RECV_BUFFER: usize = 65_536;
/// Pause after a failed send, so a stream whose sends all fail does not spin.
const SEND_FAILURE_PAUSE: Duration = Duration::from_millis(1);

/// One stream's part of a udp-rr test: the plan of a tcp-rr stream.
pub type UdpPlan = super::tcp_rr::StreamPlan;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Unknown,
    Answered,
    Lost,
    /// Lost, then answered late.
    Late,
}

struct InFlight {
    seq: u64,
    /// Latency counts from here (the intended send time in open loop).
    intended: Instant,
    /// The timeout counts from here.
    sent: Instant,
}

/// The requests in flight (in send order) and the fates of recent ones.
struct Track {
    in_flight: VecDeque<InFlight>,
    fates: Vec<Fate>,
    next_seq: u64,
    timeout: Duration,
    response_size: usize,
}

impl Track {
    fn new(window: usize, timeout: Duration, response_size: u32) -> Self {
        Track {
            in_flight: VecDeque::with_capacity(window.min(PREALLOCATED_IN_FLIGHT)),
            fates: vec![Fate::Unknown; REMEMBERED as usize],
            next_seq: 0,
            timeout,
            response_size: usize::try_from(response_size).unwrap_or(usize::MAX),
        }
    }

    fn slot(&mut self, seq: u64) -> Option<&mut Fate> {
        let i = usize::try_from(seq % REMEMBERED).ok()?;
        self.fates.get_mut(i)
    }

    fn sent(&mut self, intended: Instant, sent: Instant) {
        let seq = self.next_seq;
        if let Some(f) = self.slot(seq) {
            *f = Fate::Unknown;
        }
        self.in_flight.push_back(InFlight {
            seq,
            intended,
            sent,
        });
        self.next_seq = seq.wrapping_add(1);
    }

    /// When the oldest request in flight is lost, if any is.
    fn next_expiry(&self) -> Option<Instant> {
        self.in_flight.front().map(|f| f.sent + self.timeout)
    }

    /// Counts the requests whose time is up as lost.
    fn expire(&mut self, now: Instant, rec: &mut Recorder) {
        while let Some(f) = self.in_flight.front() {
            if now < f.sent + self.timeout {
                break;
            }
            let seq = f.seq;
            self.in_flight.pop_front();
            if let Some(slot) = self.slot(seq) {
                *slot = Fate::Lost;
            }
            rec.out.counts.lost = rec.out.counts.lost.saturating_add(1);
        }
    }

    /// Classifies a datagram that arrived at `now`.
    fn arrived(&mut self, d: &[u8], now: Instant, rec: &mut Recorder) {
        let c = &mut rec.out.counts;
        let seq = match seq_of(d) {
            Some(seq) if d.len() == self.response_size => seq,
            _ => {
                c.invalid = c.invalid.saturating_add(1);
                return;
            }
        };
        // Sent, and recent enough for its fate to be remembered?
        let age = self
            .next_seq
            .checked_sub(seq)
            .filter(|a| (1..=REMEMBERED).contains(a));
        if age.is_none() {
            c.invalid = c.invalid.saturating_add(1);
            return;
        }
        if let Ok(i) = self.in_flight.binary_search_by_key(&seq, |f| f.seq) {
            if let Some(f) = self.in_flight.remove(i) {
                if now.saturating_duration_since(f.sent) >= self.timeout {
                    // Its time was up before we looked: lost, and this answer late.
                    c.lost = c.lost.saturating_add(1);
                    c.late = c.late.saturating_add(1);
                    self.set(seq, Fate::Late);
                } else {
                    self.set(seq, Fate::Answered);
                    rec.answered(f.intended, now);
                }
            }
            return;
        }
        let fate = self.slot(seq).map_or(Fate::Unknown, |f| *f);
        match fate {
            Fate::Lost => {
                c.late = c.late.saturating_add(1);
                self.set(seq, Fate::Late);
            }
            Fate::Answered | Fate::Late => c.duplicate = c.duplicate.saturating_add(1),
            Fate::Unknown => c.invalid = c.invalid.saturating_add(1),
        }
    }

    fn set(&mut self, seq: u64, fate: Fate) {
        if let Some(f) = self.slot(seq) {
            *f = fate;
        }
    }
}

/// Runs the client side of one udp-rr stream on `sock` (connected to the server) until the
/// deadline, then until every request in flight is answered or lost. Open loop: intended send
/// times it did not get to before the deadline count as skipped.
pub fn run_client(sock: &UdpSocket, mut plan: UdpPlan, mut rec: Recorder) -> StreamOutcome {
    if let Err(e) = sock.set_read_timeout(Some(plan.timeout)) {
        rec.note(|| format!("configuring the socket: {e}"));
        rec.skipped(plan.pacer.skip_until(plan.deadline));
        return rec.finish();
    }
    let mut request = datagram(REQUEST_FILL, plan.request_size);
    let mut buf = vec![0u8; RECV_BUFFER];
    let mut track = Track::new(plan.window, plan.timeout, plan.response_size);
    let open_loop = plan.pacer.is_open();
    loop {
        let now = Instant::now();
        track.expire(now, &mut rec);
        let sending = now < plan.deadline;
        if !sending && track.in_flight.is_empty() {
            break;
        }
        let mut next_due = None;
        while sending && track.in_flight.len() < plan.window {
            match plan.pacer.poll(now) {
                Due::Now(intended) => {
                    put_seq(&mut request, track.next_seq);
                    rec.attempted(1);
                    // The timeout counts from the send; closed-loop latency too (so an answer
                    // in time never reads as slower than the timeout), open-loop latency from
                    // the intended instant.
                    let sent = Instant::now();
                    let from = if open_loop { intended } else { sent };
                    match sock.send(&request) {
                        Ok(_) => track.sent(from, sent),
                        Err(e) => {
                            rec.failed(1, Failure::of(&e), || format!("sending: {}", describe(&e)));
                            thread::sleep(SEND_FAILURE_PAUSE);
                            break;
                        }
                    }
                }
                Due::At(at) => {
                    next_due = Some(at);
                    break;
                }
            }
        }
        // Wait for an answer; in open loop (or with nothing in flight) no longer than the next
        // due time or expiry.
        if open_loop || track.in_flight.is_empty() {
            let wake = [
                next_due,
                track.next_expiry(),
                sending.then_some(plan.deadline),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now);
            match wait_readable(sock, wake.saturating_duration_since(Instant::now())) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    rec.note(|| format!("waiting: {e}"));
                    continue;
                }
            }
        }
        match sock.recv(&mut buf) {
            Ok(n) => {
                let d = buf.get(..n).unwrap_or_default();
                track.arrived(d, Instant::now(), &mut rec);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            // An ICMP error about an earlier datagram (port unreachable): that request will be
            // lost; say why.
            Err(e) => {
                rec.note(|| format!("receiving: {}", describe(&e)));
                thread::sleep(SEND_FAILURE_PAUSE);
            }
        }
    }
    rec.skipped(plan.pacer.skip_until(plan.deadline));
    rec.finish()
}

/// Server side: answers requests of `request_size` bytes from `client` with numbered responses
/// until `stop`; datagrams from anyone else or of another size are ignored. Returns the
/// requests answered and the datagrams ignored.
pub fn respond(
    sock: &UdpSocket,
    client: IpAddr,
    request_size: u32,
    response_size: u32,
    stop: &AtomicBool,
) -> (u64, u64) {
    let mut response = datagram(RESPONSE_FILL, response_size);
    let mut buf = vec![0u8; RECV_BUFFER];
    let request_len = usize::try_from(request_size).unwrap_or(usize::MAX);
    let client = client.to_canonical();
    let (mut answered, mut ignored) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(got) => got,
            Err(_) => continue,
        };
        let seq = buf.get(..n).filter(|_| n == request_len).and_then(seq_of);
        match seq {
            Some(seq) if from.ip().to_canonical() == client => {
                put_seq(&mut response, seq);
                if sock.send_to(&response, from).is_ok() {
                    answered = answered.saturating_add(1);
                }
            }
            _ => ignored = ignored.saturating_add(1),
        }
    }
    (answered, ignored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    fn response(seq: u64) -> Vec<u8> {
        let mut d = datagram(RESPONSE_FILL, 16);
        put_seq(&mut d, seq);
        d
    }

    #[test]
    fn every_datagram_gets_exactly_one_fate() {
        let ms = Duration::from_millis;
        let mut rec = Recorder::new(Arc::new(AtomicU64::new(0)));
        let mut t = Track::new(4, ms(100), 16);
        let t0 = Instant::now();
        for i in 0..4 {
            t.sent(t0, t0 + ms(i));
        }
        // Seq 1 answered in time, out of order; then again (a duplicate).
        t.arrived(&response(1), t0 + ms(10), &mut rec);
        t.arrived(&response(1), t0 + ms(11), &mut rec);
        // Seq 0 expires; its answer comes later.
        t.expire(t0 + ms(100), &mut rec);
        t.arrived(&response(0), t0 + ms(150), &mut rec);
        // Seq 2's answer arrives after its timeout but before anyone expired it.
        t.arrived(&response(2), t0 + ms(120), &mut rec);
        // Never sent, too short, and seq 3 answered.
        t.arrived(&response(9), t0 + ms(20), &mut rec);
        t.arrived(&response(3)[..8], t0 + ms(20), &mut rec);
        t.arrived(&response(3), t0 + ms(20), &mut rec);
        let c = rec.finish().counts;
        assert_eq!(c.transactions, 2, "{c:?}");
        assert_eq!(
            (c.lost, c.late, c.duplicate, c.invalid),
            (2, 2, 1, 2),
            "{c:?}"
        );
        assert!(t.in_flight.is_empty());
    }

    #[test]
    fn answers_older_than_the_remembered_window_are_invalid() {
        let mut rec = Recorder::new(Arc::new(AtomicU64::new(0)));
        let mut t = Track::new(1, Duration::from_millis(1), 16);
        t.next_seq = REMEMBERED + 10;
        t.arrived(&response(5), Instant::now(), &mut rec);
        assert_eq!(rec.finish().counts.invalid, 1);
    }
}
