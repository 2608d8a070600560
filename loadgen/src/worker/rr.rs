//! Request/response tests (tcp-rr, tcp-crr, udp-rr) as workers: the client registers, waits
//! at the barrier, connects to `-c` or the first registered server, pushes its transactions per
//! second every second and delivers the rr report (`kind: "rr"`). The server is the same
//! `server` worker as for stream tests ([`super::tcp::run_tcp_server`]): it serves exactly one
//! test of whatever protocol its client asks for, and sends no report of its own (its figures
//! travel to the client over the control connection).

use protocol::rr::RrReport;
use protocol::worker::ProgressUpdate;

use super::tcp::{run_client_worker, TcpWorkerError};
use super::WorkerClient;
use crate::rr::cli::config_for;
use crate::rr::client::{self, RrProgress};
use crate::tcp::cli::ClientArgs;

/// Runs the client's test as a worker and delivers its report (also when some transactions
/// failed: the report says how many and why).
pub fn run_rr_client(args: &ClientArgs, worker: &WorkerClient) -> Result<RrReport, TcpWorkerError> {
    run_client_worker(
        args,
        worker,
        config_for,
        client::preflight,
        client::run,
        |p: &RrProgress, u| ProgressUpdate {
            elapsed_s: p.elapsed_secs,
            transactions_per_second: Some(p.interval_transactions_per_second),
            ..u
        },
    )
}
