//! `netbench-loadgen`: command-line front end of the loadgen library.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use loadgen::http::{HttpConfig, HttpOptions};
use loadgen::report::http_summary;
use loadgen::{offload, tcp};

#[derive(Parser)]
#[command(name = "netbench-loadgen", version, about = "netbench load generators")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// HTTP load: closed loop like wrk, or open loop (-R) like wrk2.
    Http(Box<HttpCommand>),
    /// Merge reports of workers that ran at the same time into one (exact).
    Merge(MergeCommand),
    /// Serve tests of every protocol (tcp-stream, tcp-rr, ...), one after another.
    #[command(name = "server", visible_alias = "tcp-server")]
    TcpServer(tcp::cli::ServerArgs),
    /// Run a test against a server: --protocol tcp-stream (iperf3-style flags, the default),
    /// tcp-rr, tcp-crr, udp-rr (netperf-style), udp-stream.
    #[command(visible_alias = "client")]
    TcpClient(tcp::cli::ClientArgs),
    /// Read or change ethtool offload features of an interface.
    Offload(offload::cli::OffloadArgs),
    /// Answer every HTTP request with a set status, body size and delay: a target to
    /// benchmark through an ingress controller when the cluster has none of its own. With
    /// --name NAME every answer carries X-Netbench-Backend: NAME (read by http --record-answers).
    HttpServer(loadgen::responder::ServerArgs),
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

#[derive(clap::Args)]
struct HttpCommand {
    #[command(flatten)]
    options: HttpOptions,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Print the latency distribution (text output).
    #[arg(short = 'L', long)]
    latency: bool,
    /// Print a progress line to stderr every second.
    #[arg(long)]
    progress: bool,
}

#[derive(clap::Args)]
struct MergeCommand {
    /// Report files (JSON) to merge.
    #[arg(required = true)]
    files: Vec<std::path::PathBuf>,
    #[arg(long, value_enum, default_value_t = Output::Json)]
    output: Output,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Log lines (tcp-server's test log) go to stderr; stdout stays for reports.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let result = match cli.command {
        Command::Http(cmd) => http(*cmd),
        Command::Merge(cmd) => merge(cmd),
        Command::TcpServer(args) => tcp_server(&args),
        Command::TcpClient(args) => loadgen::protocols::run_client(&args),
        Command::Offload(args) => offload::cli::run(&args),
        Command::HttpServer(args) => loadgen::responder::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("netbench-loadgen: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn http(cmd: HttpCommand) -> anyhow::Result<()> {
    let sink: Option<loadgen::http::ProgressSink> = cmd.progress.then(|| {
        Box::new(|p: &loadgen::http::Progress| {
            let p99 = p
                .latency
                .map_or_else(|| "-".to_string(), |l| format!("{:.2} ms", l.p99_ms));
            eprintln!(
                "{:>5.1}s {} requests, {} errors, {:.0} req/s, p99 {p99}{}",
                p.elapsed.as_secs_f64(),
                p.requests,
                p.errors,
                p.rps,
                if p.warming_up { " (warm-up)" } else { "" }
            );
        }) as loadgen::http::ProgressSink
    });
    // Under the operator (NETBENCH_OPERATOR_URL set) the run is coordinated with the other
    // workers and the report is delivered to the operator as well as printed.
    // A worker checks its target before the barrier and reports a failure to the operator.
    let report = match loadgen::worker::WorkerEnv::from_env()? {
        Some(env) => {
            let client = loadgen::worker::WorkerClient::new(env);
            loadgen::worker::http::run_http_worker(&cmd.options, &client)?
        }
        None => loadgen::http::run(&HttpConfig::from_options(&cmd.options)?, sink)?,
    };
    match cmd.output {
        Output::Json => println!("{}", report.to_json()),
        Output::Text => print!("{}", http_summary(&report, cmd.latency)),
    }
    Ok(())
}

/// Standalone, or under the operator (NETBENCH_OPERATOR_URL set): register the address
/// clients must use, wait at the barrier, serve one test, exit.
fn tcp_server(args: &tcp::cli::ServerArgs) -> anyhow::Result<()> {
    match loadgen::worker::WorkerEnv::from_env()? {
        Some(env) => {
            let client = loadgen::worker::WorkerClient::new(env);
            loadgen::worker::tcp::run_tcp_server(args, &client)?;
            Ok(())
        }
        None => tcp::cli::run_server(args),
    }
}

fn merge(cmd: MergeCommand) -> anyhow::Result<()> {
    let mut texts = Vec::with_capacity(cmd.files.len());
    for f in &cmd.files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| anyhow::anyhow!("cannot read '{}': {e}", f.display()))?;
        texts.push((f.as_path(), text));
    }
    print!(
        "{}",
        loadgen::protocols::merge(&texts, cmd.output == Output::Json)?
    );
    Ok(())
}
