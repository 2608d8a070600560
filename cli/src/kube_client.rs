//! The Kubernetes client from the user's kubeconfig (or the pod's service account), and the
//! `KIND/NAME` benchmark references the commands take.

use anyhow::{bail, Context, Result};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// `-n/--namespace` and `--context`, as kubectl has them.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ClusterArgs {
    /// Namespace of the benchmarks and results (default: the kubeconfig context's namespace).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// kubeconfig context to use (default: the current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
}

/// A client and the namespace to work in.
pub async fn connect(args: &ClusterArgs) -> Result<(Client, String)> {
    let config = match &args.context {
        Some(context) => {
            let options = KubeConfigOptions {
                context: Some(context.clone()),
                ..Default::default()
            };
            let kubeconfig = Kubeconfig::read().context("cannot read the kubeconfig")?;
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .with_context(|| format!("cannot use kubeconfig context {context:?}"))?
        }
        None => Config::infer()
            .await
            .context("no Kubernetes configuration found (kubeconfig or in-cluster)")?,
    };
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).context("cannot build a Kubernetes client")?;
    Ok((client, namespace))
}

/// The two benchmark kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchKind {
    Ingress,
    Egress,
}

impl BenchKind {
    pub fn kind_name(self) -> &'static str {
        match self {
            BenchKind::Ingress => "IngressBenchmark",
            BenchKind::Egress => "EgressBenchmark",
        }
    }
}

/// A benchmark named on the command line as `KIND/NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchRef {
    pub kind: BenchKind,
    pub name: String,
}

impl std::str::FromStr for BenchRef {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        let Some((kind, name)) = s.split_once('/') else {
            bail!("expected KIND/NAME (e.g. ib/web or egressbenchmark/vxlan), got {s:?}");
        };
        let kind = match kind.to_ascii_lowercase().as_str() {
            "ib" | "ingressbenchmark" | "ingressbenchmarks" | "ingressbenchmark.netbench.io" => {
                BenchKind::Ingress
            }
            "eb" | "egressbenchmark" | "egressbenchmarks" | "egressbenchmark.netbench.io" => {
                BenchKind::Egress
            }
            other => bail!(
                "unknown benchmark kind {other:?}: use ib, eb, ingressbenchmark or egressbenchmark"
            ),
        };
        if name.is_empty() || name.len() > 253 || name.contains('/') {
            bail!("{name:?} is not a benchmark name");
        }
        Ok(BenchRef {
            kind,
            name: name.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_spelled_as_kubectl_spells_them() {
        let r: BenchRef = "IB/web".parse().unwrap();
        assert_eq!(r.kind, BenchKind::Ingress);
        assert_eq!(r.name, "web");
        let r: BenchRef = "egressbenchmark/vx".parse().unwrap();
        assert_eq!(r.kind, BenchKind::Egress);
        assert!("web".parse::<BenchRef>().is_err());
        assert!("pod/web".parse::<BenchRef>().is_err());
        assert!("ib/".parse::<BenchRef>().is_err());
        assert!("ib/a/b".parse::<BenchRef>().is_err());
    }
}
