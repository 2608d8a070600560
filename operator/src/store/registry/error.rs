//! Why the registry refused a worker's request (the API answers with it, see api::refusal).

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
    /// A server registered an address that is not its own (or not the port it was given).
    ListenNotOwn(String),
    /// A worker claims to run on another node than its pod's.
    NodeNotOwn(String),
    /// The caller's pod has no address yet in the API server (its status lags its start): it
    /// may retry.
    AddressUnknown,
}

impl RegistryError {
    /// Why, when the refusal is of a worker that spoke beyond itself (which ends its run).
    pub fn speaks_beyond_itself(&self) -> Option<&str> {
        match self {
            RegistryError::ListenNotOwn(why) | RegistryError::NodeNotOwn(why) => Some(why),
            _ => None,
        }
    }
}
