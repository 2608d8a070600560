//! In-memory state of the active runs: who may register, who has, and when the barrier opens.
//! Lost on restart by design: the reconciler re-announces active runs from their status and
//! workers re-register when the barrier answers 404.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use protocol::worker::{ProgressUpdate, RegisterRequest, Role};

use crate::policy::live::{Point, Reading, Series};

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
    pub step: u32,
    /// Worker pod names expected in this step, with their roles.
    pub workers: BTreeMap<String, Role>,
    /// The kind of report this step's clients deliver ("http", "tcp", "rr", "udp"); any other
    /// is refused on arrival.
    pub report_kind: &'static str,
    /// Which server each client connects to, and who starts later than the others.
    pub pairing: Pairing,
}

/// A step's clients and servers in pairs (an EgressBenchmark topology). Empty: every client
/// gets every registered server, and all start together.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pairing {
    /// Client worker -> the server worker it connects to.
    pub peers: BTreeMap<String, String>,
    /// Worker -> how long after the common start it starts (a matrix's later waves).
    pub offsets_ms: BTreeMap<String, u64>,
}

#[derive(Debug)]
struct RunState {
    spec: RunSpec,
    registered: BTreeMap<String, RegisterRequest>,
    start_at_unix_ms: Option<u64>,
    /// The clients' progress merged (SLO gates' early abort); a new step starts it anew.
    live: Series,
}

#[derive(Debug, PartialEq)]
pub enum RegistryError {
    UnknownRun,
    UnknownWorker,
    WrongStep {
        current: u32,
    },
    /// The caller is not a worker of the run's current step.
    NotAWorker,
    /// The caller is a worker, but not the one the request names.
    NotThisWorker,
    /// The worker registers in a role the run does not give it.
    WrongRole,
    /// The worker asks for the barrier before registering.
    Unregistered,
}

/// Who sent a request, as the authenticator established it before any body was read: a worker
/// pod, which may speak only for itself.
#[derive(Clone, Debug, PartialEq)]
pub struct Caller {
    pub namespace: String,
    /// The worker pod's name (worker names are pod names).
    pub worker: String,
}

impl Caller {
    /// True when this caller may speak for `worker`.
    fn may_speak_for(&self, worker: &str) -> bool {
        self.worker == worker
    }
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
    /// The registry map. A poisoned lock is taken over: every update below leaves the map
    /// consistent at each step, and a panic must not take the whole API down with it.
    fn lock(&self) -> MutexGuard<'_, HashMap<String, RunState>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Creates or updates a run; a new step resets registrations.
    pub fn announce(&self, run: &str, spec: RunSpec) {
        let mut runs = self.lock();
        match runs.get_mut(run) {
            Some(state) if state.spec.step == spec.step => state.spec = spec,
            _ => {
                runs.insert(
                    run.to_string(),
                    RunState {
                        spec,
                        registered: BTreeMap::new(),
                        start_at_unix_ms: None,
                        live: Series::default(),
                    },
                );
            }
        }
    }

    /// True when `run` is known at `step` (so the reconciler need not announce it again).
    pub fn is_announced(&self, run: &str, step: u32) -> bool {
        self.lock().get(run).is_some_and(|s| s.spec.step == step)
    }

    /// The current spec of `run`, if announced.
    pub fn spec(&self, run: &str) -> Option<RunSpec> {
        self.lock().get(run).map(|s| s.spec.clone())
    }

    pub fn forget(&self, run: &str) {
        self.lock().remove(run);
    }

    /// Checks that `caller` is a worker of `run`'s current step, in the run's namespace (the
    /// last step of authentication, before any body is read); returns the run's spec.
    pub fn admit(&self, run: &str, caller: &Caller) -> Result<RunSpec, RegistryError> {
        let runs = self.lock();
        let state = runs.get(run).ok_or(RegistryError::UnknownRun)?;
        let spec = &state.spec;
        if spec.namespace != caller.namespace || !spec.workers.contains_key(&caller.worker) {
            return Err(RegistryError::NotAWorker);
        }
        Ok(spec.clone())
    }

    /// Checks that `caller` may speak for `worker` and that `worker` belongs to the run's
    /// current `step`; returns the run's spec.
    pub fn authorize(
        &self,
        run: &str,
        caller: &Caller,
        worker: &str,
        step: u32,
    ) -> Result<RunSpec, RegistryError> {
        let runs = self.lock();
        let state = member(&runs, run, caller, worker, step)?;
        Ok(state.spec.clone())
    }

    /// Checks as `authorize` and records the registration under the same lock (idempotent);
    /// opens the barrier when the last worker arrives.
    pub fn register(
        &self,
        run: &str,
        caller: &Caller,
        req: RegisterRequest,
        now_unix_ms: u64,
    ) -> Result<BarrierState, RegistryError> {
        let mut runs = self.lock();
        let role = member(&runs, run, caller, &req.worker, req.step)?
            .spec
            .workers
            .get(&req.worker);
        if role != Some(&req.role) {
            return Err(RegistryError::WrongRole);
        }
        let state = runs.get_mut(run).ok_or(RegistryError::UnknownRun)?;
        let req_worker = req.worker.clone();
        state.registered.insert(req.worker.clone(), req);
        // A worker that cannot reach its target will not start: the barrier stays closed.
        let all_ready = state.registered.len() == state.spec.workers.len()
            && state
                .registered
                .values()
                .all(|r| r.preflight_error.is_none());
        if state.start_at_unix_ms.is_none() && all_ready {
            state.start_at_unix_ms = Some(now_unix_ms.saturating_add(START_DELAY_MS));
        }
        Ok(barrier_of(state, &req_worker))
    }

    /// The barrier as `worker` sees it, checked as `authorize`; `Unregistered` until the worker
    /// has registered (it must, e.g. after an operator restart).
    pub fn barrier(
        &self,
        run: &str,
        caller: &Caller,
        worker: &str,
        step: u32,
    ) -> Result<BarrierState, RegistryError> {
        let runs = self.lock();
        let state = member(&runs, run, caller, worker, step)?;
        if state.registered.contains_key(worker) {
            Ok(barrier_of(state, worker))
        } else {
            Err(RegistryError::Unregistered)
        }
    }

    /// Checks as `authorize` and adds a client's progress to the step's merged series (a
    /// server's, or one with an implausible time, is left out); returns the run's spec.
    pub fn progress(
        &self,
        run: &str,
        caller: &Caller,
        update: &ProgressUpdate,
    ) -> Result<RunSpec, RegistryError> {
        let mut runs = self.lock();
        member(&runs, run, caller, &update.worker, update.step)?;
        let state = runs.get_mut(run).ok_or(RegistryError::UnknownRun)?;
        let clients = state
            .spec
            .workers
            .values()
            .filter(|r| **r == Role::Client)
            .count();
        let is_client = state.spec.workers.get(&update.worker) == Some(&Role::Client);
        let kind = state.spec.report_kind;
        if let Some(reading) = Reading::of(update).filter(|_| is_client) {
            let reading = reading.only_for(kind);
            state.live.push(&update.worker, reading, clients);
        }
        Ok(state.spec.clone())
    }

    /// The merged progress of `run` at `step` (empty when it is at another step or unknown).
    pub fn live(&self, run: &str, step: u32) -> Vec<Point> {
        self.lock()
            .get(run)
            .filter(|s| s.spec.step == step)
            .map(|s| s.live.points())
            .unwrap_or_default()
    }

    /// Workers of the run's current step whose check before the barrier failed, with why.
    pub fn preflight_failures(&self, run: &str) -> Vec<(String, String)> {
        let runs = self.lock();
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
}

/// The state of `run` when `caller` may speak for `worker` of its current `step`.
fn member<'a>(
    runs: &'a HashMap<String, RunState>,
    run: &str,
    caller: &Caller,
    worker: &str,
    step: u32,
) -> Result<&'a RunState, RegistryError> {
    let state = runs.get(run).ok_or(RegistryError::UnknownRun)?;
    if !caller.may_speak_for(worker) {
        return Err(RegistryError::NotThisWorker);
    }
    if state.spec.step != step {
        return Err(RegistryError::WrongStep {
            current: state.spec.step,
        });
    }
    if !state.spec.workers.contains_key(worker) {
        return Err(RegistryError::UnknownWorker);
    }
    Ok(state)
}

/// The barrier as `worker` sees it: its own start (the common one, plus its wave's offset)
/// and the servers it may connect to (its pair's, or every one).
fn barrier_of(state: &RunState, worker: &str) -> BarrierState {
    let pairing = &state.spec.pairing;
    let offset = pairing.offsets_ms.get(worker).copied().unwrap_or(0);
    let peer = pairing.peers.get(worker);
    BarrierState {
        registered: count(state.registered.len()),
        expected: count(state.spec.workers.len()),
        start_at_unix_ms: state.start_at_unix_ms.map(|t| t.saturating_add(offset)),
        servers: state
            .registered
            .iter()
            .filter(|(name, r)| r.role == Role::Server && peer.is_none_or(|p| p == *name))
            .filter_map(|(_, r)| r.listen.clone())
            .collect(),
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::worker::PROTOCOL_VERSION;

    fn spec(step: u32) -> RunSpec {
        RunSpec {
            kind: "IngressBenchmark".into(),
            namespace: "ns".into(),
            benchmark: "b".into(),
            uid: "u".into(),
            step,
            workers: BTreeMap::from([("w0".into(), Role::Client), ("w1".into(), Role::Client)]),
            report_kind: "http",
            pairing: Default::default(),
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

    fn caller(worker: &str) -> Caller {
        Caller {
            namespace: "ns".into(),
            worker: worker.into(),
        }
    }

    #[test]
    fn barrier_opens_when_all_expected_workers_registered() {
        let r = Registry::default();
        r.announce("run", spec(0));
        assert!(r.admit("run", &caller("w0")).is_ok());
        assert_eq!(
            r.admit("run", &caller("w9")),
            Err(RegistryError::NotAWorker)
        );
        let elsewhere = Caller {
            namespace: "other".into(),
            ..caller("w0")
        };
        assert_eq!(r.admit("run", &elsewhere), Err(RegistryError::NotAWorker));
        assert_eq!(
            r.admit("other", &caller("w0")),
            Err(RegistryError::UnknownRun)
        );
        assert_eq!(
            r.authorize("run", &caller("w0"), "w1", 0),
            Err(RegistryError::NotThisWorker)
        );
        assert_eq!(
            r.register("run", &caller("w0"), reg("w1"), 1),
            Err(RegistryError::NotThisWorker)
        );
        let server = RegisterRequest {
            role: Role::Server,
            ..reg("w0")
        };
        assert_eq!(
            r.register("run", &caller("w0"), server, 1),
            Err(RegistryError::WrongRole)
        );
        assert_eq!(
            r.authorize("run", &caller("w9"), "w9", 0),
            Err(RegistryError::UnknownWorker)
        );
        assert_eq!(
            r.authorize("run", &caller("w0"), "w0", 1),
            Err(RegistryError::WrongStep { current: 0 })
        );
        assert_eq!(
            r.authorize("other", &caller("w0"), "w0", 0),
            Err(RegistryError::UnknownRun)
        );
        assert_eq!(
            r.barrier("run", &caller("w0"), "w0", 0),
            Err(RegistryError::Unregistered)
        );
        let b = r.register("run", &caller("w0"), reg("w0"), 1000).unwrap();
        assert_eq!((b.registered, b.expected, b.start_at_unix_ms), (1, 2, None));
        let b = r.register("run", &caller("w0"), reg("w0"), 1100).unwrap();
        assert_eq!(b.registered, 1, "registration is idempotent");
        assert_eq!(
            r.register("run", &caller("w9"), reg("w9"), 1100),
            Err(RegistryError::UnknownWorker)
        );
        let b = r.register("run", &caller("w1"), reg("w1"), 2000).unwrap();
        assert_eq!(b.start_at_unix_ms, Some(2000 + START_DELAY_MS));
        assert_eq!(
            r.barrier("run", &caller("w0"), "w0", 0)
                .unwrap()
                .start_at_unix_ms,
            Some(2000 + START_DELAY_MS)
        );
    }

    #[test]
    fn a_failed_preflight_keeps_the_barrier_closed_and_is_reported() {
        let r = Registry::default();
        r.announce("run", spec(0));
        r.register("run", &caller("w0"), reg("w0"), 1).unwrap();
        let failed = RegisterRequest {
            preflight_error: Some("cannot resolve host 'nginx.nowhere'".into()),
            ..reg("w1")
        };
        let b = r.register("run", &caller("w1"), failed, 2).unwrap();
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
    fn progress_of_the_step_s_clients_is_merged_and_a_new_step_starts_anew() {
        let r = Registry::default();
        r.announce("run", spec(0));
        let push = |worker: &str, elapsed_s: f64| ProgressUpdate {
            version: PROTOCOL_VERSION,
            worker: worker.into(),
            elapsed_s,
            rps: 10.0,
            ..ProgressUpdate::default()
        };
        assert_eq!(
            r.progress("run", &caller("w0"), &push("w1", 1.0)),
            Err(RegistryError::NotThisWorker)
        );
        r.progress("run", &caller("w0"), &push("w0", 1.0)).unwrap();
        assert!(r.live("run", 0).is_empty(), "w1 has not pushed yet");
        r.progress("run", &caller("w1"), &push("w1", 1.1)).unwrap();
        let points = r.live("run", 0);
        assert_eq!(points.len(), 1);
        assert_eq!(points[0].rps, Some(20.0));
        assert!(r.live("run", 1).is_empty() && r.live("other", 0).is_empty());
        r.announce("run", spec(1));
        assert!(r.live("run", 1).is_empty());
    }

    #[test]
    fn a_new_step_resets_the_barrier() {
        let r = Registry::default();
        r.announce("run", spec(0));
        r.register("run", &caller("w0"), reg("w0"), 1).unwrap();
        r.announce("run", spec(0));
        assert!(
            r.barrier("run", &caller("w0"), "w0", 0).is_ok(),
            "same step keeps registrations"
        );
        assert!(r.is_announced("run", 0));
        assert!(!r.is_announced("run", 1));
        r.announce("run", spec(1));
        assert!(r.barrier("run", &caller("w0"), "w0", 1).is_err());
        assert!(r.is_announced("run", 1));
        r.forget("run");
        assert!(!r.is_announced("run", 1));
        assert_eq!(
            r.register("run", &caller("w0"), reg("w0"), 1),
            Err(RegistryError::UnknownRun)
        );
    }

    /// Registering while the reconciler forgets and re-announces the run from other threads
    /// never panics: each call sees the run whole or not at all.
    #[test]
    fn forget_racing_register_does_not_panic() {
        let r = std::sync::Arc::new(Registry::default());
        r.announce("run", spec(0));
        let churn = {
            let r = r.clone();
            std::thread::spawn(move || {
                for _ in 0..2000 {
                    r.forget("run");
                    r.announce("run", spec(0));
                }
            })
        };
        let registrants: Vec<_> = (0..4)
            .map(|i| {
                let r = r.clone();
                std::thread::spawn(move || {
                    let mut outcomes = [0u32; 2];
                    for t in 0..2000u64 {
                        let w = format!("w{}", i % 2);
                        match r.register("run", &caller(&w), reg(&w), t) {
                            Ok(_) => outcomes[0] += 1,
                            Err(RegistryError::UnknownRun) => outcomes[1] += 1,
                            Err(e) => panic!("unexpected refusal {e:?}"),
                        }
                    }
                    outcomes
                })
            })
            .collect();
        churn.join().expect("the reconciler side did not panic");
        for t in registrants {
            let [ok, unknown] = t.join().expect("a registering thread panicked");
            assert_eq!(ok + unknown, 2000, "every call answered");
        }
        assert!(r.register("run", &caller("w0"), reg("w0"), 1).is_ok());
    }

    #[test]
    fn a_paired_client_gets_only_its_server_and_its_wave_starts_later() {
        let r = Registry::default();
        let workers = ["c0", "s0", "c1", "s1"];
        let mut spec = spec(0);
        spec.workers = workers
            .iter()
            .map(|w| {
                let role = if w.starts_with('s') {
                    Role::Server
                } else {
                    Role::Client
                };
                (w.to_string(), role)
            })
            .collect();
        spec.pairing = Pairing {
            peers: BTreeMap::from([("c0".into(), "s0".into()), ("c1".into(), "s1".into())]),
            offsets_ms: BTreeMap::from([("c1".into(), 12_000), ("s1".into(), 12_000)]),
        };
        r.announce("run", spec);
        for w in workers {
            let mut req = reg(w);
            if w.starts_with('s') {
                req.role = Role::Server;
                req.listen = Some(format!("{w}.ip:5201"));
            }
            r.register("run", &caller(w), req, 1000).unwrap();
        }
        let c0 = r.barrier("run", &caller("c0"), "c0", 0).unwrap();
        let c1 = r.barrier("run", &caller("c1"), "c1", 0).unwrap();
        let s1 = r.barrier("run", &caller("s1"), "s1", 0).unwrap();
        assert_eq!(c0.servers, ["s0.ip:5201"]);
        assert_eq!(c1.servers, ["s1.ip:5201"]);
        let start = 1000 + START_DELAY_MS;
        assert_eq!(c0.start_at_unix_ms, Some(start));
        assert_eq!(c1.start_at_unix_ms, Some(start + 12_000));
        assert_eq!(
            s1.start_at_unix_ms, c1.start_at_unix_ms,
            "a pair starts together"
        );
    }
}
