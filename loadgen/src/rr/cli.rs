//! `tcp-client --protocol tcp-rr|tcp-crr|udp-rr`: netperf-style flags on the shared client
//! command line ([`ClientArgs`]), the text or JSON report, the exit status.

use std::io::{self, Write};

use anyhow::{bail, Context};
use protocol::rr::RrReport;
use protocol::Protocol;

use super::client::{self, RrProgress};
use super::{render_text, RrClientConfig};
use crate::tcp::cli::ClientArgs;

/// The test as configured, against `host:port`.
pub fn config_for(args: &ClientArgs, host: &str, port: u16) -> RrClientConfig {
    let base = RrClientConfig::new(args.protocol, host);
    let request_size = args.request_size.unwrap_or(base.request_size);
    RrClientConfig {
        port,
        duration: args.time,
        streams: args.parallel,
        request_size,
        // netperf -r REQ without RESP answers with the same size.
        response_size: args.response_size.unwrap_or(request_size),
        burst: args.burst,
        rate_per_stream: args.rate,
        timeout: args.timeout.unwrap_or(base.timeout),
        bind_addr: args.bind,
        bind_device: args.bind_dev.clone(),
        ..base
    }
}

pub fn run_client(args: &ClientArgs) -> anyhow::Result<()> {
    args.check_applicable()?;
    let Some(host) = &args.host else {
        bail!(
            "tcp-client needs -c HOST (the server to connect to); only in worker mode \
             (NETBENCH_OPERATOR_URL set) does the operator name the server"
        );
    };
    let cfg = config_for(args, host, args.port);
    // Progress lines are best effort: a closed stdout must not abort the test.
    let mut print_interval = |p: &RrProgress| {
        let _ = writeln!(
            io::stdout(),
            "[SUM] {:>6.2} s  {:>12.1} transactions/s",
            p.elapsed_secs,
            p.interval_transactions_per_second
        );
    };
    let progress: Option<client::RrProgressSink<'_>> = if args.json() {
        None
    } else {
        Some(&mut print_interval)
    };
    let report = client::run(&cfg, progress)?;
    finish_client(args, &report)
}

/// Prints the report (text or JSON as asked); fails when nothing was answered or a tcp-rr
/// connection ended early (the report is printed first either way). Warnings (port
/// exhaustion) also go to stderr.
pub fn finish_client(args: &ClientArgs, report: &RrReport) -> anyhow::Result<()> {
    let text = if args.json() {
        serde_json::to_string_pretty(report).context("encoding the report")? + "\n"
    } else {
        render_text(report)
    };
    io::stdout()
        .write_all(text.as_bytes())
        .context("writing the report to stdout")?;
    if args.json() {
        for w in report.warnings() {
            eprintln!("WARNING: {w}");
        }
    }
    if report.counts.transactions == 0 {
        bail!(
            "no transaction completed{}",
            report
                .per_stream
                .iter()
                .find_map(|s| s.error.as_ref())
                .map(|e| format!(" (first error: {e})"))
                .unwrap_or_default()
        );
    }
    let errors = report.stream_errors();
    if report.setup.mode == Protocol::TcpRr && !errors.is_empty() {
        bail!(
            "{} stream(s) ended early: {}",
            errors.len(),
            errors.join("; ")
        );
    }
    Ok(())
}
