//! The figures a result holds, arranged as the reports show them: an ingress sweep's steps with
//! speed-up and efficiency against linear scaling, an egress run's cases with the overhead
//! against the baseline case. Pure functions over one result; nothing here trusts the numbers
//! (means may be 0 or not finite, parameters may not parse).

use crds::history::MetricTolerance;
use crds::result::{BenchmarkResultSpec, Measurement, MetricStats};

/// Figures the operator writes (see crds::history::MetricTolerance).
pub const RPS: &str = "rps";
pub const P50: &str = "p50Ms";
pub const P99: &str = "p99Ms";
pub const ERROR_RATE: &str = "errorRate";
pub const RECEIVER: &str = "receiverBitsPerSecond";
pub const SENDER: &str = "senderBitsPerSecond";
pub const RETRANSMITS: &str = "retransmits";

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
    } else if has(RECEIVER) {
        Some(Kind::Egress)
    } else {
        None
    }
}

/// The main figure of a kind: its name, the factor to the unit shown, the unit, decimals.
pub fn main_metric(kind: Kind) -> (&'static str, f64, &'static str, usize) {
    match kind {
        Kind::Ingress => (RPS, 1.0, "req/s", 2),
        Kind::Egress => (RECEIVER, 1.0 / GBIT, "Gbit/s", 2),
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
        let cpus = |c: &str| match c.trim() {
            "1" => "1 CPU".to_string(),
            c if c.ends_with('m') => format!("{c} CPU"),
            c => format!("{c} CPUs"),
        };
        match (self.cpu, self.replicas) {
            (Some(c), Some(r)) => format!("{} x {r} replicas", cpus(c)),
            (Some(c), None) => cpus(c),
            (None, Some(r)) => format!("{r} replicas"),
            (None, None) => self.m.name.clone(),
        }
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

/// The steps of an ingress result, with speed-up and efficiency against the first step. The
/// size factor comes from the steps' parameters, else from the result's scaling table.
pub fn steps(spec: &BenchmarkResultSpec) -> Vec<Step<'_>> {
    let ms = sorted(spec);
    let first = ms.first().copied();
    let base_size = first.and_then(size);
    let base_rps = first.and_then(|m| metric(m, RPS)).map(|f| f.mean);
    let scaling_factor = |index: u32| {
        spec.scaling.as_ref().and_then(|s| {
            s.rows
                .iter()
                .find(|r| r.index == index)
                .map(|r| r.size_factor)
                .filter(|f| f.is_finite() && *f > 0.0)
        })
    };
    ms.into_iter()
        .map(|m| {
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
pub fn conclusion(steps: &[Step<'_>]) -> Option<String> {
    let (first, last) = (steps.first()?, steps.last()?);
    if steps.len() < 2 {
        return None;
    }
    let (speedup, efficiency) = (last.speedup?, last.efficiency?);
    Some(format!(
        "{}: {speedup:.2}x of {}, {:.0}% of linear",
        last.describe(),
        first.describe(),
        efficiency * 100.0
    ))
}

/// Latency over every request of a step, from its merged histogram (milliseconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Merged {
    pub requests: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// Decodes a step's histogram (bounded: protocol::report::histogram) and reads its percentiles.
pub fn merged(histogram: &str) -> Result<Merged, String> {
    let h = protocol::report::histogram::decode(histogram)?;
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    Ok(Merged {
        requests: h.len(),
        p50: ms(0.5),
        p90: ms(0.9),
        p99: ms(0.99),
        p999: ms(0.999),
        max: h.max() as f64 / 1000.0,
    })
}

/// One case of an egress result.
#[derive(Clone, Debug)]
pub struct Case<'a> {
    pub m: &'a Measurement,
    pub profile: Option<&'a str>,
    pub receiver: Option<&'a MetricStats>,
    /// Receiver throughput lost against the baseline case, percent (negative: faster).
    pub overhead: Option<f64>,
    /// The case the others are compared with.
    pub is_baseline: bool,
    /// The difference from the baseline is beyond the noise (the 95% intervals do not overlap).
    pub beyond_noise: Option<bool>,
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

/// The cases of an egress result, with the overhead against the baseline case (the spec's
/// `baselineCase`, else the first case).
pub fn cases(spec: &BenchmarkResultSpec) -> Vec<Case<'_>> {
    let ms = sorted(spec);
    let named = baseline_case(spec);
    let base = named
        .as_deref()
        .and_then(|n| ms.iter().find(|m| m.name == n))
        .or(ms.first())
        .copied();
    let base_rx = base.and_then(|m| metric(m, RECEIVER));
    ms.into_iter()
        .map(|m| {
            let receiver = metric(m, RECEIVER);
            let is_baseline = base.is_some_and(|b| std::ptr::eq(b, m));
            let against = receiver.zip(base_rx).filter(|_| !is_baseline);
            let verdict = against.map(|(now, then)| {
                let t = MetricTolerance {
                    name: RECEIVER.into(),
                    tolerance_percent: 0.0,
                    better: None,
                };
                crds::stats::judge(&m.name, now, then, &t)
            });
            Case {
                m,
                profile: m.parameters.get("offloadProfile").map(String::as_str),
                receiver,
                overhead: verdict.as_ref().map(|v| -v.delta_percent),
                is_baseline,
                beyond_noise: verdict.map(|v| v.beyond_noise),
            }
        })
        .collect()
}

/// The headline of a result: the last step's RPS, or the best case's receiver throughput,
/// as (measurement name, mean, ci) in the unit of [`main_metric`].
pub fn headline(spec: &BenchmarkResultSpec) -> Option<(String, f64, f64)> {
    let kind = kind(spec)?;
    let (name, scale, _, _) = main_metric(kind);
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
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::history::Better;
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

    fn m(index: u32, params: &[(&str, &str)], name: &str, values: &[f64]) -> Measurement {
        Measurement {
            index,
            name: format!("m{index}"),
            parameters: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            metrics: vec![metric(name, "", Better::Higher, values.to_vec())],
            histogram: None,
        }
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
}
