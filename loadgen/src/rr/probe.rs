//! Latency under load: a stream test's request/response probe. On one more data connection
//! between the same two ends, the client sends 1-byte requests at a fixed rate (open loop,
//! latency from the intended send time) while the streams run, and the server answers them
//! like a tcp-rr stream. The figures go into the TCP report's `latency_probe`.

use std::net::{Shutdown, TcpStream};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use protocol::rr::{LatencyProbe, ProbeCounts};

use super::config::DEFAULT_TCP_TIMEOUT;
use super::pace::Pacer;
use super::record::{Recorder, StreamOutcome};
use super::tcp_rr::{self, StreamPlan};
use crate::tcp::protocol::RrParams;
use crate::tcp::TcpError;

/// Request and response size of the probe.
pub const PROBE_SIZE: u32 = 1;

/// What the client asks the server to answer on the probe connection.
pub(crate) fn params() -> RrParams {
    RrParams {
        request_size: PROBE_SIZE,
        response_size: PROBE_SIZE,
        timeout_ms: u64::try_from(DEFAULT_TCP_TIMEOUT.as_millis()).unwrap_or(u64::MAX),
    }
}

/// The client's probe, running.
pub(crate) struct RunningProbe {
    handle: JoinHandle<StreamOutcome>,
    rate: f64,
}

impl RunningProbe {
    /// Sends `rate` requests per second on `conn` from `start` until `deadline`.
    pub(crate) fn start(
        conn: TcpStream,
        rate: f64,
        start: Instant,
        deadline: Instant,
    ) -> Result<Self, TcpError> {
        let plan = StreamPlan {
            request_size: PROBE_SIZE,
            response_size: PROBE_SIZE,
            window: 1,
            deadline,
            timeout: DEFAULT_TCP_TIMEOUT,
            // Half an interval in, so the first request does not race the streams' start.
            pacer: Pacer::open(start, rate, 0.5),
        };
        let handle = thread::Builder::new()
            .name("nb-probe".into())
            .spawn(move || {
                tcp_rr::run_client(conn, plan, Recorder::new(Arc::new(AtomicU64::new(0))))
            })
            .map_err(|e| TcpError::io("starting the latency probe", e))?;
        Ok(RunningProbe { handle, rate })
    }

    /// Waits for the probe (it ends by itself after the deadline) and returns its figures.
    pub(crate) fn finish(self) -> Result<LatencyProbe, TcpError> {
        let out = self.handle.join().unwrap_or_else(|_| StreamOutcome {
            error: Some("the latency probe's thread panicked".into()),
            ..StreamOutcome::default()
        });
        let c = &out.counts;
        let counts = ProbeCounts {
            attempted: c.attempted,
            skipped: c.skipped,
            failed: c.checked_failed().unwrap_or(u64::MAX),
        };
        LatencyProbe::single(
            self.rate, PROBE_SIZE, PROBE_SIZE, counts, &out.hist, out.error,
        )
        .map_err(TcpError::Protocol)
    }
}

/// The server's side of the probe connection.
pub(crate) struct ProbeResponder {
    handle: JoinHandle<(u64, Option<String>)>,
    sock: TcpStream,
}

impl ProbeResponder {
    pub(crate) fn start(conn: TcpStream) -> Result<Self, TcpError> {
        let sock = conn
            .try_clone()
            .map_err(|e| TcpError::io("cloning the probe connection", e))?;
        let handle = thread::Builder::new()
            .name("nb-probe".into())
            .spawn(move || tcp_rr::respond(&conn, PROBE_SIZE, PROBE_SIZE))
            .map_err(|e| TcpError::io("starting the probe responder", e))?;
        Ok(ProbeResponder { handle, sock })
    }

    /// Gives the client up to `wait` to finish its probe (it half-closes the connection),
    /// then ends the responder.
    pub(crate) fn finish(self, wait: Duration) {
        let until = Instant::now() + wait;
        while !self.handle.is_finished() && Instant::now() < until {
            thread::sleep(Duration::from_millis(5));
        }
        let _ = self.sock.shutdown(Shutdown::Both);
        if let Ok((answered, Some(e))) = self.handle.join() {
            tracing::debug!(answered, "the latency probe ended: {e}");
        }
    }
}
