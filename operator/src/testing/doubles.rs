//! Test doubles of the operator's own traits (report storage, worker authentication), shared
//! by its unit tests (`api::tests`) and its integration tests (`tests/worker_api`).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;

use futures::future::BoxFuture;
use protocol::worker::FinalReport;

use crate::api::{AuthError, Authenticator, ReportSink};
use crate::store::registry::{Caller, RunSpec};

/// Worker identities by bearer token, all in namespace "ns": what `PodTokens` learns from a
/// TokenReview and the pod. Worker `w`'s pod runs on node "node-of-w" with address 127.0.0.1
/// unless [`FixedTokens::with_pod`] says otherwise. Any other token is refused as
/// [`AuthError::BadToken`].
pub struct FixedTokens(pub BTreeMap<String, Caller>);

impl FixedTokens {
    /// From (token, worker pod) pairs.
    pub fn new<T: Into<String>, W: Into<String>>(pairs: impl IntoIterator<Item = (T, W)>) -> Self {
        FixedTokens(
            pairs
                .into_iter()
                .map(|(t, w)| {
                    let worker: String = w.into();
                    let caller = Caller {
                        node: Some(format!("node-of-{worker}")),
                        addresses: vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
                        ..Caller::named("ns", &worker)
                    };
                    (t.into(), caller)
                })
                .collect(),
        )
    }

    /// Worker `worker`'s pod runs on `node` (None: unknown) with `addresses`.
    pub fn with_pod(mut self, worker: &str, node: Option<&str>, addresses: &[IpAddr]) -> Self {
        for caller in self.0.values_mut().filter(|c| c.worker == worker) {
            caller.node = node.map(str::to_string);
            caller.addresses = addresses.to_vec();
        }
        self
    }
}

impl Authenticator for FixedTokens {
    fn authenticate<'a>(
        &'a self,
        _run: &'a str,
        bearer: &'a str,
    ) -> BoxFuture<'a, Result<Caller, AuthError>> {
        let caller = self.0.get(bearer).cloned();
        Box::pin(async move { caller.ok_or(AuthError::BadToken) })
    }
}

/// A [`ReportSink`] that keeps every accepted report in memory, in arrival order.
#[derive(Default)]
pub struct MemorySink(pub Mutex<Vec<FinalReport>>);

impl ReportSink for MemorySink {
    fn store<'a>(
        &'a self,
        _run: &'a str,
        _spec: &'a RunSpec,
        report: &'a FinalReport,
    ) -> BoxFuture<'a, Result<(), String>> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(report.clone());
        Box::pin(async { Ok(()) })
    }
}
