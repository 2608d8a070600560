//! What the API server's schema and CEL rules cannot check: the operator's own permissions
//! and caps (set by the cluster admin), that the named nodes exist, and where the target leads.

use kube::Client;

use crds::ingress::{IngressBenchmarkSpec, OwnedRoute};

use crate::admin::caps::lookup;
use crate::admin::config::Config;
use crate::base::outcome::Failure;

/// Checks that need no API calls. Err is the message for the Invalid condition.
pub fn permitted(
    spec: &IngressBenchmarkSpec,
    namespace: &str,
    config: &Config,
) -> Result<(), String> {
    crds::bounds::ingress(spec)?;
    if spec.workers.host_network && !config.host_network_namespaces.allows(namespace) {
        return Err(format!(
            "hostNetwork workers are not enabled for namespace {namespace}; the cluster admin can allow it (Helm value security.hostNetworkNamespaces)"
        ));
    }
    for c in &spec.controllers {
        let Some(route) = &c.route else {
            continue;
        };
        route_allowed(config, namespace, route)
            .map_err(|e| format!("controller {}: {e}", c.name))?;
    }
    for c in &spec.controllers {
        for w in &c.workloads {
            if !config
                .usage_targets
                .allows(namespace, &w.namespace, &w.name)
            {
                return Err(format!(
                    "controller {}: benchmarks in namespace {namespace} may not read the CPU and memory of {}/{}; the cluster admin can pair them (Helm value security.usageTargets: \"{namespace}={}/{}\")",
                    c.name, w.namespace, w.name, w.namespace, w.name
                ));
            }
        }
    }
    Ok(())
}

/// Whether the admin lets benchmarks in `namespace` create `route` (checked before the run,
/// and again for every creation of a route change).
pub fn route_allowed(config: &Config, namespace: &str, route: &OwnedRoute) -> Result<(), String> {
    if !config.route_namespaces.allows(namespace) {
        return Err(format!(
            "HTTPRoutes created by benchmarks are not enabled for namespace {namespace}; the cluster admin can allow them (Helm value security.routeNamespaces)"
        ));
    }
    let gateway_ns = route.gateway.namespace.as_deref().unwrap_or(namespace);
    let gateway = format!("{gateway_ns}/{}", route.gateway.name);
    if !config.route_gateways.allows(&gateway) {
        return Err(format!(
            "HTTPRoutes created by benchmarks may not attach to Gateway {gateway}; the cluster admin can allow it (Helm value security.routeGateways)"
        ));
    }
    Ok(())
}

/// The admin's sweep pairs allow this benchmark's namespace to patch its target. Err is the
/// message of the Invalid/NotPermitted condition.
pub fn sweep_permitted(
    spec: &IngressBenchmarkSpec,
    namespace: &str,
    config: &Config,
) -> Result<(), String> {
    if spec.sweep.is_none() {
        return Ok(());
    }
    let targets = super::plan::sweep_targets(spec);
    if targets.is_empty() {
        // The API server refuses this; an object stored before its rules were is refused here.
        return Err("the sweep names no target: set sweep.targetRef, or with controllers each controller's sweepTarget".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for tref in targets {
        let target_ns = tref.namespace.as_deref().unwrap_or(namespace);
        // The namespace left out is this one: the same workload named two ways.
        if !seen.insert((target_ns, tref.name.as_str())) {
            return Err(crds::bounds::SHARED_SWEEP_TARGET.into());
        }
        if !config.sweep_allows(namespace, target_ns, &tref.name) {
            return Err(format!(
                "sweeps from namespace {namespace} may not patch {target_ns}/{}; the cluster admin can pair them (Helm value security.sweepTargets: \"{namespace}={target_ns}/{}\")",
                tref.name, tref.name
            ));
        }
    }
    Ok(())
}

/// The admin's caps, the named nodes, and where target.url leads: Ok, or why the run may not
/// start.
pub async fn admitted(
    ctx: &crate::context::Context,
    spec: &IngressBenchmarkSpec,
) -> crate::base::error::Result<Result<(), Failure>> {
    let (client, config) = (&ctx.client, &ctx.config);
    if let Err(m) = super::limits::check(spec, &config.caps) {
        return Ok(Err(Failure::not_permitted(m)));
    }
    if let Err(m) = nodes_exist(client, spec).await? {
        return Ok(Err(Failure::invalid(m)));
    }
    let policy = match lookup::policy(client, &config.caps, &ctx.facts.api_server).await? {
        Ok(p) => p,
        Err(r) => return Ok(Err(r)),
    };
    let timeout = config.caps.target_resolve_timeout();
    // target.url is loaded unless every controller has a URL of its own.
    let own_urls = spec.controllers.iter().all(|c| c.url.is_some());
    if spec.controllers.is_empty() || !own_urls {
        if let Err(refusal) =
            lookup::check_url(&policy, "target.url", &spec.target.url, timeout).await
        {
            return Ok(Err(refusal));
        }
    }
    for c in &spec.controllers {
        if let Some(url) = &c.url {
            let field = format!("controllers[{}].url", c.name);
            if let Err(refusal) = lookup::check_url(&policy, &field, url, timeout).await {
                return Ok(Err(refusal));
            }
        }
    }
    Ok(Ok(()))
}

/// Every node named in workers.nodeNames must exist.
pub async fn nodes_exist(
    client: &Client,
    spec: &IngressBenchmarkSpec,
) -> Result<Result<(), String>, kube::Error> {
    let missing = crate::k8s::workers::missing_nodes(client, &spec.workers.node_names).await?;
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
    use crate::admin::config::NamespaceList;

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
    fn created_routes_need_the_admins_permission() {
        let s = spec(
            "{target: {url: 'http://x/'}, controllers: [{name: plain}, {name: gw, route: {gateway: {name: bench, namespace: gw}, hostname: a.example, backend: {name: web, port: 80}}}]}",
        );
        let mut c = Config::for_tests();
        let err = permitted(&s, "team-a", &c).unwrap_err();
        assert!(
            err.contains("controller gw: HTTPRoutes created by benchmarks are not enabled for namespace team-a")
                && err.contains("security.routeNamespaces"),
            "{err}"
        );
        c.route_namespaces = NamespaceList::parse("team-b");
        assert!(permitted(&s, "team-a", &c).is_err(), "another namespace");
        c.route_namespaces = NamespaceList::parse("team-*");
        let err = permitted(&s, "team-a", &c).unwrap_err();
        assert!(
            err.contains("controller gw: HTTPRoutes created by benchmarks may not attach to Gateway gw/bench")
                && err.contains("security.routeGateways"),
            "{err}"
        );
        c.route_gateways = crate::admin::allow::GlobList::parse("gw/other,prod/*");
        assert!(permitted(&s, "team-a", &c).is_err(), "another Gateway");
        c.route_gateways = crate::admin::allow::GlobList::parse("gw/*");
        assert!(permitted(&s, "team-a", &c).is_ok());
        let plain = spec(
            "{target: {url: 'http://x/'}, controllers: [{name: a}, {name: b, url: 'http://y/'}]}",
        );
        assert!(
            permitted(&plain, "team-a", &Config::for_tests()).is_ok(),
            "no route, nothing to allow"
        );
    }

    #[test]
    fn sweeps_need_the_admins_pair() {
        let s = spec("{target: {url: 'http://x/'}, sweep: {targetRef: {name: nginx, namespace: ingress}, steps: [{cpu: '1'}]}}");
        let mut c = Config::for_tests();
        let err = sweep_permitted(&s, "team-a", &c).unwrap_err();
        assert!(err.contains("may not patch ingress/nginx"), "{err}");
        c.sweep_namespaces = "ingress,team-a".into();
        assert!(
            sweep_permitted(&s, "team-a", &c).is_err(),
            "the old flat list allows only the own namespace"
        );
        c.sweep_targets = crate::admin::allow::SweepPairs::parse("team-b=ingress/nginx");
        assert!(
            sweep_permitted(&s, "team-a", &c).is_err(),
            "another team's pair"
        );
        c.sweep_targets = crate::admin::allow::SweepPairs::parse("team-a=ingress/nginx");
        assert!(sweep_permitted(&s, "team-a", &c).is_ok());
        let own = spec(
            "{target: {url: 'http://x/'}, sweep: {targetRef: {name: web}, steps: [{cpu: '1'}]}}",
        );
        let mut c = Config::for_tests();
        c.sweep_namespaces = "*".into();
        assert!(sweep_permitted(&own, "team-a", &c).is_ok());
    }

    #[test]
    fn every_controllers_sweep_target_needs_the_admins_pair() {
        let s = spec("{target: {url: 'http://x/'}, controllers: [{name: a, sweepTarget: {name: web-a}}, {name: b, sweepTarget: {name: web-b, namespace: ingress}}], sweep: {steps: [{cpu: '1'}]}}");
        let mut c = Config::for_tests();
        c.sweep_targets = crate::admin::allow::SweepPairs::parse("team-a=.");
        let err = sweep_permitted(&s, "team-a", &c).unwrap_err();
        assert!(err.contains("may not patch ingress/web-b"), "{err}");
        c.sweep_targets = crate::admin::allow::SweepPairs::parse("team-a=.,team-a=ingress/web-b");
        assert!(sweep_permitted(&s, "team-a", &c).is_ok());
        let twice = spec("{target: {url: 'http://x/'}, controllers: [{name: a, sweepTarget: {name: web-a}}, {name: b, sweepTarget: {name: web-a, namespace: team-a}}], sweep: {steps: [{cpu: '1'}]}}");
        let err = sweep_permitted(&twice, "team-a", &c).unwrap_err();
        assert!(err.contains("distinct workloads"), "{err}");
        let none = spec(
            "{target: {url: 'http://x/'}, controllers: [{name: a}], sweep: {steps: [{cpu: '1'}]}}",
        );
        let err = sweep_permitted(&none, "team-a", &c).unwrap_err();
        assert!(err.contains("names no target"), "{err}");
    }

    #[test]
    fn reading_a_workloads_usage_needs_the_admins_pair() {
        let s = spec("{target: {url: 'http://x/'}, controllers: [{name: eg, workloads: [{name: envoy, namespace: gw}]}]}");
        let mut c = Config::for_tests();
        let err = permitted(&s, "team-a", &c).unwrap_err();
        assert!(
            err.contains("controller eg: benchmarks in namespace team-a may not read the CPU and memory of gw/envoy")
                && err.contains("security.usageTargets: \"team-a=gw/envoy\""),
            "{err}"
        );
        c.usage_targets = crate::admin::allow::SweepPairs::parse("team-b=gw/envoy,team-a=gw/other");
        assert!(
            permitted(&s, "team-a", &c).is_err(),
            "another team's or workload's pair"
        );
        c.sweep_targets = crate::admin::allow::SweepPairs::parse("team-a=gw/envoy");
        assert!(
            permitted(&s, "team-a", &c).is_err(),
            "a sweep pair is not a usage pair"
        );
        c.usage_targets = crate::admin::allow::SweepPairs::parse("team-a=gw/envoy");
        assert!(permitted(&s, "team-a", &c).is_ok());
    }
}
