//! The socket options std and socket2 do not wrap: a receive buffer beyond `rmem_max`
//! (SO_RCVBUFFORCE), the socket's drop counter (SO_MEMINFO), the path MTU of a connected socket
//! (IP_MTU / IPV6_MTU), and the thread's timer slack (PR_SET_TIMERSLACK, for pacing).
//!
//! This is the only module of the UDP engine that uses `unsafe`; each block is a single libc call
//! on a valid file descriptor with a correctly sized, initialised buffer.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd};

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
