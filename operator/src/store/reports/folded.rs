//! One object per sample. Once the stored status holds a sample's figures, the sample's worker
//! reports (one ConfigMap per worker) are folded into one ConfigMap holding exactly what a
//! result is made of: the figures, the pair rows, the parameters, the clients' merged latency
//! histogram, the workers' starts, nodes and host facts. The worker reports then go, so a run
//! that keeps its reports (a result write refused, 64 pairs, 20 samples) keeps one bounded
//! object per sample instead of one per worker and sample.
//!
//! The fold is made from verified reports by `results::fold`; here it is stored and read back.
//! A folded object carries the run's report labels (deleted with the run's reports and with
//! orphans) plus `netbench.io/sample=true`; it is read back only if its name, labels and
//! content all agree and every field is within the bounds below (the operator's namespace is
//! writable by admins: stored objects are checked like everything else).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use protocol::worker::host::HostFacts;
use serde::{Deserialize, Serialize};

use crds::environment::Placement;
use crds::topology::PairResult;

use super::object::{identity_hash, selector, step_labels};
use super::store::{delete_exactly, Store, StoreError};
use crate::base::labels;
use crate::policy::samples::Figure;
use crate::store::owner::Owner;

const KEY: &str = "sample.json";
const VERSION: u32 = 1;
/// Largest folded sample written: host facts, then the histogram, then the pair rows are left
/// out until it fits (a result holds at most 1 MiB, and a run keeps one fold per sample).
pub const MAX_FOLDED_BYTES: usize = 512 * 1024;
const MAX_FIGURES: usize = 32;
const MAX_TEXT: usize = 256;
const MAX_PARAMETERS: usize = 64;
const MAX_PARAMETER_VALUE: usize = 1024;
/// A 64-node matrix has 4032 ordered pairs.
const MAX_PAIRS: usize = 4096;
const MAX_NODES: usize = 1024;
const MAX_NODE_NAME: usize = 253;
/// Largest merged histogram a fold keeps (a larger one is left out of it).
pub const MAX_HISTOGRAM_CHARS: usize = 256 * 1024;
const ROLES: [&str; 2] = ["client", "server"];

/// What a result needs of one sample, folded from its verified worker reports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Folded {
    pub version: u32,
    /// The sample's slot (`Slot::wire`).
    pub slot: u32,
    /// The sample's figures, main figure first.
    pub figures: Vec<Figure>,
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    #[serde(default)]
    pub pairs: Vec<PairResult>,
    /// The clients' latency histograms merged (encoded), when their reports carry them.
    #[serde(default)]
    pub histogram: Option<String>,
    /// The earliest and latest start the workers reported (unix ms, their clocks).
    #[serde(default)]
    pub starts: Option<(u64, u64)>,
    /// The nodes the reports came from, with what the first worker there saw of its host.
    #[serde(default)]
    pub nodes: BTreeMap<String, Option<HostFacts>>,
    /// The nodes of each role ("client", "server").
    #[serde(default)]
    pub placement: Placement,
}

impl Folded {
    pub fn new(slot: u32) -> Folded {
        Folded {
            version: VERSION,
            slot,
            ..Folded::default()
        }
    }

    fn size(&self) -> usize {
        serde_json::to_vec(self).map_or(usize::MAX, |v| v.len())
    }

    /// Leaves out host facts, then the histogram, then the pair rows, until the JSON is at most
    /// `max` bytes (what is left out is missing from the result, nothing else changes).
    pub fn bounded(mut self, max: usize) -> Folded {
        if self.size() > max {
            self.nodes.values_mut().for_each(|h| *h = None);
        }
        if self.size() > max {
            self.histogram = None;
        }
        if self.size() > max {
            self.pairs.clear();
        }
        self
    }

    /// Whether the content is a fold of slot `slot` the operator could have written.
    pub fn check(&self, slot: u32) -> Result<(), String> {
        if self.version != VERSION {
            return Err(format!("version {} is not {VERSION}", self.version));
        }
        if self.slot != slot {
            return Err(format!("it holds slot {}, its labels {slot}", self.slot));
        }
        if self.figures.is_empty() || self.figures.len() > MAX_FIGURES {
            return Err(format!("{} figures", self.figures.len()));
        }
        for f in &self.figures {
            if f.name.len() > MAX_TEXT || f.unit.len() > MAX_TEXT || !f.value.is_finite() {
                return Err(format!(
                    "figure {:?} is not one a kind makes",
                    clip(&f.name)
                ));
            }
        }
        let long = |(k, v): (&String, &String)| k.len() > MAX_TEXT || v.len() > MAX_PARAMETER_VALUE;
        if self.parameters.len() > MAX_PARAMETERS || self.parameters.iter().any(long) {
            return Err("parameters beyond their bounds".into());
        }
        if self.pairs.len() > MAX_PAIRS {
            return Err(format!("{} pair rows", self.pairs.len()));
        }
        let bad_pair = |p: &PairResult| {
            !p.value.is_finite()
                || !p.start_lateness_ms.is_finite()
                || [&p.client_node, &p.server_node]
                    .iter()
                    .any(|n| n.as_ref().is_some_and(|n| n.len() > MAX_NODE_NAME))
                || [p.p99_ms, p.loss_percent]
                    .iter()
                    .flatten()
                    .any(|v| !v.is_finite())
        };
        if self.pairs.iter().any(bad_pair) {
            return Err("a pair row beyond its bounds".into());
        }
        if self
            .histogram
            .as_ref()
            .is_some_and(|h| h.len() > MAX_HISTOGRAM_CHARS)
        {
            return Err("a histogram beyond its bound".into());
        }
        if self.starts.is_some_and(|(first, last)| first > last) {
            return Err("its first start is after its last".into());
        }
        if self.nodes.len() > MAX_NODES || self.nodes.keys().any(|n| n.len() > MAX_NODE_NAME) {
            return Err("nodes beyond their bounds".into());
        }
        for host in self.nodes.values().flatten() {
            host.validate().map_err(|e| format!("host facts: {e}"))?;
        }
        for (role, nodes) in &self.placement {
            if !ROLES.contains(&role.as_str()) || nodes.iter().any(|n| !self.nodes.contains_key(n))
            {
                return Err(format!("placement of {:?} beyond its nodes", clip(role)));
            }
        }
        Ok(())
    }
}

fn clip(text: &str) -> String {
    crate::base::text::clip(text, 64)
}

/// The folded object's name: the run and slot, and a hash of everything that identifies it.
pub fn object_name(owner: &Owner, run: &str, slot: u32) -> String {
    let hash = identity_hash(owner, run, slot, "sample");
    format!("netbench-sample-{run}-s{slot}-{hash:016x}")
}

fn object_labels(owner: &Owner, run: &str, slot: u32) -> BTreeMap<String, String> {
    let mut l = step_labels(owner, run, slot);
    l.insert(labels::SAMPLE.to_string(), "true".to_string());
    l
}

pub(crate) fn object(
    namespace: &str,
    owner: &Owner,
    run: &str,
    f: &Folded,
) -> serde_json::Result<ConfigMap> {
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(object_name(owner, run, f.slot)),
            namespace: Some(namespace.to_string()),
            labels: Some(object_labels(owner, run, f.slot)),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            KEY.to_string(),
            serde_json::to_string(f)?,
        )])),
        ..Default::default()
    })
}

/// Whether `folded`, once stored, reads back as itself (the operator stores only such folds).
pub fn readable(owner: &Owner, run: &str, folded: &Folded) -> Result<(), String> {
    let cm = object("", owner, run, folded).map_err(|e| e.to_string())?;
    match verify(&cm, owner, run)? {
        read if read == *folded => Ok(()),
        _ => Err("it reads back otherwise".into()),
    }
}

/// The fold `cm` holds if it is exactly what [`Store::keep_folded`] writes for `run`.
pub(crate) fn verify(cm: &ConfigMap, owner: &Owner, run: &str) -> Result<Folded, String> {
    let empty = BTreeMap::new();
    let have = cm.metadata.labels.as_ref().unwrap_or(&empty);
    let slot: u32 = have
        .get(labels::STEP)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("its {} label is not a slot", labels::STEP))?;
    for (k, v) in object_labels(owner, run, slot) {
        if have.get(&k) != Some(&v) {
            return Err(format!("label {k} is not {v:?}"));
        }
    }
    let name = object_name(owner, run, slot);
    if cm.metadata.name.as_deref() != Some(name.as_str()) {
        return Err(format!("the sample of slot {slot} is named {name}"));
    }
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(KEY))
        .ok_or_else(|| format!("it has no {KEY}"))?;
    if text.len() > MAX_FOLDED_BYTES {
        return Err(format!("{} bytes", text.len()));
    }
    let folded: Folded =
        serde_json::from_str(text).map_err(|e| format!("unreadable sample: {e}"))?;
    folded.check(slot)?;
    Ok(folded)
}

impl Store {
    /// Stores `folded` for `run`. Storing it again is a no-op; an object holding its name that
    /// is not a valid fold is replaced (that very object only); a different valid fold stands
    /// (a conflict: the worker reports it came from stay).
    pub async fn keep_folded(
        &self,
        owner: &Owner,
        run: &str,
        folded: &Folded,
    ) -> Result<(), StoreError> {
        let api = self.api();
        let cm = object(&self.namespace, owner, run, folded)?;
        let name = cm.metadata.name.clone().unwrap_or_default();
        for _ in 0..3 {
            // Stored: noted for the watch, like a report (a delete of the run must not be
            // skipped while the watch has not shown it yet).
            match api.create(&PostParams::default(), &cm).await {
                Ok(_) => {
                    self.note_stored(&name, owner, run, None);
                    return Ok(());
                }
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
            let Some(existing) = api.get_opt(&name).await? else {
                continue;
            };
            match verify(&existing, owner, run) {
                Ok(stored) if stored == *folded => {
                    self.note_stored(&name, owner, run, None);
                    return Ok(());
                }
                Ok(_) => {
                    return Err(StoreError::Conflict(format!(
                        "ConfigMap {}/{name} already holds another fold of slot {}",
                        self.namespace, folded.slot
                    )))
                }
                Err(_) => delete_exactly(&api, &existing).await?,
            }
        }
        Err(StoreError::Conflict(format!(
            "ConfigMap {}/{name} keeps being taken by another object",
            self.namespace
        )))
    }

    /// The folded sample of slot `slot` of `run`: None when there is none, Err(why) when the
    /// object holding its name is not one ("ConfigMap ns/name: why").
    pub async fn folded(
        &self,
        owner: &Owner,
        run: &str,
        slot: u32,
    ) -> Result<Option<Result<Folded, String>>, kube::Error> {
        let name = object_name(owner, run, slot);
        let Some(cm) = self.api().get_opt(&name).await? else {
            return Ok(None);
        };
        let read = verify(&cm, owner, run)
            .and_then(|f| match f.slot == slot {
                true => Ok(f),
                false => Err(format!("it holds slot {}", f.slot)),
            })
            .map_err(|why| format!("ConfigMap {}/{name}: {why}", self.namespace));
        Ok(Some(read))
    }

    /// Deletes every folded sample of `run`.
    pub async fn delete_folds(&self, owner: &Owner, run: &str) -> Result<(), kube::Error> {
        if self.watch_holds_none(owner, Some(run), None, |sample| sample) {
            return Ok(());
        }
        let lp = ListParams::default().labels(&format!(
            "{},{}=true",
            selector(owner, Some(run), None),
            labels::SAMPLE
        ));
        self.api()
            .delete_collection(&DeleteParams::background(), &lp)
            .await
            .map(drop)
    }

    /// Deletes the worker reports of slot `slot` of `run` (not its folded sample).
    pub async fn delete_worker_reports(
        &self,
        owner: &Owner,
        run: &str,
        slot: u32,
    ) -> Result<(), kube::Error> {
        self.forget_held(owner, Some(run));
        let lp = ListParams::default().labels(&selector(owner, Some(run), Some(slot)));
        self.api()
            .delete_collection(&DeleteParams::background(), &lp)
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::samples::Figure;
    use crds::history::Better;

    const OWNER_UID: &str = "0d9a4c1e-0000-4000-8000-000000000001";

    fn owner() -> Owner {
        crate::testing::owner("EgressBenchmark", "mesh", OWNER_UID)
    }

    const RUN: &str = "0d9a4c1e-g1";

    pub(crate) fn sample(slot: u32) -> Folded {
        let mut f = Folded::new(slot);
        f.figures = vec![Figure {
            name: "receiverBitsPerSecond".into(),
            unit: "bit/s".into(),
            better: Better::Higher,
            value: 9.41e9,
        }];
        f.nodes.insert("node-a".into(), None);
        f.nodes.insert("node-b".into(), None);
        f.placement
            .insert("client".into(), ["node-a".to_string()].into());
        f.placement
            .insert("server".into(), ["node-b".to_string()].into());
        f.starts = Some((1_800_000_000_000, 1_800_000_000_020));
        f
    }

    #[test]
    fn what_is_written_reads_back_the_same() {
        let f = sample(65);
        let cm = object("netbench-system", &owner(), RUN, &f).unwrap();
        assert_eq!(verify(&cm, &owner(), RUN).unwrap(), f);
        assert!(cm.metadata.name.unwrap().len() <= 253);
        let l = cm.metadata.labels.unwrap();
        assert_eq!(l[labels::SAMPLE], "true");
        assert_eq!(l[labels::STEP], "65");
        assert!(!l.contains_key(labels::WORKER));
    }

    #[test]
    fn only_a_fold_that_reads_back_as_itself_is_readable() {
        assert_eq!(readable(&owner(), RUN, &sample(3)), Ok(()));
        let mut big = sample(3);
        big.histogram = Some("h".repeat(MAX_HISTOGRAM_CHARS + 1));
        assert!(readable(&owner(), RUN, &big)
            .unwrap_err()
            .contains("histogram"));
        let mut nan = sample(3);
        nan.figures[0].value = f64::INFINITY;
        assert!(readable(&owner(), RUN, &nan).is_err());
    }

    #[test]
    fn another_run_slot_name_or_forged_content_is_refused() {
        let f = sample(1);
        let cm = object("netbench-system", &owner(), RUN, &f).unwrap();
        assert!(verify(&cm, &owner(), "0d9a4c1e-g2").is_err());
        let mut moved = cm.clone();
        moved
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(labels::STEP.into(), "2".into());
        assert!(verify(&moved, &owner(), RUN).unwrap_err().contains("named"));
        let forge = |change: fn(&mut Folded)| {
            let mut bad = sample(1);
            change(&mut bad);
            let mut cm = cm.clone();
            let text = serde_json::to_string(&bad).unwrap();
            cm.data = Some(BTreeMap::from([(KEY.to_string(), text)]));
            verify(&cm, &owner(), RUN).unwrap_err()
        };
        assert!(forge(|f| f.slot = 2).contains("slot 2"));
        assert!(forge(|f| f.figures.clear()).contains("0 figures"));
        assert!(
            forge(|f| f.figures[0].name = "x".repeat(MAX_TEXT + 1).into())
                .contains("not one a kind makes")
        );
        // No JSON number is infinite or NaN (NaN is written as null): unreadable.
        assert!(forge(|f| f.figures[0].value = f64::NAN).contains("unreadable"));
        assert!(forge(|f| f.pairs = vec![PairResult::default(); MAX_PAIRS + 1]).contains("pair"));
        assert!(forge(|f| f.starts = Some((2, 1))).contains("first start"));
        assert!(forge(|f| {
            f.placement
                .insert("client".into(), ["elsewhere".to_string()].into());
        })
        .contains("placement"));
        assert!(forge(|f| {
            f.nodes.insert(
                "n".into(),
                Some(HostFacts {
                    cpu_model: Some("\u{7}".into()),
                    interfaces: vec![],
                }),
            );
        })
        .contains("host facts"));
        assert!(forge(|f| f.version = 9).contains("version"));
    }

    #[test]
    fn an_oversized_fold_sheds_host_facts_then_histogram_then_pairs() {
        let host = HostFacts {
            cpu_model: Some("x".repeat(300)),
            interfaces: vec![],
        };
        let big = |histogram: usize, pairs: usize| {
            let mut f = sample(0);
            for i in 0..1000 {
                let name = format!("node-{i:04}-{}", "n".repeat(200));
                f.nodes.insert(name, Some(host.clone()));
            }
            f.histogram = Some("h".repeat(histogram));
            f.pairs = vec![PairResult::default(); pairs];
            f
        };
        let shed = |f: Folded| {
            let small = f.bounded(MAX_FOLDED_BYTES);
            assert!(small.size() <= MAX_FOLDED_BYTES, "{}", small.size());
            assert_eq!(small.nodes.len(), 1002, "the nodes themselves stay");
            assert!(small.nodes.values().all(Option::is_none));
            (small.histogram.is_some(), small.pairs.len())
        };
        assert_eq!(shed(big(1000, 100)), (true, 100), "host facts go first");
        assert_eq!(shed(big(400_000, 100)), (false, 100), "then the histogram");
        assert_eq!(shed(big(400_000, 8000)), (false, 0), "then the pair rows");
        let fits = sample(0).bounded(MAX_FOLDED_BYTES);
        assert_eq!(fits, sample(0), "a fold that fits is kept whole");
    }
}
