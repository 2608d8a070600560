//! SLO gates (`spec.gates`) judged on merged figures, never on one worker's: a sample's as it
//! is collected (the gates with abortOnFail end the run at once), and every gate when the run
//! ends, from the statistics of all samples (each value there was made from the sample's
//! reports merged across its workers). The live abort while a sample runs is `policy::live`.

use crds::gates::{Gate, GateFigure, GateScope};
use crds::result::MeasurementStats;

use super::samples::Figure;

/// The figure an open loop gives for the share of its schedule it never sent.
pub const SCHEDULE_MISSED: &str = "scheduleMissedPercent";
/// Above this share never sent, the load asked for was not offered.
pub const MISSED_LIMIT_PERCENT: f64 = 1.0;

/// Figures that say nothing good at a load that was not offered (no loss at half the rate
/// asked is no pass): a gate on one fails when the schedule was missed, whatever the value.
fn needs_offered_load(figure: GateFigure) -> bool {
    figure == GateFigure::LossPercent
}

/// Why a gate on `gate`'s figure cannot pass when `missed` percent of the schedule went unsent.
fn not_offered(gate: &Gate, missed: Option<f64>) -> Option<String> {
    // A share that is not a number is no kept schedule.
    let missed = missed.filter(|m| m.is_nan() || *m > MISSED_LIMIT_PERCENT)?;
    needs_offered_load(gate.figure).then(|| {
        format!(
            "the senders missed {} % of their schedule (more than {MISSED_LIMIT_PERCENT} %): the load asked for was not offered",
            round(missed)
        )
    })
}

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
    /// Why the gate failed whatever its figure's value (e.g. a load that was not offered).
    pub cause: Option<String>,
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
            cause: None,
        })
    }

    fn because(self, cause: Option<String>) -> Breach {
        Breach { cause, ..self }
    }

    /// `gate "p99 under 1ms" failed: step 0: p99Ms 12.4 > max 1`.
    pub fn message(&self) -> String {
        let (op, bound) = if self.upper {
            (">", "max")
        } else {
            ("<", "min")
        };
        if let Some(cause) = &self.cause {
            return format!(
                "gate {:?} failed: {}: {} {} cannot pass: {cause}",
                self.gate,
                self.about,
                self.figure,
                round(self.value)
            );
        }
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
    let missed = figures
        .iter()
        .find(|f| f.name == SCHEDULE_MISSED)
        .map(|m| m.value);
    gates
        .iter()
        .filter(|g| g.scope == GateScope::Each && (g.abort_on_fail || !aborting))
        .filter_map(|g| {
            let f = figures.iter().find(|f| f.name == g.figure.as_str())?;
            let cause = not_offered(g, missed);
            if cause.is_some() || g.broken_by(f.value) {
                Breach::of(g, f.value, about.to_string()).map(|b| b.because(cause))
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
            let missed = m.metric(SCHEDULE_MISSED).map(|s| s.values.as_slice());
            breach = match gate.scope {
                GateScope::Each => metric
                    .values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let missed_here = missed.and_then(|all| all.get(i).copied());
                        (i, v, not_offered(gate, missed_here))
                    })
                    .find(|(_, v, cause)| cause.is_some() || gate.broken_by(**v))
                    .and_then(|(i, v, cause)| {
                        let about = if metric.values.len() > 1 {
                            format!("{} sample {}", m.name, i.saturating_add(1))
                        } else {
                            m.name.clone()
                        };
                        Breach::of(gate, *v, about).map(|b| b.because(cause))
                    }),
                GateScope::Run => {
                    let mean = mean(&metric.values);
                    let cause = not_offered(gate, missed.filter(|v| !v.is_empty()).map(self::mean));
                    if cause.is_some() || gate.broken_by(mean) {
                        let about =
                            format!("{} (mean of {} sample(s))", m.name, metric.values.len());
                        Breach::of(gate, mean, about).map(|b| b.because(cause))
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
        let mut ingress: Vec<String> = crate::ingress::result::figures(&Default::default())
            .into_iter()
            .map(|f| f.name.to_string())
            .collect();
        ingress.extend(crate::ingress::churn::all_figure_names().map(String::from));
        ingress.extend(
            [
                crate::ingress::scale::terms::ANSWERED,
                crate::ingress::scale::terms::ALL_ANSWERED_MS,
            ]
            .map(String::from),
        );
        let mut listed: Vec<String> = INGRESS_FIGURES.iter().map(|f| f.to_string()).collect();
        listed.sort();
        ingress.sort();
        assert_eq!(ingress, listed);
        let egress = crate::egress::result::figures(&Default::default());
        let egress = egress.iter().map(|f| f.name.to_string());
        for f in ingress.iter().cloned().chain(egress) {
            assert!(
                GateFigure::ALL.iter().any(|g| g.as_str() == f),
                "{f} has no gate figure"
            );
        }
    }

    #[test]
    fn a_loss_gate_fails_with_the_cause_when_the_load_was_not_offered() {
        let loss = gate("{figure: lossPercent, max: 1, abortOnFail: true, name: loss}");
        let jitter = gate("{figure: jitterMs, max: 5}");
        // 0 % loss, but half the schedule never went out: no pass.
        let starved = [
            fig("lossPercent", 0.0),
            fig("jitterMs", 0.1),
            fig(SCHEDULE_MISSED, 48.25),
        ];
        let b = sample_breaches(&[loss.clone(), jitter.clone()], &starved, "case udp", true);
        assert_eq!(b.len(), 1);
        assert_eq!(
            b[0].message(),
            "gate \"loss\" failed: case udp: lossPercent 0 cannot pass: the senders missed 48.25 % of their schedule (more than 1 %): the load asked for was not offered"
        );
        // At or under 1 % missed, the figure is judged as usual.
        let kept = [fig("lossPercent", 0.0), fig(SCHEDULE_MISSED, 1.0)];
        assert!(sample_breaches(std::slice::from_ref(&loss), &kept, "case udp", false).is_empty());
        // A NaN share is not a kept schedule.
        let nan = [fig("lossPercent", 0.0), fig(SCHEDULE_MISSED, f64::NAN)];
        assert_eq!(
            sample_breaches(std::slice::from_ref(&loss), &nan, "c", false).len(),
            1
        );
        // At the end of the run: the sample that missed its schedule fails the Each gate, the
        // mean share fails the Run gate; a case without the figure (closed loop) is judged as
        // usual.
        let s = [stats(
            0,
            &[
                ("lossPercent", vec![0.0, 0.0]),
                (SCHEDULE_MISSED, vec![0.0, 30.0]),
            ],
        )];
        let v = judge_run(std::slice::from_ref(&loss), &s);
        assert_eq!(v.broken.len(), 1);
        assert!(
            v.broken[0]
                .message()
                .contains("step 0 sample 2: lossPercent 0 cannot pass"),
            "{}",
            v.broken[0].message()
        );
        let run = gate("{figure: lossPercent, max: 1, scope: Run}");
        let v = judge_run(std::slice::from_ref(&run), &s);
        assert!(
            v.broken[0].message().contains("missed 15 %"),
            "{}",
            v.broken[0].message()
        );
        let closed = [stats(0, &[("lossPercent", vec![0.5])])];
        assert_eq!(judge_run(&[loss, run], &closed).judged, 2);
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
