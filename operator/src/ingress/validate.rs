//! What the API server's schema and CEL rules cannot check: the operator's own permissions
//! and caps (set by the cluster admin), that the named nodes exist, and where the target leads.

use kube::Client;

use crds::ingress::IngressBenchmarkSpec;

use crate::caps::{self, lookup, Refusal};
use crate::config::Config;

/// Checks that need no API calls. Err is the message for the Invalid condition.
pub fn permitted(
    spec: &IngressBenchmarkSpec,
    namespace: &str,
    config: &Config,
) -> Result<(), String> {
    if spec.workers.host_network && !config.host_network_namespaces.allows(namespace) {
        return Err(format!(
            "hostNetwork workers are not enabled for namespace {namespace}; the cluster admin can allow it (Helm value security.hostNetworkNamespaces)"
        ));
    }
    if let Some(sweep) = &spec.sweep {
        let target_ns = sweep.target_ref.namespace.as_deref().unwrap_or(namespace);
        if !config.sweep_namespaces.allows(target_ns) {
            return Err(format!(
                "sweeps may not patch workloads in namespace {target_ns}; the cluster admin can allow it (Helm value security.sweepNamespaces)"
            ));
        }
        if target_ns != namespace
            && !config.sweep_namespaces.allows("*")
            && !config.sweep_namespaces.allows(namespace)
        {
            return Err(format!(
                "a benchmark in namespace {namespace} may not sweep a workload in {target_ns}"
            ));
        }
    }
    Ok(())
}

/// The admin's caps, the named nodes, and where target.url leads: Ok, or why the run may not
/// start.
pub async fn admitted(
    client: &Client,
    spec: &IngressBenchmarkSpec,
    config: &Config,
) -> crate::error::Result<Result<(), Refusal>> {
    if let Err(m) = caps::limits::ingress(spec, &config.caps) {
        return Ok(Err(Refusal::not_permitted(m)));
    }
    if let Err(m) = nodes_exist(client, spec).await? {
        return Ok(Err(Refusal::invalid(m)));
    }
    let policy = match lookup::policy(client, &config.caps).await? {
        Ok(p) => p,
        Err(r) => return Ok(Err(r)),
    };
    let timeout = config.caps.target_resolve_timeout();
    Ok(lookup::check_url(&policy, "target.url", &spec.target.url, timeout).await)
}

/// Every node named in workers.nodeNames must exist.
pub async fn nodes_exist(
    client: &Client,
    spec: &IngressBenchmarkSpec,
) -> Result<Result<(), String>, kube::Error> {
    let missing = crate::workers::missing_nodes(client, &spec.workers.node_names).await?;
    Ok(if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "workers.nodeNames: node {} does not exist",
            missing.join(", ")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NamespaceList;

    fn spec(yaml: &str) -> IngressBenchmarkSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn host_network_needs_the_admins_permission() {
        let s = spec("{target: {url: 'http://x/'}, workers: {hostNetwork: true}}");
        let mut c = Config::for_tests();
        let err = permitted(&s, "team-a", &c).unwrap_err();
        assert!(
            err.contains("hostNetwork workers are not enabled for namespace team-a"),
            "{err}"
        );
        c.host_network_namespaces = NamespaceList::parse("team-a");
        assert!(permitted(&s, "team-a", &c).is_ok());
    }

    #[test]
    fn sweeps_need_the_admins_permission() {
        let s = spec("{target: {url: 'http://x/'}, sweep: {targetRef: {name: nginx, namespace: ingress}, steps: [{cpu: '1'}]}}");
        let mut c = Config::for_tests();
        assert!(permitted(&s, "team-a", &c)
            .unwrap_err()
            .contains("namespace ingress"));
        c.sweep_namespaces = NamespaceList::parse("ingress");
        assert!(permitted(&s, "team-a", &c)
            .unwrap_err()
            .contains("may not sweep a workload in ingress"));
        c.sweep_namespaces = NamespaceList::parse("ingress,team-a");
        assert!(permitted(&s, "team-a", &c).is_ok());
    }
}
