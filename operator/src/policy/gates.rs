//! SLO gates (`spec.gates`) judged on merged figures, never on one worker's: a sample's as it
//! is collected (the gates with abortOnFail end the run at once), and every gate when the run
//! ends, from the statistics of all samples (each value there was made from the sample's
//! reports merged across its workers). The live abort while a sample runs is `policy::live`.

use crds::gates::{Gate, GateScope};
use crds::result::MeasurementStats;

use super::samples::Figure;

/// One gate broken by one figure of one measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct Breach {
    pub gate: String,
    pub figure: &'static str,
    /// The limit, and whether it is an upper one (max).
    pub limit: f64,
    pub upper: bool,
    pub value: f64,
    /// "step 0", "case vxlan", with the sample or "mean of 3 samples" when it matters.
    pub about: String,
}

impl Breach {
    pub fn of(gate: &Gate, value: f64, about: String) -> Option<Breach> {
        let (limit, upper) = gate.limit()?;
        Some(Breach {
            gate: gate.display_name(),
            figure: gate.figure.as_str(),
            limit,
            upper,
            value,
            about,
        })
    }

    /// `gate "p99 under 1ms" failed: step 0: p99Ms 12.4 > max 1`.
    pub fn message(&self) -> String {
        let (op, bound) = if self.upper {
            (">", "max")
        } else {
            ("<", "min")
        };
        format!(
            "gate {:?} failed: {}: {} {} {op} {bound} {}",
            self.gate,
            self.about,
            self.figure,
            round(self.value),
            self.limit
        )
    }
}

/// Four significant decimals are plenty in a message.
fn round(v: f64) -> f64 {
    if v.is_finite() {
        (v * 10_000.0).round() / 10_000.0
    } else {
        v
    }
}

/// The gates with scope Each that one sample's figures break; only those with abortOnFail when
/// `aborting` (the others wait for the end of the run). A gate whose figure the sample lacks
/// is not judged here.
pub fn sample_breaches(
    gates: &[Gate],
    figures: &[Figure],
    about: &str,
    aborting: bool,
) -> Vec<Breach> {
    gates
        .iter()
        .filter(|g| g.scope == GateScope::Each && (g.abort_on_fail || !aborting))
        .filter_map(|g| {
            let f = figures.iter().find(|f| f.name == g.figure.as_str())?;
            if g.broken_by(f.value) {
                Breach::of(g, f.value, about.to_string())
            } else {
                None
            }
        })
        .collect()
}

/// The gates over a whole run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdict {
    /// The first breach of each broken gate.
    pub broken: Vec<Breach>,
    /// Gates no measurement of the run had a figure for.
    pub unjudged: Vec<String>,
    pub judged: usize,
}

impl Verdict {
    /// The GatesPassed condition: (status, reason, message).
    pub fn condition(&self) -> (bool, &'static str, String) {
        if let Some(first) = self.broken.first() {
            let more = self.broken.len().saturating_sub(1);
            let tail = if more > 0 {
                format!(" (and {more} more gate(s))")
            } else {
                String::new()
            };
            return (false, "GateFailed", format!("{}{tail}", first.message()));
        }
        if !self.unjudged.is_empty() {
            return (
                false,
                "GateNotJudged",
                format!(
                    "no step or case produced the figure of gate(s) {}",
                    self.unjudged.join(", ")
                ),
            );
        }
        (true, "Passed", format!("{} gate(s) held", self.judged))
    }
}

/// Every gate over the run's statistics: scope Each against every sample's value, scope Run
/// against each measurement's mean over its samples (computed here from the values). Values
/// that are not numbers break the gate (nothing written by the driver is one).
pub fn judge_run(gates: &[Gate], stats: &[MeasurementStats]) -> Verdict {
    let mut verdict = Verdict::default();
    for gate in gates {
        let mut judged = false;
        let mut breach = None;
        for m in stats {
            let Some(metric) = m.metric(gate.figure.as_str()) else {
                continue;
            };
            if metric.values.is_empty() {
                continue;
            }
            judged = true;
            if breach.is_some() {
                continue;
            }
            breach = match gate.scope {
                GateScope::Each => metric
                    .values
                    .iter()
                    .enumerate()
                    .find(|(_, v)| gate.broken_by(**v))
                    .and_then(|(i, v)| {
                        let about = if metric.values.len() > 1 {
                            format!("{} sample {}", m.name, i.saturating_add(1))
                        } else {
                            m.name.clone()
                        };
                        Breach::of(gate, *v, about)
                    }),
                GateScope::Run => {
                    let mean = mean(&metric.values);
                    if gate.broken_by(mean) {
                        let about =
                            format!("{} (mean of {} sample(s))", m.name, metric.values.len());
                        Breach::of(gate, mean, about)
                    } else {
                        None
                    }
                }
            };
        }
        match (judged, breach) {
            (_, Some(b)) => verdict.broken.push(b),
            (true, None) => verdict.judged = verdict.judged.saturating_add(1),
            (false, None) => verdict.unjudged.push(gate.display_name()),
        }
    }
    verdict
}

fn mean(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    values.iter().sum::<f64>() / n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::history::Better;

    fn gate(yaml: &str) -> Gate {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn fig(name: &'static str, value: f64) -> Figure {
        Figure {
            name: name.into(),
            unit: "".into(),
            better: Better::Lower,
            value,
        }
    }

    fn stats(index: u32, figures: &[(&str, Vec<f64>)]) -> MeasurementStats {
        MeasurementStats {
            index,
            name: format!("step {index}"),
            metrics: figures
                .iter()
                .map(|(n, v)| crds::stats::metric(n, "", Better::Lower, v.clone()))
                .collect(),
        }
    }

    #[test]
    fn a_sample_breaks_the_gates_its_figures_break() {
        let gates = [
            gate("{figure: p99Ms, max: 1, abortOnFail: true, name: fast}"),
            gate("{figure: rps, min: 1000}"),
            gate("{figure: errorRate, max: 0.01, abortOnFail: true}"),
            gate("{figure: jitterMs, max: 1, abortOnFail: true}"),
        ];
        let figures = [fig("rps", 500.0), fig("p99Ms", 12.5), fig("errorRate", 0.0)];
        let all = sample_breaches(&gates, &figures, "step 0", false);
        assert_eq!(
            all.iter().map(|b| b.gate.as_str()).collect::<Vec<_>>(),
            ["fast", "rps >= 1000"]
        );
        let aborting = sample_breaches(&gates, &figures, "step 0", true);
        assert_eq!(aborting.len(), 1);
        assert_eq!(
            aborting[0].message(),
            "gate \"fast\" failed: step 0: p99Ms 12.5 > max 1"
        );
    }

    #[test]
    fn the_run_fails_on_any_sample_for_each_and_on_the_mean_for_run() {
        let each = gate("{figure: rps, min: 1000}");
        let run = gate("{figure: rps, min: 1000, scope: Run}");
        let s = [
            stats(0, &[("rps", vec![1200.0, 900.0, 1200.0])]),
            stats(1, &[("rps", vec![2000.0])]),
        ];
        let v = judge_run(&[each.clone(), run.clone()], &s);
        assert_eq!(v.broken.len(), 1);
        assert_eq!(
            v.broken[0].message(),
            "gate \"rps >= 1000\" failed: step 0 sample 2: rps 900 < min 1000"
        );
        assert_eq!(v.judged, 1);
        let (ok, reason, _) = v.condition();
        assert!(!ok && reason == "GateFailed");
        let low = [stats(0, &[("rps", vec![800.0, 900.0])])];
        let v = judge_run(&[run], &low);
        assert_eq!(
            v.broken[0].message(),
            "gate \"rps >= 1000\" failed: step 0 (mean of 2 sample(s)): rps 850 < min 1000"
        );
    }

    #[test]
    fn gates_without_a_figure_are_not_judged_and_say_so() {
        let v = judge_run(
            &[
                gate("{figure: jitterMs, max: 2}"),
                gate("{figure: p99Ms, max: 5}"),
            ],
            &[stats(0, &[("p99Ms", vec![4.0])])],
        );
        assert!(v.broken.is_empty());
        assert_eq!(v.unjudged, ["jitterMs <= 2"]);
        let (ok, reason, m) = v.condition();
        assert!(!ok && reason == "GateNotJudged", "{m}");
        let v = judge_run(
            &[gate("{figure: p99Ms, max: 5}")],
            &[stats(0, &[("p99Ms", vec![4.0])])],
        );
        assert_eq!(v.condition(), (true, "Passed", "1 gate(s) held".into()));
        assert!(judge_run(&[], &[]).condition().0);
    }

    #[test]
    fn every_figure_a_kind_makes_can_be_gated() {
        use crds::gates::{GateFigure, INGRESS_FIGURES};
        let ingress = crate::ingress::result::figures(&Default::default());
        assert_eq!(ingress.len(), INGRESS_FIGURES.len());
        let egress = crate::egress::result::figures(&Default::default());
        for f in ingress.iter().chain(&egress) {
            assert!(
                GateFigure::ALL.iter().any(|g| g.as_str() == f.name),
                "{} has no gate figure",
                f.name
            );
        }
        assert!(ingress
            .iter()
            .all(|f| INGRESS_FIGURES.contains(&f.name.as_ref())));
    }

    #[test]
    fn values_that_are_not_numbers_break_the_gate() {
        let v = judge_run(
            &[gate("{figure: p99Ms, max: 5}")],
            &[stats(0, &[("p99Ms", vec![f64::NAN])])],
        );
        assert_eq!(v.broken.len(), 1);
    }
}
