//! What `netbench watch` shows for a benchmark's status: a pure function from the object to
//! the progress bar's length and position and the lines under it. Status is written by the
//! operator but readable (and writable) by others: every number is bounded and every text
//! cleaned before it reaches the terminal.

use crds::{EgressBenchmark, IngressBenchmark, Phase, QueueStatus, RunStatus};
use kube::ResourceExt;

use crate::kube_client::BenchKind;
use crate::text;

/// A benchmark's progress, whichever its kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub title: String,
    pub phase: Option<Phase>,
    /// The status describes an older generation of the spec (the operator has not picked up
    /// the change yet).
    pub stale: bool,
    pub message: Option<String>,
    /// Steps or cases the spec asks for.
    pub measurements: u32,
    /// "step" or "case".
    pub unit: &'static str,
    /// Samples of each (the spec's minimum).
    pub samples: u32,
    pub current: Option<u32>,
    pub current_sample: Option<u32>,
    /// Steps or cases finished.
    pub done: u32,
    pub workers: Option<String>,
    pub figures: Option<String>,
    pub queue: Option<QueueStatus>,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
}

/// What to draw.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    pub length: u64,
    pub position: u64,
    pub lines: Vec<String>,
    pub outcome: Option<Outcome>,
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn common(
    kind: BenchKind,
    obj: &impl ResourceExt,
    run: &RunStatus,
    samples: Option<&crds::history::Samples>,
) -> Snapshot {
    let stale = matches!((run.observed_generation, obj.meta().generation), (Some(seen), Some(g)) if seen < g);
    Snapshot {
        title: format!(
            "{} {}/{}",
            kind.kind_name(),
            obj.namespace().unwrap_or_default(),
            obj.name_any()
        ),
        phase: run.phase,
        stale,
        message: run.message.clone(),
        samples: samples.map_or(1, |s| s.min()),
        current_sample: run.current_sample,
        queue: run.queue.clone(),
        ..Default::default()
    }
}

/// The progress of an IngressBenchmark.
pub fn from_ingress(ib: &IngressBenchmark) -> Snapshot {
    let status = ib.status.clone().unwrap_or_default();
    let mut s = common(
        BenchKind::Ingress,
        ib,
        &status.run,
        ib.spec.repetition.samples.as_ref(),
    );
    s.unit = "step";
    s.measurements = ib
        .spec
        .sweep
        .as_ref()
        .map_or(1, |w| count(w.steps.len()))
        .max(1);
    s.current = status.current_step;
    s.done = count(status.steps.len());
    s.workers = status.workers.clone();
    let rps = status
        .rps_interval
        .clone()
        .or_else(|| status.rps.map(|r| text::num(r, 0)));
    s.figures = match (rps, status.p99) {
        (Some(r), Some(p)) => Some(format!("last step: {r} req/s, p99 {p}")),
        (Some(r), None) => Some(format!("last step: {r} req/s")),
        (None, Some(p)) => Some(format!("last step: p99 {p}")),
        (None, None) => None,
    };
    s
}

/// The progress of an EgressBenchmark.
pub fn from_egress(eb: &EgressBenchmark) -> Snapshot {
    let status = eb.status.clone().unwrap_or_default();
    let mut s = common(
        BenchKind::Egress,
        eb,
        &status.run,
        eb.spec.repetition.samples.as_ref(),
    );
    s.unit = "case";
    s.measurements = count(eb.spec.cases.len()).max(1);
    s.current = status.current_case;
    s.done = count(status.cases.len());
    s.figures = match (status.best, status.overhead) {
        (Some(b), Some(o)) => Some(format!("best: {b}, largest overhead {o}")),
        (Some(b), None) => Some(format!("best: {b}")),
        (None, _) => None,
    };
    s
}

/// The bar and lines of a snapshot.
pub fn render(s: &Snapshot) -> View {
    let samples = u64::from(s.samples.max(1));
    let length = u64::from(s.measurements.max(1)).saturating_mul(samples);
    let phase = if s.stale { None } else { s.phase };
    let outcome = match phase {
        Some(Phase::Succeeded) => Some(Outcome::Succeeded),
        Some(Phase::Failed) => Some(Outcome::Failed),
        _ => None,
    };
    let index = s
        .current
        .unwrap_or(s.done)
        .min(s.measurements.max(1).saturating_sub(1));
    let sample = u64::from(s.current_sample.unwrap_or(0)).min(samples.saturating_sub(1));
    let position = match phase {
        Some(Phase::Succeeded) => length,
        Some(Phase::Running | Phase::Collecting) => u64::from(index)
            .saturating_mul(samples)
            .saturating_add(sample),
        Some(Phase::Preparing) => u64::from(index).saturating_mul(samples),
        _ => u64::from(s.done).saturating_mul(samples),
    }
    .min(length);
    View {
        length,
        position,
        lines: lines(s, phase, index),
        outcome,
    }
}

fn lines(s: &Snapshot, phase: Option<Phase>, index: u32) -> Vec<String> {
    let phase_name = match (phase, s.stale) {
        (_, true) => "waiting for the operator to pick up the new spec".to_string(),
        (None, false) => "Pending".to_string(),
        (Some(p), false) => format!("{p:?}"),
    };
    let mut head = format!("{}: {phase_name}", text::label(&s.title));
    if matches!(
        phase,
        Some(Phase::Preparing | Phase::Running | Phase::Collecting)
    ) {
        head.push_str(&format!(
            ", {} {}/{}",
            s.unit,
            index.saturating_add(1),
            s.measurements.max(1)
        ));
        if s.samples > 1 {
            let sample = s.current_sample.unwrap_or(0).saturating_add(1);
            head.push_str(&format!(", sample {sample}/{}", s.samples));
        }
    }
    let mut out = vec![head];
    if let Some(w) = &s.workers {
        out.push(format!("workers reporting: {}", text::label(w)));
    }
    if let (Some(q), Some(Phase::Queued)) = (&s.queue, phase) {
        out.push(format!(
            "queued: position {}, waits for {}",
            q.position,
            text::label(&q.waits_for)
        ));
    }
    if let Some(f) = &s.figures {
        out.push(text::clean(f, 120));
    }
    if let Some(m) = &s.message {
        out.push(text::clean(m, text::MAX_SHOWN_CHARS));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ib(status: &str) -> IngressBenchmark {
        let yaml = format!(
            r#"
apiVersion: netbench.io/v1alpha1
kind: IngressBenchmark
metadata: {{name: web, namespace: team-a, generation: 2}}
spec:
  target: {{url: "http://ingress.example/"}}
  samples: {{count: 3}}
  sweep:
    targetRef: {{name: ingress-nginx-controller}}
    steps: [{{cpu: "1"}}, {{cpu: "2"}}, {{cpu: "4"}}, {{cpu: "8"}}]
status:
{status}"#
        );
        serde_yaml::from_str(&yaml).unwrap()
    }

    fn eb(status: &str) -> EgressBenchmark {
        let yaml = format!(
            r#"
apiVersion: netbench.io/v1alpha1
kind: EgressBenchmark
metadata: {{name: vx, namespace: team-a}}
spec:
  cases:
  - {{name: node-to-node, client: {{}}, server: {{}}}}
  - {{name: vxlan, client: {{}}, server: {{}}}}
status:
{status}"#
        );
        serde_yaml::from_str(&yaml).unwrap()
    }

    #[test]
    fn a_running_sweep_counts_steps_times_samples() {
        let v = render(&from_ingress(&ib(
            "  phase: Running\n  observedGeneration: 2\n  currentStep: 2\n  currentSample: 1\n  workers: 2/3\n  rpsInterval: 5709 ± 94\n  p99: 24.1ms\n  steps: [{index: 0, rps: 3209, requests: 1, bytesPerSecond: 0, latencyMs: {p50: 1, p90: 1, p99: 1, p999: 1, max: 1, mean: 1}, errors: {connect: 0, timeout: 0, read: 0, write: 0, status4xx: 0, status5xx: 0, parse: 0}}]",
        )));
        assert_eq!((v.position, v.length), (7, 12));
        assert_eq!(v.outcome, None);
        assert_eq!(
            v.lines,
            vec![
                "IngressBenchmark team-a/web: Running, step 3/4, sample 2/3",
                "workers reporting: 2/3",
                "last step: 5709 ± 94 req/s, p99 24.1ms",
            ]
        );
    }

    #[test]
    fn finished_runs_end_the_watch() {
        let ok = render(&from_ingress(&ib(
            "  phase: Succeeded\n  observedGeneration: 2\n  message: done",
        )));
        assert_eq!(ok.outcome, Some(Outcome::Succeeded));
        assert_eq!(ok.position, ok.length);
        assert_eq!(ok.lines.last().map(String::as_str), Some("done"));
        let failed = render(&from_egress(&eb(
            "  phase: Failed\n  message: \"worker lost\\non node n1\"",
        )));
        assert_eq!(failed.outcome, Some(Outcome::Failed));
        assert_eq!(
            failed.lines.last().map(String::as_str),
            Some("worker lost on node n1")
        );
    }

    #[test]
    fn a_status_of_an_older_spec_does_not_end_the_watch() {
        let v = render(&from_ingress(&ib(
            "  phase: Succeeded\n  observedGeneration: 1",
        )));
        assert_eq!(v.outcome, None);
        assert_eq!(v.position, 0);
        assert!(
            v.lines[0].contains("waiting for the operator"),
            "{:?}",
            v.lines
        );
    }

    #[test]
    fn egress_shows_cases_and_the_best_figure() {
        let v = render(&from_egress(&eb(
            "  phase: Running\n  currentCase: 1\n  best: 9.41 Gbit/s\n  overhead: 5.4%",
        )));
        assert_eq!((v.position, v.length), (1, 2));
        assert_eq!(v.lines[0], "EgressBenchmark team-a/vx: Running, case 2/2");
        assert_eq!(v.lines[1], "best: 9.41 Gbit/s, largest overhead 5.4%");
        let queued = render(&from_egress(&eb(
            "  phase: Queued\n  queue: {position: 2, waitsFor: node n1}",
        )));
        assert_eq!(queued.position, 0);
        assert_eq!(queued.lines[1], "queued: position 2, waits for node n1");
    }

    #[test]
    fn forged_numbers_stay_in_bounds() {
        let v = render(&from_ingress(&ib(&format!(
            "  phase: Running\n  currentStep: {}\n  currentSample: {}\n  workers: \"\\u001b[2J<x>\"",
            u32::MAX,
            u32::MAX
        ))));
        assert!(v.position <= v.length, "{v:?}");
        assert_eq!(v.position, 11);
        assert_eq!(v.lines[1], "workers reporting: [2J<x>");
        let empty = render(&Snapshot::default());
        assert_eq!((empty.position, empty.length), (0, 1));
    }
}
