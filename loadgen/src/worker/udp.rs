//! udp-stream as a worker: the client registers, waits at the barrier, runs the test against
//! `-c` or the first registered server (the common server worker of [`super::tcp`] serves it),
//! pushes progress every second (bits/s, and the loss of the last second where it receives) and
//! delivers the report (`kind: "udp"`), also when streams ended early.

use std::sync::mpsc;

use protocol::udp::UdpReport;
use protocol::worker::{now_unix_ms, ProgressUpdate, Role, PROTOCOL_VERSION};

use super::tcp::{split_host_port, TcpWorkerError, BARRIER_TIMEOUT};
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
    if let Some(host) = &args.host {
        if let Err(e) = client::preflight(&config_for(args, host, args.port)) {
            let why = format!("server {host}:{}: {e}", args.port);
            client.preflight_failed(Role::Client, &why);
            return Err(TcpWorkerError::Setup(format!("preflight: {why}")));
        }
    }
    client.register(Role::Client, None)?;
    let barrier = client.wait_barrier(Role::Client, None, BARRIER_TIMEOUT)?;
    let (host, port) = match &args.host {
        Some(host) => (host.clone(), args.port),
        None => {
            let first = barrier.servers.first().ok_or_else(|| {
                TcpWorkerError::Setup(
                    "no server registered with the operator and no -c HOST given: nothing to connect to"
                        .into(),
                )
            })?;
            split_host_port(first).ok_or_else(|| {
                TcpWorkerError::Setup(format!(
                    "the operator listed server {first:?}, which is not host:port"
                ))
            })?
        }
    };
    let cfg = config_for(args, &host, port);
    let started_at = now_unix_ms();
    // Pushed from a thread of its own: a slow operator must not delay the test.
    let (tx, rx) = mpsc::channel::<ProgressUpdate>();
    let pusher = {
        let client = client.clone();
        std::thread::Builder::new()
            .name("nb-progress".into())
            .spawn(move || rx.iter().for_each(|u| client.progress(&u)))
            .map_err(|e| TcpWorkerError::Setup(format!("starting the progress thread: {e}")))?
    };
    let env = client.env();
    let mut sink = |p: &UdpProgress| {
        let _ = tx.send(ProgressUpdate {
            version: PROTOCOL_VERSION,
            worker: env.worker.clone(),
            step: env.step,
            elapsed_s: p.elapsed_secs,
            bits_per_second: p.interval_bits_per_second,
            loss_percent: p.interval_loss_percent,
            ..ProgressUpdate::default()
        });
    };
    let result = client::run(&cfg, Some(&mut sink));
    drop(tx);
    let _ = pusher.join();
    let report = result?;
    let json = serde_json::to_value(&report)
        .map_err(|e| TcpWorkerError::Setup(format!("encoding the report: {e}")))?;
    client.report(started_at, json)?;
    Ok(report)
}
