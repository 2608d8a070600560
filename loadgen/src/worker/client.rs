//! The worker side of the protocol: register, wait at the barrier, push progress, push the
//! final report. Blocking (the engines run their own threads).

use std::time::Duration;

use protocol::worker::*;

/// Where a worker's bearer token comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Credential {
    /// A file re-read for every request: a pod's projected ServiceAccount token, which the
    /// kubelet rotates.
    File(std::path::PathBuf),
    /// A fixed token (local tests).
    Token(String),
}

impl Credential {
    /// The token to present now.
    pub fn bearer(&self) -> Result<String, WorkerError> {
        match self {
            Credential::Token(t) => Ok(t.clone()),
            Credential::File(path) => std::fs::read_to_string(path)
                .map(|t| t.trim().to_string())
                .map_err(|e| WorkerError::Credential(format!("{}: {e}", path.display()))),
        }
    }
}

/// Settings a worker pod gets from the operator through its environment.
#[derive(Clone, Debug)]
pub struct WorkerEnv {
    /// Base URL of the operator's worker API, e.g. http://netbench-operator.netbench:8080
    pub operator_url: String,
    pub run: String,
    pub credential: Credential,
    pub worker: String,
    pub node: Option<String>,
    pub step: u32,
}

impl WorkerEnv {
    /// Reads NETBENCH_OPERATOR_URL, NETBENCH_RUN, NETBENCH_TOKEN_FILE (or NETBENCH_TOKEN),
    /// NETBENCH_WORKER, NETBENCH_NODE, NETBENCH_STEP. Returns None when NETBENCH_OPERATOR_URL is
    /// unset (standalone mode).
    pub fn from_env() -> Result<Option<WorkerEnv>, WorkerError> {
        let Ok(operator_url) = std::env::var("NETBENCH_OPERATOR_URL") else {
            return Ok(None);
        };
        let var =
            |name: &'static str| std::env::var(name).map_err(|_| WorkerError::MissingEnv(name));
        let step = var("NETBENCH_STEP")?
            .parse()
            .map_err(|_| WorkerError::MissingEnv("NETBENCH_STEP (a number)"))?;
        Ok(Some(WorkerEnv {
            operator_url: operator_url.trim_end_matches('/').to_string(),
            run: var("NETBENCH_RUN")?,
            credential: match std::env::var_os("NETBENCH_TOKEN_FILE") {
                Some(path) => Credential::File(path.into()),
                None => Credential::Token(var("NETBENCH_TOKEN")?),
            },
            worker: var("NETBENCH_WORKER")?,
            node: std::env::var("NETBENCH_NODE")
                .ok()
                .filter(|n| !n.is_empty()),
            step,
        }))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("worker mode needs the environment variable {0}")]
    MissingEnv(&'static str),
    #[error("operator refused {what}: HTTP {status}: {message}")]
    Refused {
        what: &'static str,
        status: u16,
        message: String,
    },
    #[error("cannot reach the operator for {what} after {attempts} attempts: {last}")]
    Unreachable {
        what: &'static str,
        attempts: u32,
        last: String,
    },
    #[error("cannot read the worker's token: {0}")]
    Credential(String),
    #[error("the barrier was not released within {0:?}")]
    BarrierTimeout(Duration),
}

/// Talks to the operator for one worker of one run.
#[derive(Clone)]
pub struct WorkerClient {
    env: WorkerEnv,
    agent: ureq::Agent,
}

/// Whether an answer with this status is worth another try (until [`RETRY_FOR`] runs out).
/// 5xx and 408 (the operator's request deadline passed): yes. A register or a report answered
/// 404 (unknown run): yes, because after an operator restart the new leader learns of the run
/// only when it reconciles it; a worker that is truly unknown fails when the retries run out.
/// Other 4xx are final.
fn retried(status: u16, what: &str) -> bool {
    status >= 500 || status == 408 || (status == 404 && matches!(what, "register" | "report"))
}

/// How long a worker keeps retrying an unreachable operator (e.g. during a leader change).
const RETRY_FOR: Duration = Duration::from_secs(120);
/// Longest preflight error sent (characters); the register body is small.
const MAX_PREFLIGHT_ERROR: usize = 1000;

impl WorkerClient {
    pub fn new(env: WorkerEnv) -> WorkerClient {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(15)))
            .http_status_as_error(false)
            .build()
            .into();
        WorkerClient { env, agent }
    }

    pub fn env(&self) -> &WorkerEnv {
        &self.env
    }

    fn url(&self, tail: &str) -> String {
        format!(
            "{}{}{}",
            self.env.operator_url,
            run_path(&self.env.run),
            tail
        )
    }

    /// One request with retries on transport errors and 5xx; 4xx is final.
    fn call<B: serde::Serialize>(
        &self,
        what: &'static str,
        method: &str,
        tail: &str,
        body: Option<&B>,
    ) -> Result<(u16, String), WorkerError> {
        let deadline = std::time::Instant::now() + RETRY_FOR;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let auth = format!("Bearer {}", self.env.credential.bearer()?);
            let result = match (method, body) {
                ("GET", _) => self
                    .agent
                    .get(&self.url(tail))
                    .header("Authorization", &auth)
                    .call(),
                (_, Some(b)) => self
                    .agent
                    .post(&self.url(tail))
                    .header("Authorization", &auth)
                    .header("Content-Type", "application/json")
                    .send(serde_json::to_vec(b).expect("protocol bodies serialize")),
                (_, None) => self
                    .agent
                    .post(&self.url(tail))
                    .header("Authorization", &auth)
                    .send_empty(),
            };
            let last = match result {
                Ok(mut resp) => {
                    let status = resp.status().as_u16();
                    let text = resp.body_mut().read_to_string().unwrap_or_default();
                    if status < 400 {
                        return Ok((status, text));
                    }
                    if !retried(status, what) {
                        let message = serde_json::from_str::<ApiError>(&text)
                            .map(|e| e.error)
                            .unwrap_or(text);
                        return Err(WorkerError::Refused {
                            what,
                            status,
                            message,
                        });
                    }
                    format!("HTTP {status}: {text}")
                }
                Err(e) => e.to_string(),
            };
            if std::time::Instant::now() >= deadline {
                return Err(WorkerError::Unreachable {
                    what,
                    attempts,
                    last,
                });
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// This worker's registration as `role`.
    fn register_request(
        &self,
        role: Role,
        listen: Option<String>,
        preflight_error: Option<String>,
    ) -> RegisterRequest {
        RegisterRequest {
            version: PROTOCOL_VERSION,
            worker: self.env.worker.clone(),
            node: self.env.node.clone(),
            step: self.env.step,
            role,
            listen,
            preflight_error,
        }
    }

    pub fn register(
        &self,
        role: Role,
        listen: Option<String>,
    ) -> Result<RegisterResponse, WorkerError> {
        let req = self.register_request(role, listen, None);
        let (_, text) = self.call("register", "POST", "/register", Some(&req))?;
        serde_json::from_str(&text).map_err(|e| malformed("register", e))
    }

    /// Tells the operator this worker cannot start (its target is unreachable, ...), so the run
    /// ends with that cause before the measured time. Best effort: the worker also exits with
    /// the error, which the operator sees in the pod's termination message.
    pub fn preflight_failed(&self, role: Role, error: &str) {
        let error = error.chars().take(MAX_PREFLIGHT_ERROR).collect();
        let req = self.register_request(role, None, Some(error));
        if let Err(e) = self.call("register", "POST", "/register", Some(&req)) {
            tracing::warn!("could not report the failed preflight to the operator: {e}");
        }
    }

    /// Asks the barrier until released (each ask held by the operator until it opens, up to
    /// `BARRIER_WAIT_MS`; re-registering if the operator lost its state, e.g. after a
    /// restart), then sleeps until the common start instant. Returns the response.
    pub fn wait_barrier(
        &self,
        role: Role,
        listen: Option<String>,
        timeout: Duration,
    ) -> Result<BarrierResponse, WorkerError> {
        let deadline = std::time::Instant::now() + timeout;
        let tail = protocol::worker::barrier_tail(&self.env.worker, self.env.step);
        loop {
            match self.call::<()>("barrier", "GET", &tail, None) {
                Ok((_, text)) => {
                    let resp: BarrierResponse =
                        serde_json::from_str(&text).map_err(|e| malformed("barrier", e))?;
                    if let Some(at) = resp.start_at_unix_ms {
                        sleep_until_unix_ms(at);
                        return Ok(resp);
                    }
                }
                Err(WorkerError::Refused { status: 404, .. }) => {
                    self.register(role, listen.clone())?;
                }
                Err(e) => return Err(e),
            }
            if std::time::Instant::now() >= deadline {
                return Err(WorkerError::BarrierTimeout(timeout));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Best effort: a lost progress update only costs a point on a live chart.
    pub fn progress(&self, update: &ProgressUpdate) {
        let Ok(token) = self.env.credential.bearer() else {
            return;
        };
        let auth = format!("Bearer {token}");
        let _ = self
            .agent
            .post(&self.url("/progress"))
            .config()
            .timeout_global(Some(Duration::from_millis(500)))
            .build()
            .header("Authorization", &auth)
            .header("Content-Type", "application/json")
            .send(serde_json::to_vec(update).expect("progress serializes"));
    }

    /// Delivers the final report; retried until the operator has stored it.
    pub fn report(
        &self,
        started_at_unix_ms: u64,
        report: serde_json::Value,
    ) -> Result<(), WorkerError> {
        let (env, step) = (&self.env, self.env.step);
        let body = FinalReport {
            host: Some(protocol::worker::host::HostFacts::read_local()),
            ..FinalReport::new(
                &env.worker,
                env.node.as_deref(),
                step,
                started_at_unix_ms,
                report,
            )
        };
        self.call("report", "POST", "/report", Some(&body))
            .map(|_| ())
    }
}

fn malformed(what: &'static str, e: serde_json::Error) -> WorkerError {
    WorkerError::Refused {
        what,
        status: 200,
        message: format!("malformed response: {e}"),
    }
}

fn sleep_until_unix_ms(at: u64) {
    let now = now_unix_ms();
    if at > now {
        std::thread::sleep(Duration::from_millis(at - now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_run_is_waited_for_when_registering_and_reporting() {
        assert!(retried(404, "register"));
        assert!(retried(404, "report"));
        assert!(!retried(404, "barrier"), "the barrier re-registers instead");
        assert!(retried(503, "progress") && retried(408, "register"));
        for refused in [400, 401, 403, 409, 413, 422] {
            assert!(!retried(refused, "register"), "{refused}");
        }
    }

    #[test]
    fn a_token_file_is_read_again_for_every_request() {
        let dir = std::env::temp_dir().join(format!("nb-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "first\n").unwrap();
        let credential = Credential::File(path.clone());
        assert_eq!(credential.bearer().unwrap(), "first");
        std::fs::write(&path, "rotated").unwrap();
        assert_eq!(
            credential.bearer().unwrap(),
            "rotated",
            "the kubelet rotated it"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(
            credential.bearer(),
            Err(WorkerError::Credential(_))
        ));
    }
}
