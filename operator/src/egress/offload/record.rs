//! The authoritative offload records (kept in the operator's namespace, see crate::store::records)
//! and their bookkeeping, pure: what a case needs, which devices still need a restore, what a
//! restore writes, whether a read-back equals the state before, the status report, and the
//! re-check against the spec and the admin's allow-lists.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crds::egress::{EgressBenchmark, EgressCase, OffloadRecord};
use protocol::offload::DeviceState;

use super::super::validate;
use crate::admin::config::Config;

/// One device (interface on a node) a case's profile changes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DeviceRecord {
    /// The run (generation) and case the profile was applied for.
    pub run: String,
    pub case: String,
    pub node: String,
    pub interface: String,
    pub profile: String,
    /// The features the profile asks for.
    pub wanted: BTreeMap<String, bool>,
    /// The device's whole state, read before anything changed; never overwritten.
    #[serde(default)]
    pub before: Option<DeviceState>,
    /// The state the apply Job read back right after the change; never overwritten (the
    /// report's `applied`, whatever a restore reads later).
    #[serde(default)]
    pub applied: Option<DeviceState>,
    /// The last state read back after our change or restore.
    #[serde(default)]
    pub after: Option<DeviceState>,
    /// Set (and stored) before the apply Job is created: from here on the device may differ.
    #[serde(default)]
    pub apply_started: bool,
    /// The apply Job finished (its outcome is in `after` / `apply_error`).
    #[serde(default)]
    pub apply_done: bool,
    #[serde(default)]
    pub apply_error: Option<String>,
    /// A read-back after a restore equalled `before`.
    #[serde(default)]
    pub restored: bool,
    #[serde(default)]
    pub restore_error: Option<String>,
    /// Why the device can no longer be restored (its node is gone).
    #[serde(default)]
    pub abandoned: Option<String>,
    /// Jobs created so far per action (each attempt is a new Job).
    #[serde(default)]
    pub read_attempts: u32,
    #[serde(default)]
    pub apply_attempts: u32,
    #[serde(default)]
    pub restore_attempts: u32,
}

impl DeviceRecord {
    /// The device may differ from `before` and no read-back has shown otherwise.
    pub fn needs_restore(&self) -> bool {
        self.apply_started && !self.restored && self.abandoned.is_none()
    }

    /// What a restore writes: the features whose last known value differs from `before`, or
    /// every changeable one when the state after is unknown (the apply Job's output was lost).
    pub fn restore_features(&self) -> BTreeMap<String, bool> {
        let Some(before) = &self.before else {
            return BTreeMap::new();
        };
        let all = before.changeable();
        match &self.after {
            None => all,
            Some(after) => all
                .into_iter()
                .filter(|(name, on)| after.features.get(name) != Some(on))
                .collect(),
        }
    }

    /// Takes a read-back: restored only if every changeable feature equals `before`.
    pub fn take_read_back(&mut self, state: DeviceState) {
        let Some(before) = &self.before else {
            self.restore_error = Some("no state before is recorded".into());
            return;
        };
        if state.interface != self.interface {
            self.restore_error = Some(format!(
                "the read-back is of {}, not {}",
                state.interface, self.interface
            ));
            return;
        }
        let differences = state.differences(&before.changeable());
        self.after = Some(state);
        if differences.is_empty() {
            self.restored = true;
            self.restore_error = None;
        } else {
            self.restore_error = Some(format!(
                "read-back differs from before: {}",
                differences.join(", ")
            ));
        }
    }

    /// The status copy (a report, never read back).
    pub fn report(&self) -> OffloadRecord {
        let values = |state: &Option<DeviceState>| -> BTreeMap<String, bool> {
            let Some(s) = state else {
                return BTreeMap::new();
            };
            self.wanted
                .keys()
                .filter_map(|name| Some((name.clone(), s.value(name)?)))
                .collect()
        };
        // What the run changed and a restore writes back: from the state right after the
        // apply (a later restore's read-back must not hide it).
        let restore = match (&self.before, &self.applied) {
            (Some(before), Some(applied)) => before
                .changeable()
                .into_iter()
                .filter(|(name, on)| applied.features.get(name) != Some(on))
                .collect(),
            _ if self.apply_done || self.after.is_some() => self.restore_features(),
            _ => BTreeMap::new(),
        };
        OffloadRecord {
            case: self.case.clone(),
            node: self.node.clone(),
            interface: self.interface.clone(),
            profile: self.profile.clone(),
            before: values(&self.before),
            applied: if self.apply_done {
                values(if self.applied.is_some() {
                    &self.applied
                } else {
                    &self.after
                })
            } else {
                BTreeMap::new()
            },
            restore,
            recorded: self.apply_done,
            restored: self.restored || !self.apply_started,
            restore_error: self
                .restore_error
                .clone()
                .or_else(|| self.abandoned.clone()),
        }
    }
}

/// The records a case needs: one per (setting, node), in spec order.
pub fn records_for(eb: &EgressBenchmark, run: &str, case: &EgressCase) -> Vec<DeviceRecord> {
    let Some(profile) = validate::profile_of(&eb.spec, case) else {
        return vec![];
    };
    let mut out = vec![];
    for s in &profile.settings {
        for node in validate::offload_nodes(s, case) {
            out.push(DeviceRecord {
                run: run.to_string(),
                case: case.name.clone(),
                node,
                interface: s.interface.clone(),
                profile: profile.name.clone(),
                wanted: s.features.clone(),
                ..Default::default()
            });
        }
    }
    out
}

/// (run, case, node) groups of the records selected by `pick`, in record order.
pub fn groups(
    records: &[DeviceRecord],
    pick: impl Fn(&DeviceRecord) -> bool,
) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = vec![];
    for r in records.iter().filter(|r| pick(r)) {
        let g = (r.run.clone(), r.case.clone(), r.node.clone());
        if !out.contains(&g) {
            out.push(g);
        }
    }
    out
}

/// Indices of the group's records selected by `pick`.
pub fn indices(
    records: &[DeviceRecord],
    group: &(String, String, String),
    pick: impl Fn(&DeviceRecord) -> bool,
) -> Vec<usize> {
    records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.run == group.0 && r.case == group.1 && r.node == group.2 && pick(r))
        .map(|(i, _)| i)
        .collect()
}

/// Does the admin (still) allow this record: the namespace's opt-in, the interface, the
/// features? And, for the current run, does the spec (still) ask for it? The node's labels are
/// checked by the caller (they need an API call). Err names what is not allowed.
pub fn permitted(
    record: &DeviceRecord,
    eb: &EgressBenchmark,
    current_run: &str,
    config: &Config,
) -> Result<(), String> {
    let ns = eb.metadata.namespace.clone().unwrap_or_default();
    let device = format!("{}/{}", record.node, record.interface);
    if !config.offload_namespaces.allows(&ns) {
        return Err(format!(
            "offload Jobs are not enabled for namespace {ns} (Helm value security.offloadNamespaces); {device} not touched"
        ));
    }
    if !config.offload_interfaces.allows(&record.interface) {
        return Err(format!(
            "interface {} is not in the allowed offload interfaces (Helm value security.offloadInterfaces); {device} not touched",
            record.interface
        ));
    }
    let features: Vec<&str> = record
        .wanted
        .keys()
        .filter(|f| !config.offload_features.allows(f))
        .map(String::as_str)
        .collect();
    if !features.is_empty() {
        return Err(format!(
            "feature {} not in the allowed offload features (Helm value security.offloadFeatures); {device} not touched",
            features.join(", ")
        ));
    }
    if record.run == current_run {
        let in_spec = eb
            .spec
            .cases
            .iter()
            .filter(|c| c.name == record.case)
            .flat_map(|c| records_for(eb, current_run, c))
            .any(|r| {
                r.node == record.node
                    && r.interface == record.interface
                    && r.wanted == record.wanted
            });
        if !in_spec {
            return Err(format!(
                "{device}: the record does not match the benchmark's spec; not touched"
            ));
        }
    }
    Ok(())
}

/// Records whose restore failed or is impossible, for the OffloadRestored condition.
pub fn restore_problems(records: &[DeviceRecord]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.apply_started && !r.restored)
        .filter_map(|r| {
            r.restore_error
                .as_ref()
                .or(r.abandoned.as_ref())
                .map(|e| format!("{}/{}: {e}", r.node, r.interface))
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::admin::allow::{GlobList, NodeSelector};
    use crate::admin::config::NamespaceList;
    use crate::testing::fake_api::{status, Answer, FakeApi, Seen};
    use serde_json::{json, Value};

    pub(crate) fn eb() -> EgressBenchmark {
        serde_yaml::from_str(
            r#"
apiVersion: netbench.io/v1alpha1
kind: EgressBenchmark
metadata: {name: e, namespace: ns, uid: u-1}
spec:
  offload:
    profiles:
      - name: off
        settings:
          - {interface: vx0, features: {tx-checksumming: false}}
          - {interface: eth9, nodeNames: [n3], features: {tso: false}}
  cases:
    - name: vx
      client: {nodeName: n1, hostNetwork: true}
      server: {nodeName: n2, hostNetwork: true}
      offloadProfile: off
"#,
        )
        .unwrap()
    }

    pub(crate) fn state(pairs: &[(&str, bool)]) -> DeviceState {
        DeviceState {
            interface: "vx0".into(),
            features: pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            fixed: vec!["tx-checksum-ipv4".into()],
        }
    }

    pub(crate) fn allowing() -> Config {
        let mut c = Config::for_tests();
        c.offload_namespaces = NamespaceList::parse("ns");
        c.offload_interfaces = GlobList::parse("vx*,eth9");
        c.offload_node_selector = NodeSelector::parse("offload=yes");
        c
    }

    /// An API server for the offload steps: nodes exist (labelled offload=yes) when
    /// `nodes_exist`, a created or replaced object is echoed back with a resourceVersion, and
    /// anything else (a record not yet written, a Job) is not found.
    pub(crate) fn cluster(nodes_exist: bool) -> impl Fn(&Seen) -> Answer + Clone + Send + Sync {
        move |seen: &Seen| match seen.method.as_str() {
            "GET" if nodes_exist && seen.path.starts_with("/api/v1/nodes/") => {
                let name = seen.path.rsplit('/').next().unwrap_or_default();
                let node = json!({"apiVersion": "v1", "kind": "Node",
                                  "metadata": {"name": name, "labels": {"offload": "yes"}}});
                (200, node)
            }
            "POST" | "PUT" => {
                let mut object: Value = serde_json::from_str(&seen.body).unwrap_or_default();
                object["metadata"]["resourceVersion"] = json!("1");
                (200, object)
            }
            _ => (404, status(404, "NotFound")),
        }
    }

    /// What an [`Offload`](super::super::Offload) of run r1 borrows, owned by the test: a
    /// client of the fake API server answering as [`cluster`], the admin's configuration and
    /// the benchmark [`eb`].
    pub(crate) struct Rig {
        client: kube::Client,
        config: Config,
        eb: EgressBenchmark,
    }

    impl Rig {
        pub(crate) fn new(fake: &FakeApi, nodes_exist: bool, config: Config) -> Rig {
            Rig {
                client: fake.client(cluster(nodes_exist)),
                config,
                eb: eb(),
            }
        }

        pub(crate) fn offload(&self) -> super::super::Offload<'_> {
            super::super::Offload {
                client: &self.client,
                config: &self.config,
                eb: &self.eb,
                run: "r1",
            }
        }

        /// The record book as the API server holds it.
        pub(crate) async fn book(&self) -> super::super::Book {
            let store = crate::store::records::Store::new(
                &self.client,
                &self.config.namespace,
                super::super::book::WHAT,
            );
            super::super::Book::load_from(store, &self.eb)
                .await
                .unwrap()
        }
    }

    /// The (method, path, body) of every request `fake` saw.
    pub(crate) fn requests(fake: &FakeApi) -> Vec<(String, String, String)> {
        fake.requests()
            .iter()
            .map(|line| {
                let mut parts = line.splitn(4, ' ');
                let mut next = || parts.next().unwrap_or_default().to_string();
                let (method, path, _query, body) = (next(), next(), next(), next());
                (method, path, body)
            })
            .collect()
    }

    /// The records a request wrote to the record ConfigMap (None if it wrote none).
    pub(crate) fn written(request: &(String, String, String)) -> Option<Vec<DeviceRecord>> {
        let (method, path, body) = request;
        if !(method == "POST" || method == "PUT") || !path.contains("/configmaps") {
            return None;
        }
        let cm: Value = serde_json::from_str(body).ok()?;
        serde_json::from_str(cm["data"]["record.json"].as_str()?).ok()
    }

    /// The bodies of the Jobs created, in order.
    pub(crate) fn jobs_created(fake: &FakeApi) -> Vec<String> {
        requests(fake)
            .into_iter()
            .filter(|(m, p, _)| m == "POST" && p.ends_with("/jobs"))
            .map(|(_, _, body)| body)
            .collect()
    }

    /// The records last written before the first Job was created.
    pub(crate) fn stored_before_first_job(fake: &FakeApi) -> Option<Vec<DeviceRecord>> {
        let all = requests(fake);
        let first_job = all
            .iter()
            .position(|(m, p, _)| m == "POST" && p.ends_with("/jobs"))?;
        all.get(..first_job)?.iter().rev().find_map(written)
    }

    #[test]
    fn records_cover_every_setting_and_node() {
        let b = eb();
        let r = records_for(&b, "r1", &b.spec.cases[0]);
        let got: Vec<_> = r
            .iter()
            .map(|r| format!("{}/{}", r.node, r.interface))
            .collect();
        assert_eq!(got, ["n1/vx0", "n2/vx0", "n3/eth9"]);
        assert!(r.iter().all(|r| !r.needs_restore() && r.run == "r1"));
        assert_eq!(groups(&r, |_| true).len(), 3);
        assert_eq!(indices(&r, &groups(&r, |_| true)[1], |_| true), [1]);
    }

    #[test]
    fn the_report_keeps_what_was_applied_after_the_restore() {
        let before = state(&[("tx-checksum-ip-generic", true)]);
        let changed = state(&[("tx-checksum-ip-generic", false)]);
        let mut r = DeviceRecord {
            interface: "vx0".into(),
            wanted: BTreeMap::from([("tx-checksumming".into(), false)]),
            before: Some(before.clone()),
            applied: Some(changed.clone()),
            after: Some(changed),
            apply_started: true,
            apply_done: true,
            ..Default::default()
        };
        r.take_read_back(before);
        assert!(r.restored);
        let report = r.report();
        assert!(report.restored);
        assert!(report.before["tx-checksumming"]);
        assert!(!report.applied["tx-checksumming"], "{report:?}");
        assert_eq!(
            report.restore,
            BTreeMap::from([("tx-checksum-ip-generic".to_string(), true)])
        );
    }

    #[test]
    fn a_restore_is_verified_by_a_read_back_equal_to_before() {
        let mut r = DeviceRecord {
            interface: "vx0".into(),
            wanted: BTreeMap::from([("tx-checksumming".into(), false)]),
            before: Some(state(&[
                ("tx-checksum-ip-generic", true),
                ("tx-tcp-segmentation", true),
                ("tx-checksum-ipv4", false),
            ])),
            apply_started: true,
            ..Default::default()
        };
        // The apply's output was lost: write back every changeable feature.
        assert_eq!(r.restore_features().len(), 2);
        r.after = Some(state(&[
            ("tx-checksum-ip-generic", false),
            ("tx-tcp-segmentation", false),
            ("tx-checksum-ipv4", false),
        ]));
        r.apply_done = true;
        assert_eq!(
            r.restore_features(),
            BTreeMap::from([
                ("tx-checksum-ip-generic".to_string(), true),
                ("tx-tcp-segmentation".to_string(), true)
            ])
        );
        let report = r.report();
        assert!(report.before["tx-checksumming"]);
        assert!(!report.applied["tx-checksumming"]);
        assert!(!report.restored);
        // A read-back that is still partly changed is not a restore.
        r.take_read_back(state(&[
            ("tx-checksum-ip-generic", true),
            ("tx-tcp-segmentation", false),
        ]));
        assert!(!r.restored && r.needs_restore());
        assert!(
            r.restore_error
                .as_deref()
                .unwrap()
                .contains("tx-tcp-segmentation=on (is off)"),
            "{:?}",
            r.restore_error
        );
        assert_eq!(restore_problems(std::slice::from_ref(&r)).len(), 1);
        // The next attempt writes only what still differs.
        assert_eq!(
            r.restore_features(),
            BTreeMap::from([("tx-tcp-segmentation".to_string(), true)])
        );
        r.take_read_back(state(&[
            ("tx-checksum-ip-generic", true),
            ("tx-tcp-segmentation", true),
            ("tx-checksum-ipv4", false),
        ]));
        assert!(r.restored && !r.needs_restore() && r.restore_error.is_none());
        assert!(r.report().restored);
    }

    #[test]
    fn nothing_changed_before_the_apply_started() {
        let r = DeviceRecord {
            before: Some(state(&[("tx-checksum-ip-generic", true)])),
            ..Default::default()
        };
        assert!(!r.needs_restore());
        assert!(r.report().restored, "reported as nothing to restore");
        let mut wrong = DeviceRecord {
            interface: "vx0".into(),
            before: Some(state(&[("tx-checksum-ip-generic", true)])),
            apply_started: true,
            ..Default::default()
        };
        let mut other = state(&[("tx-checksum-ip-generic", true)]);
        other.interface = "eth0".into();
        wrong.take_read_back(other);
        assert!(
            !wrong.restored,
            "a read-back of another device proves nothing"
        );
    }

    #[test]
    fn records_are_rechecked_against_the_lists_and_the_spec() {
        let b = eb();
        let c = allowing();
        let records = records_for(&b, "r1", &b.spec.cases[0]);
        for r in &records {
            assert_eq!(permitted(r, &b, "r1", &c), Ok(()), "{r:?}");
        }
        let mut forged = records[0].clone();
        forged.interface = "eth0".into();
        let err = permitted(&forged, &b, "r1", &c).unwrap_err();
        assert!(err.contains("interface eth0"), "{err}");
        let mut forged = records[0].clone();
        forged.wanted.insert("loopback".into(), true);
        let err = permitted(&forged, &b, "r1", &c).unwrap_err();
        assert!(err.contains("feature loopback"), "{err}");
        let mut forged = records[0].clone();
        forged.node = "control-plane".into();
        let err = permitted(&forged, &b, "r1", &c).unwrap_err();
        assert!(err.contains("does not match the benchmark's spec"), "{err}");
        // An older run's record is checked against the lists only (the spec may have changed).
        assert_eq!(permitted(&forged, &b, "r2", &c), Ok(()));
        let err = permitted(&records[0], &b, "r1", &Config::for_tests()).unwrap_err();
        assert!(err.contains("not enabled for namespace ns"), "{err}");
    }
}
