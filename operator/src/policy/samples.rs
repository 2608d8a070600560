//! Repeated samples of a measurement (`spec.samples`): where each sample's workers live, the
//! statistics kept in status as samples come in, and whether another sample is wanted.

use std::borrow::Cow;
use std::time::Duration;

use crds::history::{Better, Samples};
use crds::result::MeasurementStats;

/// Slots of one sample; a measurement index is always below it (the schema allows 16 steps or
/// cases, and the driver refuses more).
pub const STRIDE: u32 = 64;

/// Where the workers of one sample of one measurement live: their pods' step label, their
/// names, the registry entry and the stored reports. Sample 0 of measurement i is slot i, as
/// before samples existed; sample s is slot i + 64 s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub measurement: u32,
    pub sample: u32,
}

impl Slot {
    pub fn first(measurement: u32) -> Slot {
        Slot {
            measurement,
            sample: 0,
        }
    }

    /// The slot number on the wire (labels, names, reports).
    pub fn wire(self) -> u32 {
        self.measurement
            .saturating_add(self.sample.saturating_mul(STRIDE))
    }
}

/// One figure of one sample, as a kind computes it from the sample's reports (or as a folded
/// sample keeps it: `store::reports::folded`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Figure {
    pub name: Cow<'static, str>,
    pub unit: Cow<'static, str>,
    pub better: Better,
    pub value: f64,
}

/// Adds sample `sample`'s figures to measurement `index`'s statistics, once: a sample already
/// there (a retried reconcile) is left alone. Returns the measurement's statistics.
pub fn record<'a>(
    stats: &'a mut Vec<MeasurementStats>,
    index: u32,
    name: &str,
    sample: u32,
    figures: &[Figure],
) -> Option<&'a MeasurementStats> {
    if !stats.iter().any(|m| m.index == index) {
        stats.push(MeasurementStats {
            index,
            name: name.into(),
            metrics: vec![],
        });
        stats.sort_by_key(|m| m.index);
    }
    let m = stats.iter_mut().find(|m| m.index == index)?;
    // Only onto a consistent entry: every figure holding exactly the earlier samples (a
    // status written by someone else may not be).
    if m.metrics.iter().all(|f| f.values.len() == sample as usize) {
        for f in figures {
            match m.metrics.iter_mut().find(|s| s.name == f.name) {
                Some(s) => s.push(f.value),
                None => m.metrics.push(crds::stats::metric(
                    &f.name,
                    &f.unit,
                    f.better,
                    vec![f.value],
                )),
            }
        }
    }
    Some(m)
}

/// Whether sample `sample` of measurement `index` is in the statistics.
pub fn recorded(stats: &[MeasurementStats], index: u32, sample: u32) -> bool {
    stats
        .iter()
        .find(|m| m.index == index)
        .is_some_and(|m| m.samples() > sample)
}

/// After `taken` samples: whether to take another. Fewer than `count`: yes. Adaptive mode:
/// until the main figure's 95% interval is within the target, at most `max`.
pub fn wants_another(plan: &Samples, stats: Option<&MeasurementStats>, taken: u32) -> bool {
    if taken < plan.min() {
        return true;
    }
    let Some(target) = plan.target_ci_percent else {
        return false;
    };
    if taken >= plan.max() {
        return false;
    }
    let main = stats.and_then(|s| s.metrics.first());
    // One sample says nothing about the noise.
    main.is_none_or(|m| m.values.len() < 2 || m.ci_percent() > target)
}

/// The sample after `current` among `count` measurements, None when every measurement has all
/// it wants. In order: every sample of one measurement, then the next measurement. Interleaved:
/// in rounds, forwards in even rounds and backwards in odd ones (A B C, C B A, A B C, ...);
/// another round while any measurement wants another sample, and then every measurement takes
/// part (one that stopped early would have its samples only in the early rounds, which is what
/// interleaving is there to prevent).
pub fn next(
    plan: &Samples,
    stats: &[MeasurementStats],
    count: u32,
    current: Slot,
    interleaved: bool,
) -> Option<Slot> {
    let wants = |measurement: u32, sample: u32| {
        let s = stats.iter().find(|m| m.index == measurement);
        wants_another(plan, s, sample)
    };
    let at = |measurement, sample| Slot {
        measurement,
        sample,
    };
    if !interleaved {
        let sample = current.sample.saturating_add(1);
        if wants(current.measurement, sample) {
            return Some(at(current.measurement, sample));
        }
        let measurement = current.measurement.saturating_add(1);
        return (measurement < count).then(|| Slot::first(measurement));
    }
    let round = |r: u32| -> Vec<u32> {
        if r.is_multiple_of(2) {
            (0..count).collect()
        } else {
            (0..count).rev().collect()
        }
    };
    let this_round = round(current.sample);
    let mut rest = this_round
        .iter()
        .skip_while(|&&m| m != current.measurement)
        .skip(1);
    if let Some(&m) = rest.next() {
        return Some(at(m, current.sample));
    }
    let sample = current.sample.checked_add(1)?;
    if sample >= plan.max() || !(0..count).any(|m| wants(m, sample)) {
        return None;
    }
    round(sample).first().map(|&m| at(m, sample))
}

/// The whole run's deadline with samples: each of the `measurements` may be sampled `max`
/// times, with a pause before each of its samples after the first.
pub fn budget(once: Duration, plan: &Samples, measurements: u32) -> Duration {
    let max = plan.max();
    let pauses = max.saturating_sub(1).saturating_mul(measurements.max(1));
    let pauses = Duration::from(plan.pause).saturating_mul(pauses);
    once.saturating_mul(max).saturating_add(pauses)
}

/// How long to wait before sample `sample` starts, given the time since the previous one was
/// collected.
pub fn pause_left(plan: &Samples, sample: u32, since_collected: Duration) -> Option<Duration> {
    if sample == 0 {
        return None;
    }
    Duration::from(plan.pause)
        .checked_sub(since_collected)
        .filter(|d| !d.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rps(v: f64) -> Vec<Figure> {
        vec![Figure {
            name: "rps".into(),
            unit: "req/s".into(),
            better: Better::Higher,
            value: v,
        }]
    }

    #[test]
    fn slots_of_the_first_sample_are_the_measurement_indexes() {
        assert_eq!(Slot::first(3).wire(), 3);
        let s = Slot {
            measurement: 3,
            sample: 2,
        };
        assert_eq!(s.wire(), 131);
        let huge = Slot {
            measurement: u32::MAX,
            sample: u32::MAX,
        };
        assert_eq!(huge.wire(), u32::MAX);
    }

    #[test]
    fn a_sample_is_recorded_once() {
        let mut stats = vec![];
        record(&mut stats, 1, "step 1", 0, &rps(100.0));
        record(&mut stats, 1, "step 1", 0, &rps(100.0));
        record(&mut stats, 0, "step 0", 0, &rps(50.0));
        let m = record(&mut stats, 1, "step 1", 1, &rps(110.0)).cloned();
        assert_eq!(m.unwrap().metrics[0].values, vec![100.0, 110.0]);
        assert_eq!(stats.iter().map(|m| m.index).collect::<Vec<_>>(), [0, 1]);
        assert!(recorded(&stats, 1, 1) && !recorded(&stats, 1, 2) && !recorded(&stats, 2, 0));
    }

    #[test]
    fn an_inconsistent_entry_takes_no_more_values() {
        let mut stats = vec![];
        record(&mut stats, 0, "step 0", 0, &rps(1.0));
        // Forged: 20 values already, while the driver is at sample 0.
        stats[0].metrics[0].values = vec![5.0; 20];
        record(&mut stats, 0, "step 0", 0, &rps(2.0));
        assert_eq!(stats[0].metrics[0].values.len(), 20);
    }

    /// Every slot a run takes, from the first, recording a figure for each.
    fn order(plan: &Samples, count: u32, interleaved: bool) -> Vec<(u32, u32)> {
        let mut stats = vec![];
        let mut slot = Some(Slot::first(0));
        let mut taken = vec![];
        while let Some(s) = slot {
            assert!(taken.len() < 100, "no end: {taken:?}");
            taken.push((s.measurement, s.sample));
            record(&mut stats, s.measurement, "m", s.sample, &rps(100.0));
            slot = next(plan, &stats, count, s, interleaved);
        }
        taken
    }

    #[test]
    fn interleaved_samples_go_in_rounds_that_alternate_direction() {
        let three = Samples {
            count: 3,
            ..Default::default()
        };
        assert_eq!(
            order(&three, 3, true),
            [
                (0, 0),
                (1, 0),
                (2, 0),
                (2, 1),
                (1, 1),
                (0, 1),
                (0, 2),
                (1, 2),
                (2, 2)
            ]
        );
        assert_eq!(
            order(&three, 2, false),
            [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
        );
        let once = Samples::default();
        assert_eq!(order(&once, 3, true), [(0, 0), (1, 0), (2, 0)]);
        assert_eq!(order(&three, 1, true), [(0, 0), (0, 1), (0, 2)]);
    }

    /// 2 samples, then more until the interval is within 5 % or `max_count` are taken.
    fn adaptive(max_count: u32) -> Samples {
        Samples {
            count: 2,
            target_ci_percent: Some(5.0),
            max_count: Some(max_count),
            ..Default::default()
        }
    }

    #[test]
    fn an_interleaved_round_takes_every_measurement_while_one_wants_more() {
        // Adaptive: measurement 1's figures agree after 2 samples, measurement 0's do not.
        let adaptive = adaptive(3);
        let mut stats = vec![];
        for (m, sample, v) in [(0, 0, 100.0), (1, 0, 100.0), (1, 1, 100.1), (0, 1, 150.0)] {
            record(&mut stats, m, "m", sample, &rps(v));
        }
        let slot = |measurement, sample| Slot {
            measurement,
            sample,
        };
        assert_eq!(
            next(&adaptive, &stats, 2, slot(0, 1), true),
            Some(slot(0, 2))
        );
        record(&mut stats, 0, "m", 2, &rps(120.0));
        assert_eq!(
            next(&adaptive, &stats, 2, slot(0, 2), true),
            Some(slot(1, 2)),
            "measurement 1 takes part in round 2 too"
        );
        record(&mut stats, 1, "m", 2, &rps(100.0));
        assert_eq!(
            next(&adaptive, &stats, 2, slot(1, 2), true),
            None,
            "max reached"
        );
    }

    #[test]
    fn a_forged_position_ends_the_run_instead_of_looping() {
        let three = Samples {
            count: 3,
            ..Default::default()
        };
        let far = Slot {
            measurement: 40,
            sample: u32::MAX,
        };
        assert_eq!(next(&three, &[], 3, far, true), None);
        assert_eq!(next(&three, &[], 3, far, false), None);
    }

    #[test]
    fn fixed_and_adaptive_sample_counts() {
        let fixed = Samples {
            count: 3,
            ..Default::default()
        };
        assert!(wants_another(&fixed, None, 2));
        assert!(!wants_another(&fixed, None, 3));
        let adaptive = adaptive(4);
        let mut stats = vec![];
        record(&mut stats, 0, "step 0", 0, &rps(100.0));
        record(&mut stats, 0, "step 0", 1, &rps(150.0));
        assert!(wants_another(&adaptive, stats.first(), 2), "wide interval");
        assert!(!wants_another(&adaptive, stats.first(), 4), "max reached");
        let mut tight = vec![];
        record(&mut tight, 0, "step 0", 0, &rps(100.0));
        record(&mut tight, 0, "step 0", 1, &rps(100.5));
        assert!(
            !wants_another(&adaptive, tight.first(), 2),
            "narrow interval"
        );
    }

    #[test]
    fn the_budget_grows_with_samples_and_pauses() {
        let plan = Samples {
            count: 3,
            pause: Duration::from_secs(5).into(),
            ..Default::default()
        };
        assert_eq!(
            budget(Duration::from_secs(60), &plan, 1),
            Duration::from_secs(190)
        );
        // Each of 4 steps pauses before its 2nd and 3rd samples.
        assert_eq!(
            budget(Duration::from_secs(60), &plan, 4),
            Duration::from_secs(180 + 40)
        );
        assert_eq!(
            pause_left(&plan, 1, Duration::from_secs(2)),
            Some(Duration::from_secs(3))
        );
        assert_eq!(pause_left(&plan, 1, Duration::from_secs(9)), None);
        assert_eq!(pause_left(&plan, 0, Duration::ZERO), None);
    }
}
