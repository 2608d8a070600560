//! `tcp-server` / `tcp-client` command lines; flags follow iperf3 where they overlap.

use std::io::{self, Write};
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::client::{self, TcpProgress};
use ::protocol::tcp::{Direction, TcpReport};
use ::protocol::Protocol;
use anyhow::{bail, Context};

use super::{render_text, server, TcpClientConfig, TcpServerConfig, DEFAULT_LEN, DEFAULT_PORT};

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
    /// Test duration in seconds (fractions allowed).
    #[arg(short = 't', long = "time", value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    pub time: Duration,
    /// Number of parallel streams (per direction with --bidir).
    #[arg(
        short = 'P',
        long = "parallel",
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
            ..TcpClientConfig::new(host)
        }
    }

    /// `--output json` or `-J`.
    pub fn json(&self) -> bool {
        self.json || self.output == OutputFormat::Json
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

pub fn run_client(args: &ClientArgs) -> anyhow::Result<()> {
    let Some(host) = &args.host else {
        bail!(
            "tcp-client needs -c HOST (the server to connect to); only in worker mode \
             (NETBENCH_OPERATOR_URL set) does the operator name the server"
        );
    };
    let cfg = args.config_for(host, args.port);
    let json = args.json();
    // Progress lines are best effort: a closed stdout must not abort the test.
    let mut print_interval = |p: &TcpProgress| {
        let _ = writeln!(
            io::stdout(),
            "[SUM] {:>6.2} s  {:>8.2} Gbit/s",
            p.elapsed_secs,
            p.interval_bits_per_second / 1e9
        );
    };
    let progress: Option<client::ProgressSink<'_>> = if json {
        None
    } else {
        Some(&mut print_interval)
    };
    let report = client::run(&cfg, progress)?;
    finish_client(args, &report)
}

/// Prints the report (text or JSON as asked) and fails if any stream ended early.
pub fn finish_client(args: &ClientArgs, report: &TcpReport) -> anyhow::Result<()> {
    let json = args.json();
    let text = if json {
        serde_json::to_string_pretty(report).context("encoding the report")? + "\n"
    } else {
        render_text(report)
    };
    io::stdout()
        .write_all(text.as_bytes())
        .context("writing the report to stdout")?;
    let errors = report.stream_errors();
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

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("not a number of seconds: {s:?}"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| format!("not a valid duration: {s:?}"))
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
        assert!(parse_seconds("-1").is_err());
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
        let err = run_client(args).unwrap_err().to_string();
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
