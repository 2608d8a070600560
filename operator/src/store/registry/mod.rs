//! In-memory state of the active runs: who may register, who has, and when the barrier opens.
//! Lost on restart by design: the reconciler re-announces active runs from their status and
//! workers re-register when the barrier answers 404. Who a request comes from and what it may
//! claim (its node, a server's `listen` address) is `caller.rs`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use protocol::worker::{ProgressUpdate, RegisterRequest, Role};
use protocol::ReportKind;

use crate::policy::live::{Point, Reading, Series};

mod caller;
mod ending;
mod error;
pub use caller::{check_listen, Caller, Listen, ListenHost};
pub use ending::{ending_key, Ends};
pub use error::RegistryError;

/// How often a run's count of reported clients is shown in status at most, between its first
/// and its last: each new count is a status write (about 30 per run at 64 workers, each
/// reconcile as reports arrive), for a column a person reads.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How far in the future the common start is set when the last worker registers, so every
/// worker learns it before it passes: a worker waiting at the barrier is answered as it opens,
/// one between two asks (or one that polls without waiting, every 100 ms) asks again within
/// that. A kind may ask for more (`RunSpec::start_lead`).
pub const START_LEAD: Duration = Duration::from_millis(500);

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
    /// The kind of report this step's clients deliver; any other is refused on arrival.
    pub report_kind: ReportKind,
    /// Which server each client connects to, and who starts later than the others.
    pub pairing: Pairing,
    /// How far ahead of the last registration the common start is set.
    pub start_lead: Duration,
}

/// A step's clients and servers in pairs (an EgressBenchmark topology). Empty: every client
/// gets every registered server, and all start together.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pairing {
    /// Client worker -> the server worker it connects to.
    pub peers: BTreeMap<String, String>,
    /// Worker -> how long after the common start it starts (a matrix's later waves).
    pub offsets_ms: BTreeMap<String, u64>,
    /// Server worker -> the address it may register for its clients. A server without an
    /// entry may register none: its clients connect only where the operator says.
    pub listen: BTreeMap<String, Listen>,
}

#[derive(Debug)]
struct RunState {
    /// Shared with every request that reads it: a run of 256 workers has maps of 256 names,
    /// and each of its workers' calls would otherwise copy them all.
    spec: Arc<RunSpec>,
    registered: BTreeMap<String, RegisterRequest>,
    /// Workers of this step the API refused for speaking beyond themselves, with why: the run
    /// ends with that cause (see `preflight_failures`).
    refused: BTreeMap<String, String>,
    start_at_unix_ms: Option<u64>,
    /// The clients' progress merged (SLO gates' early abort); a new step starts it anew.
    live: Series,
    /// The count of reported clients last shown, and when.
    shown: Option<(usize, Instant)>,
    /// True once the barrier opened: wakes the workers waiting at it. Dropped with the step's
    /// state (a new step, the run forgotten), which wakes them too.
    opened: tokio::sync::watch::Sender<bool>,
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
    /// How far the end of each run got (ending.rs).
    pub ends: Ends,
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
            Some(state) if state.spec.step == spec.step => state.spec = Arc::new(spec),
            _ => {
                runs.insert(
                    run.to_string(),
                    RunState {
                        spec: Arc::new(spec),
                        registered: BTreeMap::new(),
                        refused: BTreeMap::new(),
                        start_at_unix_ms: None,
                        live: Series::default(),
                        shown: None,
                        opened: tokio::sync::watch::Sender::new(false),
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
    pub fn spec(&self, run: &str) -> Option<Arc<RunSpec>> {
        self.lock().get(run).map(|s| Arc::clone(&s.spec))
    }

    pub fn forget(&self, run: &str) {
        self.lock().remove(run);
    }

    /// The stored status shows run `key` ([`ending_key`]) ended: if its finish handler did all
    /// it owes, it is done, and `run` (its id) forgotten.
    pub fn stored_ended(&self, key: &str, run: &str) {
        if self.ends.stored_ended(key) {
            self.forget(run);
        }
    }

    /// Checks that `caller` is a worker of `run`'s current step, in the run's namespace (the
    /// last step of authentication, before any body is read); returns the run's spec.
    pub fn admit(&self, run: &str, caller: &Caller) -> Result<Arc<RunSpec>, RegistryError> {
        let runs = self.lock();
        let state = runs.get(run).ok_or(RegistryError::UnknownRun)?;
        let spec = &state.spec;
        if spec.namespace != caller.namespace || !spec.workers.contains_key(&caller.worker) {
            return Err(RegistryError::NotAWorker);
        }
        Ok(Arc::clone(spec))
    }

    /// Checks that `caller` may speak for `worker` and that `worker` belongs to the run's
    /// current `step`; returns the run's spec.
    pub fn authorize(
        &self,
        run: &str,
        caller: &Caller,
        worker: &str,
        step: u32,
    ) -> Result<Arc<RunSpec>, RegistryError> {
        let runs = self.lock();
        let state = member(&runs, run, caller, worker, step)?;
        Ok(Arc::clone(&state.spec))
    }

    /// Checks as `authorize`, then that the worker speaks only for itself (a server's
    /// `listen` is its own address and port, see [`check_listen`]; its node is its pod's, see
    /// [`Caller::own_node`]), and records the registration under the same lock (idempotent,
    /// with the pod's node); opens the barrier when the last worker arrives. A worker refused
    /// for speaking beyond itself is remembered: the run ends with that cause.
    pub fn register(
        &self,
        run: &str,
        caller: &Caller,
        mut req: RegisterRequest,
        now_unix_ms: u64,
    ) -> Result<BarrierState, RegistryError> {
        let mut runs = self.lock();
        let state = member(&runs, run, caller, &req.worker, req.step)?;
        if state.spec.workers.get(&req.worker) != Some(&req.role) {
            return Err(RegistryError::WrongRole);
        }
        let listen_checked = match req.role {
            // A server that cannot start names no address; its preflight error ends the run.
            Role::Server if req.preflight_error.is_none() => check_listen(
                state.spec.pairing.listen.get(&req.worker),
                caller,
                req.listen.as_deref(),
            ),
            Role::Server => Ok(()),
            // A client's address is given to nobody.
            Role::Client => {
                req.listen = None;
                Ok(())
            }
        };
        let checked = listen_checked.and_then(|()| caller.own_node(req.node.as_deref()));
        let state = runs.get_mut(run).ok_or(RegistryError::UnknownRun)?;
        req.node = match checked {
            Ok(node) => node,
            Err(e) => {
                if let Some(why) = e.speaks_beyond_itself() {
                    state.refused.insert(req.worker.clone(), why.to_string());
                }
                return Err(e);
            }
        };
        let req_worker = req.worker.clone();
        state.registered.insert(req.worker.clone(), req);
        // A worker that cannot reach its target will not start: the barrier stays closed.
        let all_ready = state.registered.len() == state.spec.workers.len()
            && state
                .registered
                .values()
                .all(|r| r.preflight_error.is_none());
        if state.start_at_unix_ms.is_none() && all_ready {
            let lead = u64::try_from(state.spec.start_lead.as_millis()).unwrap_or(u64::MAX);
            state.start_at_unix_ms = Some(now_unix_ms.saturating_add(lead));
            state.opened.send_replace(true);
        }
        Ok(barrier_of(state, &req_worker))
    }

    /// When step `step` of `run` starts (Unix ms; every worker's barrier, before its wave's
    /// offset), once all its workers registered; None before, or for another step.
    pub fn started_at(&self, run: &str, step: u32) -> Option<u64> {
        let runs = self.lock();
        let state = runs.get(run)?;
        (state.spec.step == step)
            .then_some(state.start_at_unix_ms)
            .flatten()
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
        self.barrier_and_opening(run, caller, worker, step)
            .map(|(b, _)| b)
    }

    /// [`Registry::barrier`], with what wakes a worker waiting at it (true once it opened;
    /// closed when this step's state goes: a new step, the run forgotten), taken under the
    /// same lock: of this very step.
    pub fn barrier_and_opening(
        &self,
        run: &str,
        caller: &Caller,
        worker: &str,
        step: u32,
    ) -> Result<(BarrierState, tokio::sync::watch::Receiver<bool>), RegistryError> {
        let runs = self.lock();
        let state = member(&runs, run, caller, worker, step)?;
        if state.registered.contains_key(worker) {
            Ok((barrier_of(state, worker), state.opened.subscribe()))
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
    ) -> Result<Arc<RunSpec>, RegistryError> {
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
        Ok(Arc::clone(&state.spec))
    }

    /// Whether `done` of `expected` clients reported is to be shown now at `step` of `run`:
    /// the first count and the last (all reported), the count last shown again, or a new one
    /// [`PROGRESS_EVERY`] after the last shown (noted as shown). A run this process does not
    /// hold (after a restart, before it is announced) shows every count.
    pub fn progress_due(&self, run: &str, step: u32, done: usize, expected: usize) -> bool {
        let now = Instant::now();
        let mut runs = self.lock();
        let Some(state) = runs.get_mut(run).filter(|s| s.spec.step == step) else {
            return true;
        };
        let due = match state.shown {
            None => true,
            Some((shown, at)) => {
                done == shown || done >= expected || now.duration_since(at) >= PROGRESS_EVERY
            }
        };
        if due && state.shown.is_none_or(|(shown, _)| shown != done) {
            state.shown = Some((done, now));
        }
        due
    }

    /// The merged progress of `run` at `step` (empty when it is at another step or unknown).
    pub fn live(&self, run: &str, step: u32) -> Vec<Point> {
        self.lock()
            .get(run)
            .filter(|s| s.spec.step == step)
            .map(|s| s.live.points())
            .unwrap_or_default()
    }

    /// Records that the API refused `worker` of `run`'s current step for speaking beyond
    /// itself (e.g. a report naming another node), so the run ends with `why`.
    pub fn refused(&self, run: &str, worker: &str, why: &str) {
        if let Some(state) = self.lock().get_mut(run) {
            if state.spec.workers.contains_key(worker) {
                state.refused.insert(worker.to_string(), why.to_string());
            }
        }
    }

    /// Workers of the run's current step whose check before the barrier failed, or whom the
    /// API refused for speaking beyond themselves, with why.
    pub fn preflight_failures(&self, run: &str) -> Vec<(String, String)> {
        let runs = self.lock();
        runs.get(run)
            .map(|state| {
                let refused = state.refused.iter().map(|(w, why)| {
                    let why = format!("the operator refused it: {why}");
                    (w.clone(), why)
                });
                let failed = state
                    .registered
                    .iter()
                    .filter_map(|(w, r)| Some((w.clone(), r.preflight_error.clone()?)));
                refused.chain(failed).collect()
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

    /// [`START_LEAD`] in ms, as the common start counts it.
    fn lead_ms() -> u64 {
        u64::try_from(START_LEAD.as_millis()).unwrap()
    }
    use crate::testing::{register_request as reg, run_spec};
    use protocol::worker::PROTOCOL_VERSION;

    fn spec(step: u32) -> RunSpec {
        RunSpec {
            step,
            ..run_spec(&[("w0", Role::Client), ("w1", Role::Client)])
        }
    }

    fn caller(worker: &str) -> Caller {
        Caller::named("ns", worker)
    }

    /// Server pods as the API server lists them: s0 at 10.0.0.10, s1 (on the host network)
    /// at its node's fd00::11 and 10.0.1.11, each on node "n-<name>".
    fn server(worker: &str) -> Caller {
        let addresses = match worker {
            "s0" => vec!["10.0.0.10".parse().unwrap()],
            "s1" => vec!["fd00::11".parse().unwrap(), "10.0.1.11".parse().unwrap()],
            _ => vec![],
        };
        Caller {
            node: Some(format!("n-{worker}")),
            addresses,
            ..caller(worker)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_count_of_reports_is_shown_at_most_every_second_but_the_last_at_once() {
        let r = Registry::default();
        r.announce("run", spec(0));
        let due = |done| r.progress_due("run", 0, done, 4);
        assert!(due(0), "the first count");
        assert!(due(0), "the count shown again");
        assert!(!due(1), "a new count within a second of the last shown");
        assert!(!due(2));
        tokio::time::advance(PROGRESS_EVERY).await;
        assert!(due(2), "a second after the last shown");
        assert!(!due(3), "the second is counted from there");
        assert!(due(4), "all reported: at once");
        // A step this process does not hold, and an unknown run: every count.
        assert!(r.progress_due("run", 1, 3, 4));
        assert!(r.progress_due("other", 0, 3, 4));
        // A new step starts anew.
        r.announce("run", spec(1));
        assert!(r.progress_due("run", 1, 1, 4));
    }

    fn own(port: u16) -> Listen {
        Listen {
            host: ListenHost::Own,
            port,
        }
    }

    /// A step with server s0 (and client c0) whose listen rule is `rule`.
    fn served(rule: Option<Listen>) -> RunSpec {
        let mut spec = spec(0);
        spec.kind = "EgressBenchmark".into();
        spec.workers = BTreeMap::from([("c0".into(), Role::Client), ("s0".into(), Role::Server)]);
        spec.pairing.peers = BTreeMap::from([("c0".into(), "s0".into())]);
        spec.pairing.listen = rule.map(|r| ("s0".to_string(), r)).into_iter().collect();
        spec
    }

    fn serving(listen: &str) -> RegisterRequest {
        RegisterRequest {
            role: Role::Server,
            listen: Some(listen.into()),
            ..reg("s0")
        }
    }

    /// The refusal of `listen` from s0 (Ok(()) when accepted) under `rule`.
    fn listen_under(rule: Option<Listen>, who: &Caller, listen: &str) -> Result<(), String> {
        let r = Registry::default();
        r.announce("run", served(rule));
        match r.register("run", who, serving(listen), 1) {
            Ok(_) => Ok(()),
            Err(RegistryError::ListenNotOwn(why)) => {
                let failures = r.preflight_failures("run");
                assert_eq!(failures.len(), 1, "the refusal ends the run: {failures:?}");
                assert!(failures[0].1.contains(&why), "{failures:?}");
                Err(why)
            }
            Err(e) => panic!("{listen}: unexpected {e:?}"),
        }
    }

    #[test]
    fn a_server_may_register_only_its_own_address_and_port() {
        let s0 = server("s0");
        // Honest: its pod IP and the plan's port; IPv6 and IPv4-mapped forms too.
        assert_eq!(listen_under(Some(own(5201)), &s0, "10.0.0.10:5201"), Ok(()));
        let s1 = Caller {
            worker: "s0".into(),
            ..server("s1")
        };
        for ok in ["[fd00::11]:5202", "[fd00:0:0::11]:5202", "10.0.1.11:5202"] {
            assert_eq!(listen_under(Some(own(5202)), &s1, ok), Ok(()), "{ok}");
        }
        assert_eq!(
            listen_under(Some(own(5201)), &s0, "[::ffff:10.0.0.10]:5201"),
            Ok(())
        );
        // Another host, port, a name, garbage, nothing: refused, saying what was expected.
        let why = listen_under(Some(own(5201)), &s0, "10.0.0.99:5201").unwrap_err();
        assert!(
            why.contains("\"10.0.0.99:5201\" is not server s0's own address")
                && why.contains("its pod's 10.0.0.10, port 5201"),
            "{why}"
        );
        let why = listen_under(Some(own(5201)), &s0, "10.0.0.10:22").unwrap_err();
        assert!(why.contains("gave server s0 port 5201, not 22"), "{why}");
        for bad in [
            "kubernetes.default:5201",
            "[fd00::10]:5201",
            "127.0.0.1:5201",
            "10.0.0.10",
            "fd00::1:5201",
        ] {
            assert!(listen_under(Some(own(5201)), &s0, bad).is_err(), "{bad}");
        }
        // No rule (the run gives the server no address to register): refused.
        assert!(listen_under(None, &s0, "10.0.0.10:5201").is_err());
        let r = Registry::default();
        r.announce("run", served(Some(own(5201))));
        let silent = RegisterRequest {
            listen: None,
            ..serving("")
        };
        assert!(matches!(
            r.register("run", &s0, silent, 1),
            Err(RegistryError::ListenNotOwn(_))
        ));
        // A server that cannot start says why, not where.
        let failed = RegisterRequest {
            listen: None,
            preflight_error: Some("cannot bind".into()),
            ..serving("")
        };
        assert!(r.register("run", &s0, failed, 1).is_ok());
    }

    #[test]
    fn a_server_may_name_what_the_operator_chose_for_it() {
        let s0 = server("s0");
        let rule = |host| Some(Listen { host, port: 5201 });
        // The Service path: the Service's name, nothing else.
        let svc = || rule(ListenHost::Service("nb-e-r1-s0-w1".into()));
        assert_eq!(listen_under(svc(), &s0, "nb-e-r1-s0-w1:5201"), Ok(()));
        assert!(listen_under(svc(), &s0, "evil.example:5201").is_err());
        assert!(listen_under(svc(), &s0, "10.0.0.10:5201").is_err());
        // The case's bindAddress, or its own.
        let bind = || rule(ListenHost::OwnOr("198.18.0.2".parse().unwrap()));
        assert_eq!(listen_under(bind(), &s0, "198.18.0.2:5201"), Ok(()));
        assert_eq!(listen_under(bind(), &s0, "10.0.0.10:5201"), Ok(()));
        assert!(listen_under(bind(), &s0, "198.18.0.3:5201").is_err());
        // A host-network interface the API server does not know: a unicast address literal.
        let dev = || rule(ListenHost::NodeInterface);
        assert_eq!(listen_under(dev(), &s0, "192.168.77.2:5201"), Ok(()));
        for bad in [
            "127.0.0.1:5201",
            "169.254.169.254:5201",
            "0.0.0.0:5201",
            "[fe80::1]:5201",
            "[::1]:5201",
            "224.0.0.1:5201",
            "vx.example:5201",
            "192.168.77.2:5999",
        ] {
            assert!(listen_under(dev(), &s0, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_pod_without_an_address_yet_is_asked_to_retry() {
        let r = Registry::default();
        r.announce("run", served(Some(own(5201))));
        let unknown = Caller {
            addresses: vec![],
            ..server("s0")
        };
        assert_eq!(
            r.register("run", &unknown, serving("10.0.0.10:5201"), 1),
            Err(RegistryError::AddressUnknown)
        );
        assert!(r.preflight_failures("run").is_empty(), "not a refusal");
        assert!(r
            .register("run", &server("s0"), serving("10.0.0.10:5201"), 2)
            .is_ok());
    }

    #[test]
    fn a_worker_runs_on_its_pods_node_only() {
        let r = Registry::default();
        r.announce("run", served(Some(own(5201))));
        r.announce("other", spec(0));
        let c0 = Caller {
            node: Some("n-c0".into()),
            ..caller("c0")
        };
        let claiming = |node: Option<&str>| RegisterRequest {
            node: node.map(str::to_string),
            ..reg("c0")
        };
        // Another node: refused, and the run ends with why.
        let Err(RegistryError::NodeNotOwn(why)) = r.register("run", &c0, claiming(Some("n-s0")), 1)
        else {
            panic!("a claim of another node was accepted");
        };
        assert!(
            why.contains("says it runs on node \"n-s0\", but its pod runs on node \"n-c0\""),
            "{why}"
        );
        assert_eq!(r.preflight_failures("run").len(), 1);
        // Other runs are not disturbed.
        assert!(r.preflight_failures("other").is_empty());
        assert!(r.register("other", &caller("w0"), reg("w0"), 1).is_ok());
        // Its own node, or none: registered with the pod's node.
        let r = Registry::default();
        r.announce("run", served(Some(own(5201))));
        r.register("run", &c0, claiming(None), 1).unwrap();
        r.register("run", &c0, claiming(Some("n-c0")), 1).unwrap();
        let runs = r.lock();
        assert_eq!(
            runs["run"].registered["c0"].node.as_deref(),
            Some("n-c0"),
            "the pod's node is kept"
        );
        drop(runs);
        // When the operator does not know the pod's node, no claim is kept.
        assert_eq!(caller("c0").own_node(Some("n-x")), Ok(None));
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
        assert_eq!(b.start_at_unix_ms, Some(2000 + lead_ms()));
        assert_eq!(
            r.barrier("run", &caller("w0"), "w0", 0)
                .unwrap()
                .start_at_unix_ms,
            Some(2000 + lead_ms())
        );
    }

    #[test]
    fn the_barrier_opening_wakes_its_waiters_and_a_new_step_closes_their_watch() {
        let r = Registry::default();
        r.announce("run", spec(0));
        r.register("run", &caller("w0"), reg("w0"), 1).unwrap();
        let (b, waiting) = r
            .barrier_and_opening("run", &caller("w0"), "w0", 0)
            .unwrap();
        assert_eq!(b.start_at_unix_ms, None);
        assert!(!*waiting.borrow(), "open only once every worker registered");
        r.register("run", &caller("w1"), reg("w1"), 2).unwrap();
        assert!(waiting.has_changed().unwrap() && *waiting.borrow());
        // Who asks after it opened sees it open.
        let (_, later) = r
            .barrier_and_opening("run", &caller("w1"), "w1", 0)
            .unwrap();
        assert!(*later.borrow());
        // A new step's state replaces it: the watch of the old one closes, the new one's is
        // closed until its own workers registered.
        r.announce("run", spec(1));
        assert!(waiting.has_changed().is_err());
        r.register(
            "run",
            &caller("w0"),
            RegisterRequest {
                step: 1,
                ..reg("w0")
            },
            3,
        )
        .unwrap();
        let (_, next) = r
            .barrier_and_opening("run", &caller("w0"), "w0", 1)
            .unwrap();
        assert!(!*next.borrow());
    }

    #[test]
    fn the_common_start_is_set_the_specs_lead_after_the_last_registration() {
        let r = Registry::default();
        r.announce(
            "run",
            RunSpec {
                start_lead: Duration::from_millis(1500),
                ..spec(0)
            },
        );
        r.register("run", &caller("w0"), reg("w0"), 1000).unwrap();
        let b = r.register("run", &caller("w1"), reg("w1"), 2000).unwrap();
        assert_eq!(b.start_at_unix_ms, Some(3500));
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

    /// Every call of every worker reads the run's spec: one copy is shared, none is made per
    /// call (a copy of a 256-worker run's maps per call made the operator's work grow with the
    /// square of the workers). A new announcement of the step is a new spec for later calls.
    #[test]
    fn a_run_s_spec_is_shared_by_every_call_not_copied() {
        let r = Registry::default();
        r.announce("run", spec(0));
        let first = r.spec("run").unwrap();
        let progress = ProgressUpdate {
            version: PROTOCOL_VERSION,
            worker: "w1".into(),
            ..ProgressUpdate::default()
        };
        let reads = [
            r.spec("run").unwrap(),
            r.admit("run", &caller("w0")).unwrap(),
            r.authorize("run", &caller("w1"), "w1", 0).unwrap(),
            r.progress("run", &caller("w1"), &progress).unwrap(),
        ];
        for read in &reads {
            assert!(Arc::ptr_eq(&first, read), "a copy of the spec");
        }
        let mut changed = spec(0);
        changed.benchmark = "renamed".into();
        r.announce("run", changed);
        let later = r.spec("run").unwrap();
        assert_eq!(later.benchmark, "renamed");
        assert_eq!(
            first.benchmark,
            spec(0).benchmark,
            "an earlier read keeps its spec"
        );
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
            // s1 on the host network: the case's port plus its pair's index.
            listen: BTreeMap::from([("s0".into(), own(5201)), ("s1".into(), own(5202))]),
        };
        r.announce("run", spec);
        for w in workers {
            let mut req = reg(w);
            if w.starts_with('s') {
                req.role = Role::Server;
                req.listen = Some(match w {
                    "s0" => "10.0.0.10:5201".into(),
                    _ => "[fd00::11]:5202".into(),
                });
            }
            r.register("run", &server(w), req, 1000).unwrap();
        }
        let c0 = r.barrier("run", &caller("c0"), "c0", 0).unwrap();
        let c1 = r.barrier("run", &caller("c1"), "c1", 0).unwrap();
        let s1 = r.barrier("run", &server("s1"), "s1", 0).unwrap();
        assert_eq!(c0.servers, ["10.0.0.10:5201"]);
        assert_eq!(c1.servers, ["[fd00::11]:5202"]);
        let start = 1000 + lead_ms();
        assert_eq!(c0.start_at_unix_ms, Some(start));
        assert_eq!(c1.start_at_unix_ms, Some(start + 12_000));
        assert_eq!(
            s1.start_at_unix_ms, c1.start_at_unix_ms,
            "a pair starts together"
        );
    }
}
