//! What a request/response client does ([`RrClientConfig`]) and the limits both ends enforce.

use std::net::IpAddr;
use std::time::Duration;

use protocol::rr::{
    in_flight_window, RrSetup, MAX_BURST, MAX_STREAM_RATE, MAX_TIMEOUT_MS, SEQUENCE_BYTES,
};
use protocol::tcp::MAX_STREAMS;
use protocol::Protocol;

use crate::tcp::{TcpError, DEFAULT_PORT, MAX_DURATION};

/// udp-rr: a datagram not answered within this is lost, and its slot goes on. Far above any
/// LAN round trip under load, short enough that a loss costs its stream little.
pub const DEFAULT_UDP_TIMEOUT: Duration = Duration::from_millis(100);
/// tcp-rr / tcp-crr: a connection or answer that takes longer has failed (TCP retransmits by
/// itself; SYN retries alone take 1 s and 3 s).
pub const DEFAULT_TCP_TIMEOUT: Duration = Duration::from_secs(10);
/// A pipeline (burst) of more than this many bytes in flight each way could fill both ends'
/// socket buffers and deadlock them (each blocked writing, neither reading).
pub const MAX_PIPELINE_BYTES: u64 = 64 * 1024;

/// A request/response test: tcp-rr, tcp-crr or udp-rr.
#[derive(Debug, Clone, PartialEq)]
pub struct RrClientConfig {
    pub protocol: Protocol,
    pub host: String,
    pub port: u16,
    pub duration: Duration,
    pub streams: u32,
    pub request_size: u32,
    pub response_size: u32,
    /// Requests in flight per stream beyond the first (netperf `-b`).
    pub burst: u32,
    /// Open loop: transactions per second per stream; `None` = closed loop.
    pub rate_per_stream: Option<f64>,
    /// udp-rr: a request unanswered this long is lost; TCP: a connect or answer this slow
    /// failed.
    pub timeout: Duration,
    pub bind_addr: Option<IpAddr>,
    pub bind_device: Option<String>,
}

impl RrClientConfig {
    /// netperf's defaults: 1-byte request and response (8 bytes for udp-rr, which carry the
    /// sequence number), one stream, no burst, closed loop, 10 s.
    pub fn new(protocol: Protocol, host: impl Into<String>) -> Self {
        let udp = protocol == Protocol::UdpRr;
        let size = if udp { SEQUENCE_BYTES } else { 1 };
        RrClientConfig {
            protocol,
            host: host.into(),
            port: DEFAULT_PORT,
            duration: Duration::from_secs(10),
            streams: 1,
            request_size: size,
            response_size: size,
            burst: 0,
            rate_per_stream: None,
            timeout: if udp {
                DEFAULT_UDP_TIMEOUT
            } else {
                DEFAULT_TCP_TIMEOUT
            },
            bind_addr: None,
            bind_device: None,
        }
    }

    /// In flight per stream at most: `1 + burst`, or for an open-loop udp-rr two timeouts of
    /// the schedule (see [`protocol::rr::in_flight_window`]).
    pub fn window(&self) -> u32 {
        in_flight_window(&self.setup())
    }

    /// What the report says was asked for (and kept in flight).
    pub fn setup(&self) -> RrSetup {
        let mut setup = RrSetup {
            mode: self.protocol,
            request_size: self.request_size,
            response_size: self.response_size,
            burst: self.burst,
            rate_per_stream: self.rate_per_stream,
            timeout_ms: self.timeout_ms(),
            max_in_flight: None,
        };
        setup.max_in_flight = Some(in_flight_window(&setup));
        setup
    }

    pub fn timeout_ms(&self) -> u64 {
        u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX)
    }

    pub fn validate(&self) -> Result<(), TcpError> {
        let bad = |m: String| Err(TcpError::Config(m));
        if self.host.is_empty() {
            return bad("the server host is empty".into());
        }
        validate_sizes(self.protocol, self.request_size, self.response_size)?;
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            return bad(format!(
                "streams must be 1..={MAX_STREAMS}, got {}",
                self.streams
            ));
        }
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            return bad(format!(
                "duration must be more than 0 and at most {} s, got {:?}",
                MAX_DURATION.as_secs(),
                self.duration
            ));
        }
        if self.burst > MAX_BURST {
            return bad(format!("burst must be 0..={MAX_BURST}, got {}", self.burst));
        }
        if self.protocol.connects_per_transaction() && self.burst > 0 {
            return bad(format!(
                "{} has one transaction per connection: no burst (use more streams)",
                self.protocol
            ));
        }
        let widest = u64::from(self.request_size.max(self.response_size));
        let pipeline = widest.saturating_mul(u64::from(self.burst).saturating_add(1));
        if self.protocol == Protocol::TcpRr && self.burst > 0 && pipeline > MAX_PIPELINE_BYTES {
            return bad(format!(
                "burst {} of {widest}-byte messages puts {pipeline} bytes in flight each way, more than \
                 {MAX_PIPELINE_BYTES}: both ends could block on full socket buffers; lower --burst or the sizes",
                self.burst
            ));
        }
        if let Some(rate) = self.rate_per_stream {
            if !(rate.is_finite() && rate > 0.0 && rate <= MAX_STREAM_RATE) {
                return bad(format!(
                    "rate must be more than 0 and at most {MAX_STREAM_RATE} transactions/s per stream, got {rate}"
                ));
            }
        }
        let ms = self.timeout_ms();
        if !(1..=MAX_TIMEOUT_MS).contains(&ms)
            || !self.timeout.subsec_nanos().is_multiple_of(1_000_000)
        {
            return bad(format!(
                "timeout must be whole milliseconds, 1 ms..={} s, got {:?}",
                MAX_TIMEOUT_MS / 1000,
                self.timeout
            ));
        }
        Ok(())
    }
}

/// Message sizes both ends accept for `protocol`.
pub(crate) fn validate_sizes(
    protocol: Protocol,
    request: u32,
    response: u32,
) -> Result<(), TcpError> {
    let Some((min, max)) = protocol.rr_message_sizes() else {
        return Err(TcpError::Config(format!(
            "{protocol} is not a request/response test"
        )));
    };
    for (what, v) in [("request", request), ("response", response)] {
        if !(min..=max).contains(&v) {
            let why = if protocol == Protocol::UdpRr && v < min {
                " (the first 8 bytes of a udp-rr datagram carry its sequence number)"
            } else {
                ""
            };
            return Err(TcpError::Config(format!(
                "{protocol} {what} size must be {min}..={max} bytes, got {v}{why}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(cfg: &RrClientConfig, needle: &str) {
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.contains(needle), "{needle:?} not in {e}");
    }

    #[test]
    fn defaults_follow_netperf_and_are_valid() {
        let tcp = RrClientConfig::new(Protocol::TcpRr, "h");
        assert_eq!((tcp.request_size, tcp.response_size, tcp.burst), (1, 1, 0));
        assert_eq!(tcp.timeout, DEFAULT_TCP_TIMEOUT);
        tcp.validate().unwrap();
        let udp = RrClientConfig::new(Protocol::UdpRr, "h");
        assert_eq!((udp.request_size, udp.timeout), (8, DEFAULT_UDP_TIMEOUT));
        udp.validate().unwrap();
        assert_eq!(udp.window(), 1);
    }

    #[test]
    fn an_open_loop_udp_stream_keeps_two_timeouts_of_its_schedule_in_flight() {
        let open = |protocol, rate, timeout_ms| RrClientConfig {
            rate_per_stream: Some(rate),
            timeout: Duration::from_millis(timeout_ms),
            ..RrClientConfig::new(protocol, "h")
        };
        // The case: 2000/s, 50 ms: 100 per timeout, 201 in flight (was 1).
        let udp = open(Protocol::UdpRr, 2000.0, 50);
        assert_eq!(udp.window(), 201);
        assert_eq!(udp.setup().max_in_flight, Some(201));
        // Closed loop and TCP keep 1 + burst.
        assert_eq!(open(Protocol::TcpRr, 2000.0, 50).window(), 1);
        let closed = RrClientConfig {
            burst: 7,
            ..RrClientConfig::new(Protocol::UdpRr, "h")
        };
        assert_eq!(closed.window(), 8);
        // The largest rate and timeout a config allows: saturated, no overflow.
        let absurd = open(Protocol::UdpRr, MAX_STREAM_RATE, MAX_TIMEOUT_MS);
        absurd.validate().unwrap();
        assert_eq!(absurd.window(), protocol::rr::MAX_OPEN_LOOP_WINDOW);
    }

    #[test]
    fn impossible_tests_are_refused_with_the_reason() {
        let base = RrClientConfig::new(Protocol::UdpRr, "h");
        refused(
            &RrClientConfig {
                request_size: 4,
                ..base.clone()
            },
            "sequence number",
        );
        refused(
            &RrClientConfig {
                response_size: 70_000,
                ..base.clone()
            },
            "8..=65507",
        );
        refused(
            &RrClientConfig {
                burst: 5000,
                ..base.clone()
            },
            "burst must be 0..=1024",
        );
        refused(
            &RrClientConfig {
                rate_per_stream: Some(f64::NAN),
                ..base.clone()
            },
            "rate must be",
        );
        refused(
            &RrClientConfig {
                timeout: Duration::from_micros(1500),
                ..base.clone()
            },
            "whole milliseconds",
        );
        refused(
            &RrClientConfig {
                streams: 0,
                ..base.clone()
            },
            "streams must be",
        );
        let crr = RrClientConfig::new(Protocol::TcpCrr, "h");
        refused(
            &RrClientConfig {
                burst: 1,
                ..crr.clone()
            },
            "no burst",
        );
        let rr = RrClientConfig::new(Protocol::TcpRr, "h");
        refused(
            &RrClientConfig {
                burst: 3,
                request_size: 32 * 1024,
                ..rr.clone()
            },
            "lower --burst",
        );
        RrClientConfig {
            burst: 1023,
            request_size: 64,
            ..rr
        }
        .validate()
        .unwrap();
        refused(
            &RrClientConfig::new(Protocol::TcpStream, "h"),
            "not a request/response test",
        );
    }
}
