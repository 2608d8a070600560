//! The EgressBenchmark test bed (tests/e2e/egress-net.sh): devices of our own in the node's
//! (this machine's) network namespace and an external tcp-server in namespace nbe-target.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context as _, Result};

use crate::repo_root;

fn script() -> PathBuf {
    repo_root().join("tests/e2e/egress-net.sh")
}

fn run_script(action: &str) -> Result<String> {
    let out = Command::new(script())
        .arg(action)
        .output()
        .with_context(|| format!("running egress-net.sh {action}"))?;
    if !out.status.success() {
        bail!(
            "egress-net.sh {action} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The topology while it exists; dropping it runs `egress-net.sh down`.
#[derive(Debug)]
pub struct EgressNet {
    /// Root-namespace end of the veth (the node's side of node-to-node).
    pub veth_root: String,
    /// Address of the target's veth end (node-to-node and pod-to-target server address).
    pub veth_target_ip: String,
    /// Root-namespace vxlan device (the one offload profiles change).
    pub vxlan_root: String,
    /// Address of the target's vxlan end (vxlan-to-vxlan server address).
    pub vxlan_target_ip: String,
    /// Port of the target's tcp-server.
    pub server_port: u16,
    env: BTreeMap<String, String>,
}

impl EgressNet {
    /// Builds the topology (removing a leftover of an earlier run first) with its tcp-server.
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
            veth_root: get("NBE_VETH_ROOT")?,
            veth_target_ip: get("NBE_VETH_TARGET_IP")?,
            vxlan_root: get("NBE_VXLAN_ROOT")?,
            vxlan_target_ip: get("NBE_VXLAN_TARGET_IP")?,
            server_port: get("NBE_SERVER_PORT")?.parse()?,
            env,
        })
    }

    /// Any variable `egress-net.sh env` prints.
    pub fn var(&self, key: &str) -> Option<&str> {
        self.env.get(key).map(String::as_str)
    }

    /// The offload features of a root-namespace device, as `netbench-loadgen offload get` reports
    /// them (name -> "on"/"off"), read with the same static binary the images hold.
    pub fn features(&self, interface: &str) -> Result<BTreeMap<String, String>> {
        let loadgen = self
            .var("NBE_LOADGEN")
            .context("egress-net.sh env does not print NBE_LOADGEN")?;
        let out = Command::new(loadgen)
            .args(["offload", "get", "--interface", interface])
            .output()
            .with_context(|| format!("running {loadgen}"))?;
        if !out.status.success() {
            bail!(
                "offload get --interface {interface}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let features = report["features"]
            .as_object()
            .context("offload get prints a features object")?;
        Ok(features
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect())
    }
}

impl Drop for EgressNet {
    fn drop(&mut self) {
        if let Err(e) = run_script("down") {
            eprintln!("{e:#}");
        }
    }
}
