//! The socket calls std and socket2 do not wrap: a receive buffer beyond `rmem_max`
//! (SO_RCVBUFFORCE), the socket's drop counter (SO_MEMINFO), the path MTU of a connected socket
//! (IP_MTU / IPV6_MTU), the thread's timer slack (PR_SET_TIMERSLACK, for pacing), and batched
//! receives with the kernel's arrival time of each datagram ([`RecvBatch`]: recvmmsg with
//! SO_TIMESTAMPNS).
//!
//! This is the only module of the UDP engine that uses `unsafe`; each block is a single libc call
//! on a valid file descriptor with correctly sized, initialised buffers, or reads a control
//! message the kernel wrote within the length it reported.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::ptr;

/// `SO_MEMINFO` (linux/socket.h, since 4.12) and the drop counter's index in its array.
const SO_MEMINFO: libc::c_int = 55;
const SK_MEMINFO_VARS: usize = 9;
const SK_MEMINFO_DROPS: usize = 8;

fn setsockopt_int(
    sock: &impl AsFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    let fd = sock.as_fd().as_raw_fd();
    // SAFETY: `value` is a readable c_int for the duration of the call, its size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getsockopt_int(
    sock: &impl AsFd,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<libc::c_int> {
    let fd = sock.as_fd().as_raw_fd();
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` is a writable c_int of `len` bytes that outlives the call.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Asks for a receive buffer of `bytes` past the `net.core.rmem_max` cap (needs CAP_NET_ADMIN,
/// which a test namespace's root has).
pub(crate) fn force_recv_buffer(sock: &impl AsFd, bytes: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    setsockopt_int(sock, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, value)
}

/// Datagrams the kernel dropped on their way into this socket (buffer full, bad checksum).
pub(crate) fn socket_drops(sock: &impl AsFd) -> io::Result<u64> {
    let fd = sock.as_fd().as_raw_fd();
    let mut info = [0u32; SK_MEMINFO_VARS];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: `info` is a writable array of `len` bytes that outlives the call.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let filled = usize::try_from(len).unwrap_or(0) / std::mem::size_of::<u32>();
    match info.get(SK_MEMINFO_DROPS) {
        Some(drops) if filled > SK_MEMINFO_DROPS => Ok(u64::from(*drops)),
        _ => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "SO_MEMINFO has no drop counter",
        )),
    }
}

/// The path MTU the kernel knows for a connected socket (IPv4 or IPv6).
pub(crate) fn path_mtu(sock: &impl AsFd, ipv6: bool) -> io::Result<usize> {
    let mtu = if ipv6 {
        getsockopt_int(sock, libc::IPPROTO_IPV6, libc::IPV6_MTU)?
    } else {
        getsockopt_int(sock, libc::IPPROTO_IP, libc::IP_MTU)?
    };
    usize::try_from(mtu).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "negative MTU"))
}

/// Makes this thread's sleeps end within a few microseconds of their deadline (the default
/// slack is 50 us), so a paced sender keeps its schedule without spinning.
pub(crate) fn tight_timer_slack() -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long argument and touches no memory.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// SO_TIMESTAMPNS, and SCM_TIMESTAMPNS of its control messages (the "old" value, 35 on every
/// architecture but mips/sparc/parisc; its timespec has 64-bit fields on 64-bit targets).
const SO_TIMESTAMPNS: libc::c_int = 35;
/// Control message space per datagram: CMSG_SPACE(16) is 32; room to spare, 8-byte aligned.
const CONTROL_WORDS: usize = 8;

/// Asks the kernel to stamp every datagram with its arrival time (CLOCK_REALTIME, ns).
pub(crate) fn enable_arrival_times(sock: &impl AsFd) -> io::Result<()> {
    setsockopt_int(sock, libc::SOL_SOCKET, SO_TIMESTAMPNS, 1)
}

/// Buffers for receiving up to `n` datagrams of up to `cap` bytes with one recvmmsg call. The
/// headers point into the buffers, which are allocated once and never resized (moving the
/// struct moves no heap memory), so the pointers stay valid for its whole life.
pub(crate) struct RecvBatch {
    cap: usize,
    data: Vec<u8>,
    _iovecs: Vec<libc::iovec>,
    controls: Vec<u64>,
    headers: Vec<libc::mmsghdr>,
}

impl RecvBatch {
    pub fn new(n: usize, cap: usize) -> RecvBatch {
        let n = n.max(1);
        let mut data = vec![0u8; n * cap];
        let mut controls = vec![0u64; n * CONTROL_WORDS];
        let mut iovecs: Vec<libc::iovec> = data
            .chunks_mut(cap.max(1))
            .take(n)
            .map(|chunk| libc::iovec {
                iov_base: chunk.as_mut_ptr().cast(),
                iov_len: chunk.len(),
            })
            .collect();
        let headers = iovecs
            .iter_mut()
            .zip(controls.chunks_mut(CONTROL_WORDS))
            .map(|(iov, control)| {
                // SAFETY: msghdr and mmsghdr are plain old data; all-zero is a valid value.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = iov;
                h.msg_hdr.msg_iovlen = 1;
                h.msg_hdr.msg_control = control.as_mut_ptr().cast();
                h
            })
            .collect();
        RecvBatch {
            cap,
            data,
            _iovecs: iovecs,
            controls,
            headers,
        }
    }

    /// Waits for at least one datagram (up to the socket's receive timeout), then takes every
    /// one already queued, up to the batch size. Returns how many arrived.
    pub fn recv(&mut self, sock: &impl AsFd) -> io::Result<usize> {
        let control_bytes = std::mem::size_of_val(self.controls.as_slice()) / self.headers.len();
        for h in &mut self.headers {
            h.msg_len = 0;
            h.msg_hdr.msg_controllen = control_bytes as _;
            h.msg_hdr.msg_flags = 0;
        }
        let n = libc::c_uint::try_from(self.headers.len()).unwrap_or(libc::c_uint::MAX);
        // SAFETY: `headers` holds `n` initialised mmsghdr whose iovecs and control buffers are
        // live allocations of the stated lengths (see `new`); no timeout pointer.
        let rc = unsafe {
            libc::recvmmsg(
                sock.as_fd().as_raw_fd(),
                self.headers.as_mut_ptr(),
                n,
                libc::MSG_WAITFORONE,
                ptr::null_mut(),
            )
        };
        usize::try_from(rc).map_err(|_| io::Error::last_os_error())
    }

    /// Datagram `i` of the last [`RecvBatch::recv`] (at most `cap` bytes: longer ones are cut)
    /// and its arrival time in ns since the Unix epoch, if the kernel stamped it.
    pub fn datagram(&self, i: usize) -> Option<(&[u8], Option<u64>)> {
        let h = self.headers.get(i)?;
        let len = usize::try_from(h.msg_len).ok()?.min(self.cap);
        let start = i.checked_mul(self.cap)?;
        let bytes = self.data.get(start..start.checked_add(len)?)?;
        Some((bytes, arrival_time(&h.msg_hdr)))
    }
}

/// The SCM_TIMESTAMPNS control message of a received datagram, in ns since the Unix epoch.
fn arrival_time(msg: &libc::msghdr) -> Option<u64> {
    let want = std::mem::size_of::<libc::timespec>();
    // SAFETY: `msg` is a header recvmmsg filled in: msg_control points to a live buffer of
    // which the kernel used msg_controllen bytes; the CMSG_* helpers stay within that length,
    // and the timespec is read (unaligned) only from a message long enough to hold one.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            // size_t with glibc, u32 with musl.
            #[allow(clippy::useless_conversion)]
            let len = usize::try_from((*c).cmsg_len).unwrap_or(0);
            let data_len = libc::CMSG_LEN(0) as usize;
            if (*c).cmsg_level == libc::SOL_SOCKET
                && (*c).cmsg_type == SO_TIMESTAMPNS
                && len >= data_len + want
            {
                let ts: libc::timespec = ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                let secs = u64::try_from(ts.tv_sec).ok()?;
                let nanos = u64::try_from(ts.tv_nsec).ok()?;
                return secs.checked_mul(1_000_000_000)?.checked_add(nanos);
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn drops_mtu_and_slack_are_readable_on_loopback() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        assert_eq!(socket_drops(&b).unwrap(), 0);
        assert!(path_mtu(&a, false).unwrap() >= 1500);
        tight_timer_slack().unwrap();
        // Without CAP_NET_ADMIN the forced size is refused; either way nothing breaks.
        let _ = force_recv_buffer(&b, 1 << 20);
    }

    #[test]
    fn batches_hold_each_datagram_with_its_kernel_arrival_time() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_arrival_times(&rx).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        for i in 0..5u8 {
            tx.send(&[i; 10]).unwrap();
        }
        tx.send(&[9u8; 100]).unwrap();
        let mut batch = RecvBatch::new(4, 16);
        let mut got = Vec::new();
        while got.len() < 6 {
            let n = batch.recv(&rx).unwrap();
            assert!((1..=4).contains(&n), "{n}");
            for i in 0..n {
                let (bytes, at) = batch.datagram(i).unwrap();
                let at = u128::from(at.expect("the kernel stamped it"));
                assert!(
                    at >= before && at < before + 2_000_000_000,
                    "{at} vs {before}"
                );
                got.push(bytes.to_vec());
            }
            assert!(batch.datagram(n.max(4)).is_none());
        }
        assert_eq!(got[..5], [[0u8; 10], [1; 10], [2; 10], [3; 10], [4; 10]]);
        assert_eq!(got[5], vec![9u8; 16], "cut to the buffer, as recv does");
        // Nothing queued: the socket's timeout ends the wait.
        rx.set_read_timeout(Some(std::time::Duration::from_millis(20)))
            .unwrap();
        let e = batch.recv(&rx).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{e}"
        );
    }

    #[test]
    fn a_full_receive_buffer_shows_up_as_drops() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket2::SockRef::from(&rx)
            .set_recv_buffer_size(4096)
            .unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        for _ in 0..200 {
            tx.send(&[0u8; 1000]).unwrap();
        }
        assert!(socket_drops(&rx).unwrap() > 100);
    }
}
