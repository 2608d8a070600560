//! Serving the API over TCP within bounds: at most `max_connections` connections at once, and
//! `max_connections_per_peer` from one address, so one client cannot take every slot (more are
//! closed at once and counted); a deadline for each request head, and one for each request.
//!
//! hyper starts the head deadline whenever a connection waits for a request, so it also ends
//! keep-alive connections that stay idle that long: one setting bounds both.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::metrics::ApiMetrics;
use super::refusal::refuse;
use crate::admin::config::Config;
use crate::base::metrics::Metrics;

/// Bounds of the API server (operator config: `--api-*` flags).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServerLimits {
    /// How long a connection may wait for a complete request head (idle keep-alive included).
    pub header_timeout: Duration,
    /// How long one request may take, body and answer included.
    pub request_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
    /// Connections open at once from one IP address.
    pub max_connections_per_peer: usize,
}

impl ServerLimits {
    /// The operator's `--api-*` flags.
    pub fn of(config: &Config) -> ServerLimits {
        ServerLimits {
            header_timeout: Duration::from_secs(config.api_header_timeout_s),
            request_timeout: Duration::from_secs(config.api_request_timeout_s),
            max_connections: usize::try_from(config.api_max_connections).unwrap_or(1024),
            max_connections_per_peer: usize::try_from(config.api_max_connections_per_client)
                .unwrap_or(64),
        }
    }
}

/// Largest request head (request line and headers) a connection buffers.
const MAX_HEAD_BYTES: usize = 32 * 1024;

/// Serves `app` on `listener` until the task is dropped; accept errors (e.g. out of file
/// descriptors) are logged and retried after a short pause.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ServerLimits,
    metrics: Arc<Metrics>,
) {
    let deadline = RequestDeadline {
        timeout: limits.request_timeout,
        metrics: metrics.clone(),
    };
    let app = app.layer(middleware::from_fn_with_state(deadline, request_deadline));
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let peers = Arc::new(Peers::default());
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!("accepting an API connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let slot = slots.clone().try_acquire_owned().ok().and_then(|slot| {
            let peer = peers.enter(peer.ip(), limits.max_connections_per_peer)?;
            Some((slot, peer))
        });
        let Some(slot) = slot else {
            metrics
                .family::<ApiMetrics>()
                .rejected
                .with_label_values(&["too_many_connections"])
                .inc();
            drop(stream);
            continue;
        };
        let conn = serve_connection(stream, app.clone(), limits, metrics.clone(), slot);
        tokio::spawn(conn);
    }
}

async fn serve_connection(
    stream: TcpStream,
    app: Router,
    limits: ServerLimits,
    metrics: Arc<Metrics>,
    _slot: (OwnedSemaphorePermit, PeerSlot),
) {
    let _ = stream.set_nodelay(true);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES)
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    if let Err(e) = conn.await {
        if e.is_timeout() {
            metrics
                .family::<ApiMetrics>()
                .rejected
                .with_label_values(&["header_timeout"])
                .inc();
        } else {
            tracing::debug!("API connection ended: {e}");
        }
    }
}

/// Open connections by peer address.
#[derive(Default)]
struct Peers(Mutex<HashMap<IpAddr, usize>>);

/// One open connection of a peer; dropping it frees the place.
struct PeerSlot {
    peers: Arc<Peers>,
    ip: IpAddr,
}

impl Peers {
    /// A place for one more connection from `ip`, unless it already has `max`.
    fn enter(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<PeerSlot> {
        let mut open = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(ip).or_insert(0);
        if *count >= max {
            return None;
        }
        *count = count.saturating_add(1);
        Some(PeerSlot {
            peers: self.clone(),
            ip,
        })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.peers.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.ip) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

#[derive(Clone)]
struct RequestDeadline {
    timeout: Duration,
    metrics: Arc<Metrics>,
}

/// Answers 408 (and closes the connection) when a request takes longer than allowed.
async fn request_deadline(State(d): State<RequestDeadline>, req: Request, next: Next) -> Response {
    match tokio::time::timeout(d.timeout, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => {
            let message = format!("the request took longer than {:?}", d.timeout);
            let refusal = refuse(&d.metrics, StatusCode::REQUEST_TIMEOUT, "timeout", message);
            closing(refusal.into_response())
        }
    }
}

/// `resp` with `Connection: close`: the client must open a new connection for its next request.
pub fn closing(mut resp: Response) -> Response {
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}
