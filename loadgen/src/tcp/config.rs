use std::net::IpAddr;
use std::time::Duration;

use ::protocol::tcp::{Direction, MAX_LEN, MAX_STREAMS};

use super::TcpError;

/// iperf3's port, so firewalls opened for iperf3 work unchanged.
pub const DEFAULT_PORT: u16 = 5201;
/// iperf3's default TCP message (buffer) size.
pub const DEFAULT_LEN: usize = 128 * 1024;

pub(crate) const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);
/// Highest rate of the latency probe: a probe, not a load.
pub const MAX_PROBE_RATE: f64 = 100_000.0;

/// What `tcp-client` does; [`TcpClientConfig::new`] gives iperf3's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct TcpClientConfig {
    pub host: String,
    pub port: u16,
    pub duration: Duration,
    pub streams: u32,
    /// Bytes per write/read call (iperf3 `-l`).
    pub len: usize,
    pub direction: Direction,
    /// Source address to bind every connection to (iperf3 `-B`).
    pub bind_addr: Option<IpAddr>,
    /// Interface to bind every connection to (SO_BINDTODEVICE, iperf3 `--bind-dev`).
    pub bind_device: Option<String>,
    pub connect_timeout: Duration,
    /// A data connection that moves no byte for this long is considered dead.
    pub idle_timeout: Duration,
    /// Latency under load: requests per second of a 1-byte request/response probe on a
    /// separate connection beside the streams; `None` = no probe.
    pub latency_probe: Option<f64>,
}

impl TcpClientConfig {
    pub fn new(host: impl Into<String>) -> Self {
        TcpClientConfig {
            host: host.into(),
            port: DEFAULT_PORT,
            duration: Duration::from_secs(10),
            streams: 1,
            len: DEFAULT_LEN,
            direction: Direction::Send,
            bind_addr: None,
            bind_device: None,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(15),
            latency_probe: None,
        }
    }

    pub fn validate(&self) -> Result<(), TcpError> {
        validate_test(self.streams, self.len, self.duration)?;
        if self.host.is_empty() {
            return Err(TcpError::Config("the server host is empty".into()));
        }
        if let Some(rate) = self.latency_probe {
            if !(rate.is_finite() && rate > 0.0 && rate <= MAX_PROBE_RATE) {
                return Err(TcpError::Config(format!(
                    "the latency probe's rate must be more than 0 and at most {MAX_PROBE_RATE} requests/s, got {rate}"
                )));
            }
        }
        Ok(())
    }
}

/// Limits both ends enforce, so a typo cannot ask a server for a week-long test.
pub(crate) fn validate_test(streams: u32, len: usize, duration: Duration) -> Result<(), TcpError> {
    if !(1..=MAX_STREAMS).contains(&streams) {
        return Err(TcpError::Config(format!(
            "streams must be 1..={MAX_STREAMS}, got {streams}"
        )));
    }
    if !(1..=MAX_LEN).contains(&len) {
        return Err(TcpError::Config(format!(
            "message length must be 1..={MAX_LEN} bytes, got {len}"
        )));
    }
    if duration.is_zero() || duration > MAX_DURATION {
        return Err(TcpError::Config(format!(
            "duration must be more than 0 and at most {} s, got {:?}",
            MAX_DURATION.as_secs(),
            duration
        )));
    }
    Ok(())
}

/// What `tcp-server` does.
#[derive(Debug, Clone, PartialEq)]
pub struct TcpServerConfig {
    /// Address to listen on; `None` = every address (IPv6 dual-stack, else IPv4).
    pub bind_addr: Option<IpAddr>,
    pub port: u16,
    pub bind_device: Option<String>,
    /// A data connection that moves no byte for this long is considered dead.
    pub idle_timeout: Duration,
    /// Serve one test, then return (iperf3 `-1`).
    pub one_off: bool,
}

impl Default for TcpServerConfig {
    fn default() -> Self {
        TcpServerConfig {
            bind_addr: None,
            port: DEFAULT_PORT,
            bind_device: None,
            idle_timeout: Duration::from_secs(15),
            one_off: false,
        }
    }
}
