//! Operator configuration: set by the cluster admin (Helm values -> flags/env), never by a CR.

use std::time::Duration;

use crate::admin::allow::{from_str_by_parse, list_items, GlobList, NodeSelector, SweepPairs};
use crate::admin::caps::destinations::TargetList;
use crate::admin::tolerations::WorkerTolerations;
use crate::policy::deadline::Timeouts;

/// The offload features allowed by default: the checksum and segmentation offloads the
/// examples and the seed experiments switch (legacy ethtool names and their kernel bits).
pub const DEFAULT_OFFLOAD_FEATURES: &str = "tx-checksumming,tx,tx-checksum-*,rx-checksumming,rx,rx-checksum,scatter-gather,sg,tx-scatter-gather*,tcp-segmentation-offload,tso,tx-tcp*-segmentation,generic-segmentation-offload,gso,tx-generic-segmentation,generic-receive-offload,gro,rx-gro";

/// A list of namespaces from a comma-separated flag; "*" allows every namespace and a trailing
/// "*" a prefix ("team-a-*": namespaces created per run or per test).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NamespaceList(Vec<String>);

impl NamespaceList {
    pub fn parse(text: &str) -> NamespaceList {
        NamespaceList(list_items(text).map(String::from).collect())
    }
    pub fn allows(&self, namespace: &str) -> bool {
        self.0.iter().any(|n| match n.strip_suffix('*') {
            Some(prefix) => namespace.starts_with(prefix),
            None => n == namespace,
        })
    }
}

from_str_by_parse!(NamespaceList);

/// How the operator writes its log.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// The worker image of this release: the load generator built from the same version.
pub const DEFAULT_LOADGEN_IMAGE: &str =
    concat!("localhost/netbench/loadgen:", env!("CARGO_PKG_VERSION"));

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
        default_value = DEFAULT_LOADGEN_IMAGE
    )]
    pub loadgen_image: String,
    /// A fixed user and group id for worker pods (Helm value security.runAsUser); unset, they
    /// run as the loadgen image's user unless the cluster assigns one.
    #[arg(long, env = "NETBENCH_WORKER_UID",
          value_parser = clap::value_parser!(i64).range(1..=2_147_483_647))]
    pub worker_uid: Option<i64>,
    /// Tolerations of every worker pod, a JSON array of core/v1 Tolerations (Helm value
    /// workerTolerations): for benchmark nodes that are tainted. Refused at start if the API
    /// server would refuse it on a pod.
    #[arg(long, env = "NETBENCH_WORKER_TOLERATIONS", default_value = "")]
    pub worker_tolerations: WorkerTolerations,
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
    /// Log format: `text` (plain, colour only on a terminal) or `json` (one object per line).
    #[arg(long, env = "NETBENCH_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Namespaces whose benchmarks may run hostNetwork workers ("*" = all; empty = none).
    #[arg(long, env = "NETBENCH_HOST_NETWORK_NAMESPACES", default_value = "")]
    pub host_network_namespaces: NamespaceList,
    /// Namespaces whose IngressBenchmarks may have the operator create HTTPRoutes there
    /// (controllers[].route; "*" = all; empty = none).
    #[arg(long, env = "NETBENCH_ROUTE_NAMESPACES", default_value = "")]
    pub route_namespaces: NamespaceList,
    /// Gateways those routes may attach to, comma-separated globs of "namespace/name" (empty =
    /// none): a route can claim any hostname a Gateway's listeners let it have.
    #[arg(long, env = "NETBENCH_ROUTE_GATEWAYS", default_value = "")]
    pub route_gateways: GlobList,
    /// Namespaces whose benchmarks may run privileged offload Jobs ("*" = all; empty = none).
    #[arg(long, env = "NETBENCH_OFFLOAD_NAMESPACES", default_value = "")]
    pub offload_namespaces: NamespaceList,
    /// Interfaces offload Jobs may change, comma-separated globs ("vxlan*,flannel.1"; empty =
    /// none).
    #[arg(long, env = "NETBENCH_OFFLOAD_INTERFACES", default_value = "")]
    pub offload_interfaces: GlobList,
    /// Features offload Jobs may change, comma-separated globs of ethtool legacy or kernel
    /// names (empty = none).
    #[arg(long, env = "NETBENCH_OFFLOAD_FEATURES", default_value = DEFAULT_OFFLOAD_FEATURES)]
    pub offload_features: GlobList,
    /// Nodes offload Jobs may run on: an equality-based label selector ("k=v,k!=v,k,!k");
    /// empty = no node.
    #[arg(long, env = "NETBENCH_OFFLOAD_NODE_SELECTOR", default_value = "")]
    pub offload_node_selector: NodeSelector,
    /// Sweep pairs: `BENCHMARK_NS=TARGET_NS[/NAME]`, comma-separated globs; TARGET_NS `.` = the
    /// benchmark's own namespace (empty = no sweep).
    #[arg(long, env = "NETBENCH_SWEEP_TARGETS", default_value = "")]
    pub sweep_targets: SweepPairs,
    /// Usage pairs, as sweep pairs: `BENCHMARK_NS=TARGET_NS[/NAME]`, comma-separated globs.
    /// An IngressBenchmark in BENCHMARK_NS may read the CPU and memory of workload NAME in
    /// TARGET_NS (controllers[].workloads) from the kubelets (empty = none).
    #[arg(long, env = "NETBENCH_USAGE_TARGETS", default_value = "")]
    pub usage_targets: SweepPairs,
    /// Old form of sweep permissions: each listed namespace ("*" = every one) may sweep
    /// workloads in its OWN namespace only (pairs `NS=.`); use --sweep-targets for others.
    #[arg(long, env = "NETBENCH_SWEEP_NAMESPACES", default_value = "")]
    pub sweep_namespaces: String,
    /// Namespaces whose benchmarks this operator runs, comma-separated exact names (Helm
    /// `watchNamespaces`); empty = every namespace. Benchmarks elsewhere are left alone.
    #[arg(long, env = "NETBENCH_WATCH_NAMESPACES", default_value = "")]
    pub watch_namespaces: crate::admin::scope::Scope,
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
    /// How long a finished run keeps trying to write its BenchmarkResult, in seconds from the
    /// first failure (every 10 s); then it gives up with ResultRecorded=False and a Warning
    /// Event, keeps its reports, and tries again only when the benchmark is reconciled again.
    #[arg(long, env = "NETBENCH_RESULT_WRITE_TIMEOUT", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub result_write_timeout_s: u64,
    /// How long a worker API connection may take to send a request head, in seconds; also how
    /// long an idle keep-alive connection stays open.
    #[arg(long, env = "NETBENCH_API_HEADER_TIMEOUT", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub api_header_timeout_s: u64,
    /// How long one worker API request may take, body and answer included, in seconds.
    #[arg(long, env = "NETBENCH_API_REQUEST_TIMEOUT", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub api_request_timeout_s: u64,
    /// Most worker API connections open at once; more are closed at once (and counted).
    #[arg(long, env = "NETBENCH_API_MAX_CONNECTIONS", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub api_max_connections: u32,
    /// Most worker API connections open at once from one IP address.
    #[arg(long, env = "NETBENCH_API_MAX_CONNECTIONS_PER_CLIENT", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub api_max_connections_per_client: u32,
    /// A step in which more than this share of requests failed ends Failed (0 to 1; 1 turns
    /// the check off). A step in which no request succeeded fails regardless.
    #[arg(long, env = "NETBENCH_MAX_ERROR_RATIO", default_value_t = 0.5, value_parser = parse_ratio)]
    pub max_error_ratio: f64,
    /// Admin caps: sizes, durations, runs per namespace and target addresses of benchmarks.
    #[command(flatten)]
    pub caps: AdminCaps,
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
    pub fn result_write_timeout(&self) -> Duration {
        Duration::from_secs(self.result_write_timeout_s)
    }
    /// The operator's timeouts a run's deadline depends on.
    pub fn timeouts(&self) -> Timeouts {
        Timeouts {
            worker_start: self.worker_start_timeout(),
            rollout: self.rollout_timeout(),
        }
    }
    /// May a sweep of a benchmark in `benchmark_ns` patch `target_ns/name`? (--sweep-targets,
    /// and --sweep-namespaces as same-namespace pairs.)
    pub fn sweep_allows(&self, benchmark_ns: &str, target_ns: &str, name: &str) -> bool {
        self.sweep_targets.allows(benchmark_ns, target_ns, name)
            || SweepPairs::same_namespace(&self.sweep_namespaces).allows(
                benchmark_ns,
                target_ns,
                name,
            )
    }
    /// Defaults for tests: everything allowed nowhere.
    pub fn for_tests() -> Config {
        <Config as clap::Parser>::parse_from(["netbench-operator"])
    }
}

/// Admin caps on what one benchmark may ask for (Helm values caps.* and targets.*). A
/// benchmark over a cap is refused (condition Invalid, reason NotPermitted, no pod created);
/// one beyond the namespace's concurrent runs waits in Queued.
#[derive(clap::Args, Clone, Debug)]
pub struct AdminCaps {
    /// Most worker pods one benchmark may run at once.
    #[arg(long, env = "NETBENCH_MAX_WORKERS", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_workers: u64,
    /// Most connections (HTTP connections, TCP streams) one worker may open.
    #[arg(long, env = "NETBENCH_MAX_CONNECTIONS_PER_WORKER", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections_per_worker: u64,
    /// Most connections all workers of one benchmark may open together.
    #[arg(long, env = "NETBENCH_MAX_TOTAL_CONNECTIONS", default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_total_connections: u64,
    /// Longest run, in seconds: the sum over all steps (warm-up, measurement, settle) or cases.
    #[arg(long, env = "NETBENCH_MAX_RUN_SECONDS", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_run_seconds: u64,
    /// Most runs of one namespace active at once (both kinds); later ones wait in Queued.
    #[arg(long, env = "NETBENCH_MAX_RUNS_PER_NAMESPACE", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_runs_per_namespace: u32,
    /// Targets benchmarks may load: CIDRs, IPs and host-name patterns ("*.svc.cluster.local").
    /// A target is allowed when its name matches a pattern or every address it resolves to is
    /// inside an allowed CIDR.
    #[arg(
        long,
        env = "NETBENCH_ALLOWED_TARGETS",
        default_value = "0.0.0.0/0,::/0"
    )]
    pub allowed_targets: TargetList,
    /// Targets refused whatever the allow-list says (same syntax): by default loopback,
    /// "this host" and link-local (cloud metadata at 169.254.169.254) addresses.
    #[arg(
        long,
        env = "NETBENCH_DENIED_TARGETS",
        default_value = "127.0.0.0/8,::1/128,0.0.0.0/8,::/128,169.254.0.0/16,fe80::/10"
    )]
    pub denied_targets: TargetList,
    /// Also refuse the Kubernetes API server: the `kubernetes` Service's ClusterIPs and its
    /// endpoints, looked up at each check.
    #[arg(long, env = "NETBENCH_DENY_API_SERVER", default_value_t = true, action = clap::ArgAction::Set)]
    pub deny_api_server: bool,
    /// How long resolving one target host may take, in seconds.
    #[arg(long, env = "NETBENCH_TARGET_RESOLVE_TIMEOUT", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub target_resolve_timeout_s: u64,
}

impl AdminCaps {
    pub fn max_run_duration(&self) -> Duration {
        Duration::from_secs(self.max_run_seconds)
    }
    pub fn target_resolve_timeout(&self) -> Duration {
        Duration::from_secs(self.target_resolve_timeout_s)
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
    fn privileged_lists_allow_nothing_by_default() {
        let c = Config::for_tests();
        assert!(!c.offload_interfaces.allows("eth0"));
        assert!(c.offload_node_selector.is_empty());
        assert!(!c.sweep_allows("a", "a", "web"));
        assert!(c.offload_features.allows("tx-checksumming"));
        assert!(c.offload_features.allows("tx-checksum-ip-generic"));
        assert!(!c.offload_features.allows("loopback"));
    }

    #[test]
    fn the_old_sweep_flag_means_same_namespace_pairs() {
        let mut c = Config::for_tests();
        c.sweep_namespaces = "*".into();
        assert!(c.sweep_allows("team-a", "team-a", "web"));
        assert!(!c.sweep_allows("team-a", "team-b", "web"));
        c.sweep_targets = SweepPairs::parse("team-a=team-b/web");
        assert!(c.sweep_allows("team-a", "team-b", "web"));
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

    #[test]
    fn caps_parse_from_flags_and_refuse_bad_lists() {
        use clap::Parser;
        let c = Config::try_parse_from([
            "netbench-operator",
            "--max-workers=4",
            "--max-runs-per-namespace=1",
            "--allowed-targets=198.18.0.0/15, *.svc.cluster.local",
            "--deny-api-server=false",
        ])
        .unwrap();
        assert_eq!(c.caps.max_workers, 4);
        assert_eq!(c.caps.max_runs_per_namespace, 1);
        assert_eq!(
            c.caps.allowed_targets.to_string(),
            "198.18.0.0/15, *.svc.cluster.local"
        );
        assert!(!c.caps.deny_api_server);
        let defaults = Config::for_tests().caps;
        assert_eq!(defaults.max_run_duration(), Duration::from_secs(3600));
        assert!(defaults.deny_api_server);
        for bad in [
            "--allowed-targets=10.0.0.0/40",
            "--denied-targets=not a host",
            "--max-workers=0",
            "--max-runs-per-namespace=0",
        ] {
            assert!(
                Config::try_parse_from(["netbench-operator", bad]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn worker_tolerations_are_refused_at_start_with_the_entry_and_why() {
        let parse = |v: &str| {
            <Config as clap::Parser>::try_parse_from([
                "netbench-operator",
                "--worker-tolerations",
                v,
            ])
        };
        let c =
            parse(r#"[{"key":"kwok.x-k8s.io/node","operator":"Exists","effect":"NoSchedule"}]"#)
                .unwrap();
        assert_eq!(c.worker_tolerations.for_pod().map(|t| t.len()), Some(1));
        let e = parse(r#"[{"key":"a","operator":"Exists","value":"x"}]"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--worker-tolerations"), "{e}");
        assert!(
            e.contains("toleration 0: operator Exists takes no value"),
            "{e}"
        );
    }
}
