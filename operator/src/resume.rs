//! What a replica does once when it starts leading, before its controllers run: publish the
//! results held in existing benchmarks' status again (the gauges live in memory and went with
//! the previous process), and delete report objects whose benchmark is gone (they live in the
//! operator's namespace, where no owner reference removes them). Best effort: a failure is
//! logged and the controllers start anyway.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::context::Context;

/// Longest time the pass may delay the controllers.
pub const TIMEOUT: Duration = Duration::from_secs(60);

pub async fn on_leading(ctx: &Context) {
    match tokio::time::timeout(TIMEOUT, resume(ctx)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!("resuming after a restart: {e}"),
        Err(_) => tracing::warn!("resuming after a restart took over {TIMEOUT:?}; skipped"),
    }
}

async fn resume(ctx: &Context) -> Result<(), kube::Error> {
    let mut listed = vec![];
    for kind in &ctx.kinds.0 {
        listed.push((kind.list)(&ctx.client, &ctx.config.watch_namespaces).await?);
    }
    // Only with every list complete: a benchmark missing from them would lose its reports.
    let mut live = BTreeSet::new();
    let mut complete = true;
    for kind in listed {
        (kind.export)(&ctx.metrics);
        live.extend(kind.uids);
        complete &= kind.complete;
    }
    if !complete {
        tracing::warn!("a watched namespace refused the list: no report deleted as an orphan");
        return Ok(());
    }
    let deleted = ctx.reports().delete_orphans(&live).await?;
    if deleted > 0 {
        tracing::info!("deleted {deleted} report object(s) of benchmarks that are gone");
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    use crate::base::metrics::Metrics;
    use crate::run::Hooks;
    use crds::{EgressBenchmark, IngressBenchmark};

    fn ingress() -> IngressBenchmark {
        serde_yaml::from_str(
            r#"
apiVersion: netbench.io/v1alpha1
kind: IngressBenchmark
metadata: {name: sweep, namespace: team-a, uid: u1}
spec:
  target: {url: "http://web/"}
  load: {connections: 2, threads: 1, duration: 5s}
  sweep: {targetRef: {name: web}, steps: [{cpu: "1"}, {cpu: "2"}]}
status:
  phase: Succeeded
  steps:
    # Beyond the spec's steps, with a name of its own: never exported.
    - {index: 7, controller: forged, rps: 1.0, requests: 1, bytesPerSecond: 1.0,
       latencyMs: {mean: 1.0, p50: 1.0, p90: 1.0, p99: 1.0, p999: 1.0, max: 1.0},
       errors: {connect: 0, timeout: 0, read: 0, write: 0, status4xx: 0, status5xx: 0, parse: 0}}
    - {index: 0, rps: 1500.5, requests: 7500, bytesPerSecond: 1.0,
       latencyMs: {mean: 1.5, p50: 1.0, p90: 2.0, p99: 4.0, p999: 8.0, max: 16.0},
       errors: {connect: 0, timeout: 3, read: 0, write: 0, status4xx: 0, status5xx: 0, parse: 0}}
    - {index: 1, rps: 2900.0, requests: 14500, bytesPerSecond: 1.0,
       latencyMs: {mean: 1.2, p50: 1.0, p90: 2.0, p99: 3.0, p999: 5.0, max: 9.0},
       errors: {connect: 0, timeout: 0, read: 0, write: 0, status4xx: 0, status5xx: 0, parse: 0}}
  scaling:
    rows:
      - {index: 0, sizeFactor: 1.0, rps: 1500.5, speedup: 1.0, efficiency: 1.0}
      - {index: 1, sizeFactor: 2.0, rps: 2900.0, speedup: 1.93, efficiency: 0.966}
    summary: "2x: 97% of linear"
"#,
        )
        .unwrap()
    }

    fn egress() -> EgressBenchmark {
        serde_yaml::from_str(
            r#"
apiVersion: netbench.io/v1alpha1
kind: EgressBenchmark
metadata: {name: vx, namespace: team-b, uid: u2}
spec:
  cases:
    - name: direct
      client: {node: n1}
      server: {node: n2}
status:
  phase: Succeeded
  cases:
    - {name: direct, senderBitsPerSecond: 9.0e9, receiverBitsPerSecond: 8.9e9,
       retransmits: 12, overheadPercent: 0.0, clientCpuPercent: 10.0, serverCpuPercent: 12.0}
"#,
        )
        .unwrap()
    }

    #[test]
    fn gauges_come_back_from_status() {
        let m = Metrics::new();
        let before = m.render();
        assert!(!before.contains("netbench_ingress_rps{"), "{before}");
        ingress().export_results(&m);
        egress().export_results(&m);
        let out = m.render();
        for line in [
            r#"netbench_ingress_rps{controller="",name="sweep",namespace="team-a",step="0"} 1500.5"#,
            r#"netbench_ingress_rps{controller="",name="sweep",namespace="team-a",step="1"} 2900"#,
            r#"netbench_ingress_latency_seconds{controller="",name="sweep",namespace="team-a",quantile="0.99",step="0"} 0.004"#,
            r#"netbench_ingress_errors{class="timeout",controller="",name="sweep",namespace="team-a",step="0"} 3"#,
            r#"netbench_ingress_scaling_efficiency{name="sweep",namespace="team-a",step="1"} 0.966"#,
            r#"netbench_egress_bits_per_second{case="direct",name="vx",namespace="team-b",offload="none",side="receiver"} 8900000000"#,
            r#"netbench_egress_retransmits{case="direct",name="vx",namespace="team-b"} 12"#,
        ] {
            assert!(out.contains(line), "missing {line} in\n{out}");
        }
        assert!(
            !out.contains("forged") && !out.contains("step=\"7\""),
            "{out}"
        );
    }

    #[test]
    fn a_benchmark_without_status_exports_nothing() {
        let m = Metrics::new();
        let mut ib = ingress();
        ib.status = None;
        ib.export_results(&m);
        assert!(!m.render().contains("netbench_ingress_rps{"));
    }
}
