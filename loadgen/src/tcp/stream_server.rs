//! tcp-stream on the server side of the common control protocol: after the `accept`, the
//! server takes the test's data connections (and the latency probe's, if asked for), runs its
//! ends of the streams (receiving what the client sends, sending what it receives) until the
//! duration is over, and sends every stream's figures and its CPU use in `results`.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ::protocol::tcp::Flow;

use super::cpu::CpuMeter;
use super::protocol::{write_message, Message, PeerStream, PROTOCOL_VERSION};
use super::server::{refuse, BusyResponder, TcpServer, POLL_INTERVAL};
use super::stream::{Role, RunningStreams};
use super::sys::wait_readable;
use super::TcpError;
use crate::protocols::Accepted;
use crate::rr::probe::ProbeResponder;

/// Runs a tcp-stream test the server accepted and sends the results.
pub(crate) fn run_test(accepted: Accepted<'_>) -> Result<(), TcpError> {
    let Accepted {
        server,
        control,
        cookie,
        test,
        shutdown,
    } = accepted;
    write_message(
        &control,
        &Message::Accept {
            version: PROTOCOL_VERSION,
        },
    )?;
    let flows = test.direction.flows(test.streams);
    let with_probe = usize::from(test.probe.is_some());
    let mut conns = match server.accept_streams(cookie, flows.len() + with_probe) {
        Ok(conns) => conns,
        Err(e) => {
            refuse(&control, &e.to_string());
            return Err(e);
        }
    };
    // The latency probe's connection comes last (stream id = the number of flows).
    let probe = match (test.probe.is_some(), conns.len() > flows.len()) {
        (true, true) => conns.pop().map(ProbeResponder::start).transpose()?,
        _ => None,
    };
    let roles = flows.iter().map(|f| match f {
        Flow::ClientToServer => Role::Receiver,
        Flow::ServerToClient => Role::Sender,
    });
    let has_senders = flows.contains(&Flow::ServerToClient);

    let busy = BusyResponder::start(server.listener())?;
    let meter = CpuMeter::start();
    let start = Instant::now();
    let streams = RunningStreams::spawn(
        conns.into_iter().zip(roles).collect(),
        test.len,
        server.config().idle_timeout,
        start,
    )?;
    if let Err(e) = write_message(&control, &Message::Start) {
        streams.abort();
        streams.join();
        busy.stop();
        return Err(e);
    }
    let outcome = watch(
        server,
        &control,
        &streams,
        start + test.duration(),
        has_senders,
        shutdown,
    );
    let outcomes = streams.join();
    if let Some(p) = probe {
        p.finish(server.config().idle_timeout);
    }
    let cpu = meter.stop();
    busy.stop();
    outcome?;

    let peer_streams = outcomes
        .into_iter()
        .enumerate()
        .map(|(id, o)| PeerStream {
            id: id as u32,
            bytes: o.bytes,
            seconds: o.seconds,
            tcp: o.tcp,
            error: o.error,
            transactions: 0,
        })
        .collect();
    write_message(
        &control,
        &Message::Results {
            streams: peer_streams,
            cpu,
        },
    )
}

/// Waits for the streams to end, stopping the server's senders at `deadline` and aborting
/// everything when the client goes away, the test overruns, or the server shuts down.
fn watch(
    server: &TcpServer,
    control: &TcpStream,
    streams: &RunningStreams,
    deadline: Instant,
    has_senders: bool,
    shutdown: &AtomicBool,
) -> Result<(), TcpError> {
    let hard_deadline = deadline + server.config().idle_timeout + Duration::from_secs(5);
    loop {
        let now = Instant::now();
        if has_senders && now >= deadline {
            streams.stop_senders();
        }
        if streams.all_finished() {
            return Ok(());
        }
        if shutdown.load(Ordering::Relaxed) {
            streams.abort();
            return Err(TcpError::Protocol("server shutting down".into()));
        }
        if now >= hard_deadline {
            streams.abort();
            return Err(TcpError::Protocol(
                "test overran its duration; aborted".into(),
            ));
        }
        let mut wait = POLL_INTERVAL;
        if has_senders && now < deadline {
            wait = wait.min(deadline - now);
        }
        // The client sends nothing during a test: readable control means it went away.
        if wait_readable(control, wait)
            .map_err(|e| TcpError::io("watching the control connection", e))?
        {
            streams.abort();
            return Err(TcpError::Protocol(
                "client closed the control connection mid-test".into(),
            ));
        }
    }
}
