//! The data path: one thread per stream, one buffer allocated per stream, plain blocking
//! `write`/`read` calls of `len` bytes and nothing else in the loop but a relaxed atomic store
//! (the byte count the progress reporter samples).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use ::protocol::tcp::TcpInfoSnapshot;

use super::sys::{self, TcpInfo};
use super::TcpError;

impl From<TcpInfo> for TcpInfoSnapshot {
    fn from(i: TcpInfo) -> Self {
        TcpInfoSnapshot {
            retransmits: u64::from(i.total_retrans),
            rtt_us: i.rtt_us,
            rttvar_us: i.rttvar_us,
            snd_cwnd_bytes: u64::from(i.snd_cwnd) * u64::from(i.snd_mss),
            pmtu: i.pmtu,
        }
    }
}

/// What one side saw of one stream.
#[derive(Debug, Clone, Default)]
pub(crate) struct StreamOutcome {
    pub bytes: u64,
    pub seconds: f64,
    /// TCP_INFO of the sending socket; `None` on the receiving side.
    pub tcp: Option<TcpInfoSnapshot>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Sender,
    Receiver,
}

/// The data connections of one side of a test, running.
pub(crate) struct RunningStreams {
    handles: Vec<JoinHandle<StreamOutcome>>,
    /// Clones of the sockets, to unblock the threads when the test is aborted.
    sockets: Vec<TcpStream>,
    /// Byte counts so far, per stream, for progress reports.
    counters: Vec<Arc<AtomicU64>>,
    stop: Arc<AtomicBool>,
}

impl RunningStreams {
    /// Starts one thread per connection. `start` is the instant the test began for this side.
    pub fn spawn(
        conns: Vec<(TcpStream, Role)>,
        len: usize,
        idle_timeout: Duration,
        start: Instant,
    ) -> Result<Self, TcpError> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut running = RunningStreams {
            handles: Vec::with_capacity(conns.len()),
            sockets: Vec::with_capacity(conns.len()),
            counters: Vec::with_capacity(conns.len()),
            stop: stop.clone(),
        };
        for (id, (sock, role)) in conns.into_iter().enumerate() {
            sock.set_read_timeout(Some(idle_timeout))
                .and_then(|()| sock.set_write_timeout(Some(idle_timeout)))
                .map_err(|e| TcpError::io("setting data connection timeouts", e))?;
            running.sockets.push(
                sock.try_clone()
                    .map_err(|e| TcpError::io("cloning a data connection", e))?,
            );
            let counter = Arc::new(AtomicU64::new(0));
            running.counters.push(counter.clone());
            let stop = stop.clone();
            let handle = thread::Builder::new()
                .name(format!("nb-tcp-{id}"))
                .spawn(move || match role {
                    Role::Sender => send(sock, len, start, &stop, &counter),
                    Role::Receiver => receive(sock, len, start, &counter),
                })
                .map_err(|e| TcpError::io("starting a stream thread", e))?;
            running.handles.push(handle);
        }
        Ok(running)
    }

    /// Bytes moved so far by all streams.
    pub fn bytes_so_far(&self) -> u64 {
        self.counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// Tells the senders to finish their current write and end the stream.
    pub fn stop_senders(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn all_finished(&self) -> bool {
        self.handles.iter().all(JoinHandle::is_finished)
    }

    /// Ends every stream now: blocked reads and writes return at once.
    pub fn abort(&self) {
        self.stop_senders();
        for sock in &self.sockets {
            let _ = sock.shutdown(Shutdown::Both);
        }
    }

    /// Waits for every stream thread; outcomes in stream order.
    pub fn join(mut self) -> Vec<StreamOutcome> {
        std::mem::take(&mut self.handles)
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| StreamOutcome {
                    error: Some("stream thread panicked".into()),
                    ..StreamOutcome::default()
                })
            })
            .collect()
    }
}

/// Streams dropped without [`RunningStreams::join`] (an early error return) must not keep
/// sending forever in detached threads.
impl Drop for RunningStreams {
    fn drop(&mut self) {
        if !self.handles.is_empty() {
            self.abort();
        }
    }
}

fn send(
    sock: TcpStream,
    len: usize,
    start: Instant,
    stop: &AtomicBool,
    counter: &AtomicU64,
) -> StreamOutcome {
    let buf = PageBuffer::new(len);
    let buf = buf.as_slice();
    let (bytes, error) = pump(
        || (&sock).write(buf),
        || !stop.load(Ordering::Relaxed),
        Zero::PeerGone,
        counter,
    );
    let seconds = start.elapsed().as_secs_f64();
    let tcp = sys::tcp_info(&sock).ok().map(TcpInfoSnapshot::from);
    // FIN after the queued bytes: the receiver's read returns 0 once it has everything.
    let _ = sock.shutdown(Shutdown::Write);
    StreamOutcome {
        bytes,
        seconds,
        tcp,
        error,
    }
}

fn receive(sock: TcpStream, len: usize, start: Instant, counter: &AtomicU64) -> StreamOutcome {
    let mut buf = PageBuffer::new(len);
    let buf = buf.as_mut_slice();
    let (bytes, error) = pump(|| (&sock).read(buf), || true, Zero::EndOfStream, counter);
    StreamOutcome {
        bytes,
        seconds: start.elapsed().as_secs_f64(),
        tcp: None,
        error,
    }
}

/// What a 0-byte result of the I/O call means.
#[derive(Clone, Copy)]
enum Zero {
    /// A read: the sender finished (FIN).
    EndOfStream,
    /// A write: the peer is gone.
    PeerGone,
}

/// Repeats `transfer` (one read or one write) while `running` holds, keeping `counter` at the byte
/// count; returns the bytes moved and why it stopped early, if it did.
fn pump(
    mut transfer: impl FnMut() -> io::Result<usize>,
    running: impl Fn() -> bool,
    zero: Zero,
    counter: &AtomicU64,
) -> (u64, Option<String>) {
    let mut bytes = 0u64;
    while running() {
        match transfer() {
            Ok(0) => match zero {
                Zero::EndOfStream => break,
                Zero::PeerGone => return (bytes, Some("connection closed by the peer".into())),
            },
            Ok(n) => {
                bytes += n as u64;
                counter.store(bytes, Ordering::Relaxed);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (bytes, Some(describe(&e))),
        }
    }
    (bytes, None)
}

const PAGE: usize = 4096;

/// A zeroed buffer starting on a page boundary, like iperf3's mmap'd one, so the kernel copies
/// whole pages without a misaligned head.
struct PageBuffer {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl PageBuffer {
    fn new(len: usize) -> Self {
        let storage = vec![0u8; len + PAGE];
        let start = storage.as_ptr().align_offset(PAGE).min(PAGE);
        PageBuffer {
            storage,
            start,
            len,
        }
    }

    fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

fn describe(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            "no progress within the idle timeout".into()
        }
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_start_on_a_page() {
        for len in [1, 1000, 128 * 1024] {
            let mut b = PageBuffer::new(len);
            assert_eq!(b.as_slice().as_ptr() as usize % PAGE, 0);
            assert_eq!(b.as_mut_slice().len(), len);
        }
    }
}
