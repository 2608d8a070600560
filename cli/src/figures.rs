//! The figures a result holds, arranged as the reports show them: an ingress sweep's steps with
//! speed-up and efficiency against linear scaling, an egress run's cases with the overhead of
//! their headline figure (by protocol, see crate::egress) against the baseline case's. Pure
//! functions over one result; nothing here trusts the numbers (means may be 0 or not finite,
//! parameters may not parse).

use crds::history::{Better, MetricTolerance};
use crds::result::{BenchmarkResultSpec, Measurement, MetricStats};

use crate::egress;

/// Figures the operator writes (see crds::history::MetricTolerance).
pub const RPS: &str = "rps";
pub const P50: &str = "p50Ms";
pub const P99: &str = "p99Ms";
pub const ERROR_RATE: &str = "errorRate";
pub const RECEIVER: &str = "receiverBitsPerSecond";
pub const SENDER: &str = "senderBitsPerSecond";
pub const RETRANSMITS: &str = "retransmits";
pub const TPS: &str = "transactionsPerSecond";
pub const LOSS: &str = "lossPercent";

/// Bits per second in one Gbit/s.
pub const GBIT: f64 = 1e9;

/// Which kind of benchmark a result is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Ingress,
    Egress,
}

/// The result's kind: as it names its benchmark, else by the figures it holds.
pub fn kind(spec: &BenchmarkResultSpec) -> Option<Kind> {
    match spec.benchmark.kind.as_str() {
        "IngressBenchmark" => return Some(Kind::Ingress),
        "EgressBenchmark" => return Some(Kind::Egress),
        _ => {}
    }
    let has = |name: &str| {
        spec.measurements
            .iter()
            .any(|m| m.metrics.iter().any(|f| f.name == name))
    };
    if has(RPS) {
        Some(Kind::Ingress)
    } else if has(RECEIVER) || has(TPS) {
        Some(Kind::Egress)
    } else {
        None
    }
}

/// The main figure of a result: its name, the factor to the unit shown, the unit, decimals.
/// Requests/s for ingress; receiver Gbit/s for egress, or transactions/s when no case
/// streams (request/response cases only).
pub fn main_metric(spec: &BenchmarkResultSpec) -> Option<(&'static str, f64, &'static str, usize)> {
    let has = |name: &str| spec.measurements.iter().any(|m| metric(m, name).is_some());
    match kind(spec)? {
        Kind::Ingress => Some((RPS, 1.0, "req/s", 2)),
        Kind::Egress if !has(RECEIVER) && has(TPS) => Some((TPS, 1.0, "transactions/s", 2)),
        Kind::Egress => Some((RECEIVER, 1.0 / GBIT, "Gbit/s", 2)),
    }
}

/// One figure of a measurement, by name.
pub fn metric<'a>(m: &'a Measurement, name: &str) -> Option<&'a MetricStats> {
    m.metrics.iter().find(|f| f.name == name)
}

/// A result's measurements in index order.
pub fn sorted(spec: &BenchmarkResultSpec) -> Vec<&Measurement> {
    let mut v: Vec<&Measurement> = spec.measurements.iter().collect();
    v.sort_by_key(|m| m.index);
    v
}

/// The ratio of two means, when it means something (both finite, the divisor above 0).
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    let r = a / b;
    (a.is_finite() && b.is_finite() && b > 0.0 && r.is_finite()).then_some(r)
}

/// One step of an ingress run.
#[derive(Clone, Debug)]
pub struct Step<'a> {
    pub m: &'a Measurement,
    pub cpu: Option<&'a str>,
    pub replicas: Option<&'a str>,
    /// This step's size over the first step's (CPU x replicas, or replicas).
    pub size_factor: Option<f64>,
    pub rps: Option<&'a MetricStats>,
    /// Its RPS over the first step's.
    pub speedup: Option<f64>,
    /// speedup / size_factor: 1 is perfectly linear.
    pub efficiency: Option<f64>,
}

impl Step<'_> {
    /// "8 CPUs", "500m CPU", "2 CPUs x 3 replicas", "3 replicas", or the step's name.
    pub fn describe(&self) -> String {
        size_label(self.cpu, self.replicas).unwrap_or_else(|| self.m.name.clone())
    }
}

/// A sweep step's size from a measurement's parameters: "8 CPUs", "500m CPU",
/// "2 CPUs x 3 replicas", "3 replicas"; None when the sweep set neither.
pub fn size_label(cpu: Option<&str>, replicas: Option<&str>) -> Option<String> {
    let cpus = |c: &str| match c.trim() {
        "1" => "1 CPU".to_string(),
        c if c.ends_with('m') => format!("{c} CPU"),
        c => format!("{c} CPUs"),
    };
    match (cpu, replicas) {
        (Some(c), Some(r)) => Some(format!("{} x {r} replicas", cpus(c))),
        (Some(c), None) => Some(cpus(c)),
        (None, Some(r)) => Some(format!("{r} replicas")),
        (None, None) => None,
    }
}

/// CPU quantity in millicores ("500m" -> 500, "2" -> 2000, "1.5" -> 1500).
pub fn millicores(q: &str) -> Option<f64> {
    let q = q.trim();
    let v = match q.strip_suffix('m') {
        Some(m) => m.parse::<f64>().ok()?,
        None => q.parse::<f64>().ok()? * 1000.0,
    };
    (v.is_finite() && v > 0.0).then_some(v)
}

fn size(m: &Measurement) -> Option<f64> {
    let replicas = m
        .parameters
        .get("replicas")
        .and_then(|r| r.trim().parse::<f64>().ok());
    let replicas = replicas.filter(|r| r.is_finite() && *r > 0.0);
    match (m.parameters.get("cpu").map(String::as_str), replicas) {
        (Some(cpu), r) => millicores(cpu).map(|c| c * r.unwrap_or(1.0)),
        (None, r) => r,
    }
}

fn controller(m: &Measurement) -> Option<&str> {
    m.parameters.get("controller").map(String::as_str)
}

/// The steps of an ingress result, with speed-up and efficiency against the first step (of
/// the same controller, when controllers are compared: one controller is never a size of
/// another). The size factor comes from the steps' parameters, else from the result's
/// scaling table.
pub fn steps(spec: &BenchmarkResultSpec) -> Vec<Step<'_>> {
    let ms = sorted(spec);
    let first_of = |m: &Measurement| ms.iter().copied().find(|f| controller(f) == controller(m));
    let scaling_factor = |index: u32| {
        spec.scaling.as_ref().and_then(|s| {
            s.rows
                .iter()
                .find(|r| r.index == index)
                .map(|r| r.size_factor)
                .filter(|f| f.is_finite() && *f > 0.0)
        })
    };
    ms.iter()
        .copied()
        .map(|m| {
            let first = first_of(m);
            let base_size = first.and_then(size);
            let base_rps = first.and_then(|m| metric(m, RPS)).map(|f| f.mean);
            let rps = metric(m, RPS);
            let size_factor = match (size(m), base_size) {
                (Some(s), Some(b)) => ratio(s, b),
                _ => scaling_factor(m.index),
            };
            let speedup = rps.zip(base_rps).and_then(|(r, b)| ratio(r.mean, b));
            let efficiency = speedup.zip(size_factor).and_then(|(s, f)| ratio(s, f));
            Step {
                m,
                cpu: m.parameters.get("cpu").map(String::as_str),
                replicas: m.parameters.get("replicas").map(String::as_str),
                size_factor,
                rps,
                speedup,
                efficiency,
            }
        })
        .collect()
}

/// "8 CPUs: 6.45x of 1 CPU, 81% of linear", for a sweep of two steps or more.
/// With controllers swept, a line per controller ("traefik: 2 CPUs: ..."); None for
/// controllers measured once each.
pub fn conclusion(steps: &[Step<'_>]) -> Option<String> {
    let mut names: Vec<Option<&str>> = vec![];
    for s in steps {
        if !names.contains(&controller(s.m)) {
            names.push(controller(s.m));
        }
    }
    let lines: Vec<String> = names
        .into_iter()
        .filter_map(|name| {
            let own: Vec<&Step<'_>> = steps.iter().filter(|s| controller(s.m) == name).collect();
            let (first, last) = (own.first()?, own.last()?);
            if own.len() < 2 {
                return None;
            }
            let (speedup, efficiency) = (last.speedup?, last.efficiency?);
            let line = format!(
                "{}: {speedup:.2}x of {}, {:.0}% of linear",
                last.describe(),
                first.describe(),
                efficiency * 100.0
            );
            Some(match name {
                Some(n) => format!("{n}: {line}"),
                None => line,
            })
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("; "))
}

/// One case of an egress result (one measurement: a swept case has one per value).
#[derive(Clone, Debug)]
pub struct Case<'a> {
    pub m: &'a Measurement,
    pub protocol: &'a str,
    pub profile: Option<&'a str>,
    /// Its protocol's headline figure (receiver bits/s, transactions/s), when it has it.
    pub main: Option<&'a MetricStats>,
    /// How much worse its headline figure is than the baseline's, percent (negative: better).
    pub overhead: Option<f64>,
    /// The case the others are compared with.
    pub is_baseline: bool,
    /// The difference from the baseline is beyond the noise (the 95% intervals do not overlap).
    pub beyond_noise: Option<bool>,
    /// Why it has no overhead although the baseline has its figure: another node pair or path
    /// ("not comparable: nb-node1->nb-node1 vs nb-node2->nb-node0").
    pub not_comparable: Option<String>,
}

impl Case<'_> {
    pub fn param(&self, key: &str) -> Option<&str> {
        self.m.parameters.get(key).map(String::as_str)
    }
}

/// The baseline case the spec that ran names (`baselineCase`), if any.
pub fn baseline_case(spec: &BenchmarkResultSpec) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(&spec.benchmark_spec).ok()?;
    v.get("baselineCase")?.as_str().map(str::to_string)
}

/// The measurements of the baseline case: those the spec's `baselineCase` names (by name or
/// declared case), else the first measurement's case.
fn baseline_members<'a>(ms: &[&'a Measurement], named: Option<&str>) -> Vec<&'a Measurement> {
    fn declared(m: &Measurement) -> Option<&str> {
        m.parameters.get(egress::CASE).map(String::as_str)
    }
    let of_case = |case: &str| -> Vec<&'a Measurement> {
        ms.iter()
            .copied()
            .filter(|m| m.name == case || declared(m) == Some(case))
            .collect()
    };
    match named.map(of_case).filter(|b| !b.is_empty()) {
        Some(b) => b,
        None => match ms.first() {
            Some(first) => declared(first).map_or_else(|| vec![*first], of_case),
            None => vec![],
        },
    }
}

/// A case's baseline: the baseline case's measurement of the same protocol with the same
/// message size and streams (like is compared with like only).
fn baseline_of<'a>(base: &[&'a Measurement], m: &Measurement) -> Option<&'a Measurement> {
    fn like(x: &Measurement) -> (&str, [Option<&str>; 2]) {
        let swept =
            [egress::MESSAGE_SIZE, egress::STREAMS].map(|k| x.parameters.get(k).map(|v| v.trim()));
        (egress::protocol(x), swept)
    }
    base.iter().copied().find(|b| like(b) == like(m))
}

/// The cases of an egress result, with the overhead of each one's headline figure against the
/// baseline case's (the spec's `baselineCase`, else the first case) where they ran the same
/// protocol, message size and streams.
pub fn cases(spec: &BenchmarkResultSpec) -> Vec<Case<'_>> {
    let ms = sorted(spec);
    let base = baseline_members(&ms, baseline_case(spec).as_deref());
    ms.iter()
        .map(|&m| {
            let protocol = egress::protocol(m);
            let main = egress::main_figures(protocol)
                .first()
                .and_then(|name| metric(m, name));
            let then = baseline_of(&base, m);
            let is_baseline = then.is_some_and(|b| std::ptr::eq(b, m));
            let against = main
                .zip(then.and_then(|b| main.and_then(|f| metric(b, &f.name))))
                .filter(|_| !is_baseline);
            // Only the same node pair and path is set side by side.
            let apart = against.and(then).and_then(|b| egress::not_comparable(m, b));
            let against = against.filter(|_| apart.is_none());
            let verdict = against.map(|(now, then)| {
                let t = MetricTolerance {
                    name: now.name.clone(),
                    tolerance_percent: 0.0,
                    better: None,
                };
                crds::stats::judge(&m.name, now, then, &t)
            });
            Case {
                m,
                protocol,
                profile: m.parameters.get("offloadProfile").map(String::as_str),
                main,
                overhead: verdict.as_ref().map(|v| match v.better {
                    Better::Higher => -v.delta_percent,
                    Better::Lower => v.delta_percent,
                }),
                is_baseline,
                beyond_noise: verdict.map(|v| v.beyond_noise),
                not_comparable: apart,
            }
        })
        .collect()
}

/// The headline of a result: the last step's RPS, or the best case's [`main_metric`], as
/// (measurement name, mean, ci, unit) in the unit of [`main_metric`].
pub fn headline(spec: &BenchmarkResultSpec) -> Option<(String, f64, f64, &'static str)> {
    let kind = kind(spec)?;
    let (name, scale, unit, _) = main_metric(spec)?;
    let ms = sorted(spec);
    let pick = match kind {
        Kind::Ingress => ms
            .iter()
            .rev()
            .find_map(|m| metric(m, name).map(|f| (m, f))),
        Kind::Egress => ms
            .iter()
            .filter_map(|m| metric(m, name).map(|f| (m, f)))
            .filter(|(_, f)| f.mean.is_finite())
            .max_by(|a, b| a.1.mean.total_cmp(&b.1.mean)),
    }?;
    Some((
        pick.0.name.clone(),
        pick.1.mean * scale,
        pick.1.ci95 * scale,
        unit,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::result::Measurement;
    use crds::stats::metric;

    fn spec(measurements: Vec<Measurement>) -> BenchmarkResultSpec {
        let mut s: BenchmarkResultSpec = serde_json::from_value(serde_json::json!({
            "benchmark": {"kind": "", "namespace": "n", "name": "b"},
            "benchmarkUid": "u", "runId": "r", "specHash": "h",
            "benchmarkSpec": "{\"baselineCase\": \"b\"}", "phase": "Succeeded"
        }))
        .unwrap();
        s.measurements = measurements;
        s
    }

    /// A measurement from node a to node b unless `params` say otherwise.
    fn m(index: u32, params: &[(&str, &str)], name: &str, values: &[f64]) -> Measurement {
        let mut m = Measurement {
            metrics: vec![metric(name, "", Better::Higher, values.to_vec())],
            ..crate::egress::tests::m(index, params)
        };
        for (k, v) in [("clientNode", "a"), ("serverNode", "b")] {
            m.parameters.entry(k.into()).or_insert_with(|| v.into());
        }
        m
    }

    #[test]
    fn cases_on_different_node_pairs_are_not_compared_and_say_why() {
        let rr = |index: u32, name: &str, nodes: (&str, &str), tps: f64| {
            let p = [
                ("protocol", "tcp-rr"),
                ("clientNode", nodes.0),
                ("serverNode", nodes.1),
            ];
            let mut m = m(index, &p, TPS, &[tps * 0.99, tps, tps * 1.01]);
            m.name = name.into();
            m
        };
        let mut s = spec(vec![
            rr(0, "rr-pod", ("nb-node1", "nb-node1"), 14_769.0),
            rr(1, "rr-service", ("nb-node2", "nb-node0"), 7_383.0),
            rr(2, "rr-same", ("nb-node1", "nb-node1"), 7_383.0),
        ]);
        s.benchmark_spec = r#"{"baselineCase": "rr-pod"}"#.into();
        let c = cases(&s);
        assert_eq!(c[1].overhead, None);
        assert_eq!(c[1].beyond_noise, None);
        assert_eq!(
            c[1].not_comparable.as_deref(),
            Some("not comparable: nb-node2->nb-node0 vs nb-node1->nb-node1")
        );
        assert!((c[2].overhead.unwrap() - 50.01).abs() < 0.01);
        assert_eq!(c[2].not_comparable, None);
        // A node not recorded is no pair to compare.
        s.measurements[2].parameters.remove("serverNode");
        let c = cases(&s);
        assert_eq!(c[2].overhead, None);
        assert_eq!(
            c[2].not_comparable.as_deref(),
            Some("not comparable: nodes not recorded vs nb-node1->nb-node1")
        );
    }

    #[test]
    fn the_seed_sweep_scales_as_the_seed_report_says() {
        let s = spec(
            [
                ("1", 3209.66),
                ("2", 5709.07),
                ("4", 9005.79),
                ("8", 20696.19),
            ]
            .iter()
            .enumerate()
            .rev()
            .map(|(i, (cpu, rps))| m(i as u32, &[("cpu", cpu)], RPS, &[*rps]))
            .collect(),
        );
        assert_eq!(kind(&s), Some(Kind::Ingress));
        let steps = steps(&s);
        assert_eq!(steps[0].m.index, 0, "sorted by index");
        assert_eq!(steps[3].size_factor, Some(8.0));
        assert_eq!(
            conclusion(&steps).unwrap(),
            "8 CPUs: 6.45x of 1 CPU, 81% of linear"
        );
    }

    #[test]
    fn sizes_come_from_millicores_and_replicas_and_never_divide_by_zero() {
        assert_eq!(millicores("500m"), Some(500.0));
        assert_eq!(millicores("1.5"), Some(1500.0));
        assert_eq!(millicores("0"), None);
        assert_eq!(millicores("lots"), None);
        let s = spec(vec![
            m(0, &[("cpu", "500m"), ("replicas", "2")], RPS, &[100.0]),
            m(1, &[("cpu", "1"), ("replicas", "2")], RPS, &[150.0]),
        ]);
        let st = steps(&s);
        assert_eq!(st[1].size_factor, Some(2.0));
        assert_eq!(st[1].efficiency, Some(0.75));
        assert_eq!(st[1].describe(), "1 CPU x 2 replicas");
        let zero = spec(vec![
            m(0, &[("replicas", "1")], RPS, &[0.0]),
            m(1, &[("replicas", "2")], RPS, &[10.0]),
        ]);
        assert_eq!(steps(&zero)[1].speedup, None);
        assert_eq!(conclusion(&steps(&zero)), None);
        assert_eq!(conclusion(&steps(&spec(vec![]))), None);
    }

    #[test]
    fn overhead_is_against_the_named_baseline_case() {
        let mut a = m(0, &[], RECEIVER, &[5e9, 5.1e9, 4.9e9]);
        a.name = "a".into();
        let mut b = m(
            1,
            &[("offloadProfile", "off")],
            RECEIVER,
            &[10e9, 10.1e9, 9.9e9],
        );
        b.name = "b".into();
        let s = spec(vec![a, b]);
        assert_eq!(kind(&s), Some(Kind::Egress));
        let c = cases(&s);
        assert!(c[1].is_baseline && !c[0].is_baseline);
        assert!((c[0].overhead.unwrap() - 50.0).abs() < 1e-9);
        assert_eq!(c[0].beyond_noise, Some(true));
        assert_eq!(c[1].profile, Some("off"));
        assert_eq!(headline(&s).map(|h| h.0), Some("b".to_string()));
    }

    #[test]
    fn a_swept_case_is_compared_with_the_baseline_of_the_same_size_and_protocol() {
        let rr = |index: u32, case: &str, size: &str, tps: f64| {
            let mut m = m(
                index,
                &[
                    ("case", case),
                    ("protocol", "tcp-rr"),
                    ("messageSize", size),
                ],
                TPS,
                &[tps * 0.99, tps, tps * 1.01],
            );
            m.name = format!("{case}/{size}");
            m
        };
        let mut s = spec(vec![
            rr(0, "pod", "64", 20000.0),
            rr(1, "pod", "1024", 10000.0),
            rr(2, "svc", "1024", 8000.0),
            rr(3, "svc", "64", 15000.0),
            rr(4, "svc", "4096", 5000.0),
            m(5, &[("protocol", "tcp-crr")], TPS, &[100.0]),
        ]);
        s.benchmark_spec = r#"{"baselineCase": "pod"}"#.into();
        assert_eq!(
            kind(&s),
            Some(Kind::Egress),
            "transactions/s make it egress"
        );
        let c = cases(&s);
        assert!(c[0].is_baseline && c[1].is_baseline);
        assert!(
            (c[2].overhead.unwrap() - 20.0).abs() < 1e-9,
            "svc/1024 against pod/1024"
        );
        assert!(
            (c[3].overhead.unwrap() - 25.0).abs() < 1e-9,
            "svc/64 against pod/64"
        );
        assert_eq!(c[4].overhead, None, "no baseline of 4096 bytes");
        assert_eq!(c[5].overhead, None, "tcp-crr is not compared with tcp-rr");
        assert_eq!(main_metric(&s).map(|m| m.2), Some("transactions/s"));
        assert_eq!(headline(&s).map(|h| h.0), Some("pod/64".to_string()));
    }

    #[test]
    fn overhead_needs_a_known_protocol_and_a_headline_both_sides_have() {
        let mut a = m(0, &[("protocol", "mystery")], P99, &[1.0]);
        a.name = "a".into();
        let mut b = m(1, &[("protocol", "mystery")], P99, &[1.5]);
        b.name = "b".into();
        // A protocol this CLI does not know has no headline: nothing to compare.
        let s = spec(vec![a.clone(), b.clone()]);
        assert!(cases(&s).iter().all(|c| c.overhead.is_none()));
        a.parameters.insert("protocol".into(), "udp-stream".into());
        b.parameters.insert("protocol".into(), "udp-stream".into());
        a.metrics = vec![metric(LOSS, "%", Better::Lower, vec![1.0])];
        b.metrics = vec![metric(RECEIVER, "bit/s", Better::Higher, vec![1e9])];
        let mut s = spec(vec![a, b]);
        s.benchmark_spec = r#"{"baselineCase": "a"}"#.into();
        // b's headline (receiver) is not a's: no overhead either.
        assert_eq!(cases(&s)[1].overhead, None);
        s.measurements[1].metrics = vec![
            metric(RECEIVER, "bit/s", Better::Higher, vec![1e9]),
            metric(LOSS, "%", Better::Lower, vec![3.0]),
        ];
        s.measurements[0]
            .metrics
            .insert(0, metric(RECEIVER, "bit/s", Better::Higher, vec![2e9]));
        assert!((cases(&s)[1].overhead.unwrap() - 50.0).abs() < 1e-9);
    }
}
