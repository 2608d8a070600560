//! An IngressBenchmark's figures on /metrics: each finished step's requests per second,
//! latency quantiles and errors (labelled with the step's controller when several are
//! compared, else an empty `controller`), route changes under load (how many showed, how
//! fast), a route scale's routes (how many answered, how soon), the controller workloads'
//! CPU and memory (and a route scale's memory per route), and a sweep's scaling efficiency.

use prometheus::{GaugeVec, Registry};

use crate::base::metrics::{gauge, remove_labelled, set_each, set_or_remove, Family};

pub struct IngressMetrics {
    rps: GaugeVec,
    latency: GaugeVec,
    errors: GaugeVec,
    error_ratio: GaugeVec,
    efficiency: GaugeVec,
    propagation: GaugeVec,
    changes: GaugeVec,
    scale_seconds: GaugeVec,
    scale_routes: GaugeVec,
    cpu: GaugeVec,
    memory: GaugeVec,
    memory_per_route: GaugeVec,
}

impl Family for IngressMetrics {
    fn register(registry: &Registry) -> Self {
        let step = ["namespace", "name", "step", "controller"];
        IngressMetrics {
            rps: gauge(
                registry,
                "netbench_ingress_rps",
                "Requests per second of a finished step, all workers",
                &step,
            ),
            latency: gauge(
                registry,
                "netbench_ingress_latency_seconds",
                "Latency quantiles of a finished step from the merged histogram",
                &["namespace", "name", "step", "controller", "quantile"],
            ),
            errors: gauge(
                registry,
                "netbench_ingress_errors",
                "Failed requests of a finished step by class",
                &["namespace", "name", "step", "controller", "class"],
            ),
            error_ratio: gauge(
                registry,
                "netbench_ingress_error_ratio",
                "Failed / all requests of a finished step",
                &step,
            ),
            efficiency: gauge(
                registry,
                "netbench_ingress_scaling_efficiency",
                "Speed-up / size factor against the first step (1 = linear)",
                &["namespace", "name", "step"],
            ),
            propagation: gauge(
                registry,
                "netbench_ingress_route_change_propagation_seconds",
                "Route changes under load (routeChanges): from sending a change to the first answers that show it, quantiles over the shown changes; change: swap, create or delete",
                &["namespace", "name", "step", "controller", "change", "quantile"],
            ),
            changes: gauge(
                registry,
                "netbench_ingress_route_changes",
                "Route changes under load made, shown before the next change, and made with their instant lost (untimed); change: swap, create or delete",
                &["namespace", "name", "step", "controller", "change", "state"],
            ),
            scale_seconds: gauge(
                registry,
                "netbench_ingress_route_scale_seconds",
                "Route scale (controllers[].route.count): from a route's creation to its first 2xx answer, quantiles over the answered routes of a finished step's samples (quantile 0.5, 0.99, 1), and quantile \"all\": from a sample's first creation until all its routes answered, the longest sample",
                &["namespace", "name", "step", "controller", "quantile"],
            ),
            scale_routes: gauge(
                registry,
                "netbench_ingress_route_scale_routes",
                "Route scale: routes per sample (asked), and created and answered over a finished step's samples",
                &["namespace", "name", "step", "controller", "state"],
            ),
            cpu: gauge(
                registry,
                "netbench_ingress_workload_cpu_cores",
                "Mean CPU of a controller workload's pods (controllers[].workloads) over the kubelet samples inside a finished step's window, in cores",
                &["namespace", "name", "step", "controller", "workload"],
            ),
            memory: gauge(
                registry,
                "netbench_ingress_workload_memory_bytes",
                "Highest working-set memory of a controller workload's pods sampled by the kubelets inside a finished step's window",
                &["namespace", "name", "step", "controller", "workload"],
            ),
            memory_per_route: gauge(
                registry,
                "netbench_ingress_workload_memory_per_route_bytes",
                "Route scale: a controller workload's working-set growth from before the sample's routes to the highest in the window, over the routes made (steps[].workloads[].memoryPerRouteBytes)",
                &["namespace", "name", "step", "controller", "workload"],
            ),
        }
    }
}

impl IngressMetrics {
    /// Publishes a finished step: RPS, latency quantiles, errors by class and their ratio.
    pub fn set_step(&self, namespace: &str, name: &str, r: &crds::ingress::StepResult) {
        let step = r.index.to_string();
        let controller = r.controller.as_deref().unwrap_or("");
        let labels = [namespace, name, step.as_str(), controller];
        self.rps.with_label_values(&labels).set(r.rps);
        let l = &r.latency_ms;
        let quantiles = [
            ("0.5", l.p50),
            ("0.9", l.p90),
            ("0.99", l.p99),
            ("0.999", l.p999),
            ("1", l.max),
        ];
        set_each(
            &self.latency,
            &labels,
            quantiles.map(|(q, v)| (q, v / 1000.0)),
        );
        let e = &r.errors;
        let classes = [
            ("connect", e.connect),
            ("timeout", e.timeout),
            ("read", e.read),
            ("write", e.write),
            ("status4xx", e.status4xx),
            ("status5xx", e.status5xx),
            ("parse", e.parse),
        ];
        set_each(&self.errors, &labels, classes.map(|(c, v)| (c, v as f64)));
        let ratio = e.error_rate(r.requests).unwrap_or(0.0);
        self.error_ratio.with_label_values(&labels).set(ratio);
        let kinds = [
            ("swap", &r.route_changes),
            ("create", &r.route_creations),
            ("delete", &r.route_deletions),
        ];
        for (change, rc) in kinds {
            let Some(rc) = rc else { continue };
            let of_change = [namespace, name, &step, controller, change];
            let quantiles = [("0.5", rc.p50_ms), ("0.99", rc.p99_ms), ("1", rc.max_ms)];
            // None showed: no series rather than a 0 s that would read as instant.
            let shown = quantiles
                .into_iter()
                .filter_map(|(q, v)| Some((q, v? / 1000.0)));
            set_each(&self.propagation, &of_change, shown);
            let states = [
                ("made", rc.changes),
                ("shown", rc.shown),
                ("untimed", rc.untimed),
            ];
            set_each(
                &self.changes,
                &of_change,
                states.map(|(s, v)| (s, f64::from(v))),
            );
        }
        if let Some(rs) = &r.route_scale {
            let quantiles = [
                ("0.5", rs.p50_ms),
                ("0.99", rs.p99_ms),
                ("1", rs.max_ms),
                ("all", rs.all_answered_ms),
            ];
            for (q, v) in quantiles {
                let labels = [namespace, name, &step, controller, q];
                // Not answered: no series rather than a 0 s that would read as instant.
                set_or_remove(&self.scale_seconds, &labels, v.map(|v| v / 1000.0));
            }
            let states = [
                ("asked", rs.routes),
                ("created", rs.created),
                ("answered", rs.answered),
            ];
            set_each(
                &self.scale_routes,
                &labels,
                states.map(|(s, v)| (s, f64::from(v))),
            );
        }
        for w in &r.workloads {
            let labels = [namespace, name, &step, controller, w.workload.as_str()];
            // A figure this run does not have leaves no earlier run's value behind.
            set_or_remove(&self.cpu, &labels, w.cpu_cores);
            let memory = w.memory_bytes.map(|bytes| bytes as f64);
            set_or_remove(&self.memory, &labels, memory);
            set_or_remove(&self.memory_per_route, &labels, w.memory_per_route_bytes);
        }
    }

    /// Drops every series of benchmark `namespace`/`name` (it is deleted).
    pub fn forget(&self, namespace: &str, name: &str) {
        let ours = [("namespace", namespace), ("name", name)];
        for g in [
            &self.rps,
            &self.latency,
            &self.errors,
            &self.error_ratio,
            &self.efficiency,
            &self.propagation,
            &self.changes,
            &self.scale_seconds,
            &self.scale_routes,
            &self.cpu,
            &self.memory,
            &self.memory_per_route,
        ] {
            remove_labelled(g, &ours);
        }
    }

    /// Publishes a sweep's scaling efficiency per step.
    pub fn set_scaling(&self, namespace: &str, name: &str, s: &crds::ingress::Scaling) {
        for row in &s.rows {
            let step = row.index.to_string();
            self.efficiency
                .with_label_values(&[namespace, name, &step])
                .set(row.efficiency);
        }
    }

    /// Publishes every result an IngressBenchmark's status holds (after a restart, say): only
    /// the spec's steps, each labelled with the spec's controller, never status's own names.
    pub fn export(&self, namespace: &str, name: &str, ib: &crds::IngressBenchmark) {
        let Some(s) = &ib.status else {
            return;
        };
        let steps = super::plan::step_count(&ib.spec);
        for step in s.steps.iter().filter(|r| r.index < steps) {
            let mut step = step.clone();
            let controller = super::plan::controller(&ib.spec, step.index);
            step.controller = controller.map(|c| c.name.clone());
            // Only the spec's workloads label a series.
            let named: Vec<String> = controller
                .map(|c| c.workloads.iter().map(super::usage::describe).collect())
                .unwrap_or_default();
            step.workloads.retain(|w| named.contains(&w.workload));
            self.set_step(namespace, name, &step);
        }
        if let Some(scaling) = &s.scaling {
            self.set_scaling(namespace, name, scaling);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_changes_are_published_with_their_controller() {
        let registry = Registry::new();
        let m = IngressMetrics::register(&registry);
        let step = crds::ingress::StepResult {
            index: 1,
            controller: Some("envoy-gateway".into()),
            route_changes: Some(crds::ingress::RouteChangeResult {
                changes: 10,
                shown: 9,
                p50_ms: Some(20.0),
                p99_ms: Some(40.0),
                max_ms: Some(41.0),
                ..Default::default()
            }),
            route_deletions: Some(crds::ingress::RouteChangeResult {
                changes: 5,
                shown: 4,
                untimed: 1,
                p99_ms: Some(30.0),
                ..Default::default()
            }),
            route_scale: Some(crds::ingress::RouteScaleResult {
                routes: 50,
                created: 100,
                answered: 99,
                p50_ms: Some(25.0),
                all_answered_ms: None,
                ..Default::default()
            }),
            workloads: vec![crds::ingress::WorkloadUsage {
                workload: "Deployment gw/envoy".into(),
                pods: 1,
                cpu_cores: Some(0.25),
                memory_bytes: Some(1 << 20),
                memory_per_route_bytes: Some(-512.0),
                ..Default::default()
            }],
            ..Default::default()
        };
        m.set_step("team", "churn", &step);
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&registry.gather())
            .unwrap();
        for series in [
            r#"netbench_ingress_route_changes{change="swap",controller="envoy-gateway",name="churn",namespace="team",state="shown",step="1"} 9"#,
            r#"netbench_ingress_route_change_propagation_seconds{change="swap",controller="envoy-gateway",name="churn",namespace="team",quantile="0.99",step="1"} 0.04"#,
            r#"netbench_ingress_route_changes{change="delete",controller="envoy-gateway",name="churn",namespace="team",state="untimed",step="1"} 1"#,
            r#"netbench_ingress_route_change_propagation_seconds{change="delete",controller="envoy-gateway",name="churn",namespace="team",quantile="0.99",step="1"} 0.03"#,
            r#"netbench_ingress_workload_cpu_cores{controller="envoy-gateway",name="churn",namespace="team",step="1",workload="Deployment gw/envoy"} 0.25"#,
            r#"netbench_ingress_route_scale_routes{controller="envoy-gateway",name="churn",namespace="team",state="answered",step="1"} 99"#,
            r#"netbench_ingress_route_scale_seconds{controller="envoy-gateway",name="churn",namespace="team",quantile="0.5",step="1"} 0.025"#,
            r#"netbench_ingress_workload_memory_bytes{controller="envoy-gateway",name="churn",namespace="team",step="1",workload="Deployment gw/envoy"} 1048576"#,
            r#"netbench_ingress_workload_memory_per_route_bytes{controller="envoy-gateway",name="churn",namespace="team",step="1",workload="Deployment gw/envoy"} -512"#,
        ] {
            assert!(text.contains(series), "{series} missing from\n{text}");
        }
        assert!(
            !text.contains(r#"change="create""#),
            "no creations made: {text}"
        );
        assert!(
            !text.contains(r#"quantile="all""#),
            "not all routes answered: no time for all: {text}"
        );
        m.set_step("team", "churn-2", &step);
        m.forget("team", "churn");
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&registry.gather())
            .unwrap();
        assert!(
            !text.contains(r#"name="churn","#),
            "a deleted benchmark's series: {text}"
        );
        assert!(
            text.contains(r#"netbench_ingress_rps{controller="envoy-gateway",name="churn-2",namespace="team",step="1"}"#),
            "another benchmark's series stay: {text}"
        );
    }
}
