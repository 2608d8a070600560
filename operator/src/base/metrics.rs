//! The operator's Prometheus registry (every series is prefixed `netbench_` and served on
//! /metrics). It holds no series of its own: each family of series is defined and registered
//! by the module that owns it, as a [`Family`] (the run phase by the driver, results by
//! `results`, a kind's figures by that kind, the worker API's counters by `api`, ...), on
//! first use or up front by `main` for the series that exist at 0 from the start.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus::core::Collector;
use prometheus::{Encoder, GaugeVec, IntCounterVec, Opts, Registry, TextEncoder};

/// A family of series, owned by one module.
pub trait Family: Send + Sync + 'static {
    /// Creates the family's series and registers them in `registry` (once per [`Metrics`]).
    fn register(registry: &Registry) -> Self;
}

pub struct Metrics {
    registry: Registry,
    families: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            registry: Registry::new(),
            families: Mutex::default(),
        }
    }

    /// The family `F`, registered on first use.
    pub fn family<F: Family>(&self) -> Arc<F> {
        let mut families = self.families.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = families
            .entry(TypeId::of::<F>())
            .or_insert_with(|| Arc::new(F::register(&self.registry)));
        Arc::clone(entry)
            .downcast::<F>()
            .expect("the entry of F's TypeId holds an F")
    }

    /// Every series in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut buf = vec![];
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding");
        String::from_utf8(buf).expect("metrics are UTF-8")
    }
}

/// A gauge family, registered in `registry`.
pub fn gauge(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    let g = GaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(g.clone()))
        .expect("unique metric");
    g
}

/// A counter family, registered in `registry`.
pub fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("unique metric");
    c
}

/// Sets the series `labels` of `g` to `value`, or removes it when there is none: a figure a run
/// does not have leaves no earlier run's value behind.
pub fn set_or_remove(g: &GaugeVec, labels: &[&str], value: Option<f64>) {
    match value {
        Some(v) => g.with_label_values(labels).set(v),
        None => drop(g.remove_label_values(labels)),
    }
}

/// Sets one series of `g` per (label, value) of `values`, labelled `first` then that label.
pub fn set_each<'a>(
    g: &GaugeVec,
    first: &[&str],
    values: impl IntoIterator<Item = (&'a str, f64)>,
) {
    for (last, v) in values {
        let mut labels = first.to_vec();
        labels.push(last);
        g.with_label_values(&labels).set(v);
    }
}

/// Removes every series of `g` labelled with this benchmark (kind, namespace, name first).
pub fn remove_benchmark(g: &GaugeVec, kind: &str, namespace: &str, name: &str) {
    remove_labelled(
        g,
        &[("kind", kind), ("namespace", namespace), ("name", name)],
    );
}

/// Removes every series of `g` that has all of `labels` (name, value).
pub fn remove_labelled(g: &GaugeVec, labels: &[(&str, &str)]) {
    for family in g.collect() {
        for m in family.get_metric() {
            let series: HashMap<&str, &str> = m
                .get_label()
                .iter()
                .map(|l| (l.name(), l.value()))
                .collect();
            if labels.iter().all(|(k, v)| series.get(k) == Some(v)) {
                let _ = g.remove(&series);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counted(IntCounterVec);

    impl Family for Counted {
        fn register(registry: &Registry) -> Self {
            Counted(counter(registry, "netbench_test_total", "test", &["x"]))
        }
    }

    #[test]
    fn a_family_is_registered_once_and_shared() {
        let m = Metrics::new();
        m.family::<Counted>().0.with_label_values(&["a"]).inc();
        m.family::<Counted>().0.with_label_values(&["a"]).inc();
        assert!(m.render().contains(r#"netbench_test_total{x="a"} 2"#));
    }
}
