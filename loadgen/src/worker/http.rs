//! An HTTP run as a worker: register, wait at the barrier, run with progress pushed every
//! second, deliver the report (retried until stored).

use crate::http::{HttpConfig, HttpError, Progress, ProgressSink};
use crate::report::{HttpReport, Report};

use super::protocol::{LiveLatency, ProgressUpdate, Role, PROTOCOL_VERSION};
use super::{now_unix_ms, WorkerClient, WorkerError};

#[derive(Debug, thiserror::Error)]
pub enum WorkerRunError {
    #[error(transparent)]
    Worker(#[from] WorkerError),
    #[error(transparent)]
    Http(#[from] HttpError),
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
        })
    });
    let report = crate::http::run(cfg, Some(sink))?;
    let json = serde_json::to_value(Report::Http(report.clone())).expect("reports serialize");
    client.report(started_at, json)?;
    Ok(report)
}
