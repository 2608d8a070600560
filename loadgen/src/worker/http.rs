//! An HTTP run as a worker: register, wait at the barrier, run with progress pushed every
//! second, deliver the report (retried until stored).

use std::time::Duration;

use protocol::report::{HttpReport, Report};
use protocol::worker::{now_unix_ms, LiveLatency, ProgressUpdate, Role, PROTOCOL_VERSION};

use super::{WorkerClient, WorkerError};
use crate::http::{HttpConfig, HttpError, HttpOptions, Progress, ProgressSink};

#[derive(Debug, thiserror::Error)]
pub enum WorkerRunError {
    #[error(transparent)]
    Worker(#[from] WorkerError),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("preflight: {0}")]
    Preflight(String),
}

/// The shortest time the preflight connection may take (longer when the load's timeout is).
const PREFLIGHT_TIMEOUT: Duration = Duration::from_secs(10);

/// Checks the options and the target (host resolves, one connection opens) before joining the
/// barrier, then runs as a worker. A failed check is reported to the operator, which ends the
/// run with its cause before the measured time, and ends this worker with the error.
pub fn run_http_worker(
    opts: &HttpOptions,
    client: &WorkerClient,
) -> Result<HttpReport, WorkerRunError> {
    let checked = HttpConfig::from_options(opts)
        .map_err(|e| e.to_string())
        .and_then(|cfg| {
            crate::http::preflight(&cfg, cfg.timeout.max(PREFLIGHT_TIMEOUT))?;
            Ok(cfg)
        });
    match checked {
        Ok(cfg) => run_http(&cfg, client),
        Err(why) => {
            client.preflight_failed(Role::Client, &why);
            Err(WorkerRunError::Preflight(why))
        }
    }
}

/// How long a worker waits for the others at the barrier.
const BARRIER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

pub fn run_http(cfg: &HttpConfig, client: &WorkerClient) -> Result<HttpReport, WorkerRunError> {
    client.register(Role::Client, None)?;
    client.wait_barrier(Role::Client, None, BARRIER_TIMEOUT)?;
    let started_at = now_unix_ms();
    let progress_client = client.clone();
    let sink: ProgressSink = Box::new(move |p: &Progress| {
        progress_client.progress(&ProgressUpdate {
            version: PROTOCOL_VERSION,
            worker: progress_client.env().worker.clone(),
            step: progress_client.env().step,
            elapsed_s: p.elapsed.as_secs_f64(),
            requests: p.requests,
            errors: p.errors,
            rps: p.rps,
            bits_per_second: 0.0,
            errors_per_second: Some(p.errors_per_second),
            latency: p.latency.map(|l| LiveLatency {
                p50_ms: l.p50_ms,
                p99_ms: l.p99_ms,
                max_ms: l.max_ms,
            }),
            ..ProgressUpdate::default()
        })
    });
    let report = crate::http::run(cfg, Some(sink))?;
    let json = serde_json::to_value(Report::Http(report.clone())).expect("reports serialize");
    client.report(started_at, json)?;
    Ok(report)
}
