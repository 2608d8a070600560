//! What the simulator sent, per benchmark step: ONE histogram into which every latency sample
//! of every worker was recorded one by one (never merged from the reports' histograms; a
//! request/response client's samples each with the count of transactions it stands for), the
//! request count, each worker's start and the barrier's. `bench/operator-scale.sh` compares
//! these with the merged percentiles and start skew the operator wrote to status.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hdrhistogram::Histogram;
use protocol::report::histogram::new_latency_histogram;
use protocol::report::LatencySummary;
use serde::{Deserialize, Serialize};

/// Which step of which run of which benchmark.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StepKey {
    pub namespace: String,
    pub benchmark: String,
    pub run: String,
    pub step: u32,
}

impl StepKey {
    /// The record's file name in the record directory.
    pub fn file_name(&self) -> String {
        format!(
            "{}.{}.{}.s{}.json",
            self.namespace, self.benchmark, self.run, self.step
        )
    }
}

/// The record of one step, as written to its file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRecord {
    pub namespace: String,
    pub benchmark: String,
    pub run: String,
    pub step: u32,
    /// Workers whose report the operator stored (HTTP 204).
    pub reports: u32,
    /// Latency of every sample sent, from the one histogram (microseconds).
    pub latency: LatencySummary,
    /// The barrier's common start and each reporting worker's actual start (Unix ms).
    pub start_at_unix_ms: Option<u64>,
    pub started_at_unix_ms: Vec<u64>,
    /// Bytes the TCP and UDP stream clients' receivers counted (egress steps).
    pub receiver_bytes: u64,
    /// The clients' main figure, summed (what a topology case's aggregate.sum is): receiver
    /// bits/s for tcp-stream and udp-stream, transactions/s for tcp-rr, tcp-crr and udp-rr.
    #[serde(default, alias = "receiverBitsPerSecond")]
    pub main_figure: f64,
    /// Paired clients (EgressBenchmark topologies) whose barrier named exactly one server: the
    /// address their own pair's server registered.
    #[serde(default)]
    pub paired: u32,
    /// Paired clients given anything else, as "worker: servers given (expected)".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub misdirected: Vec<String>,
}

impl StepRecord {
    /// Latest start minus earliest (what status.steps[].startSkewMs is).
    pub fn start_spread_ms(&self) -> Option<u64> {
        let min = self.started_at_unix_ms.iter().min()?;
        let max = self.started_at_unix_ms.iter().max()?;
        Some(max - min)
    }

    /// The latest start after the barrier's instant.
    pub fn max_lateness_ms(&self) -> Option<u64> {
        let at = self.start_at_unix_ms?;
        let max = self.started_at_unix_ms.iter().max()?;
        Some(max.saturating_sub(at))
    }
}

/// What one worker sent in its stored report.
#[derive(Clone, Debug, Default)]
pub struct Sent<'a> {
    /// Every latency sample (microseconds)...
    pub samples: &'a [u64],
    /// ...or a request/response client's: each latency with the count of transactions it
    /// stands for (see `report::RrDraw`).
    pub counted: &'a [(u64, u64)],
    /// Stream clients: bytes their receivers counted.
    pub receiver_bytes: u64,
    /// The figure of its pair row (receiver bits/s, or transactions/s for request/response).
    pub main_figure: f64,
    /// The barrier's common start and this worker's actual start (Unix ms).
    pub start_at_unix_ms: Option<u64>,
    pub started_at_unix_ms: u64,
    /// A paired client: Ok if the barrier named exactly its own server, else what it got.
    pub pairing: Option<Result<(), String>>,
}

struct Tally {
    record: StepRecord,
    samples: Histogram<u64>,
}

/// Every step's tally, written to `dir` after each stored report.
pub struct Recorder {
    dir: Option<PathBuf>,
    steps: Mutex<BTreeMap<StepKey, Tally>>,
}

impl Recorder {
    pub fn new(dir: Option<PathBuf>) -> Result<Recorder, String> {
        if let Some(d) = &dir {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        Ok(Recorder {
            dir,
            steps: Mutex::new(BTreeMap::new()),
        })
    }

    /// Adds one worker's stored report: its samples, recorded one by one (with their counts),
    /// and its start.
    pub fn add(&self, key: &StepKey, sent: &Sent<'_>) -> Result<StepRecord, String> {
        let mut steps = self
            .steps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let tally = steps.entry(key.clone()).or_insert_with(|| Tally {
            record: StepRecord {
                namespace: key.namespace.clone(),
                benchmark: key.benchmark.clone(),
                run: key.run.clone(),
                step: key.step,
                ..StepRecord::default()
            },
            samples: new_latency_histogram(),
        });
        for &v in sent.samples {
            tally
                .samples
                .record(v)
                .map_err(|e| format!("cannot record {v} us: {e:?}"))?;
        }
        for &(v, n) in sent.counted {
            tally
                .samples
                .record_n(v, n)
                .map_err(|e| format!("cannot record {n} x {v} us: {e:?}"))?;
        }
        let r = &mut tally.record;
        r.reports += 1;
        r.receiver_bytes = r.receiver_bytes.saturating_add(sent.receiver_bytes);
        r.main_figure += sent.main_figure;
        r.start_at_unix_ms = r.start_at_unix_ms.or(sent.start_at_unix_ms);
        r.started_at_unix_ms.push(sent.started_at_unix_ms);
        match &sent.pairing {
            Some(Ok(())) => r.paired += 1,
            Some(Err(why)) => r.misdirected.push(why.clone()),
            None => {}
        }
        r.latency = LatencySummary::from_histogram(&tally.samples);
        let record = r.clone();
        // Written under the lock: two reports of one step written at once would share the
        // temporary file, and the second rename would find it gone.
        if let Some(dir) = &self.dir {
            write_atomically(&dir.join(key.file_name()), &record)?;
        }
        drop(steps);
        Ok(record)
    }
}

fn write_atomically(path: &Path, record: &StepRecord) -> Result<(), String> {
    let text = serde_json::to_vec_pretty(record).map_err(|e| e.to_string())?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads every record of `namespace`/`benchmark` in `dir`.
pub fn read_records(
    dir: &Path,
    namespace: &str,
    benchmark: &str,
) -> Result<Vec<StepRecord>, String> {
    let prefix = format!("{namespace}.{benchmark}.");
    let mut out = vec![];
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| e.to_string())?;
        let name = entry.file_name().to_string_lossy().to_string();
        if !(name.starts_with(&prefix) && name.ends_with(".json")) {
            continue;
        }
        let text = std::fs::read(entry.path()).map_err(|e| format!("{name}: {e}"))?;
        let record: StepRecord =
            serde_json::from_slice(&text).map_err(|e| format!("{name}: {e}"))?;
        // A benchmark named like another's prefix ("b" and "b.x" cannot both exist: names
        // have no dots here, but check anyway).
        if record.namespace == namespace && record.benchmark == benchmark {
            out.push(record);
        }
    }
    Ok(out)
}
