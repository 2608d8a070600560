//! A short check before a worker joins the barrier: the target's host resolved (done by
//! [`HttpConfig::from_options`]) and one connection opened, with the TLS handshake for https,
//! so an unreachable target is reported before the measured time instead of as a run full of
//! errors. No request is sent: the target's own request count (nginx's access log, which the
//! accuracy tests compare against) stays exactly the measured one.

use std::time::Duration;

use super::config::HttpConfig;
use super::connect::Connector;
use super::engine::{transport, Transport};

/// How long the preflight waits before it tries a refused connection again.
const REFUSED_RETRY: Duration = Duration::from_millis(200);

/// How long the first connection attempt may take before a new one is opened (each next one
/// may take twice as long, so that a slow TLS handshake still completes). A Service whose
/// pods were just replaced (a sweep step's rollout) can, for a moment, still send a SYN to the
/// old pod's address; the kernel's retransmits of that SYN keep the connection's conntrack
/// entry, and so the dead address, for the whole timeout. A new connection (a new source port)
/// is translated by the rules of now.
const FIRST_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);

/// The answers that can change within seconds on a cluster whose endpoints are moving.
fn retried(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionRefused, HostUnreachable};
    matches!(e.kind(), ConnectionRefused | HostUnreachable)
}

/// Opens (and closes) one connection to the target within `timeout`: a refused or unreachable
/// one is tried again, and a new one opened when an attempt is not answered in time
/// ([`FIRST_ATTEMPT_TIMEOUT`]). Err names the target, its address and the cause ("connection
/// refused", a TLS error, no answer in time).
pub fn preflight(cfg: &HttpConfig, timeout: Duration) -> Result<(), String> {
    let target = format!("{} ({})", cfg.url, cfg.addr);
    let transport = transport(cfg).map_err(|e| format!("cannot connect to {target}: {e}"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime for the preflight: {e}"))?;
    rt.block_on(async {
        let mut last_refusal: Option<std::io::Error> = None;
        let attempt = async {
            let mut attempt_timeout = FIRST_ATTEMPT_TIMEOUT;
            loop {
                let connect = async {
                    match &transport {
                        Transport::Plain(p) => p.connect().await.map(drop),
                        Transport::Tls(t) => t.connect().await.map(drop),
                    }
                };
                match tokio::time::timeout(attempt_timeout, connect).await {
                    // Not answered yet: dropped, and a new connection opened at once.
                    Err(_) => attempt_timeout = attempt_timeout.saturating_mul(2),
                    // A Service created a moment ago refuses until every node's proxy has its
                    // rules (and a stale rule's gone pod is unreachable): asked again within the
                    // timeout, which the last refusal ends.
                    Ok(Err(e)) if retried(&e) => {
                        tokio::time::sleep(REFUSED_RETRY).await;
                        last_refusal = Some(e);
                    }
                    Ok(other) => return other,
                }
            }
        };
        let outcome = tokio::time::timeout(timeout, attempt).await;
        let outcome = match (outcome, last_refusal) {
            (Err(_), Some(refused)) => Ok(Err(refused)),
            (other, _) => other,
        };
        match outcome {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("cannot connect to {target}: {e}")),
            Err(_) => Err(format!(
                "cannot connect to {target}: no connection within {}s",
                timeout.as_secs_f64()
            )),
        }
    })
}
