//! The server side of a request/response test, run by [`TcpServer`] for a tcp-rr, tcp-crr or
//! udp-rr test request:
//!
//! - tcp-rr: the client's `streams` data connections (cookie, stream id), one responder thread
//!   each; other clients are told the server is busy.
//! - tcp-crr: a few threads accept every connection on the listening port for the test's
//!   duration and answer each with one response, closing first; a connection that starts with
//!   a control frame (another client's hello) is told the server is busy.
//! - udp-rr: a UDP socket on the address and port the client reached over TCP, bound before
//!   the test is accepted (so a taken port is a refusal, not a failed test); it answers only
//!   the client's address.
//!
//! The test ends when the client sends `done` after its streams ended (its answers in flight
//! included), or is aborted when the client goes away or overruns; the server then sends the
//! requests it answered and its CPU use.

use std::net::{IpAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use protocol::Protocol;

use super::config::validate_sizes;
use super::{crr, net, tcp_rr, udp};
use crate::protocols::Accepted;
use crate::tcp::cpu::CpuMeter;
use crate::tcp::protocol::{
    read_message_by, write_message, Message, PeerStream, RrParams, TestParams, PROTOCOL_VERSION,
};
use crate::tcp::server::{refuse, BusyResponder, TcpServer, BUSY, HELLO_TIMEOUT, POLL_INTERVAL};
use crate::tcp::sys::wait_readable;
use crate::tcp::TcpError;

/// Most threads answering tcp-crr connections or udp-rr datagrams.
const MAX_RESPONDERS: usize = 16;
/// Beyond the duration and twice the client's timeout, how long the server waits for `done`.
const GRACE: Duration = Duration::from_secs(15);

/// A request/response test request carries what the server needs, within bounds.
pub(crate) fn check(test: &TestParams) -> Result<(), TcpError> {
    let rr = test.rr.ok_or_else(|| {
        TcpError::Config(format!(
            "a {} test needs the request and response sizes",
            test.protocol
        ))
    })?;
    validate_sizes(test.protocol, rr.request_size, rr.response_size)
}

/// Runs the test (checked by [`check`]) and sends the results.
pub(crate) fn run_test(accepted: Accepted<'_>) -> Result<(), TcpError> {
    let test = accepted.test;
    check(test)?;
    let rr = test.rr.unwrap_or(RrParams {
        request_size: 1,
        response_size: 1,
        timeout_ms: 0,
    });
    let timeout = Duration::from_millis(rr.timeout_ms.min(protocol::rr::MAX_TIMEOUT_MS));
    let hard_deadline = test.duration() + timeout * 2 + GRACE;
    // tcp-crr: the listener in blocking mode for the test (restored when this is dropped,
    // after the responders ended).
    let mut crr_listening = None;
    let running = match prepare(&accepted, rr, &mut crr_listening) {
        Ok(r) => r,
        Err(e) => {
            // Before or after `accept`: either way the client reads why, not a timeout.
            refuse(&accepted.control, &e.to_string());
            return Err(e);
        }
    };
    let control = &accepted.control;
    let meter = CpuMeter::start();
    if let Err(e) = write_message(control, &Message::Start) {
        running.finish();
        return Err(e);
    }
    let start = Instant::now();
    let outcome = await_done(control, start + hard_deadline, accepted.shutdown);
    let streams = running.finish();
    let cpu = meter.stop();
    drop(crr_listening);
    outcome?;
    write_message(control, &Message::Results { streams, cpu })
}

/// Accepts the test and starts its responders (not yet `start`ed).
fn prepare<'a>(
    accepted: &Accepted<'a>,
    rr: RrParams,
    crr_listening: &mut Option<crr::Listening<'a>>,
) -> Result<Running, TcpError> {
    let (server, control, test) = (accepted.server, &accepted.control, accepted.test);
    let responders = usize::try_from(test.streams)
        .unwrap_or(1)
        .clamp(1, MAX_RESPONDERS);
    match test.protocol {
        Protocol::TcpRr => {
            accept_test(control)?;
            let conns = server
                .accept_streams(accepted.cookie, usize::try_from(test.streams).unwrap_or(0))?;
            Running::tcp_rr(server, conns, rr)
        }
        Protocol::TcpCrr => {
            let listening = crr::Listening::for_crr(server.listener(), POLL_INTERVAL)
                .map_err(|e| TcpError::io("configuring the listener", e))?;
            *crr_listening = Some(listening);
            accept_test(control)?;
            Running::crr(server, rr, responders)
        }
        _ => {
            let local = control
                .local_addr()
                .map_err(|e| TcpError::io("reading the control connection's address", e))?;
            let client = control
                .peer_addr()
                .map_err(|e| TcpError::io("reading the client's address", e))?
                .ip();
            let sock = net::udp_bind(local, server.config().bind_device.as_deref())
                .map_err(|e| TcpError::io(format!("binding UDP port {local}"), e))?;
            accept_test(control)?;
            Running::udp(server, sock, client, rr, responders)
        }
    }
}

fn accept_test(control: &TcpStream) -> Result<(), TcpError> {
    write_message(
        control,
        &Message::Accept {
            version: PROTOCOL_VERSION,
        },
    )
}

/// Waits for the client's `done`; an error if it goes away, sends anything else, overruns
/// or the server shuts down.
fn await_done(
    control: &TcpStream,
    deadline: Instant,
    shutdown: &AtomicBool,
) -> Result<(), TcpError> {
    loop {
        if shutdown.load(Ordering::Relaxed) {
            return Err(TcpError::Protocol("server shutting down".into()));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(TcpError::Protocol(
                "the client did not finish the test in time; aborted".into(),
            ));
        }
        let readable = wait_readable(control, left.min(POLL_INTERVAL))
            .map_err(|e| TcpError::io("watching the control connection", e))?;
        if !readable {
            continue;
        }
        // The whole `done` by the deadline (a trickled frame cannot hold the server past it).
        let by = deadline.min(Instant::now() + HELLO_TIMEOUT);
        return match read_message_by(control, by) {
            Ok(Message::Done) => Ok(()),
            Ok(other) => Err(TcpError::Protocol(format!(
                "expected done, got a {} message",
                other.kind()
            ))),
            Err(e) => Err(TcpError::Protocol(format!(
                "the client went away mid-test ({e})"
            ))),
        };
    }
}

/// The responders of a running test.
enum Running {
    TcpRr {
        handles: Vec<JoinHandle<(u64, Option<String>)>>,
        /// Clones of the connections, to end the responders.
        sockets: Vec<TcpStream>,
        busy: BusyResponder,
    },
    Pool {
        handles: Vec<JoinHandle<u64>>,
        stop: Arc<AtomicBool>,
        busy: Option<BusyResponder>,
    },
}

impl Running {
    fn tcp_rr(server: &TcpServer, conns: Vec<TcpStream>, rr: RrParams) -> Result<Self, TcpError> {
        let mut sockets = Vec::with_capacity(conns.len());
        let mut handles = Vec::with_capacity(conns.len());
        for (id, conn) in conns.into_iter().enumerate() {
            sockets.push(
                conn.try_clone()
                    .map_err(|e| TcpError::io("cloning a data connection", e))?,
            );
            let spawned = thread::Builder::new()
                .name(format!("nb-rr-{id}"))
                .spawn(move || tcp_rr::respond(&conn, rr.request_size, rr.response_size));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    end_all(&sockets);
                    return Err(TcpError::io("starting a responder thread", e));
                }
            }
        }
        let busy = BusyResponder::start(server.listener())?;
        Ok(Running::TcpRr {
            handles,
            sockets,
            busy,
        })
    }

    fn crr(server: &TcpServer, rr: RrParams, threads: usize) -> Result<Self, TcpError> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let listener = server
                .listener()
                .try_clone()
                .map_err(|e| TcpError::io("cloning the listener", e))?;
            let stop_flag = stop.clone();
            let spawned = thread::Builder::new()
                .name(format!("nb-crr-{i}"))
                .spawn(move || {
                    crr::serve_connections(
                        &listener,
                        rr.request_size,
                        rr.response_size,
                        &stop_flag,
                        tell_busy,
                    )
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(TcpError::io("starting an accept thread", e));
                }
            }
        }
        Ok(Running::Pool {
            handles,
            stop,
            busy: None,
        })
    }

    fn udp(
        server: &TcpServer,
        sock: UdpSocket,
        client: IpAddr,
        rr: RrParams,
        threads: usize,
    ) -> Result<Self, TcpError> {
        sock.set_read_timeout(Some(POLL_INTERVAL))
            .map_err(|e| TcpError::io("configuring the UDP socket", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let sock = sock
                .try_clone()
                .map_err(|e| TcpError::io("cloning the UDP socket", e))?;
            let stop_flag = stop.clone();
            let spawned = thread::Builder::new()
                .name(format!("nb-udp-rr-{i}"))
                .spawn(move || {
                    let (answered, ignored) =
                        udp::respond(&sock, client, rr.request_size, rr.response_size, &stop_flag);
                    if ignored > 0 {
                        tracing::warn!(
                            ignored,
                            "ignored datagrams that were not the client's requests"
                        );
                    }
                    answered
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(TcpError::io("starting a UDP responder thread", e));
                }
            }
        }
        let busy = Some(BusyResponder::start(server.listener())?);
        Ok(Running::Pool {
            handles,
            stop,
            busy,
        })
    }

    /// Ends the responders; what each stream answered (one entry when the server cannot tell
    /// the streams apart: tcp-crr, udp-rr).
    fn finish(self) -> Vec<PeerStream> {
        let peer = |id: u32, transactions: u64, error: Option<String>| PeerStream {
            id,
            bytes: 0,
            seconds: 0.0,
            tcp: None,
            error,
            transactions,
        };
        match self {
            Running::TcpRr {
                handles,
                sockets,
                busy,
            } => {
                end_all(&sockets);
                busy.stop();
                handles
                    .into_iter()
                    .zip(0u32..)
                    .map(|(h, id)| match h.join() {
                        Ok((answered, error)) => peer(id, answered, error),
                        Err(_) => peer(id, 0, Some("responder thread panicked".into())),
                    })
                    .collect()
            }
            Running::Pool {
                handles,
                stop,
                busy,
            } => {
                stop.store(true, Ordering::Relaxed);
                if let Some(b) = busy {
                    b.stop();
                }
                let answered = handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or(0))
                    .fold(0u64, u64::saturating_add);
                vec![peer(0, answered, None)]
            }
        }
    }
}

/// Makes blocked reads of the responders return.
fn end_all(sockets: &[TcpStream]) {
    for s in sockets {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
}

/// A control frame arrived on the test's port during a tcp-crr test: read what the other
/// client sent (bounded) and tell it the server is busy.
fn tell_busy(conn: &TcpStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
    let mut sink = [0u8; 4096];
    let _ = std::io::Read::read(&mut &*conn, &mut sink);
    refuse(conn, BUSY);
}
