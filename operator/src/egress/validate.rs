//! What the API server's schema and CEL rules cannot check: what the cluster admin allows this
//! namespace (hostNetwork workers, privileged offload Jobs), that every offload setting knows
//! its nodes, and that the named nodes exist.

use std::collections::BTreeSet;

use kube::Client;

use crds::egress::{EgressBenchmarkSpec, EgressCase, OffloadProfile};

use crate::admin::caps::lookup;
use crate::admin::config::Config;
use crate::base::error::Result;

use crate::base::outcome::Failure;

/// Checks that need no API calls.
pub fn permitted(
    spec: &EgressBenchmarkSpec,
    namespace: &str,
    config: &Config,
) -> Result<(), Failure> {
    crds::bounds::egress(spec).map_err(Failure::invalid)?;
    let uses_offload = spec.cases.iter().any(|c| c.offload_profile.is_some());
    if uses_offload && !config.offload_namespaces.allows(namespace) {
        return Err(Failure::not_permitted(format!(
            "privileged offload Jobs are not enabled for namespace {namespace}; the cluster admin can allow them (Helm value security.offloadNamespaces)"
        )));
    }
    let host_network: Vec<&str> = spec
        .cases
        .iter()
        .filter(|c| c.client.host_network || c.server.host_network)
        .map(|c| c.name.as_str())
        .collect();
    if !host_network.is_empty() && !config.host_network_namespaces.allows(namespace) {
        return Err(Failure::not_permitted(format!(
            "hostNetwork workers (case {}) are not enabled for namespace {namespace}; the cluster admin can allow them (Helm value security.hostNetworkNamespaces)",
            host_network.join(", ")
        )));
    }
    for case in &spec.cases {
        let pairs = super::topology::pairs(case)
            .map_err(|m| Failure::invalid(format!("case {}: {m}", case.name)))?;
        if let Some(m) = super::topology::unplaceable(&pairs) {
            return Err(Failure::invalid(format!("case {}: {m}", case.name)));
        }
        let last = u32::try_from(pairs.len().saturating_sub(1)).unwrap_or(u32::MAX);
        if super::plan::server_port(case, last) > 65_535 {
            return Err(Failure::invalid(format!(
                "case {}: its {} hostNetwork servers listen on server.port plus their pair's index, past 65535: choose a lower server.port",
                case.name,
                pairs.len()
            )));
        }
        if let Some(profile) = profile_of(spec, case) {
            for s in &profile.settings {
                if offload_nodes(s, case).is_empty() {
                    return Err(Failure::invalid(format!(
                        "offload profile {}: the setting for {} lists no nodeNames and case {} pins neither client nor server to a node",
                        profile.name, s.interface, case.name
                    )));
                }
            }
        }
    }
    Ok(())
}

pub fn profile_of<'a>(
    spec: &'a EgressBenchmarkSpec,
    case: &EgressCase,
) -> Option<&'a OffloadProfile> {
    let name = case.offload_profile.as_ref()?;
    spec.offload
        .as_ref()?
        .profiles
        .iter()
        .find(|p| &p.name == name)
}

/// The nodes one setting changes for a case: its nodeNames, or the case's pinned client and
/// in-cluster server nodes (with a topology: the nodes it names).
pub fn offload_nodes(setting: &crds::egress::OffloadSetting, case: &EgressCase) -> Vec<String> {
    if !setting.node_names.is_empty() {
        return setting.node_names.clone();
    }
    let server = case
        .server
        .address
        .is_none()
        .then_some(case.server.node_name.as_ref())
        .flatten();
    let nodes: BTreeSet<String> = [case.client.node_name.as_ref(), server]
        .into_iter()
        .flatten()
        .cloned()
        .chain(super::topology::named_nodes(case))
        .collect();
    nodes.into_iter().collect()
}

/// The admin's caps, the named nodes, and every external server's address: Ok, or why the run
/// may not start.
pub async fn admitted(
    ctx: &crate::context::Context,
    spec: &EgressBenchmarkSpec,
) -> Result<Result<(), Failure>> {
    let (client, config) = (&ctx.client, &ctx.config);
    if let Err(m) = super::limits::check(spec, &config.caps) {
        return Ok(Err(Failure::not_permitted(m)));
    }
    if let Err(r) = nodes_exist(client, spec).await? {
        return Ok(Err(r));
    }
    let external: Vec<(&EgressCase, &String)> = spec
        .cases
        .iter()
        .filter_map(|c| c.server.address.as_ref().map(|a| (c, a)))
        .collect();
    if external.is_empty() {
        return Ok(Ok(()));
    }
    let policy = match lookup::policy(client, &config.caps, &ctx.facts.api_server).await? {
        Ok(p) => p,
        Err(r) => return Ok(Err(r)),
    };
    let timeout = config.caps.target_resolve_timeout();
    let mut checked = BTreeSet::new();
    for (case, address) in external {
        // Cases often share a server: resolve each address once.
        if !checked.insert((address, case.server.port)) {
            continue;
        }
        let field = format!("case {}: server.address", case.name);
        let port = case.server.port;
        if let Err(r) = lookup::check_host(&policy, &field, address, address, port, timeout).await {
            return Ok(Err(r));
        }
    }
    Ok(Ok(()))
}

/// Every node named by a case or an offload setting must exist.
pub async fn nodes_exist(
    client: &Client,
    spec: &EgressBenchmarkSpec,
) -> Result<Result<(), Failure>, kube::Error> {
    let mut names = vec![];
    for c in &spec.cases {
        names.extend(c.client.node_name.iter().cloned());
        names.extend(c.server.node_name.iter().cloned());
        names.extend(super::topology::named_nodes(c));
    }
    for p in spec.offload.iter().flat_map(|o| &o.profiles) {
        for s in &p.settings {
            names.extend(s.node_names.iter().cloned());
        }
    }
    let missing = crate::k8s::workers::missing_nodes(client, &names).await?;
    Ok(if missing.is_empty() {
        Ok(())
    } else {
        Err(Failure::invalid(format!(
            "node {} does not exist",
            missing.join(", ")
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::config::NamespaceList;

    fn spec(yaml: &str) -> EgressBenchmarkSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    const OFFLOAD: &str = "{offload: {profiles: [{name: off, settings: [{interface: vx0, features: {tx-checksumming: false}}]}]}, cases: [{name: a, client: {nodeName: n1}, server: {address: 198.18.20.2}, offloadProfile: off}]}";

    #[test]
    fn offload_jobs_need_the_admins_permission() {
        let s = spec(OFFLOAD);
        let mut c = Config::for_tests();
        let err = permitted(&s, "team-a", &c).unwrap_err();
        assert_eq!(err.reason.as_str(), "NotPermitted");
        assert!(
            err.message
                .contains("offload Jobs are not enabled for namespace team-a"),
            "{}",
            err.message
        );
        c.offload_namespaces = NamespaceList::parse("team-*");
        assert_eq!(permitted(&s, "team-a", &c), Ok(()));
    }

    #[test]
    fn host_network_needs_the_admins_permission() {
        let s = spec("{cases: [{name: n2n, client: {hostNetwork: true}, server: {hostNetwork: true}}, {name: p, client: {}, server: {}}]}");
        let mut c = Config::for_tests();
        let err = permitted(&s, "team-a", &c).unwrap_err();
        assert!(err.message.contains("(case n2n)"), "{}", err.message);
        c.host_network_namespaces = NamespaceList::parse("team-a");
        assert_eq!(permitted(&s, "team-a", &c), Ok(()));
    }

    #[test]
    fn a_setting_without_nodes_follows_the_case() {
        let s = spec(OFFLOAD);
        let setting = &s.offload.as_ref().unwrap().profiles[0].settings[0];
        assert_eq!(offload_nodes(setting, &s.cases[0]), ["n1"]);
        let unpinned = spec(&OFFLOAD.replace("{nodeName: n1}", "{}"));
        let mut c = Config::for_tests();
        c.offload_namespaces = NamespaceList::parse("*");
        let err = permitted(&unpinned, "x", &c).unwrap_err();
        assert_eq!(err.reason.as_str(), "InvalidSpec");
        assert!(
            err.message.contains("lists no nodeNames"),
            "{}",
            err.message
        );
    }

    #[test]
    fn host_network_servers_whose_ports_would_pass_65535_are_refused() {
        let mut c = Config::for_tests();
        c.host_network_namespaces = NamespaceList::parse("*");
        let yaml = |port: u32| {
            format!("{{cases: [{{name: f, client: {{hostNetwork: true}}, server: {{hostNetwork: true, port: {port}}}, topology: {{pairs: 100}}}}]}}")
        };
        // Pair 99 listens on port + 99.
        assert_eq!(permitted(&spec(&yaml(65_436)), "x", &c), Ok(()));
        let err = permitted(&spec(&yaml(65_437)), "x", &c).unwrap_err();
        assert_eq!(err.reason.as_str(), "InvalidSpec");
        assert!(
            err.message
                .contains("past 65535: choose a lower server.port"),
            "{}",
            err.message
        );
    }
}
