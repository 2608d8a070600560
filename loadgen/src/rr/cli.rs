//! `tcp-client --protocol tcp-rr|tcp-crr|udp-rr`: netperf-style flags on the shared client
//! command line ([`ClientArgs`]), the text or JSON report, the exit status.

use anyhow::bail;
use protocol::rr::RrReport;
use protocol::Protocol;

use super::client::{self, RrProgress};
use super::{render_text, RrClientConfig};
use crate::protocols::ClientTest;
use crate::tcp::cli::{fail_on_stream_errors, print_report, ClientArgs};
use protocol::worker::ProgressUpdate;

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

/// tcp-rr, tcp-crr and udp-rr (the protocol is the config's).
pub const CLIENT: ClientTest<RrClientConfig, RrProgress, RrReport> = ClientTest {
    command: "tcp-client",
    config: config_for,
    preflight: client::preflight,
    run: client::run,
    progress_line,
    progress_update,
    finish,
};

/// The line printed every second while the test runs.
fn progress_line(p: &RrProgress) -> String {
    format!(
        "[SUM] {:>6.2} s  {:>12.1} transactions/s",
        p.elapsed_secs, p.interval_transactions_per_second
    )
}

fn progress_update(p: &RrProgress, u: ProgressUpdate) -> ProgressUpdate {
    ProgressUpdate {
        elapsed_s: p.elapsed_secs,
        transactions_per_second: Some(p.interval_transactions_per_second),
        ..u
    }
}

/// Prints the report (text or JSON as asked); fails when nothing was answered or a tcp-rr
/// connection ended early (the report is printed first either way). Warnings (port
/// exhaustion) also go to stderr.
fn finish(args: &ClientArgs, report: &RrReport) -> anyhow::Result<()> {
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
    if report.setup.mode == Protocol::TcpRr {
        fail_on_stream_errors(&report.stream_errors())?;
    }
    Ok(())
}
