//! What an EgressBenchmark is to the shared run driver, pure (`run::Plan`, `run::RunState`):
//! its cases as steps, their budget and deadlines, workers, pairing and pods, the figures and
//! rows of a sample, and where each pair's workers ran.
//!
//! Invariants: a pair's nodes come from the pods the operator created or the nodes the plan
//! pinned it to, and from a worker's report only for what nothing else can tell (the client's
//! node of a placed case); never from status, which anyone who may edit the benchmark can
//! write. A sample missing a client's report yields no pairs (Err names the client).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use protocol::worker::FinalReport;

use crds::cases::Measured;
use crds::{EgressBenchmark, EgressBenchmarkStatus, RunStatus};

use crate::admin::config::Config;
use crate::egress::result::PairReport;
use crate::egress::{plan, result};
use crate::k8s::workers;
use crate::policy::queue::Contender;
use crate::policy::samples::Slot;
use crate::run::{MeasurementPlan, Outline, Plan, Reading, RunState, SamplePlan};

impl RunState for EgressBenchmarkStatus {
    fn run(&self) -> &RunStatus {
        &self.run
    }
    fn run_mut(&mut self) -> &mut RunStatus {
        &mut self.run
    }
    fn current(&self) -> Option<u32> {
        self.current_case
    }
    fn set_current(&mut self, case: u32) {
        self.current_case = Some(case);
    }
}

impl Plan for EgressBenchmark {
    fn outline(&self) -> Outline<'_> {
        Outline {
            noun: "case",
            // Any run (of this spec or an earlier one) may have had a Service path.
            services: true,
            count: plan::count(self),
            cleanup: self.spec.cleanup,
            repetition: &self.spec.repetition,
            // Each case is judged by the figures its protocol has (a figure a case lacks is
            // not expected of it).
            gates: &self.spec.gates,
            // An offload profile is applied per case: one case's samples, then the next.
            interleaved: false,
            judged_by_default: &[
                ("receiverBitsPerSecond", 10.0),
                ("transactionsPerSecond", 10.0),
                ("p99Ms", 20.0),
                ("lossPercent", 50.0),
            ],
        }
    }
    fn measurement(&self, case: u32) -> MeasurementPlan {
        let measured = plan::case_at(self, case);
        MeasurementPlan {
            name: match &measured {
                Some(m) => format!("case {}", m.name),
                None => format!("case {case}"),
            },
            report_kind: measured
                .as_ref()
                .map(|m| m.spec.protocol)
                .unwrap_or_default()
                .report_kind(),
            live_from: Duration::ZERO,
            after_start: measured.map_or(Duration::ZERO, |m| {
                plan::case_deadline(&m.spec, Duration::ZERO)
            }),
            start_lead: crate::store::registry::START_LEAD,
        }
    }
    fn budget(&self, config: &Config) -> Duration {
        plan::budget(&self.spec, config.timeouts())
    }
    fn contender(&self) -> Contender {
        plan::contender(self)
    }
    fn sample(&self, run: &str, slot: Slot) -> SamplePlan {
        SamplePlan {
            workers: plan::worker_roles(self, run, slot),
            pairing: plan::pairing(self, run, slot),
        }
    }
    fn pods(&self, run: &str, slot: Slot, config: &Config) -> Vec<Pod> {
        plan::workers(self, run, slot)
            .iter()
            .map(|p| workers::pod(p, config))
            .collect()
    }
    /// A case with a topology has a row per pair. The case's nodes come from the plan's pins
    /// and the sample's verified reports, never from status.cases, which a benchmark author
    /// can write.
    fn read(
        &self,
        run: &str,
        slot: Slot,
        reports: &BTreeMap<String, FinalReport>,
    ) -> std::result::Result<Reading, String> {
        let case = plan::case_at(self, slot.measurement)
            .ok_or_else(|| format!("no case {}", slot.measurement))?;
        let pairs = pair_reports(self, run, slot, reports, Nodes::Pinned)?;
        let (measured, _) = result::case_result(&case, &pairs)?;
        Ok(Reading {
            figures: result::figures(&measured),
            parameters: parameters(self, run, slot, &case, &pairs, reports),
            pairs: match case.spec.topology {
                Some(_) => measured.pairs,
                None => vec![],
            },
        })
    }
}

/// What distinguishes a case in a result: its spec, and for a single pair where it ran.
fn parameters(
    eb: &EgressBenchmark,
    run: &str,
    slot: Slot,
    m: &Measured,
    pairs: &[PairReport<'_>],
    reports: &BTreeMap<String, FinalReport>,
) -> BTreeMap<String, String> {
    let c = &m.spec;
    let mut p = BTreeMap::new();
    p.insert("case".to_string(), m.case.clone());
    p.insert("protocol".to_string(), c.protocol.to_string());
    p.insert("path".to_string(), c.path().to_string());
    p.insert("streams".to_string(), c.streams.to_string());
    if let Some(size) = c.shown_message_size() {
        p.insert("messageSize".to_string(), size.to_string());
    }
    if let Some(profile) = &c.offload_profile {
        p.insert("offloadProfile".to_string(), profile.clone());
    }
    if c.topology.is_none() {
        let (client, server) = case_nodes(eb, run, slot, pairs, reports);
        for (key, node) in [("clientNode", client), ("serverNode", server)] {
            if let Some(n) = node {
                p.insert(key.to_string(), n);
            }
        }
    }
    if let Some(a) = &c.server.address {
        p.insert("serverAddress".to_string(), a.clone());
    }
    p
}

/// Where the workers of a pair ran, as far as the caller can tell.
pub(super) enum Nodes<'p> {
    /// The pods the operator created for the sample (status: while they exist).
    Pods(&'p [Pod]),
    /// The nodes the plan pinned the pair to (the pods could run nowhere else); else the
    /// client's node as its report says, and no server node (a server sends no report). For
    /// results, made of reports after the pods are gone.
    Pinned,
}

/// The client reports of a sample pair by pair, with their nodes (`nodes`); Err names a
/// client whose report is missing.
pub(super) fn pair_reports<'a>(
    eb: &EgressBenchmark,
    run: &str,
    slot: Slot,
    reports: &'a BTreeMap<String, FinalReport>,
    nodes: Nodes<'_>,
) -> std::result::Result<Vec<PairReport<'a>>, String> {
    let node_of = |pods: &[Pod], name: &str| {
        pods.iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .and_then(|p| p.spec.as_ref()?.node_name.clone())
    };
    let case = plan::case_at(eb, slot.measurement)
        .map(|m| m.name)
        .unwrap_or_default();
    plan::pairs_at(eb, slot)
        .iter()
        .map(|p| {
            let client = plan::client_name(eb, run, slot.wire(), p.index);
            let server = plan::server_name(eb, run, slot.wire(), p.index);
            let report = reports.get(&client).ok_or_else(|| {
                format!(
                    "case {case}: the report of client {client} (pair {}) is gone",
                    p.index
                )
            })?;
            let (client_node, server_node) = match nodes {
                Nodes::Pods(pods) => (node_of(pods, &client), node_of(pods, &server)),
                Nodes::Pinned => (
                    p.client.node.clone().or_else(|| report.node.clone()),
                    p.server.node.clone(),
                ),
            };
            Ok(PairReport {
                pair: p.index,
                wave: p.wave,
                client: report,
                client_node,
                server_node,
            })
        })
        .collect()
}

/// Where the single pair of a case without a topology ran: each end's pinned node, or else
/// the node its own verified report names.
fn case_nodes(
    eb: &EgressBenchmark,
    run: &str,
    slot: Slot,
    pairs: &[PairReport<'_>],
    reports: &BTreeMap<String, FinalReport>,
) -> (Option<String>, Option<String>) {
    let Some(only) = pairs.first() else {
        return (None, None);
    };
    let server = plan::server_name(eb, run, slot.wire(), only.pair);
    let server_node = only
        .server_node
        .clone()
        .or_else(|| reports.get(&server).and_then(|r| r.node.clone()));
    (only.client_node.clone(), server_node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::egress::CaseResult;

    const TWO_CASES: &str = r#"
apiVersion: netbench.io/v1alpha1
kind: EgressBenchmark
metadata: {name: e, uid: u-1}
spec:
  cases:
    - name: pinned
      client: {nodeName: a}
      server: {nodeName: b}
    - name: placed
      client: {}
      server: {}
"#;

    fn report(worker: &str, node: &str) -> (String, FinalReport) {
        let r = FinalReport::new(worker, Some(node), 0, 1, serde_json::json!({}));
        (worker.to_string(), r)
    }

    /// A result's nodes: the pins, else each end's own report; status.cases (forged here) is
    /// never read.
    #[test]
    fn a_cases_nodes_come_from_pins_and_reports_never_from_status() {
        let mut eb: EgressBenchmark = serde_yaml::from_str(TWO_CASES).unwrap();
        let forged = |name: &str| CaseResult {
            name: name.into(),
            client_node: Some("forged-client".into()),
            server_node: Some("forged-server".into()),
            ..Default::default()
        };
        eb.status = Some(EgressBenchmarkStatus {
            cases: vec![forged("pinned"), forged("placed")],
            ..Default::default()
        });
        let run = "u1-g1";
        // As `read` makes them, from the pair reports of the sample (none without reports).
        let nodes = |slot: Slot, reports: &BTreeMap<String, FinalReport>| {
            let case = plan::case_at(&eb, slot.measurement).unwrap();
            let pairs = pair_reports(&eb, run, slot, reports, Nodes::Pinned).unwrap_or_default();
            let p = parameters(&eb, run, slot, &case, &pairs, reports);
            (p.get("clientNode").cloned(), p.get("serverNode").cloned())
        };
        let some = |a: &str, b: &str| (Some(a.to_string()), Some(b.to_string()));
        // Pinned: the pins win over what a report says.
        let slot = Slot::first(0);
        let reports = BTreeMap::from([
            report(&plan::client_name(&eb, run, 0, 0), "elsewhere"),
            report(&plan::server_name(&eb, run, 0, 0), "elsewhere"),
        ]);
        assert_eq!(nodes(slot, &reports), some("a", "b"));
        // Placed by the scheduler: each end's own report.
        let slot = Slot::first(1);
        let reports = BTreeMap::from([
            report(&plan::client_name(&eb, run, 1, 0), "n1"),
            report(&plan::server_name(&eb, run, 1, 0), "n2"),
        ]);
        assert_eq!(nodes(slot, &reports), some("n1", "n2"));
        // No report: no node (not status's).
        assert_eq!(nodes(slot, &BTreeMap::new()), (None, None));
    }
}
