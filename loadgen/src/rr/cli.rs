//! `tcp-client --protocol tcp-rr|tcp-crr|udp-rr`: netperf-style flags on the shared client
//! command line ([`ClientArgs`]), the text or JSON report, the exit status.

use anyhow::bail;
use protocol::rr::RrReport;
use protocol::Protocol;

use super::client::{self, RrProgress};
use super::{render_text, RrClientConfig};
use crate::tcp::cli::{print_report, with_progress_lines, ClientArgs};

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
    let host = args.server("tcp-client")?;
    let cfg = config_for(args, host, args.port);
    let report = with_progress_lines(args.json(), &cfg, client::run, progress_line)?;
    finish_client(args, &report)
}

/// The line printed every second while the test runs.
fn progress_line(p: &RrProgress) -> String {
    format!(
        "[SUM] {:>6.2} s  {:>12.1} transactions/s",
        p.elapsed_secs, p.interval_transactions_per_second
    )
}

/// Prints the report (text or JSON as asked); fails when nothing was answered or a tcp-rr
/// connection ended early (the report is printed first either way). Warnings (port
/// exhaustion) also go to stderr.
pub fn finish_client(args: &ClientArgs, report: &RrReport) -> anyhow::Result<()> {
    print_report(args.json(), report, render_text)?;
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
