//! A short check before a worker joins the barrier: the target's host resolved (done by
//! [`HttpConfig::from_options`]) and one connection opened, with the TLS handshake for https,
//! so an unreachable target is reported before the measured time instead of as a run full of
//! errors. No request is sent: the target's own request count (nginx's access log, which the
//! accuracy tests compare against) stays exactly the measured one.

use std::time::Duration;

use super::config::HttpConfig;
use super::connect::Connector;
use super::engine::{transport, Transport};

/// Opens (and closes) one connection to the target within `timeout`; Err names the target,
/// its address and the cause ("connection refused", a TLS error, no answer in time).
pub fn preflight(cfg: &HttpConfig, timeout: Duration) -> Result<(), String> {
    let target = format!("{} ({})", cfg.url, cfg.addr);
    let transport = transport(cfg).map_err(|e| format!("cannot connect to {target}: {e}"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime for the preflight: {e}"))?;
    rt.block_on(async {
        let attempt = async {
            match &transport {
                Transport::Plain(p) => p.connect().await.map(drop),
                Transport::Tls(t) => t.connect().await.map(drop),
            }
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("cannot connect to {target}: {e}")),
            Err(_) => Err(format!(
                "cannot connect to {target}: no connection within {}s",
                timeout.as_secs_f64()
            )),
        }
    })
}
