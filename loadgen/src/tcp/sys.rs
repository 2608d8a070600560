//! The few syscalls std does not wrap: TCP_INFO, getrusage, poll and IP_BIND_ADDRESS_NO_PORT.
//!
//! This is the only module of the TCP engine that uses `unsafe`; each block is a single libc call
//! on a valid file descriptor with a correctly sized, zero-initialised out-parameter.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

/// The fields of the kernel's `struct tcp_info` that a throughput report needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TcpInfo {
    pub total_retrans: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_cwnd: u32,
    pub snd_mss: u32,
    pub pmtu: u32,
}

/// `getsockopt(fd, IPPROTO_TCP, TCP_INFO)`.
pub(crate) fn tcp_info(sock: &impl AsFd) -> io::Result<TcpInfo> {
    let fd = sock.as_fd().as_raw_fd();
    // SAFETY: tcp_info is plain old data; the all-zero value is valid.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is a writable buffer of `len` bytes that outlives the call.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpInfo {
        total_retrans: info.tcpi_total_retrans,
        rtt_us: info.tcpi_rtt,
        rttvar_us: info.tcpi_rttvar,
        snd_cwnd: info.tcpi_snd_cwnd,
        snd_mss: info.tcpi_snd_mss,
        pmtu: info.tcpi_pmtu,
    })
}

/// `setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)`: a later `bind(addr, 0)` leaves the
/// port to `connect`, which picks one per destination (as it does without a source address),
/// instead of reserving one of the source address's ports for every destination.
pub(crate) fn set_bind_address_no_port(sock: &impl AsFd) -> io::Result<()> {
    let fd = sock.as_fd().as_raw_fd();
    let one: libc::c_int = 1;
    // SAFETY: `one` is a readable c_int that outlives the call; its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// User and system CPU time consumed by this process (all threads) so far.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuTimes {
    pub user: Duration,
    pub system: Duration,
}

pub(crate) fn process_cpu_times() -> io::Result<CpuTimes> {
    cpu_times(libc::RUSAGE_SELF)
}

/// The calling thread's CPU times (tests: an amount of work that does not depend on how long
/// a loaded machine takes to do it).
#[cfg(test)]
pub(crate) fn thread_cpu_times() -> io::Result<CpuTimes> {
    cpu_times(libc::RUSAGE_THREAD)
}

fn cpu_times(who: libc::c_int) -> io::Result<CpuTimes> {
    // SAFETY: rusage is plain old data; the all-zero value is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    let rc = unsafe { libc::getrusage(who, &mut usage) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let to_duration = |tv: libc::timeval| {
        Duration::from_secs(tv.tv_sec.max(0) as u64)
            + Duration::from_micros(tv.tv_usec.max(0) as u64)
    };
    Ok(CpuTimes {
        user: to_duration(usage.ru_utime),
        system: to_duration(usage.ru_stime),
    })
}

/// Waits until `sock` is readable (data, EOF, error or a pending connection) or `timeout` passes,
/// to the nanosecond (`ppoll`: a millisecond `poll` would turn the last fraction of a
/// millisecond into a busy loop for callers that wait for a due time). Returns whether it
/// became readable.
pub(crate) fn wait_readable(sock: &impl AsFd, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: sock.as_fd().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos()),
    };
    loop {
        // SAFETY: one valid pollfd, count 1, a valid timespec, no signal mask.
        let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if rc >= 0 {
            return Ok(rc > 0);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_sub_millisecond_wait_sleeps_instead_of_returning_at_once() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let started = Instant::now();
        assert!(!wait_readable(&a, Duration::from_micros(700)).unwrap());
        let took = started.elapsed();
        assert!(
            took >= Duration::from_micros(700),
            "returned after {took:?}"
        );
    }
}
