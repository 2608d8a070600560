//! `tcp-server` / `tcp-client` command lines; flags follow iperf3 where they overlap.

use std::io::{self, Write};
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::client::{self, TcpProgress};
use ::protocol::tcp::{Direction, TcpReport};
use ::protocol::worker::ProgressUpdate;
use ::protocol::Protocol;
use anyhow::{bail, Context};

use super::{render_text, server, TcpClientConfig, TcpServerConfig, DEFAULT_LEN, DEFAULT_PORT};
use crate::protocols::ClientTest;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

/// `--direction`: [`Direction`] as a command-line value (the report type has no clap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DirectionArg {
    /// Client sends, server receives.
    Send,
    /// Server sends, client receives (iperf3 `-R`).
    Receive,
    /// Both at once: `streams` connections each way (iperf3 `--bidir`).
    Both,
}

impl From<DirectionArg> for Direction {
    fn from(d: DirectionArg) -> Direction {
        match d {
            DirectionArg::Send => Direction::Send,
            DirectionArg::Receive => Direction::Receive,
            DirectionArg::Both => Direction::Both,
        }
    }
}

/// Run a test against a `netbench-loadgen server` (formerly `tcp-server`).
#[derive(Debug, clap::Args)]
pub struct ClientArgs {
    /// The test: tcp-stream (throughput, the default), tcp-rr, tcp-crr, udp-rr, udp-stream.
    #[arg(long, value_name = "PROTOCOL", default_value_t = Protocol::TcpStream)]
    pub protocol: Protocol,
    /// Server to connect to. Required standalone; in worker mode (NETBENCH_OPERATOR_URL set)
    /// the default is the first server registered at the barrier.
    #[arg(short = 'c', long = "client", value_name = "HOST")]
    pub host: Option<String>,
    /// Server port (with -c).
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Test duration: seconds (fractions allowed) or with a unit (500ms, 10s, 2m, 1h).
    #[arg(short = 't', long = "time", visible_alias = "duration", value_name = "DURATION", default_value = "10", value_parser = parse_duration)]
    pub time: Duration,
    /// Number of parallel streams (per direction with --bidir).
    #[arg(
        short = 'P',
        long = "parallel",
        visible_alias = "streams",
        value_name = "STREAMS",
        default_value_t = 1
    )]
    pub parallel: u32,
    /// Bytes per write/read: plain number or with K/M suffix (1024-based); default 128K. For
    /// udp-stream the datagram size; default the largest that fits the path MTU, at most 1472.
    #[arg(short = 'l', long = "len", value_name = "LEN", value_parser = parse_len)]
    pub len: Option<usize>,
    /// Reverse: the server sends, the client receives.
    #[arg(short = 'R', long, conflicts_with_all = ["bidir", "direction"])]
    pub reverse: bool,
    /// Both directions at once.
    #[arg(long, conflicts_with = "direction")]
    pub bidir: bool,
    /// Direction, as an alternative to -R / --bidir.
    #[arg(long, value_enum)]
    pub direction: Option<DirectionArg>,
    /// Source address for every connection.
    #[arg(short = 'B', long = "bind", value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Source interface for every connection (SO_BINDTODEVICE).
    #[arg(long = "bind-dev", value_name = "IF")]
    pub bind_dev: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
    /// Same as --output json.
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// tcp-rr, tcp-crr, udp-rr: bytes per request (default 1; udp-rr 8, which carry the
    /// sequence number). K/M suffixes allowed.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub request_size: Option<u32>,
    /// tcp-rr, tcp-crr, udp-rr: bytes per response (default as --request-size).
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub response_size: Option<u32>,
    /// tcp-rr, udp-rr: requests in flight per stream beyond the first (netperf -b).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub burst: u32,
    /// tcp-rr, tcp-crr, udp-rr: transactions per second per stream (open loop, latency from
    /// the intended send time); default: closed loop.
    #[arg(long, value_name = "PER_SECOND")]
    pub rate: Option<f64>,
    /// tcp-rr, tcp-crr, udp-rr: per-request timeout (udp-rr: a datagram unanswered this long
    /// is lost and the stream goes on; default 100ms; TCP: default 10s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// tcp-stream: latency under load: RATE paced 1-byte requests per second on a separate
    /// connection to the same server; the report carries their percentiles.
    #[arg(long, value_name = "RATE")]
    pub latency_probe: Option<f64>,
    #[command(flatten)]
    pub udp: crate::udp::cli::UdpArgs,
}

/// Serve TCP stream tests, one after another, until killed.
#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// Address to listen on (default: all).
    #[arg(short = 'B', long = "bind", value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Port to listen on (control and data connections).
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Interface to listen on (SO_BINDTODEVICE).
    #[arg(long = "bind-dev", value_name = "IF")]
    pub bind_dev: Option<String>,
    /// Serve one test, then exit (always so in worker mode).
    #[arg(short = '1', long = "one-off")]
    pub one_off: bool,
    /// Worker mode: the host (address or name) clients must connect to, registered with the
    /// operator. Default: the -B address, else the IPv4 address of --bind-dev, else
    /// $NETBENCH_POD_IP.
    #[arg(long, value_name = "HOST")]
    pub advertise: Option<String>,
}

impl ClientArgs {
    /// The test as configured, against `host:port`.
    pub fn config_for(&self, host: &str, port: u16) -> TcpClientConfig {
        let direction = if self.reverse {
            Direction::Receive
        } else if self.bidir {
            Direction::Both
        } else {
            self.direction.map(Direction::from).unwrap_or_default()
        };
        TcpClientConfig {
            port,
            duration: self.time,
            streams: self.parallel,
            len: self.len.unwrap_or(DEFAULT_LEN),
            direction,
            bind_addr: self.bind,
            bind_device: self.bind_dev.clone(),
            latency_probe: self.latency_probe,
            ..TcpClientConfig::new(host)
        }
    }

    /// Flags that do not apply to the chosen protocol are refused, not ignored.
    pub fn check_applicable(&self) -> anyhow::Result<()> {
        let protocol = self.udp.protocol(self.protocol);
        self.udp.check_for(protocol)?;
        if protocol == Protocol::UdpStream && self.latency_probe.is_some() {
            bail!("--latency-probe applies to --protocol tcp-stream only, not udp-stream");
        }
        let rr = protocol.is_request_response();
        let stream_only = [
            ("-l/--len", self.len.is_some()),
            ("-R/--reverse", self.reverse),
            ("--bidir", self.bidir),
            ("--direction", self.direction.is_some()),
            ("--latency-probe", self.latency_probe.is_some()),
        ];
        let rr_only = [
            ("--request-size", self.request_size.is_some()),
            ("--response-size", self.response_size.is_some()),
            ("--burst", self.burst != 0),
            ("--rate", self.rate.is_some()),
            ("--timeout", self.timeout.is_some()),
        ];
        let (misplaced, kind) = if rr {
            (stream_only, "tcp-stream and udp-stream")
        } else {
            (rr_only, "tcp-rr, tcp-crr and udp-rr")
        };
        if let Some((flag, _)) = misplaced.iter().find(|(_, given)| *given) {
            bail!("{flag} applies to {kind} only, not to --protocol {protocol}");
        }
        Ok(())
    }

    /// `--output json` or `-J`.
    pub fn json(&self) -> bool {
        self.json || self.output == OutputFormat::Json
    }

    /// The server of a standalone `command` (`-c HOST`; only a worker is told it).
    pub(crate) fn server(&self, command: &str) -> anyhow::Result<&str> {
        match &self.host {
            Some(host) => Ok(host),
            None => bail!(
                "{command} needs -c HOST (the server to connect to); only in worker mode \
                 (NETBENCH_OPERATOR_URL set) does the operator name the server"
            ),
        }
    }
}

impl ServerArgs {
    pub fn config(&self) -> TcpServerConfig {
        TcpServerConfig {
            bind_addr: self.bind,
            port: self.port,
            bind_device: self.bind_dev.clone(),
            one_off: self.one_off,
            ..TcpServerConfig::default()
        }
    }
}

/// tcp-stream, the default test.
pub const CLIENT: ClientTest<TcpClientConfig, TcpProgress, TcpReport> = ClientTest {
    command: "tcp-client",
    config: ClientArgs::config_for,
    preflight: client::preflight,
    run: client::run,
    progress_line,
    progress_update,
    finish,
};

/// The line printed every second while the test runs.
fn progress_line(p: &TcpProgress) -> String {
    format!(
        "[SUM] {:>6.2} s  {:>8.2} Gbit/s",
        p.elapsed_secs,
        p.interval_bits_per_second / 1e9
    )
}

fn progress_update(p: &TcpProgress, u: ProgressUpdate) -> ProgressUpdate {
    ProgressUpdate {
        elapsed_s: p.elapsed_secs,
        bits_per_second: p.interval_bits_per_second,
        ..u
    }
}

/// Prints the report (text or JSON as asked) and fails if any stream ended early.
fn finish(args: &ClientArgs, report: &TcpReport) -> anyhow::Result<()> {
    print_report(args.json(), report, render_text)?;
    fail_on_stream_errors(&report.stream_errors())
}

/// Prints `report` on stdout: pretty JSON when `json`, else its `text`.
pub(crate) fn print_report<R: serde::Serialize>(
    json: bool,
    report: &R,
    text: impl FnOnce(&R) -> String,
) -> anyhow::Result<()> {
    let text = if json {
        serde_json::to_string_pretty(report).context("encoding the report")? + "\n"
    } else {
        text(report)
    };
    io::stdout()
        .write_all(text.as_bytes())
        .context("writing the report to stdout")
}

/// Fails naming the streams that ended early (`errors`, one line each), if any did.
pub(crate) fn fail_on_stream_errors(errors: &[String]) -> anyhow::Result<()> {
    if !errors.is_empty() {
        bail!(
            "{} stream(s) ended early: {}",
            errors.len(),
            errors.join("; ")
        );
    }
    Ok(())
}

pub fn run_server(args: &ServerArgs) -> anyhow::Result<()> {
    if args.advertise.is_some() {
        tracing::warn!("--advertise only matters in worker mode (NETBENCH_OPERATOR_URL set)");
    }
    server::serve(&args.config(), &AtomicBool::new(false))?;
    Ok(())
}

/// Seconds (`2.5`) or a number with a unit: `ms`, `s`, `m`, `h` (`500ms`, `10s`, `2m`).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "not a duration: {s:?} (use e.g. 2.5, 500ms, 10s, 2m)"
            ))
        }
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("not a duration: {s:?} (use e.g. 2.5, 500ms, 10s, 2m)"))?;
    Duration::try_from_secs_f64(value * scale).map_err(|_| format!("not a valid duration: {s:?}"))
}

/// A message size: [`parse_len`] that fits a u32.
fn parse_size(s: &str) -> Result<u32, String> {
    parse_len(s).and_then(|n| u32::try_from(n).map_err(|_| format!("too large: {s:?}")))
}

pub(crate) fn parse_len(s: &str) -> Result<usize, String> {
    let (digits, factor) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1024),
        Some((i, 'm' | 'M')) => (&s[..i], 1024 * 1024),
        _ => (s, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .ok_or_else(|| format!("not a length: {s:?} (use e.g. 131072, 128K or 1M)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        client: ClientArgs,
    }

    #[derive(Parser)]
    struct ServerCli {
        #[command(flatten)]
        server: ServerArgs,
    }

    #[test]
    fn iperf3_style_flags() {
        let cli = Cli::try_parse_from([
            "x",
            "-c",
            "198.18.0.2",
            "-t",
            "2.5",
            "-P",
            "4",
            "-l",
            "64K",
            "-R",
            "-B",
            "198.18.0.1",
        ])
        .unwrap();
        let args = &cli.client;
        assert_eq!(args.host.as_deref(), Some("198.18.0.2"));
        let cfg = args.config_for(args.host.as_deref().unwrap(), args.port);
        assert_eq!(cfg.host, "198.18.0.2");
        assert_eq!(cfg.duration, Duration::from_millis(2500));
        assert_eq!(cfg.streams, 4);
        assert_eq!(cfg.len, 65536);
        assert_eq!(cfg.direction, Direction::Receive);
        assert_eq!(cfg.bind_addr, Some("198.18.0.1".parse().unwrap()));
        assert_eq!(cfg.port, DEFAULT_PORT);
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(parse_len("12X").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        assert!(Cli::try_parse_from(["x", "-c", "h", "-R", "--bidir"]).is_err());
        assert_eq!(parse_len("1M"), Ok(1 << 20));
    }

    #[test]
    fn the_protocol_is_a_kebab_case_name_defaulting_to_tcp_stream() {
        let cli = Cli::try_parse_from(["x", "-c", "h"]).unwrap();
        assert_eq!(cli.client.protocol, Protocol::TcpStream);
        let cli = Cli::try_parse_from(["x", "-c", "h", "--protocol", "udp-rr"]).unwrap();
        assert_eq!(cli.client.protocol, Protocol::UdpRr);
        let err = Cli::try_parse_from(["x", "--protocol", "tcp_rr"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("tcp-crr"), "{err}");
    }

    #[test]
    fn netperf_style_request_response_flags() {
        let cli = Cli::try_parse_from([
            "x",
            "-c",
            "h",
            "--protocol",
            "tcp-rr",
            "--streams",
            "4",
            "--burst",
            "8",
            "--request-size",
            "1",
            "--response-size",
            "1K",
            "--duration",
            "10s",
            "--timeout",
            "250ms",
            "--json",
        ])
        .unwrap();
        let a = &cli.client;
        assert_eq!(
            (a.parallel, a.burst, a.time),
            (4, 8, Duration::from_secs(10))
        );
        assert_eq!((a.request_size, a.response_size), (Some(1), Some(1024)));
        assert_eq!(a.timeout, Some(Duration::from_millis(250)));
        a.check_applicable().unwrap();
        // Stream flags with a request/response protocol, and the other way round, are refused.
        let cli = Cli::try_parse_from(["x", "--protocol", "udp-rr", "-R"]).unwrap();
        let e = cli.client.check_applicable().unwrap_err().to_string();
        assert!(
            e.contains("-R/--reverse applies to tcp-stream and udp-stream only"),
            "{e}"
        );
        let cli = Cli::try_parse_from(["x", "--burst", "2"]).unwrap();
        let e = cli.client.check_applicable().unwrap_err().to_string();
        assert!(e.contains("--burst applies to tcp-rr"), "{e}");
        let cli = Cli::try_parse_from(["x", "--latency-probe", "100"]).unwrap();
        cli.client.check_applicable().unwrap();
        assert_eq!(cli.client.config_for("h", 1).latency_probe, Some(100.0));
        // udp-stream (-u) takes the stream flags and its own, nothing else.
        let cli = Cli::try_parse_from(["x", "-u", "-R", "-l", "1000", "-b", "1G"]).unwrap();
        cli.client.check_applicable().unwrap();
        let cli = Cli::try_parse_from(["x", "-u", "--burst", "2"]).unwrap();
        let e = cli.client.check_applicable().unwrap_err().to_string();
        assert!(e.contains("not to --protocol udp-stream"), "{e}");
        let cli = Cli::try_parse_from(["x", "-u", "--latency-probe", "100"]).unwrap();
        let e = cli.client.check_applicable().unwrap_err().to_string();
        assert!(e.contains("tcp-stream only"), "{e}");
    }

    #[test]
    fn client_host_is_optional_for_worker_mode() {
        let cli = Cli::try_parse_from(["x", "-t", "3", "-P", "2", "--output", "json"]).unwrap();
        let args = &cli.client;
        assert_eq!(args.host, None);
        assert!(args.json());
        // The host and port come from the operator's barrier then.
        let cfg = args.config_for("10.0.0.7", 6000);
        assert_eq!((cfg.host.as_str(), cfg.port), ("10.0.0.7", 6000));
        assert_eq!((cfg.duration, cfg.streams), (Duration::from_secs(3), 2));
        // Standalone, a missing -c is a clear error, not a panic.
        let err = crate::protocols::standalone(args, &CLIENT)
            .unwrap_err()
            .to_string();
        assert!(err.contains("-c HOST"), "{err}");
        assert!(Cli::try_parse_from(["x", "-J"]).unwrap().client.json());
    }

    #[test]
    fn server_flags_including_advertise() {
        let cli = ServerCli::try_parse_from([
            "x",
            "-B",
            "198.18.0.2",
            "-p",
            "5300",
            "--bind-dev",
            "eth1",
            "--advertise",
            "node-b.example",
            "-1",
        ])
        .unwrap();
        let s = &cli.server;
        assert_eq!(s.advertise.as_deref(), Some("node-b.example"));
        let cfg = s.config();
        assert_eq!(cfg.bind_addr, Some("198.18.0.2".parse().unwrap()));
        assert_eq!(cfg.port, 5300);
        assert_eq!(cfg.bind_device.as_deref(), Some("eth1"));
        assert!(cfg.one_off);
        let defaults = ServerCli::try_parse_from(["x"]).unwrap().server;
        assert_eq!(defaults.advertise, None);
        assert_eq!(defaults.config(), TcpServerConfig::default());
        assert!(ServerCli::try_parse_from(["x", "--advertise"]).is_err());
    }
}
