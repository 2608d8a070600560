//! Operator configuration: set by the cluster admin (Helm values -> flags/env), never by a CR.

use std::time::Duration;

/// A list of namespaces from a comma-separated flag; "*" allows every namespace and a trailing
/// "*" a prefix ("team-a-*": namespaces created per run or per test).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NamespaceList(Vec<String>);

impl NamespaceList {
    pub fn parse(text: &str) -> NamespaceList {
        NamespaceList(
            text.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
        )
    }
    pub fn allows(&self, namespace: &str) -> bool {
        self.0.iter().any(|n| match n.strip_suffix('*') {
            Some(prefix) => namespace.starts_with(prefix),
            None => n == namespace,
        })
    }
}

impl std::str::FromStr for NamespaceList {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(NamespaceList::parse(s))
    }
}

#[derive(clap::Parser, Clone, Debug)]
#[command(
    name = "netbench-operator",
    version,
    about = "Runs IngressBenchmark and EgressBenchmark objects"
)]
pub struct Config {
    /// Image of the worker pods (never taken from a benchmark object).
    #[arg(
        long,
        env = "NETBENCH_LOADGEN_IMAGE",
        default_value = "netbench/loadgen:0.1.0"
    )]
    pub loadgen_image: String,
    /// imagePullPolicy of worker pods.
    #[arg(
        long,
        env = "NETBENCH_IMAGE_PULL_POLICY",
        default_value = "IfNotPresent"
    )]
    pub image_pull_policy: String,
    /// URL at which worker pods reach this operator's worker API.
    #[arg(
        long,
        env = "NETBENCH_API_URL",
        default_value = "http://netbench-operator.netbench-system.svc:8080"
    )]
    pub api_url: String,
    /// Address of the worker API, /metrics, /healthz and /readyz.
    #[arg(long, env = "NETBENCH_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: std::net::SocketAddr,
    /// Namespaces whose benchmarks may run hostNetwork workers ("*" = all; empty = none).
    #[arg(long, env = "NETBENCH_HOST_NETWORK_NAMESPACES", default_value = "")]
    pub host_network_namespaces: NamespaceList,
    /// Namespaces whose benchmarks may run privileged offload Jobs ("*" = all; empty = none).
    #[arg(long, env = "NETBENCH_OFFLOAD_NAMESPACES", default_value = "")]
    pub offload_namespaces: NamespaceList,
    /// Namespaces in which sweeps may patch target workloads ("*" = all; empty = none).
    #[arg(long, env = "NETBENCH_SWEEP_NAMESPACES", default_value = "")]
    pub sweep_namespaces: NamespaceList,
    /// Namespace of the operator (holds the leader Lease).
    #[arg(long, env = "POD_NAMESPACE", default_value = "netbench-system")]
    pub namespace: String,
    /// This replica's identity in the leader Lease.
    #[arg(long, env = "POD_NAME", default_value = "netbench-operator")]
    pub pod_name: String,
    /// Elect a leader with a Lease so two replicas never both act.
    #[arg(long, env = "NETBENCH_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,
    /// How long a worker may take to be scheduled, start and register, in seconds.
    #[arg(long, env = "NETBENCH_WORKER_START_TIMEOUT", default_value_t = 120)]
    pub worker_start_timeout_s: u64,
    /// How long a sweep target may take to roll out, in seconds.
    #[arg(long, env = "NETBENCH_ROLLOUT_TIMEOUT", default_value_t = 300)]
    pub rollout_timeout_s: u64,
    /// A step in which more than this share of requests failed ends Failed (0 to 1; 1 turns
    /// the check off). A step in which no request succeeded fails regardless.
    #[arg(long, env = "NETBENCH_MAX_ERROR_RATIO", default_value_t = 0.5, value_parser = parse_ratio)]
    pub max_error_ratio: f64,
}

fn parse_ratio(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{text:?} is not a ratio between 0 and 1")),
    }
}

impl Config {
    pub fn worker_start_timeout(&self) -> Duration {
        Duration::from_secs(self.worker_start_timeout_s)
    }
    pub fn rollout_timeout(&self) -> Duration {
        Duration::from_secs(self.rollout_timeout_s)
    }
    /// Defaults for tests: everything allowed nowhere.
    pub fn for_tests() -> Config {
        <Config as clap::Parser>::parse_from(["netbench-operator"])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_lists() {
        assert!(!NamespaceList::parse("").allows("a"));
        assert!(NamespaceList::parse("a, b").allows("b"));
        assert!(!NamespaceList::parse("a,b").allows("c"));
        assert!(NamespaceList::parse("*").allows("anything"));
        let prefix = NamespaceList::parse("e2e-egpriv-*");
        assert!(prefix.allows("e2e-egpriv-x1"));
        assert!(!prefix.allows("e2e-egdeny-x1"));
    }

    #[test]
    fn max_error_ratio_is_a_ratio() {
        assert_eq!(Config::for_tests().max_error_ratio, 0.5);
        let parse = |v: &str| {
            <Config as clap::Parser>::try_parse_from(["netbench-operator", "--max-error-ratio", v])
        };
        assert_eq!(parse("1").unwrap().max_error_ratio, 1.0);
        assert_eq!(parse("0.05").unwrap().max_error_ratio, 0.05);
        for bad in ["1.5", "-0.1", "NaN", "half"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
