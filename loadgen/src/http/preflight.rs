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

/// Opens (and closes) one connection to the target within `timeout`, trying a refused one again
/// until then; Err names the target, its address and the cause ("connection refused", a TLS
/// error, no answer in time).
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
            loop {
                let tried = match &transport {
                    Transport::Plain(p) => p.connect().await.map(drop),
                    Transport::Tls(t) => t.connect().await.map(drop),
                };
                match tried {
                    // A Service created a moment ago refuses until every node's proxy has its
                    // rules: asked again within the timeout, which the last refusal ends.
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                        tokio::time::sleep(REFUSED_RETRY).await;
                        last_refusal = Some(e);
                    }
                    other => return other,
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
