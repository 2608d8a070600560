//! The `server` and `client` commands as workers, whatever the protocol. The server binds,
//! registers the address clients must use (`Role::Server`, `listen = "host:port"`), waits at
//! the barrier and serves exactly one test of whatever protocol its client asks for; it sends
//! no report (the client's report carries the server's figures and CPU, which travel over the
//! control connection). The client ([`run_client_worker`], one for every protocol's
//! [`ClientTest`]) registers, waits at the barrier, connects to the first registered server
//! (or `-c`), pushes progress every second (bits/s; udp-stream also the loss of the last
//! second where it receives; tcp-rr, tcp-crr and udp-rr transactions per second) and delivers
//! the report (`kind` "tcp", "udp" or "rr"), also when streams ended early or transactions
//! failed.
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::Duration;

pub use protocol::worker::{join_host_port, split_host_port};
use protocol::worker::{now_unix_ms, ProgressUpdate, Role, PROTOCOL_VERSION};

use super::{WorkerClient, WorkerError};
use crate::protocols::ClientTest;
use crate::tcp::cli::{ClientArgs, ServerArgs};
use crate::tcp::server::TcpServer;
use crate::tcp::TcpError;

#[derive(Debug, thiserror::Error)]
pub enum TcpWorkerError {
    #[error(transparent)]
    Worker(#[from] WorkerError),
    #[error(transparent)]
    Tcp(#[from] TcpError),
    #[error("{0}")]
    Setup(String),
}

/// How long a worker waits for the others at the barrier.
pub(crate) const BARRIER_TIMEOUT: Duration = Duration::from_secs(600);
/// How long the server waits, after the barrier, for its client to start the test.
pub const CLIENT_ARRIVAL_TIMEOUT: Duration = Duration::from_secs(120);
/// The operator sets this from the pod's `status.podIP` (the node IP for a hostNetwork pod).
pub const POD_IP_ENV: &str = "NETBENCH_POD_IP";

/// Binds, registers, waits at the barrier, serves one test. Returns the registered address.
pub fn run_tcp_server(args: &ServerArgs, client: &WorkerClient) -> Result<String, TcpWorkerError> {
    let mut cfg = args.config();
    cfg.one_off = true;
    let server = TcpServer::bind(&cfg)?;
    let port = server.local_addr()?.port();
    let host = advertise_host(
        args.advertise.as_deref(),
        args.bind,
        args.bind_dev.as_deref(),
        std::env::var(POD_IP_ENV).ok(),
    )?;
    let listen = join_host_port(&host, port);
    tracing::info!(listen, "registering as the server");
    client.register(Role::Server, Some(listen.clone()))?;
    client.wait_barrier(Role::Server, Some(listen.clone()), BARRIER_TIMEOUT)?;
    server.serve_one(CLIENT_ARRIVAL_TIMEOUT, &AtomicBool::new(false))?;
    Ok(listen)
}

/// A client worker of any protocol: checks `-c`, joins and names the server (see
/// `join_as_client`), runs `test` with a progress sink that pushes what its
/// `progress_update` makes of each snapshot of this worker's blank update, and delivers its
/// report, also when streams ended early (the caller fails afterwards, so the operator still
/// sees what happened).
pub fn run_client_worker<C, P, R: serde::Serialize>(
    args: &ClientArgs,
    client: &WorkerClient,
    test: &ClientTest<C, P, R>,
) -> Result<R, TcpWorkerError> {
    let (host, port) = join_as_client(args, client, |host, port| {
        (test.preflight)(&(test.config)(args, host, port))
    })?;
    let cfg = (test.config)(args, &host, port);
    let started_at = now_unix_ms();
    let pusher = ProgressPusher::start(client)?;
    let mut sink = |p: &P| pusher.push(|u| (test.progress_update)(p, u));
    let result = (test.run)(&cfg, Some(&mut sink));
    pusher.finish();
    let report = result?;
    let json = serde_json::to_value(&report)
        .map_err(|e| TcpWorkerError::Setup(format!("encoding the report: {e}")))?;
    client.report(started_at, json)?;
    Ok(report)
}

/// Checks an external server (`-c`) with `preflight` before the barrier (an in-cluster one is
/// known only at the barrier, and a failed connection then ends the run within seconds
/// anyway), registers as a client, waits at the barrier and names the server: `-c HOST` or
/// the first one registered.
pub(crate) fn join_as_client(
    args: &ClientArgs,
    client: &WorkerClient,
    preflight: impl Fn(&str, u16) -> Result<(), TcpError>,
) -> Result<(String, u16), TcpWorkerError> {
    if let Some(host) = &args.host {
        if let Err(e) = preflight(host, args.port) {
            let why = format!("server {host}:{}: {e}", args.port);
            client.preflight_failed(Role::Client, &why);
            return Err(TcpWorkerError::Setup(format!("preflight: {why}")));
        }
    }
    client.register(Role::Client, None)?;
    let barrier = client.wait_barrier(Role::Client, None, BARRIER_TIMEOUT)?;
    match &args.host {
        Some(host) => Ok((host.clone(), args.port)),
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
            })
        }
    }
}

/// Pushes progress updates from a thread of its own: a slow operator must not delay the test.
pub(crate) struct ProgressPusher {
    tx: mpsc::Sender<ProgressUpdate>,
    handle: std::thread::JoinHandle<()>,
    base: ProgressUpdate,
}

impl ProgressPusher {
    pub(crate) fn start(client: &WorkerClient) -> Result<Self, TcpWorkerError> {
        let (tx, rx) = mpsc::channel::<ProgressUpdate>();
        let pushing = client.clone();
        let handle = std::thread::Builder::new()
            .name("nb-progress".into())
            .spawn(move || rx.iter().for_each(|u| pushing.progress(&u)))
            .map_err(|e| TcpWorkerError::Setup(format!("starting the progress thread: {e}")))?;
        let env = client.env();
        Ok(ProgressPusher {
            tx,
            handle,
            base: ProgressUpdate {
                version: PROTOCOL_VERSION,
                worker: env.worker.clone(),
                step: env.step,
                ..ProgressUpdate::default()
            },
        })
    }

    /// Queues the update `fill` makes of this worker's blank one.
    pub(crate) fn push(&self, fill: impl FnOnce(ProgressUpdate) -> ProgressUpdate) {
        let _ = self.tx.send(fill(self.base.clone()));
    }

    /// Waits until the queued updates are sent.
    pub(crate) fn finish(self) {
        drop(self.tx);
        let _ = self.handle.join();
    }
}

/// The host clients must use: `--advertise`, else a specific `-B` address, else the IPv4
/// address of `--bind-dev`, else the pod IP from the environment.
pub fn advertise_host(
    advertise: Option<&str>,
    bind: Option<IpAddr>,
    bind_dev: Option<&str>,
    pod_ip: Option<String>,
) -> Result<String, TcpWorkerError> {
    if let Some(host) = advertise.filter(|h| !h.is_empty()) {
        return Ok(host.to_string());
    }
    if let Some(ip) = bind.filter(|ip| !ip.is_unspecified()) {
        return Ok(ip.to_string());
    }
    if let Some(dev) = bind_dev {
        return interface_ipv4(dev).map(|ip| ip.to_string());
    }
    pod_ip.filter(|ip| !ip.is_empty()).ok_or_else(|| {
        TcpWorkerError::Setup(format!(
            "cannot tell clients where to connect: pass --advertise HOST, -B ADDR or --bind-dev IF, \
             or set {POD_IP_ENV}"
        ))
    })
}

/// The first IPv4 address of interface `dev` in this network namespace.
pub fn interface_ipv4(dev: &str) -> Result<IpAddr, TcpWorkerError> {
    let addrs = if_addrs::get_if_addrs()
        .map_err(|e| TcpWorkerError::Setup(format!("listing interface addresses: {e}")))?;
    let on_dev: Vec<IpAddr> = addrs
        .iter()
        .filter(|a| a.name == dev)
        .map(|a| a.ip())
        .collect();
    if on_dev.is_empty() {
        return Err(TcpWorkerError::Setup(format!(
            "interface {dev:?} has no address in this network namespace (or does not exist); \
             pass --advertise HOST"
        )));
    }
    on_dev.into_iter().find(IpAddr::is_ipv4).ok_or_else(|| {
        TcpWorkerError::Setup(format!(
            "interface {dev:?} has no IPv4 address; pass --advertise HOST"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_host_follows_the_documented_order() {
        let pod = || Some("10.1.2.3".to_string());
        let b: IpAddr = "198.18.0.2".parse().unwrap();
        assert_eq!(
            advertise_host(Some("svc.example"), Some(b), Some("lo"), pod()).unwrap(),
            "svc.example"
        );
        assert_eq!(
            advertise_host(None, Some(b), Some("lo"), pod()).unwrap(),
            "198.18.0.2"
        );
        // An unspecified -B (0.0.0.0) says nothing about where clients should go.
        assert_eq!(
            advertise_host(None, Some("0.0.0.0".parse().unwrap()), Some("lo"), pod()).unwrap(),
            "127.0.0.1",
            "the IPv4 address of --bind-dev (lo)"
        );
        assert_eq!(advertise_host(None, None, None, pod()).unwrap(), "10.1.2.3");
        let err = advertise_host(None, None, None, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--advertise") && err.contains(POD_IP_ENV),
            "{err}"
        );
        let err = advertise_host(None, None, Some("nb-no-such0"), pod())
            .unwrap_err()
            .to_string();
        assert!(err.contains("nb-no-such0"), "{err}");
    }
}
