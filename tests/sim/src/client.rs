//! The worker API as the simulated workers call it: one HTTP/1.1 client shared by every worker,
//! with at most `max_in_flight` requests at once, and beside them at most [`HELD_ASKS`] barrier
//! asks the operator holds until the barrier opens (a held ask must not take a slot the
//! registration that opens its barrier needs). The simulator is ONE client address to the
//! operator, whose worker API allows 64 connections per client by default
//! (`NETBENCH_API_MAX_CONNECTIONS_PER_CLIENT`); real pods each have their own address.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a pooled connection may stay idle; at most half the operator's header timeout.
const IDLE_TIMEOUT: Duration = Duration::from_secs(3);

/// Barrier asks held by the operator at once; a worker that finds none free asks without
/// waiting (and polls, as a worker without `waitMs` does). With the default 32 in flight, 48
/// connections: under the operator's 64 per client.
pub const HELD_ASKS: usize = 16;

/// Idle connections the pool keeps. Beside those in use (at most the requests in flight and
/// the held asks) the pool also keeps the connections it opened for a request that an idle
/// one served first (hyper's pool races a new connection against a connection coming back):
/// with 32 idle kept, 48 in use and 32 idle reached 80 and the operator refused 12-14 of them
/// at 64 workers. With the default 32 in flight: 48 + 8 = 56, under the 64.
const IDLE_AT_MOST: usize = 8;

#[derive(Clone)]
pub struct Api {
    client: Client<HttpConnector, Full<Bytes>>,
    permits: Arc<Semaphore>,
    held: Arc<Semaphore>,
}

/// One answer: status and body (or why there was none).
pub type Answer = Result<(u16, Bytes), String>;

impl Api {
    pub fn new(max_in_flight: usize) -> Api {
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(IDLE_AT_MOST.min(max_in_flight))
            // Idle connections close well before the operator's header timeout (10 s), which
            // counts an idle keep-alive connection it closes as a refusal (`header_timeout`).
            // The pool's reaper wakes once per idle timeout, so a connection can stay idle for
            // up to twice this: 3 s keeps it at 6 s (5 s let it reach the 10 s and lose the race).
            // Without a timer the pool never reaps them.
            .pool_idle_timeout(IDLE_TIMEOUT)
            .pool_timer(TokioTimer::new())
            .build_http();
        Api {
            client,
            permits: Arc::new(Semaphore::new(max_in_flight.max(1))),
            held: Arc::new(Semaphore::new(HELD_ASKS)),
        }
    }

    /// A slot for one held barrier ask, if one is free: [`Api::call_held`] while it is kept.
    pub fn try_hold(&self) -> Option<OwnedSemaphorePermit> {
        self.held.clone().try_acquire_owned().ok()
    }

    /// `method url` with the bearer token and an optional JSON body, within `timeout`.
    pub async fn call(
        &self,
        method: http::Method,
        url: &str,
        token: &str,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Answer {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|e| format!("client closed: {e}"))?;
        self.exchange(method, url, token, body, timeout).await
    }

    /// As [`Api::call`], counted against the held asks' slot the caller keeps
    /// ([`Api::try_hold`]) instead of the requests in flight.
    pub async fn call_held(
        &self,
        _held: &OwnedSemaphorePermit,
        method: http::Method,
        url: &str,
        token: &str,
        timeout: Duration,
    ) -> Answer {
        self.exchange(method, url, token, None, timeout).await
    }

    async fn exchange(
        &self,
        method: http::Method,
        url: &str,
        token: &str,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Answer {
        let mut req = http::Request::builder()
            .method(method)
            .uri(url)
            .header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        if body.is_some() {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| format!("request: {e}"))?;
        let exchange = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| format!("{e:?}"))?;
            let status = resp.status().as_u16();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("reading the answer: {e}"))?
                .to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| format!("no answer within {timeout:?}"))?
    }
}
