//! udp-stream as a worker: the client registers, waits at the barrier, runs the test against
//! `-c` or the first registered server (the common server worker of [`super::tcp`] serves it),
//! pushes progress every second (bits/s, and the loss of the last second where it receives) and
//! delivers the report (`kind: "udp"`), also when streams ended early.

use protocol::udp::UdpReport;
use protocol::worker::ProgressUpdate;

use super::tcp::{run_client_worker, TcpWorkerError};
use super::WorkerClient;
use crate::tcp::cli::ClientArgs;
use crate::udp::cli::config_for;
use crate::udp::client::{self, UdpProgress};

/// Registers, waits at the barrier, runs the test with progress pushed every second, delivers
/// the report.
pub fn run_udp_client(
    args: &ClientArgs,
    client: &WorkerClient,
) -> Result<UdpReport, TcpWorkerError> {
    run_client_worker(
        args,
        client,
        config_for,
        client::preflight,
        client::run,
        |p: &UdpProgress, u| ProgressUpdate {
            elapsed_s: p.elapsed_secs,
            bits_per_second: p.interval_bits_per_second,
            loss_percent: p.interval_loss_percent,
            ..u
        },
    )
}
