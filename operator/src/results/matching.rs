//! Which results a baseline may use: those whose environment fingerprint matches this run's
//! (crds::environment), except in the fields `baseline.ignoreEnvironment` leaves out. The
//! results passed over and the differences ignored are named, so a verdict says what it
//! compared with and what it did not.

use kube::ResourceExt;

use crds::environment::{self, EnvironmentField, Match};
use crds::{BenchmarkResult, BenchmarkResultSpec};

/// Most lines of skipped results and of ignored differences a verdict lists.
const MAX_LINES: usize = 20;
/// Longest line.
const MAX_LINE: usize = 1024;
/// Most names in the one-line note.
const MAX_NAMES: usize = 5;

/// The results chosen and what the choice passed over or overlooked.
#[derive(Debug, Default)]
pub struct Choice<'a> {
    /// The baseline's results, newest first.
    pub used: Vec<&'a BenchmarkResult>,
    /// Results of another environment, with their differences (newest first).
    pub skipped: Vec<(String, Match)>,
    /// Used results whose environment differs only in ignored fields, with those differences.
    pub ignored: Vec<(String, Match)>,
}

/// Of `candidates` (newest first), the first `n` whose environment matches `now`'s; the ones
/// passed over on the way are skipped.
pub fn choose<'a>(
    now: &BenchmarkResultSpec,
    candidates: &'a [BenchmarkResult],
    n: usize,
    ignore: &[EnvironmentField],
) -> Choice<'a> {
    let mut choice = Choice::default();
    for r in candidates {
        if choice.used.len() >= n {
            break;
        }
        let m = environment::compare(
            now.environment.as_ref(),
            r.spec.environment.as_ref(),
            ignore,
        );
        if !m.matches() {
            choice.skipped.push((r.name_any(), m));
            continue;
        }
        if !m.ignored.is_empty() || m.unrecorded {
            choice.ignored.push((r.name_any(), m));
        }
        choice.used.push(r);
    }
    choice
}

impl Choice<'_> {
    /// One line per skipped result: "web-r3: kernel 6.1.0-18-amd64 (this run: 6.1.0-21-amd64)".
    pub fn skipped_lines(&self) -> Vec<String> {
        lines(&self.skipped, |m| &m.differs)
    }

    /// One line per used result with ignored differences.
    pub fn ignored_lines(&self) -> Vec<String> {
        lines(&self.ignored, |m| &m.ignored)
    }

    /// What the choice left out or overlooked, for the verdict's one-line baseline; empty when
    /// every result considered matched exactly.
    pub fn note(&self) -> String {
        let mut parts = vec![];
        if !self.skipped.is_empty() {
            parts.push(format!(
                "skipped {} result(s) of another environment ({})",
                self.skipped.len(),
                short(&self.skipped, |m| &m.differs)
            ));
        }
        if !self.ignored.is_empty() {
            parts.push(format!(
                "ignored environment differences ({})",
                short(&self.ignored, |m| &m.ignored)
            ));
        }
        parts.join("; ")
    }
}

/// "web-r3: kernel, cpu, web-r1: no environment recorded" for the first few results.
fn short(results: &[(String, Match)], of: fn(&Match) -> &Vec<environment::Difference>) -> String {
    let mut named: Vec<String> = results
        .iter()
        .take(MAX_NAMES)
        .map(|(name, m)| {
            let fields: Vec<&str> = of(m).iter().map(|d| d.field.name()).collect();
            if m.unrecorded {
                format!("{name}: no environment recorded")
            } else {
                format!("{name}: {}", fields.join(", "))
            }
        })
        .collect();
    if results.len() > MAX_NAMES {
        named.push(format!("{} more", results.len().saturating_sub(MAX_NAMES)));
    }
    named.join("; ")
}

fn lines(
    results: &[(String, Match)],
    of: fn(&Match) -> &Vec<environment::Difference>,
) -> Vec<String> {
    results
        .iter()
        .take(MAX_LINES)
        .map(|(name, m)| {
            let line = if m.unrecorded {
                format!("{name}: no environment recorded (written before fingerprints)")
            } else {
                let ds: Vec<String> = of(m).iter().map(|d| d.describe()).collect();
                format!("{name}: {}", ds.join("; "))
            };
            // clip adds an ellipsis after `max` characters.
            crate::base::text::clip(&line, MAX_LINE.saturating_sub(1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::environment::Environment;
    use crds::Phase;

    fn result(name: &str, kernel: Option<&str>) -> BenchmarkResult {
        let spec: BenchmarkResultSpec = serde_json::from_value(serde_json::json!({
            "benchmark": {"kind": "IngressBenchmark", "namespace": "a", "name": "web"},
            "benchmarkUid": "u", "runId": name, "specHash": "h", "benchmarkSpec": "{}",
            "phase": "Succeeded"
        }))
        .unwrap();
        let mut r = BenchmarkResult::new(name, spec);
        r.spec.environment = kernel.map(|k| Environment {
            kernel: Some(k.into()),
            placement: Some(format!("client: {name}-node")),
            ..Default::default()
        });
        assert_eq!(r.spec.phase, Phase::Succeeded);
        r
    }

    fn now() -> BenchmarkResultSpec {
        let mut now = result("now", Some("6.1.0-21")).spec;
        if let Some(e) = now.environment.as_mut() {
            e.placement = Some("client: node-a".into());
        }
        now
    }

    fn names(used: &[&BenchmarkResult]) -> Vec<String> {
        used.iter().map(|r| r.name_any()).collect()
    }

    #[test]
    fn a_different_kernel_is_skipped_and_named() {
        let mut same = result("r3", Some("6.1.0-21"));
        same.spec.environment.as_mut().unwrap().placement = Some("client: node-a".into());
        let candidates = [result("r4", Some("6.1.0-18")), same];
        let c = choose(&now(), &candidates, 3, &[]);
        assert_eq!(names(&c.used), ["r3"]);
        assert_eq!(
            c.skipped_lines(),
            ["r4: kernel 6.1.0-18 (this run: 6.1.0-21); placement client: r4-node (this run: client: node-a)"]
        );
        assert!(c.ignored.is_empty());
        assert_eq!(
            c.note(),
            "skipped 1 result(s) of another environment (r4: kernel, placement)"
        );
    }

    #[test]
    fn ignored_fields_let_a_result_in_and_are_named() {
        let candidates = [
            result("r4", Some("6.1.0-18")),
            result("r3", Some("6.1.0-21")),
        ];
        let ignore = [EnvironmentField::Kernel, EnvironmentField::Placement];
        let c = choose(&now(), &candidates, 1, &ignore);
        assert_eq!(names(&c.used), ["r4"], "the newest n that match");
        assert!(c.skipped.is_empty());
        assert_eq!(
            c.ignored_lines(),
            ["r4: kernel 6.1.0-18 (this run: 6.1.0-21); placement client: r4-node (this run: client: node-a)"]
        );
        assert_eq!(
            c.note(),
            "ignored environment differences (r4: kernel, placement)"
        );
    }

    #[test]
    fn results_without_a_fingerprint_count_only_when_everything_is_ignored() {
        let candidates = [result("old", None)];
        let c = choose(&now(), &candidates, 1, &[EnvironmentField::Kernel]);
        assert!(c.used.is_empty());
        assert_eq!(
            c.skipped_lines(),
            ["old: no environment recorded (written before fingerprints)"]
        );
        assert_eq!(
            c.note(),
            "skipped 1 result(s) of another environment (old: no environment recorded)"
        );
        let c = choose(&now(), &candidates, 1, &[EnvironmentField::All]);
        assert_eq!(names(&c.used), ["old"]);
        assert_eq!(
            c.note(),
            "ignored environment differences (old: no environment recorded)"
        );
    }

    #[test]
    fn the_lists_stay_bounded() {
        let candidates: Vec<BenchmarkResult> = (0..50)
            .map(|i| result(&format!("r{i}"), Some(&"k".repeat(400))))
            .collect();
        let c = choose(&now(), &candidates, 3, &[]);
        assert_eq!(c.skipped.len(), 50);
        let lines = c.skipped_lines();
        assert_eq!(lines.len(), MAX_LINES);
        assert!(lines.iter().all(|l| l.chars().count() <= MAX_LINE));
        assert!(c.note().ends_with("; 45 more)"), "{}", c.note());
    }
}
