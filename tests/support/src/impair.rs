//! Delay and loss on a device inside a test's own namespace: `tc qdisc add dev DEV root netem
//! delay ... loss ...` when the kernel has netem, else a userspace stand-in doing the same to
//! the same packets: an iptables rule in the namespace hands every packet leaving DEV to an
//! NFQUEUE (with --queue-bypass, so packets flow if the stand-in is gone), and a thread of the
//! test, moved into the namespace, gives each one its verdict: dropped with the loss
//! probability (seeded, deterministic), accepted once the delay has passed (FIFO: the delay
//! is constant). Nothing outside the test's namespace is touched. [`Impairment::matching`]
//! hands the stand-in only the packets an iptables match selects (e.g. one pod's replies
//! from the API server, on a test cluster's node namespace).
//!
//! The stand-in's thread runs at real-time priority ([`STAND_IN_PRIORITY`], SCHED_FIFO) and
//! sleeps until the next packet or the next release is due (`ppoll`, to the nanosecond). At
//! normal priority on a loaded machine (a build on both cores) it would wait milliseconds for
//! a CPU now and then, and the delay would be whatever the scheduler gave; a real-time thread
//! preempts that load at once, so what is left is the wake-up itself (microseconds, about the
//! same for every packet). It never spins, so it takes a CPU from nobody while idle (and the
//! kernel's real-time throttling would stop a runaway one). It still costs some microseconds
//! per packet, so a test that measures an added delay compares two delays through the same
//! mechanism (1 ms and 11 ms) rather than a delay against none.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use netlink_sys::{protocols::NETLINK_NETFILTER, Socket, SocketAddr};

/// What to do to the packets leaving a device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    pub delay: Duration,
    pub loss_percent: f64,
}

pub struct Impairment {
    ns: String,
    /// The iptables match of the packets impaired (mangle POSTROUTING).
    rule: Vec<String>,
    queue: Option<Queue>,
}

/// The queue number inside the namespace (queues are per network namespace).
const QUEUE: u16 = 0;
/// SCHED_FIFO priority of the stand-in's thread: above the endpoints of a latency measurement
/// (see `REALTIME_PRIORITY` in the support module), so the path never waits for them.
pub const STAND_IN_PRIORITY: i32 = 20;
/// Longest the stand-in sleeps before it looks at its stop flag again.
const STOP_CHECK: Duration = Duration::from_millis(20);

impl Impairment {
    /// Applies `spec` to packets leaving `dev` in namespace `ns`.
    pub fn apply(ns: &str, dev: &str, spec: Spec) -> Impairment {
        let mut netem = vec![
            "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "netem",
        ];
        let delay = format!("{}us", spec.delay.as_micros());
        let loss = format!("{}%", spec.loss_percent);
        netem.extend(["delay", &delay, "loss", &loss]);
        let out = Command::new("ip")
            .args(&netem)
            .output()
            .expect("running tc");
        if out.status.success() {
            return Impairment {
                ns: ns.into(),
                rule: vec!["-o".into(), dev.into()],
                queue: None,
            };
        }
        let why = String::from_utf8_lossy(&out.stderr);
        assert!(
            why.contains("unknown") || why.contains("Unknown"),
            "tc netem failed for another reason than a kernel without netem: {why}"
        );
        Self::matching(ns, &["-o", dev], spec)
    }

    /// Applies `spec` with the stand-in to the packets leaving namespace `ns` that the
    /// iptables match `rule` selects in mangle POSTROUTING (after routing, before the source
    /// NAT), e.g. `["-d", POD_IP, "-p", "tcp", "--sport", "6443"]`.
    pub fn matching(ns: &str, rule: &[&str], spec: Spec) -> Impairment {
        let queue = Queue::start(ns, spec);
        let rule: Vec<String> = rule.iter().map(|s| s.to_string()).collect();
        iptables(ns, "-A", &rule);
        Impairment {
            ns: ns.into(),
            rule,
            queue: Some(queue),
        }
    }

    /// "netem" or the stand-in's name, for messages.
    pub fn mechanism(&self) -> &'static str {
        if self.queue.is_some() {
            "nfqueue stand-in (this kernel has no netem)"
        } else {
            "netem"
        }
    }

    /// Packets the stand-in dropped so far (netem does not say).
    pub fn dropped(&self) -> Option<u64> {
        self.queue.as_ref().map(Queue::dropped)
    }

    /// Removes the impairment (the namespace's removal would too).
    pub fn remove(mut self) {
        self.take_down();
    }

    fn take_down(&mut self) {
        match self.queue.take() {
            Some(q) => {
                iptables(&self.ns, "-D", &self.rule);
                q.stop();
            }
            None => {
                let dev = self.rule.get(1).map_or("", String::as_str);
                let _ = Command::new("ip")
                    .args([
                        "netns", "exec", &self.ns, "tc", "qdisc", "del", "dev", dev, "root",
                    ])
                    .output();
            }
        }
    }
}

impl Drop for Impairment {
    fn drop(&mut self) {
        self.take_down();
    }
}

fn iptables(ns: &str, op: &str, rule: &[String]) {
    let queue = QUEUE.to_string();
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "iptables",
            "-t",
            "mangle",
            op,
            "POSTROUTING",
        ])
        .args(rule)
        .args(["-j", "NFQUEUE", "--queue-num", &queue, "--queue-bypass"])
        .output()
        .expect("running iptables (Debian package iptables)");
    assert!(
        out.status.success() || op == "-D",
        "iptables {op} in {ns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The stand-in's thread.
struct Queue {
    stop: Arc<AtomicBool>,
    dropped: Arc<std::sync::atomic::AtomicU64>,
    handle: JoinHandle<io::Result<()>>,
}

impl Queue {
    fn start(ns: &str, spec: Spec) -> Queue {
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (ready_tx, ready_rx) = mpsc::channel();
        let ns = ns.to_string();
        let (flag, count) = (stop.clone(), dropped.clone());
        let handle = thread::spawn(move || {
            let sock = match open_queue(&ns) {
                Ok(s) => s,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return Err(e);
                }
            };
            if let Err(e) = realtime(STAND_IN_PRIORITY) {
                let _ = ready_tx.send(Err(format!("real-time priority: {e}")));
                return Err(e);
            }
            let _ = ready_tx.send(Ok(()));
            serve(&sock, spec, &flag, &count)
        });
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => {}
            other => panic!("the nfqueue stand-in did not start: {other:?}"),
        }
        Queue {
            stop,
            dropped,
            handle,
        }
    }

    fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Err(e) = self.handle.join().expect("the stand-in panicked") {
            if !thread::panicking() {
                panic!("the nfqueue stand-in failed: {e}");
            }
        }
    }
}

/// Puts this thread in the SCHED_FIFO class at `priority`.
pub fn realtime(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: a valid sched_param; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sleeps until `sock` is readable or `timeout` passes (to the nanosecond).
fn wait_readable(sock: &Socket, timeout: Duration) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos()),
    };
    // SAFETY: one valid pollfd, count 1, a valid timespec, no signal mask.
    if unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) } < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// Moves this thread into `ns`, and binds queue [`QUEUE`] there (packet metadata only).
fn open_queue(ns: &str) -> io::Result<Socket> {
    let netns = File::open(format!("/var/run/netns/{ns}"))?;
    // SAFETY: setns with an open namespace file descriptor; it only changes this thread's
    // network namespace.
    if unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut sock = Socket::new(NETLINK_NETFILTER)?;
    // (Nonblocking from the end of the set-up on: the stand-in drains its queue in `serve`.)
    sock.bind(&SocketAddr::new(0, 0))?;
    sock.set_rx_buf_sz(16 << 20)?;
    let mut cmd = Vec::new();
    // NFQNL_CFG_CMD_BIND for this queue.
    attr(&mut cmd, NFQA_CFG_CMD, &[1, 0, 0, 0]);
    config(&sock, &cmd)?;
    let mut params = Vec::new();
    // copy_range 0, NFQNL_COPY_META: the packet's id is all we need.
    attr(&mut params, NFQA_CFG_PARAMS, &[0, 0, 0, 0, 1]);
    attr(&mut params, NFQA_CFG_QUEUE_MAXLEN, &65_536u32.to_be_bytes());
    config(&sock, &params)?;
    sock.set_non_blocking(true)?;
    Ok(sock)
}

const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NLMSG_ERROR: u16 = 2;
const NF_DROP: u32 = 0;
const NF_ACCEPT: u32 = 1;

fn attr(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(out.len() + (4 - len % 4) % 4, 0);
}

/// nlmsghdr + nfgenmsg (AF_UNSPEC, version 0, the queue number) + attributes.
fn message(kind: u16, flags: u16, attrs: &[u8]) -> Vec<u8> {
    let len = 16 + 4 + attrs.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | kind).to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[0, 0]);
    m.extend_from_slice(&QUEUE.to_be_bytes());
    m.extend_from_slice(attrs);
    m
}

/// Sends a config request and waits for its acknowledgement.
fn config(sock: &Socket, attrs: &[u8]) -> io::Result<()> {
    // NLM_F_REQUEST | NLM_F_ACK
    sock.send(&message(NFQNL_MSG_CONFIG, 1 | 4, attrs), 0)?;
    let mut buf = Vec::with_capacity(8192);
    sock.recv(&mut buf, 0)?;
    let kind = buf.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let code = buf
        .get(16..20)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match (kind, code) {
        (Some(NLMSG_ERROR), Some(0)) => Ok(()),
        (Some(NLMSG_ERROR), Some(e)) => Err(io::Error::from_raw_os_error(-e)),
        other => Err(io::Error::other(format!("unexpected answer {other:?}"))),
    }
}

fn verdict(sock: &Socket, id: u32, accept: bool) -> io::Result<()> {
    let mut hdr = Vec::with_capacity(8);
    hdr.extend_from_slice(&(if accept { NF_ACCEPT } else { NF_DROP }).to_be_bytes());
    hdr.extend_from_slice(&id.to_be_bytes());
    let mut attrs = Vec::new();
    attr(&mut attrs, NFQA_VERDICT_HDR, &hdr);
    sock.send(&message(NFQNL_MSG_VERDICT, 1, &attrs), 0)
        .map(drop)
}

/// The packet ids of the packet messages in one netlink datagram.
fn packet_ids(buf: &[u8], out: &mut Vec<u32>) {
    let mut at = 0usize;
    while let Some(h) = buf.get(at..at + 16) {
        let len = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]) as usize;
        let kind = u16::from_ne_bytes([h[4], h[5]]);
        if len < 16 {
            return;
        }
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET {
            let body = buf.get(at + 20..at + len).unwrap_or_default();
            let mut a = 0usize;
            while let Some(ah) = body.get(a..a + 4) {
                let alen = u16::from_ne_bytes([ah[0], ah[1]]) as usize;
                let akind = u16::from_ne_bytes([ah[2], ah[3]]) & 0x7fff;
                if alen < 4 {
                    break;
                }
                if akind == NFQA_PACKET_HDR {
                    if let Some(id) = body.get(a + 4..a + 8) {
                        out.push(u32::from_be_bytes([id[0], id[1], id[2], id[3]]));
                    }
                }
                a += (alen + 3) & !3;
            }
        }
        at += (len + 3) & !3;
    }
}

/// Gives every queued packet its verdict until `stop`.
fn serve(
    sock: &Socket,
    spec: Spec,
    stop: &AtomicBool,
    dropped: &std::sync::atomic::AtomicU64,
) -> io::Result<()> {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let threshold = (spec.loss_percent / 100.0 * u64::MAX as f64) as u64;
    let mut held: VecDeque<(Instant, u32)> = VecDeque::new();
    let mut buf = Vec::with_capacity(1 << 16);
    let mut ids = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let wait = held.front().map_or(STOP_CHECK, |&(due, _)| {
            due.saturating_duration_since(Instant::now())
                .min(STOP_CHECK)
        });
        if !wait.is_zero() {
            wait_readable(sock, wait)?;
        }
        loop {
            buf.clear();
            match sock.recv(&mut buf, 0) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // ENOBUFS: the kernel dropped queue messages (their packets stay queued until
                // bypassed); keep serving.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => continue,
                Err(e) => return Err(e),
            }
            let now = Instant::now();
            ids.clear();
            packet_ids(&buf, &mut ids);
            for &id in &ids {
                // xorshift64
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                if threshold > 0 && rng < threshold {
                    dropped.fetch_add(1, Ordering::Relaxed);
                    verdict(sock, id, false)?;
                } else if spec.delay.is_zero() {
                    verdict(sock, id, true)?;
                } else {
                    held.push_back((now + spec.delay, id));
                }
            }
        }
        let now = Instant::now();
        while let Some(&(due, id)) = held.front() {
            if due > now {
                break;
            }
            held.pop_front();
            verdict(sock, id, true)?;
        }
    }
    for (_, id) in held {
        verdict(sock, id, true)?;
    }
    Ok(())
}
