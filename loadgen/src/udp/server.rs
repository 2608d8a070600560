//! udp-stream on the server side of the common control protocol: after the `accept`, the
//! server takes each stream's "open" datagram on a set-up socket bound to the address the client
//! reached and the listener's port, gives the stream a socket of its own connected to the
//! client's stream address ([`super::net`]), answers `start`, runs its ends of the streams, and
//! sends its figures and CPU use in `udp_results`. Strangers' datagrams on the port are ignored;
//! a client that does not open every stream within [`OPEN_TIMEOUT`], or whose control
//! connection closes, ends the test with a reason.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ::protocol::tcp::Flow;

use super::config::validate_params;
use super::datagram::{tag_of, Header, Kind, HEADER_LEN};
use super::net;
use super::stream::{Plan, Role, RunningStreams, DRAIN, LINGER};
use crate::protocols::Accepted;
use crate::tcp::cpu::CpuMeter;
use crate::tcp::protocol::{write_message, Message, TestParams, PROTOCOL_VERSION};
use crate::tcp::server::{refuse, BusyResponder};
use crate::tcp::sys::wait_readable;
use crate::tcp::{TcpError, TcpServerConfig};

/// Time the client gets to open every stream after the `accept`.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the waiting server looks at its deadline, the control connection and shutdown.
const POLL: Duration = Duration::from_millis(50);

/// Whether a test request is a udp-stream test this server can run (before it is accepted).
pub(crate) fn supported(test: &TestParams) -> Result<(), TcpError> {
    validate_params(test.len, test.udp.as_ref())
}

/// Runs a udp-stream test the server accepted (checked by [`supported`]) and sends the
/// results.
pub(crate) fn run_test(accepted: Accepted<'_>) -> Result<(), TcpError> {
    let udp = UdpTest {
        listener: accepted.server.listener(),
        cfg: accepted.server.config(),
        cookie: accepted.cookie,
        test: accepted.test,
    };
    udp.run(accepted.control, accepted.shutdown)
}

/// One udp-stream test the server accepted from its listener.
struct UdpTest<'a> {
    listener: &'a TcpListener,
    cfg: &'a TcpServerConfig,
    cookie: &'a str,
    test: &'a TestParams,
}

impl UdpTest<'_> {
    fn run(&self, control: TcpStream, shutdown: &AtomicBool) -> Result<(), TcpError> {
        let (plan, setup) = match self.prepare(&control) {
            Ok(ready) => ready,
            Err(e) => {
                refuse(&control, &e.to_string());
                return Err(e);
            }
        };
        write_message(
            &control,
            &Message::Accept {
                version: PROTOCOL_VERSION,
            },
        )?;
        let flows = self.test.direction.flows(self.test.streams);
        let sockets = match self.open_streams(&setup, &control, &flows, plan.tag, shutdown) {
            Ok(sockets) => sockets,
            Err(e) => {
                refuse(&control, &e.to_string());
                return Err(e);
            }
        };
        drop(setup);
        let roles = flows.iter().map(|f| match f {
            Flow::ClientToServer => Role::Receiver,
            Flow::ServerToClient => Role::Sender,
        });

        let busy = BusyResponder::start(self.listener)?;
        let meter = CpuMeter::start();
        let start = Instant::now();
        let streams = RunningStreams::spawn(sockets.into_iter().zip(roles).collect(), plan, start)?;
        if let Err(e) = write_message(&control, &Message::Start) {
            streams.abort();
            streams.join();
            busy.stop();
            return Err(e);
        }
        let hard_deadline = start + plan.duration + LINGER + DRAIN + Duration::from_secs(5);
        let outcome = watch(&control, &streams, hard_deadline, shutdown);
        let sides = streams.join();
        let cpu = meter.stop();
        let cpu_seconds = cpu.cpu_seconds(start.elapsed().as_secs_f64());
        busy.stop();
        outcome?;
        write_message(
            &control,
            &Message::UdpResults {
                streams: sides,
                cpu,
                cpu_seconds,
            },
        )
    }

    /// The plan of the test and the set-up socket on the address the client reached.
    fn prepare(&self, control: &TcpStream) -> Result<(Plan, UdpSocket), TcpError> {
        supported(self.test)?;
        let packets_per_second = self.test.udp.and_then(|u| u.packets_per_second);
        let plan = Plan {
            tag: tag_of(self.cookie),
            len: self.test.len,
            duration: self.test.duration(),
            packets_per_second,
        };
        let local = control
            .local_addr()
            .map_err(|e| TcpError::io("reading the control connection's address", e))?;
        let setup =
            net::server_socket(net::canonical(local), self.cfg.bind_device.as_deref(), None)?;
        Ok((plan, setup))
    }

    /// Waits for every stream's open datagram and gives each stream its socket.
    fn open_streams(
        &self,
        setup: &UdpSocket,
        control: &TcpStream,
        flows: &[Flow],
        tag: u64,
        shutdown: &AtomicBool,
    ) -> Result<Vec<UdpSocket>, TcpError> {
        let local = setup
            .local_addr()
            .map_err(|e| TcpError::io("reading the udp address", e))?;
        setup
            .set_read_timeout(Some(POLL))
            .map_err(|e| TcpError::io("configuring the udp socket", e))?;
        // Streams open only from the control connection's peer: a datagram from elsewhere (a
        // spoofed source with the tag seen on the wire) must not point a stream at a victim.
        let client = control
            .peer_addr()
            .map_err(|e| TcpError::io("reading the control connection's peer", e))?
            .ip()
            .to_canonical();
        let deadline = Instant::now() + OPEN_TIMEOUT;
        let mut slots: Vec<Option<UdpSocket>> = flows.iter().map(|_| None).collect();
        let mut missing = flows.len();
        let mut buf = [0u8; HEADER_LEN];
        while missing > 0 {
            if Instant::now() >= deadline {
                return Err(TcpError::Protocol(format!(
                    "only {} of {} udp streams opened within {} s: are datagrams to udp port {} \
                     reaching the server?",
                    flows.len() - missing,
                    flows.len(),
                    OPEN_TIMEOUT.as_secs(),
                    local.port()
                )));
            }
            if shutdown.load(Ordering::Relaxed) {
                return Err(TcpError::Protocol("server shutting down".into()));
            }
            if wait_readable(control, Duration::ZERO)
                .map_err(|e| TcpError::io("watching the control connection", e))?
            {
                return Err(TcpError::Protocol(
                    "client closed the control connection while opening the udp streams".into(),
                ));
            }
            let (n, peer) = match setup.recv_from(&mut buf) {
                Ok(got) => got,
                Err(e) if is_transient(&e) => continue,
                Err(e) => return Err(TcpError::io("receiving open datagrams", e)),
            };
            if peer.ip().to_canonical() != client {
                tracing::debug!(%peer, "ignoring an open datagram from another host than the client");
                continue;
            }
            let Some(id) = opened_stream(buf.get(..n).unwrap_or_default(), tag) else {
                tracing::debug!(%peer, "ignoring a datagram that opens no stream of this test");
                continue;
            };
            if let Some(slot @ None) = slots.get_mut(usize::from(id)) {
                *slot = Some(self.stream_socket(local, peer, flows.get(usize::from(id)))?);
                missing -= 1;
            }
        }
        Ok(slots.into_iter().flatten().collect())
    }

    fn stream_socket(
        &self,
        local: SocketAddr,
        peer: SocketAddr,
        flow: Option<&Flow>,
    ) -> Result<UdpSocket, TcpError> {
        let sock = net::server_socket(local, self.cfg.bind_device.as_deref(), Some(peer))?;
        if flow == Some(&Flow::ClientToServer) {
            let asked = self.test.udp.and_then(|u| u.rcvbuf);
            net::grow_recv_buffer(&sock, asked.unwrap_or(net::DEFAULT_RECV_BUFFER));
        }
        Ok(sock)
    }
}

/// The stream a datagram opens, if it is an open datagram of this test.
fn opened_stream(datagram: &[u8], tag: u64) -> Option<u16> {
    let h = Header::read(datagram).ok()?;
    (h.kind == Kind::Open && h.tag == tag).then_some(h.stream)
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock
            | io::ErrorKind::TimedOut
            | io::ErrorKind::Interrupted
            | io::ErrorKind::ConnectionRefused
    )
}

/// Waits for the streams to end, aborting them when the client goes away, the test overruns,
/// or the server shuts down.
fn watch(
    control: &TcpStream,
    streams: &RunningStreams,
    hard_deadline: Instant,
    shutdown: &AtomicBool,
) -> Result<(), TcpError> {
    loop {
        if streams.all_finished() {
            return Ok(());
        }
        if shutdown.load(Ordering::Relaxed) {
            streams.abort();
            return Err(TcpError::Protocol("server shutting down".into()));
        }
        if Instant::now() >= hard_deadline {
            streams.abort();
            return Err(TcpError::Protocol(
                "test overran its duration; aborted".into(),
            ));
        }
        // The client sends nothing during a test: readable control means it went away.
        if wait_readable(control, POLL)
            .map_err(|e| TcpError::io("watching the control connection", e))?
        {
            streams.abort();
            return Err(TcpError::Protocol(
                "client closed the control connection mid-test".into(),
            ));
        }
    }
}
