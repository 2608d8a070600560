//! The EgressBenchmark test bed (tests/e2e/egress-net.sh): the test cluster's nodes, their NICs
//! and overlay devices, and an external tcp-server on the target host behind the egress node.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context as _, Result};

use crate::repo_root;

fn script() -> PathBuf {
    repo_root().join("tests/e2e/egress-net.sh")
}

fn run_script(action: &str) -> Result<String> {
    stdout_of(
        Command::new(script()).arg(action),
        format!("running egress-net.sh {action}"),
        format!("egress-net.sh {action} failed"),
    )
}

/// Runs `program args` in `node`'s network namespace (each test node is one).
fn in_node(node: &str, program: &str, args: &[&str]) -> Result<String> {
    stdout_of(
        Command::new("nsenter")
            .arg(format!("--net=/run/netns/{node}"))
            .arg("--")
            .arg(program)
            .args(args),
        format!("running {program} on {node}"),
        format!("{program} {} on {node}", args.join(" ")),
    )
}

/// The stdout of `cmd`, which must succeed: else an error, `running` when it could not be run,
/// `failed` and its stderr when it failed.
fn stdout_of(cmd: &mut Command, running: String, failed: String) -> Result<String> {
    let out = cmd.output().context(running)?;
    if !out.status.success() {
        bail!("{failed}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The topology, with the target's tcp-server running; dropping it stops the server.
#[derive(Debug)]
pub struct EgressNet {
    /// Node of the client pods.
    pub client_node: String,
    /// Node of the in-cluster server pods (another node than the client's).
    pub server_node: String,
    /// The egress node: the target host sits behind it.
    pub egress_node: String,
    /// Every node's NIC (a veth to the switch), the node->node path.
    pub nic: String,
    /// Every node's vxlan overlay device, the vxlan->vxlan path.
    pub vxlan: String,
    /// The target host's address (the tcp-server's).
    pub target_ip: String,
    /// Port of the target's tcp-server.
    pub server_port: u16,
    env: BTreeMap<String, String>,
}

impl EgressNet {
    /// Starts the target's tcp-server (stopping a leftover of an earlier run first).
    pub fn up() -> Result<EgressNet> {
        run_script("down")?;
        run_script("up")?;
        let env: BTreeMap<String, String> = run_script("env")?
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let get = |k: &str| {
            env.get(k)
                .cloned()
                .with_context(|| format!("egress-net.sh env does not print {k}"))
        };
        Ok(EgressNet {
            client_node: get("NBE_CLIENT_NODE")?,
            server_node: get("NBE_SERVER_NODE")?,
            egress_node: get("NBE_EGRESS_NODE")?,
            nic: get("NBE_NIC")?,
            vxlan: get("NBE_VXLAN")?,
            target_ip: get("NBE_TARGET_IP")?,
            server_port: get("NBE_SERVER_PORT")?.parse()?,
            env,
        })
    }

    /// Any variable `egress-net.sh env` prints.
    pub fn var(&self, key: &str) -> Option<&str> {
        self.env.get(key).map(String::as_str)
    }

    /// The offload features of `interface` on `node`, as `netbench-loadgen offload get` reports
    /// them (name -> "on"/"off"), read with the same static binary the images hold.
    pub fn features(&self, node: &str, interface: &str) -> Result<BTreeMap<String, String>> {
        let loadgen = self
            .var("NBE_LOADGEN")
            .context("egress-net.sh env does not print NBE_LOADGEN")?;
        let out = in_node(node, loadgen, &["offload", "get", "--interface", interface])?;
        let report: serde_json::Value = serde_json::from_str(&out)?;
        let features = report["features"]
            .as_object()
            .context("offload get prints a features object")?;
        Ok(features
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect())
    }

    /// `ethtool -k` of `interface` on `node`, as text.
    pub fn ethtool_k(&self, node: &str, interface: &str) -> Result<String> {
        in_node(node, "ethtool", &["-k", interface])
    }

    /// Bytes `interface` on `node` has received so far.
    pub fn rx_bytes(&self, node: &str, interface: &str) -> Result<u64> {
        let out = in_node(node, "ip", &["-s", "-j", "link", "show", "dev", interface])?;
        let v: serde_json::Value = serde_json::from_str(&out)?;
        v[0]["stats64"]["rx"]["bytes"]
            .as_u64()
            .with_context(|| format!("no rx byte count for {interface} on {node}: {out}"))
    }
}

impl Drop for EgressNet {
    fn drop(&mut self) {
        if let Err(e) = run_script("down") {
            eprintln!("{e:#}");
        }
    }
}
