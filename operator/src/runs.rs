//! In-memory state of the active runs: who may register, who has, and when the barrier opens.
//! Lost on restart by design: the reconciler re-announces active runs from their status and
//! workers re-register when the barrier answers 404.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use loadgen::worker::protocol::{RegisterRequest, Role};

/// How far in the future the common start is set when the last worker registers, so every
/// worker's barrier poll sees it before it passes.
pub const START_DELAY_MS: u64 = 1500;

/// What the reconciler tells the registry about one step of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    pub kind: String,
    pub namespace: String,
    pub benchmark: String,
    /// The benchmark object's uid (owner of report ConfigMaps).
    pub uid: String,
    pub token: String,
    pub step: u32,
    /// Worker pod names expected in this step, with their roles.
    pub workers: BTreeMap<String, Role>,
}

#[derive(Debug)]
struct RunState {
    spec: RunSpec,
    registered: BTreeMap<String, RegisterRequest>,
    start_at_unix_ms: Option<u64>,
}

#[derive(Debug, PartialEq)]
pub enum RegistryError {
    UnknownRun,
    BadToken,
    UnknownWorker,
    WrongStep { current: u32 },
}

/// The barrier's answer for one worker.
#[derive(Debug, PartialEq)]
pub struct BarrierState {
    pub registered: u32,
    pub expected: u32,
    pub start_at_unix_ms: Option<u64>,
    pub servers: Vec<String>,
}

#[derive(Default)]
pub struct Registry {
    runs: Mutex<HashMap<String, RunState>>,
}

impl Registry {
    /// Creates or updates a run; a new step resets registrations.
    pub fn announce(&self, run: &str, spec: RunSpec) {
        let mut runs = self.runs.lock().expect("registry lock");
        match runs.get_mut(run) {
            Some(state) if state.spec.step == spec.step => state.spec = spec,
            _ => {
                runs.insert(
                    run.to_string(),
                    RunState {
                        spec,
                        registered: BTreeMap::new(),
                        start_at_unix_ms: None,
                    },
                );
            }
        }
    }

    /// True when `run` is known at `step` (so the reconciler need not announce it again).
    pub fn is_announced(&self, run: &str, step: u32) -> bool {
        let runs = self.runs.lock().expect("registry lock");
        runs.get(run).is_some_and(|s| s.spec.step == step)
    }

    pub fn forget(&self, run: &str) {
        self.runs.lock().expect("registry lock").remove(run);
    }

    /// Checks the token and that `worker` belongs to the run's current `step`.
    pub fn authorize(
        &self,
        run: &str,
        token: &str,
        worker: &str,
        step: u32,
    ) -> Result<RunSpec, RegistryError> {
        let runs = self.runs.lock().expect("registry lock");
        let state = runs.get(run).ok_or(RegistryError::UnknownRun)?;
        if !constant_time_eq(state.spec.token.as_bytes(), token.as_bytes()) {
            return Err(RegistryError::BadToken);
        }
        if state.spec.step != step {
            return Err(RegistryError::WrongStep {
                current: state.spec.step,
            });
        }
        if !state.spec.workers.contains_key(worker) {
            return Err(RegistryError::UnknownWorker);
        }
        Ok(state.spec.clone())
    }

    /// Checks only the token (for endpoints whose body names the worker).
    pub fn check_token(&self, run: &str, token: &str) -> Result<(), RegistryError> {
        let runs = self.runs.lock().expect("registry lock");
        let state = runs.get(run).ok_or(RegistryError::UnknownRun)?;
        if constant_time_eq(state.spec.token.as_bytes(), token.as_bytes()) {
            Ok(())
        } else {
            Err(RegistryError::BadToken)
        }
    }

    /// Records a registration (idempotent); opens the barrier when the last worker arrives.
    pub fn register(&self, run: &str, req: RegisterRequest, now_unix_ms: u64) -> BarrierState {
        let mut runs = self.runs.lock().expect("registry lock");
        let state = runs.get_mut(run).expect("authorized before");
        state.registered.insert(req.worker.clone(), req);
        // A worker that cannot reach its target will not start: the barrier stays closed.
        let all_ready = state.registered.len() == state.spec.workers.len()
            && state
                .registered
                .values()
                .all(|r| r.preflight_error.is_none());
        if state.start_at_unix_ms.is_none() && all_ready {
            state.start_at_unix_ms = Some(now_unix_ms + START_DELAY_MS);
        }
        barrier_of(state)
    }

    /// Workers of the run's current step whose check before the barrier failed, with why.
    pub fn preflight_failures(&self, run: &str) -> Vec<(String, String)> {
        let runs = self.runs.lock().expect("registry lock");
        runs.get(run)
            .map(|state| {
                state
                    .registered
                    .iter()
                    .filter_map(|(w, r)| Some((w.clone(), r.preflight_error.clone()?)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The barrier as `worker` sees it; None when the worker has not registered (it must).
    pub fn barrier(&self, run: &str, worker: &str) -> Option<BarrierState> {
        let runs = self.runs.lock().expect("registry lock");
        let state = runs.get(run)?;
        state
            .registered
            .contains_key(worker)
            .then(|| barrier_of(state))
    }
}

fn barrier_of(state: &RunState) -> BarrierState {
    BarrierState {
        registered: state.registered.len() as u32,
        expected: state.spec.workers.len() as u32,
        start_at_unix_ms: state.start_at_unix_ms,
        servers: state
            .registered
            .values()
            .filter(|r| r.role == Role::Server)
            .filter_map(|r| r.listen.clone())
            .collect(),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadgen::worker::protocol::PROTOCOL_VERSION;

    fn spec(step: u32) -> RunSpec {
        RunSpec {
            kind: "IngressBenchmark".into(),
            namespace: "ns".into(),
            benchmark: "b".into(),
            uid: "u".into(),
            token: "secret".into(),
            step,
            workers: BTreeMap::from([("w0".into(), Role::Client), ("w1".into(), Role::Client)]),
        }
    }

    fn reg(worker: &str) -> RegisterRequest {
        RegisterRequest {
            version: PROTOCOL_VERSION,
            worker: worker.into(),
            node: None,
            step: 0,
            role: Role::Client,
            listen: None,
            preflight_error: None,
        }
    }

    #[test]
    fn barrier_opens_when_all_expected_workers_registered() {
        let r = Registry::default();
        r.announce("run", spec(0));
        assert_eq!(
            r.authorize("run", "nope", "w0", 0),
            Err(RegistryError::BadToken)
        );
        assert_eq!(
            r.authorize("run", "secret", "w9", 0),
            Err(RegistryError::UnknownWorker)
        );
        assert_eq!(
            r.authorize("run", "secret", "w0", 1),
            Err(RegistryError::WrongStep { current: 0 })
        );
        assert_eq!(
            r.authorize("other", "secret", "w0", 0),
            Err(RegistryError::UnknownRun)
        );
        assert!(r.barrier("run", "w0").is_none(), "unregistered worker");
        let b = r.register("run", reg("w0"), 1000);
        assert_eq!((b.registered, b.expected, b.start_at_unix_ms), (1, 2, None));
        let b = r.register("run", reg("w0"), 1100);
        assert_eq!(b.registered, 1, "registration is idempotent");
        let b = r.register("run", reg("w1"), 2000);
        assert_eq!(b.start_at_unix_ms, Some(2000 + START_DELAY_MS));
        assert_eq!(
            r.barrier("run", "w0").unwrap().start_at_unix_ms,
            Some(2000 + START_DELAY_MS)
        );
    }

    #[test]
    fn a_failed_preflight_keeps_the_barrier_closed_and_is_reported() {
        let r = Registry::default();
        r.announce("run", spec(0));
        r.register("run", reg("w0"), 1);
        let failed = RegisterRequest {
            preflight_error: Some("cannot resolve host 'nginx.nowhere'".into()),
            ..reg("w1")
        };
        let b = r.register("run", failed, 2);
        assert_eq!((b.registered, b.start_at_unix_ms), (2, None));
        assert_eq!(
            r.preflight_failures("run"),
            vec![(
                "w1".to_string(),
                "cannot resolve host 'nginx.nowhere'".to_string()
            )]
        );
        assert!(r.preflight_failures("other").is_empty());
    }

    #[test]
    fn a_new_step_resets_the_barrier() {
        let r = Registry::default();
        r.announce("run", spec(0));
        r.register("run", reg("w0"), 1);
        r.announce("run", spec(0));
        assert!(
            r.barrier("run", "w0").is_some(),
            "same step keeps registrations"
        );
        assert!(r.is_announced("run", 0));
        assert!(!r.is_announced("run", 1));
        r.announce("run", spec(1));
        assert!(r.barrier("run", "w0").is_none());
        assert!(r.is_announced("run", 1));
        r.forget("run");
        assert!(!r.is_announced("run", 1));
    }
}
