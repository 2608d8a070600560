//! Request/response tests (tcp-rr, tcp-crr, udp-rr) as workers: the client registers, waits
//! at the barrier, connects to `-c` or the first registered server, pushes its transactions per
//! second every second and delivers the rr report (`kind: "rr"`). The server is the same
//! `server` worker as for stream tests ([`super::tcp::run_tcp_server`]): it serves exactly one
//! test of whatever protocol its client asks for, and sends no report of its own (its figures
//! travel to the client over the control connection).

use protocol::rr::RrReport;
use protocol::worker::now_unix_ms;
use protocol::worker::ProgressUpdate;

use super::tcp::{join_as_client, ProgressPusher, TcpWorkerError};
use super::WorkerClient;
use crate::rr::cli::config_for;
use crate::rr::client::{self, RrProgress};
use crate::tcp::cli::ClientArgs;

/// Runs the client's test as a worker and delivers its report (also when some transactions
/// failed: the report says how many and why).
pub fn run_rr_client(args: &ClientArgs, worker: &WorkerClient) -> Result<RrReport, TcpWorkerError> {
    let (host, port) = join_as_client(args, worker, |host, port| {
        client::preflight(&config_for(args, host, port))
    })?;
    let cfg = config_for(args, &host, port);
    let started_at = now_unix_ms();
    let pusher = ProgressPusher::start(worker)?;
    let mut sink = |p: &RrProgress| {
        pusher.push(|u| ProgressUpdate {
            elapsed_s: p.elapsed_secs,
            transactions_per_second: Some(p.interval_transactions_per_second),
            ..u
        });
    };
    let result = client::run(&cfg, Some(&mut sink));
    pusher.finish();
    let report = result?;
    let json = serde_json::to_value(&report)
        .map_err(|e| TcpWorkerError::Setup(format!("encoding the report: {e}")))?;
    worker.report(started_at, json)?;
    Ok(report)
}
