//! The udp-stream flags of `client` (iperf3's where they overlap: `-u`, `-b`, `-l`, `-P`, `-t`,
//! `-R`, `-J`); the common ones (`-c`, `-p`, `-t`, `-P`, `-l`, `-R`, `--bidir`, `-B`,
//! `--bind-dev`, `--output`) are [`crate::tcp::cli::ClientArgs`]'s, which flattens these in.

use ::protocol::udp::UdpReport;
use ::protocol::worker::ProgressUpdate;
use ::protocol::Protocol;
use anyhow::bail;

use super::client::{self, UdpProgress};
use super::{render_text, Pace, UdpClientConfig, DEFAULT_BITRATE};
use crate::protocols::ClientTest;
use crate::tcp::cli::{fail_on_stream_errors, print_report, ClientArgs};

#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct UdpArgs {
    /// Same as --protocol udp-stream (iperf3 -u).
    #[arg(short = 'u', long = "udp", conflicts_with = "protocol")]
    pub udp: bool,
    /// udp-stream: target bitrate of EACH stream (as iperf3 -b), bits/s of UDP payload with an
    /// optional K/M/G suffix (1000-based); 0 sends as fast as possible. Default 1M.
    #[arg(short = 'b', long = "bitrate", value_name = "RATE", value_parser = parse_bitrate)]
    pub bitrate: Option<f64>,
    /// udp-stream: target datagrams per second of EACH stream, instead of --bitrate.
    #[arg(long = "pps", value_name = "N", conflicts_with = "bitrate", value_parser = parse_pps)]
    pub pps: Option<f64>,
    /// udp-stream: receive buffer of every receiving socket, both ends (as iperf3 -w: the
    /// SO_RCVBUF argument, K/M suffix 1024-based; the kernel doubles it). Default 4M, forced
    /// past net.core.rmem_max where allowed.
    #[arg(short = 'w', long = "window", value_name = "BYTES", value_parser = parse_window)]
    pub window: Option<usize>,
}

impl UdpArgs {
    /// The protocol asked for: udp-stream with `-u`, else `--protocol`.
    pub fn protocol(&self, named: Protocol) -> Protocol {
        if self.udp {
            Protocol::UdpStream
        } else {
            named
        }
    }

    pub fn pace(&self) -> Pace {
        match (self.pps, self.bitrate) {
            (Some(pps), _) => Pace::PacketsPerSecond(pps),
            (None, Some(0.0)) => Pace::Unlimited,
            (None, Some(bps)) => Pace::Bitrate(bps),
            (None, None) => Pace::Bitrate(DEFAULT_BITRATE),
        }
    }

    /// Refuses the udp-only flags for another protocol.
    pub fn check_for(&self, protocol: Protocol) -> anyhow::Result<()> {
        if protocol != Protocol::UdpStream
            && (self.bitrate.is_some() || self.pps.is_some() || self.window.is_some())
        {
            bail!(
                "--bitrate, --pps and --window apply to --protocol udp-stream (-u) only, not \
                 {protocol}"
            );
        }
        Ok(())
    }
}

/// The udp-stream test the command line asks for, against `host:port`.
pub fn config_for(args: &ClientArgs, host: &str, port: u16) -> UdpClientConfig {
    let common = args.config_for(host, port);
    UdpClientConfig {
        port,
        duration: common.duration,
        streams: common.streams,
        len: args.len,
        pace: args.udp.pace(),
        direction: common.direction,
        rcvbuf: args.udp.window,
        bind_addr: common.bind_addr,
        bind_device: common.bind_device,
        ..UdpClientConfig::new(host)
    }
}

/// udp-stream (`-u`).
pub const CLIENT: ClientTest<UdpClientConfig, UdpProgress, UdpReport> = ClientTest {
    command: "client",
    config: config_for,
    preflight: client::preflight,
    run: client::run,
    progress_line,
    progress_update,
    finish,
};

/// The line printed every second while the test runs: the rate, and the loss where this
/// client receives.
fn progress_line(p: &UdpProgress) -> String {
    let loss = p
        .interval_loss_percent
        .map_or_else(String::new, |l| format!("  loss {l:.3}%"));
    format!(
        "[SUM] {:>6.2} s  {:>10.3} Mbit/s{loss}",
        p.elapsed_secs,
        p.interval_bits_per_second / 1e6
    )
}

/// bits/s, and the loss of the last second where it receives.
fn progress_update(p: &UdpProgress, u: ProgressUpdate) -> ProgressUpdate {
    ProgressUpdate {
        elapsed_s: p.elapsed_secs,
        bits_per_second: p.interval_bits_per_second,
        loss_percent: p.interval_loss_percent,
        ..u
    }
}

/// Prints the report (text or JSON as asked) and fails if any stream ended early.
fn finish(args: &ClientArgs, report: &UdpReport) -> anyhow::Result<()> {
    print_report(args.json(), report, render_text)?;
    fail_on_stream_errors(&report.stream_errors())
}

/// Bits per second: a number with an optional K, M, G or T suffix (1000-based, as iperf3).
fn parse_bitrate(s: &str) -> Result<f64, String> {
    let (digits, factor) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1e3),
        Some((i, 'm' | 'M')) => (&s[..i], 1e6),
        Some((i, 'g' | 'G')) => (&s[..i], 1e9),
        Some((i, 't' | 'T')) => (&s[..i], 1e12),
        _ => (s, 1.0),
    };
    digits
        .parse::<f64>()
        .ok()
        .map(|v| v * factor)
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| format!("not a bitrate: {s:?} (use e.g. 100M, 1.5G or 0 for unlimited)"))
}

fn parse_window(s: &str) -> Result<usize, String> {
    crate::tcp::cli::parse_len(s)
}

fn parse_pps(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("not a datagram rate: {s:?} (a number above 0)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::protocol::tcp::Direction;
    use clap::Parser;
    use std::time::Duration;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        client: ClientArgs,
    }

    fn parse(args: &[&str]) -> Result<ClientArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|c| c.client)
    }

    #[test]
    fn iperf3_style_udp_flags() {
        let args = parse(&[
            "-c",
            "198.18.0.2",
            "-u",
            "-b",
            "1.5G",
            "-l",
            "1400",
            "-P",
            "2",
            "-t",
            "3",
            "-R",
        ])
        .unwrap();
        assert_eq!(args.udp.protocol(args.protocol), Protocol::UdpStream);
        let cfg = config_for(&args, "198.18.0.2", 5201);
        assert_eq!(cfg.pace, Pace::Bitrate(1.5e9));
        assert_eq!(cfg.len, Some(1400));
        assert_eq!((cfg.streams, cfg.duration), (2, Duration::from_secs(3)));
        assert_eq!(cfg.direction, Direction::Receive);
        let args = parse(&["-c", "h", "--protocol", "udp-stream", "--pps", "1000"]).unwrap();
        assert_eq!(args.udp.protocol(args.protocol), Protocol::UdpStream);
        assert_eq!(
            config_for(&args, "h", 1).pace,
            Pace::PacketsPerSecond(1000.0)
        );
        assert_eq!(config_for(&args, "h", 1).len, None, "the path decides");
        let args = parse(&["-c", "h", "-u", "-b", "0"]).unwrap();
        assert_eq!(args.udp.pace(), Pace::Unlimited);
        let args = parse(&["-c", "h", "-u"]).unwrap();
        assert_eq!(args.udp.pace(), Pace::Bitrate(DEFAULT_BITRATE));
        assert_eq!(config_for(&args, "h", 1).rcvbuf, None);
        let args = parse(&["-c", "h", "-u", "-w", "208K"]).unwrap();
        assert_eq!(config_for(&args, "h", 1).rcvbuf, Some(208 * 1024));
    }

    #[test]
    fn udp_flags_are_refused_where_they_mean_nothing() {
        assert!(parse(&["-c", "h", "-u", "--protocol", "tcp-rr"]).is_err());
        assert!(parse(&["-c", "h", "-u", "-b", "1M", "--pps", "5"]).is_err());
        assert!(parse(&["-c", "h", "-u", "-b", "fast"]).is_err());
        assert!(parse(&["-c", "h", "-u", "--pps", "0"]).is_err());
        let args = parse(&["-c", "h", "-b", "1M"]).unwrap();
        let e = args.udp.check_for(args.protocol).unwrap_err().to_string();
        assert!(e.contains("udp-stream"), "{e}");
        assert_eq!(parse_bitrate("100k"), Ok(1e5));
        assert_eq!(parse_bitrate("2T"), Ok(2e12));
        assert!(parse_bitrate("-1M").is_err());
        // The TCP default length is unchanged.
        let args = parse(&["-c", "h"]).unwrap();
        assert_eq!(args.config_for("h", 1).len, 128 * 1024);
    }
}
