use std::net::IpAddr;
use std::time::Duration;

use ::protocol::tcp::Direction;
use ::protocol::udp::{MAX_LEN, MIN_LEN};

use super::UdpParams;
use crate::tcp::{TcpError, DEFAULT_PORT};

/// Largest datagram that fits a 1500-byte MTU over IPv4 (1500 - 20 - 8): the default length,
/// lowered to what fits the path's MTU (e.g. 1422 over a vxlan with MTU 1450).
pub const DEFAULT_LEN: usize = 1472;
/// iperf3's UDP default: 1 Mbit/s per stream.
pub const DEFAULT_BITRATE: f64 = 1e6;
/// Smallest receive buffer a test may ask for (the kernel's own minimum is about this).
pub(crate) const MIN_RECV_BUFFER: usize = 2048;
pub(crate) use super::net::MAX_RECV_BUFFER;
/// Most datagrams per second one stream may be asked for.
pub(crate) const MAX_PACKETS_PER_SECOND: f64 = 1e9;
/// Fewest: one datagram in 1000 s (keeps the schedule's arithmetic finite).
pub(crate) const MIN_PACKETS_PER_SECOND: f64 = 1e-3;

/// How fast each sending stream sends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// Bits per second of UDP payload (iperf3 `-b`).
    Bitrate(f64),
    PacketsPerSecond(f64),
    /// As fast as the socket takes datagrams (iperf3 `-b 0`).
    Unlimited,
}

impl Pace {
    /// Datagrams per second at `len` bytes each; None when unlimited.
    pub fn packets_per_second(self, len: usize) -> Option<f64> {
        match self {
            Pace::Bitrate(bps) => Some(bps / (len as f64 * 8.0)),
            Pace::PacketsPerSecond(pps) => Some(pps),
            Pace::Unlimited => None,
        }
    }
}

/// What `client --protocol udp-stream` does; [`UdpClientConfig::new`] gives iperf3's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct UdpClientConfig {
    pub host: String,
    /// The server's port: TCP for the control connection, UDP for the datagrams.
    pub port: u16,
    pub duration: Duration,
    pub streams: u32,
    /// Bytes per datagram (iperf3 `-l`); None: [`DEFAULT_LEN`] or what fits the path MTU.
    pub len: Option<usize>,
    pub pace: Pace,
    pub direction: Direction,
    /// Receive buffer of each receiving socket, both ends (iperf3 `-w`); None:
    /// [`super::DEFAULT_RECV_BUFFER`], forced past `net.core.rmem_max` where allowed.
    pub rcvbuf: Option<usize>,
    pub bind_addr: Option<IpAddr>,
    pub bind_device: Option<String>,
    pub connect_timeout: Duration,
}

impl UdpClientConfig {
    pub fn new(host: impl Into<String>) -> Self {
        UdpClientConfig {
            host: host.into(),
            port: DEFAULT_PORT,
            duration: Duration::from_secs(10),
            streams: 1,
            len: None,
            pace: Pace::Bitrate(DEFAULT_BITRATE),
            direction: Direction::Send,
            rcvbuf: None,
            bind_addr: None,
            bind_device: None,
            connect_timeout: Duration::from_secs(10),
        }
    }

    pub fn validate(&self) -> Result<(), TcpError> {
        if self.host.is_empty() {
            return Err(TcpError::Config("the server host is empty".into()));
        }
        let len = self.len.unwrap_or(DEFAULT_LEN);
        crate::tcp::config::validate_test(self.streams, len, self.duration)?;
        validate_udp(
            &UdpParams {
                packets_per_second: self.pace.packets_per_second(len),
                rcvbuf: self.rcvbuf,
            },
            len,
        )
    }
}

/// The limits both ends enforce on a udp-stream test.
pub(crate) fn validate_udp(params: &UdpParams, len: usize) -> Result<(), TcpError> {
    if let Some(b) = params.rcvbuf {
        if !(MIN_RECV_BUFFER..=MAX_RECV_BUFFER).contains(&b) {
            return Err(TcpError::Config(format!(
                "the receive buffer must be {MIN_RECV_BUFFER}..={MAX_RECV_BUFFER} bytes, got {b}"
            )));
        }
    }
    let packets_per_second = params.packets_per_second;
    if !(MIN_LEN..=MAX_LEN).contains(&len) {
        return Err(TcpError::Config(format!(
            "datagram length must be {MIN_LEN}..={MAX_LEN} bytes, got {len}"
        )));
    }
    if let Some(pps) = packets_per_second {
        if !(MIN_PACKETS_PER_SECOND..=MAX_PACKETS_PER_SECOND).contains(&pps) {
            return Err(TcpError::Config(format!(
                "the rate must be {MIN_PACKETS_PER_SECOND}..={MAX_PACKETS_PER_SECOND} datagrams/s \
                 per stream, got {pps} (use a bitrate of 0 to send as fast as possible)"
            )));
        }
    }
    Ok(())
}

/// Checks a test request's udp parameters (the server's side of [`validate_udp`]).
pub(crate) fn validate_params(len: usize, params: Option<&UdpParams>) -> Result<(), TcpError> {
    let params = params.ok_or_else(|| {
        TcpError::Config("a udp-stream test request carries no udp parameters".into())
    })?;
    validate_udp(params, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_iperf3_and_bad_values_are_named() {
        let cfg = UdpClientConfig::new("h");
        cfg.validate().unwrap();
        assert_eq!(cfg.pace.packets_per_second(1000), Some(125.0));
        assert_eq!(Pace::Unlimited.packets_per_second(1000), None);
        let bad = |cfg: UdpClientConfig, needle: &str| {
            let e = cfg.validate().unwrap_err().to_string();
            assert!(e.contains(needle), "{needle:?} not in {e}");
        };
        bad(
            UdpClientConfig {
                len: Some(65_508),
                ..cfg.clone()
            },
            "32..=65507",
        );
        bad(
            UdpClientConfig {
                len: Some(31),
                ..cfg.clone()
            },
            "got 31",
        );
        bad(
            UdpClientConfig {
                pace: Pace::PacketsPerSecond(f64::NAN),
                ..cfg.clone()
            },
            "datagrams/s",
        );
        bad(
            UdpClientConfig {
                pace: Pace::Bitrate(-1.0),
                ..cfg.clone()
            },
            "0.001..=",
        );
        bad(
            UdpClientConfig {
                streams: 0,
                ..cfg.clone()
            },
            "streams",
        );
        assert!(validate_params(1000, None).is_err());
        assert!(validate_params(
            1000,
            Some(&UdpParams {
                packets_per_second: Some(2e9),
                rcvbuf: None,
            })
        )
        .is_err());
        validate_params(
            1000,
            Some(&UdpParams {
                packets_per_second: None,
                rcvbuf: Some(212_992),
            }),
        )
        .unwrap();
        let e = validate_params(
            1000,
            Some(&UdpParams {
                packets_per_second: None,
                rcvbuf: Some(2 << 30),
            }),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("receive buffer"), "{e}");
    }
}
