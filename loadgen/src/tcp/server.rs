//! `server` (also `tcp-server`): serves tests one after another on one port (control and data
//! connections alike), answers "busy" to clients that arrive during a test, and survives clients
//! that vanish mid-test. The test request names its [`Protocol`](::protocol::Protocol), whose
//! `crate::protocols::entry` checks the request (a test this build cannot run is refused
//! before it starts) and runs the server's side of the test.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::config::{validate_test, TcpServerConfig};
use super::net;
use super::protocol::{read_message_by, write_message, Message, TestParams, PROTOCOL_VERSION};
use super::sys::wait_readable;
use super::TcpError;
use crate::protocols::Accepted;

/// How often the idle server and the running test look at the shutdown flag.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Time a new connection gets to send its first frame.
pub(crate) const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Time a client gets to open all its data connections.
const STREAMS_TIMEOUT: Duration = Duration::from_secs(10);

/// A bound, listening server. Bind first (port 0 picks a free port), then [`TcpServer::serve`].
pub struct TcpServer {
    listener: TcpListener,
    cfg: TcpServerConfig,
}

/// Binds and serves until `shutdown` is set (or after one test with `one_off`).
pub fn serve(cfg: &TcpServerConfig, shutdown: &AtomicBool) -> Result<(), TcpError> {
    TcpServer::bind(cfg)?.serve(shutdown)
}

impl TcpServer {
    pub fn bind(cfg: &TcpServerConfig) -> Result<Self, TcpError> {
        let listener = net::listen(cfg.bind_addr, cfg.port, cfg.bind_device.as_deref())?;
        // Non-blocking so a connection that vanishes between poll and accept cannot stall us.
        listener
            .set_nonblocking(true)
            .map_err(|e| TcpError::io("configuring the listener", e))?;
        Ok(TcpServer {
            listener,
            cfg: cfg.clone(),
        })
    }

    pub(crate) fn listener(&self) -> &TcpListener {
        &self.listener
    }

    pub(crate) fn config(&self) -> &TcpServerConfig {
        &self.cfg
    }

    pub fn local_addr(&self) -> Result<SocketAddr, TcpError> {
        self.listener
            .local_addr()
            .map_err(|e| TcpError::io("reading the listening address", e))
    }

    /// Serves tests one after another. A failed test is logged and the server carries on;
    /// only listener failures end it. Checks `shutdown` several times a second.
    pub fn serve(&self, shutdown: &AtomicBool) -> Result<(), TcpError> {
        tracing::info!(addr = %self.local_addr()?, "tcp-server listening");
        while !shutdown.load(Ordering::Relaxed) {
            let Some((conn, peer)) = accept(&self.listener, POLL_INTERVAL)? else {
                continue;
            };
            match self.handle_connection(conn, peer, shutdown) {
                Ok(true) => {
                    if self.cfg.one_off {
                        return Ok(());
                    }
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(%peer, "test failed: {e}");
                    if self.cfg.one_off {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    /// Serves exactly one test, which must start within `arrival` (worker mode: the client was
    /// released from the same barrier). Connections that are not a valid test request (probes,
    /// stray data connections, a client of another version) are refused and do not count; the
    /// last such refusal is named if no test arrives in time.
    pub fn serve_one(&self, arrival: Duration, shutdown: &AtomicBool) -> Result<(), TcpError> {
        tracing::info!(addr = %self.local_addr()?, "tcp-server waiting for one test");
        let deadline = Instant::now() + arrival;
        let mut last_refusal = None;
        loop {
            if shutdown.load(Ordering::Relaxed) {
                return Err(TcpError::Protocol("server shutting down".into()));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(TcpError::NoTest {
                    waited: arrival,
                    last_refusal,
                });
            }
            let Some((conn, peer)) = accept(&self.listener, left.min(POLL_INTERVAL))? else {
                continue;
            };
            match self.read_test(&conn, peer) {
                Ok(Some((cookie, test))) => {
                    self.run_test(conn, &cookie, &test, shutdown)?;
                    tracing::info!(%peer, "test done");
                    return Ok(());
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(%peer, "refused a connection: {e}");
                    last_refusal = Some(format!("{peer}: {e}"));
                }
            }
        }
    }

    /// Serves the test a new connection asks for; `Ok(false)` if it was not a test (a stray data
    /// connection of an earlier test).
    fn handle_connection(
        &self,
        conn: TcpStream,
        peer: SocketAddr,
        shutdown: &AtomicBool,
    ) -> Result<bool, TcpError> {
        let Some((cookie, test)) = self.read_test(&conn, peer)? else {
            return Ok(false);
        };
        self.run_test(conn, &cookie, &test, shutdown)?;
        tracing::info!(%peer, "test done");
        Ok(true)
    }

    /// Reads and checks a new connection's test request (refusing it with a reason if it is
    /// bad); `Ok(None)` if it is a stray data connection of an earlier test.
    fn read_test(
        &self,
        conn: &TcpStream,
        peer: SocketAddr,
    ) -> Result<Option<(String, TestParams)>, TcpError> {
        let (cookie, test) = match read_message_by(conn, Instant::now() + HELLO_TIMEOUT) {
            Ok(Message::Hello { cookie, test, .. }) => (cookie, test),
            Ok(Message::Data { .. }) => {
                tracing::debug!(%peer, "dropping a data connection that belongs to no running test");
                return Ok(None);
            }
            Ok(other) => {
                let e =
                    TcpError::Protocol(format!("expected a hello, got a {} message", other.kind()));
                refuse(conn, &e.to_string());
                return Err(e);
            }
            Err(TcpError::VersionMismatch { theirs, .. }) => {
                let text = format!(
                    "control protocol version mismatch: the server speaks version {PROTOCOL_VERSION}, \
                     the client version {theirs}; run the same netbench-loadgen release on both ends"
                );
                refuse(conn, &text);
                return Err(TcpError::VersionMismatch {
                    ours: PROTOCOL_VERSION,
                    theirs,
                });
            }
            Err(e) => {
                refuse(conn, &e.to_string());
                return Err(e);
            }
        };
        if let Err(e) =
            supported(&test).and_then(|()| validate_test(test.streams, test.len, test.duration()))
        {
            refuse(conn, &e.to_string());
            return Err(e);
        }
        tracing::info!(%peer, protocol = %test.protocol, streams = test.streams, direction = ?test.direction,
            seconds = test.duration().as_secs_f64(), len = test.len, "test starting");
        Ok(Some((cookie, test)))
    }

    /// Runs the test of the protocol the client asked for (checked by [`supported`]).
    fn run_test(
        &self,
        control: TcpStream,
        cookie: &str,
        test: &TestParams,
        shutdown: &AtomicBool,
    ) -> Result<(), TcpError> {
        let accepted = Accepted {
            server: self,
            control,
            cookie,
            test,
            shutdown,
        };
        (crate::protocols::entry(test.protocol).serve)(accepted)
    }

    /// Accepts the test's `n` data connections, identified by cookie and stream id.
    pub(crate) fn accept_streams(
        &self,
        cookie: &str,
        n: usize,
    ) -> Result<Vec<TcpStream>, TcpError> {
        let deadline = Instant::now() + STREAMS_TIMEOUT;
        let mut slots: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
        let mut missing = n;
        while missing > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(TcpError::Protocol(format!(
                    "only {} of {n} data connections arrived within {} s",
                    n - missing,
                    STREAMS_TIMEOUT.as_secs()
                )));
            }
            let Some((conn, peer)) = accept(&self.listener, left.min(POLL_INTERVAL))? else {
                continue;
            };
            match read_message_by(&conn, Instant::now() + left.min(HELLO_TIMEOUT)) {
                Ok(Message::Data {
                    cookie: c, stream, ..
                }) if c == cookie => match slots.get_mut(stream as usize) {
                    Some(slot @ None) => {
                        *slot = Some(conn);
                        missing -= 1;
                    }
                    _ => {
                        tracing::warn!(%peer, stream, "ignoring a duplicate or out-of-range data connection")
                    }
                },
                Ok(Message::Hello { .. }) => refuse(&conn, BUSY),
                Ok(_) => {
                    tracing::debug!(%peer, "ignoring a connection that is not part of this test")
                }
                Err(e) => tracing::debug!(%peer, "ignoring a connection: {e}"),
            }
        }
        Ok(slots.into_iter().flatten().collect())
    }
}

pub(crate) const BUSY: &str = "the server is busy running another test; try again later";

/// Whether this build serves the test's protocol (and the test carries what it needs).
fn supported(test: &TestParams) -> Result<(), TcpError> {
    (crate::protocols::entry(test.protocol).check)(test)
}

/// Accepts one connection if one arrives within `wait`.
pub(crate) fn accept(
    listener: &TcpListener,
    wait: Duration,
) -> Result<Option<(TcpStream, SocketAddr)>, TcpError> {
    if !wait_readable(listener, wait).map_err(|e| TcpError::io("waiting for connections", e))? {
        return Ok(None);
    }
    match listener.accept() {
        Ok((conn, peer)) => {
            // Accepted sockets do not inherit O_NONBLOCK on Linux, but be explicit.
            conn.set_nonblocking(false)
                .map_err(|e| TcpError::io("configuring an accepted connection", e))?;
            Ok(Some((conn, peer)))
        }
        Err(e) if is_fd_exhaustion(&e) => {
            // The connection stays queued and poll keeps saying "readable": do not spin.
            thread::sleep(POLL_INTERVAL);
            Ok(None)
        }
        Err(e) if is_transient_accept_error(&e) => Ok(None),
        Err(e) => Err(TcpError::io("accepting a connection", e)),
    }
}

fn is_transient_accept_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock
            | io::ErrorKind::Interrupted
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

fn is_fd_exhaustion(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Best effort: tell the peer why, then drop the connection.
pub(crate) fn refuse(conn: &TcpStream, message: &str) {
    let _ = write_message(conn, &Message::error(message));
}

/// While a test runs, tells every new client that the server is busy (as iperf3 does) instead of
/// leaving it hanging in the listen backlog.
pub(crate) struct BusyResponder {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

impl BusyResponder {
    pub(crate) fn start(listener: &TcpListener) -> Result<Self, TcpError> {
        let listener = listener
            .try_clone()
            .map_err(|e| TcpError::io("cloning the listener", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = thread::Builder::new()
            .name("nb-tcp-busy".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    if let Ok(Some((conn, _))) = accept(&listener, POLL_INTERVAL) {
                        let by = Instant::now() + Duration::from_secs(1);
                        if let Ok(Message::Hello { .. }) = read_message_by(&conn, by) {
                            refuse(&conn, BUSY);
                        }
                    }
                }
            })
            .map_err(|e| TcpError::io("starting the busy responder", e))?;
        Ok(BusyResponder { stop, handle })
    }

    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.handle.join();
    }
}
