//! The two ends of an EgressBenchmark case: the client pod, and the server (a pod the operator
//! runs, reached directly, through a Service or on the host network, or an external server).

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// The client pod.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(has(self.bindInterface) && has(self.bindAddress))").message("set bindInterface or bindAddress, not both"))]
pub struct ClientEndpoint {
    /// Node to run the client on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub node_name: Option<String>,
    /// Use the node's network namespace (node->node and vxlan->vxlan cases). A normal pod
    /// (false) measures the pod -> egress node -> target path.
    #[serde(default)]
    pub host_network: bool,
    /// Send from this interface's address (e.g. the vxlan device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 15))]
    pub bind_interface: Option<String>,
    /// Send from this local address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 45))]
    pub bind_address: Option<String>,
}

/// The server: a pod the operator runs, or an external `netbench-loadgen tcp-server`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.address) || (!has(self.nodeName) && !has(self.bindInterface) && !has(self.bindAddress) && !self.hostNetwork)").message("server.address (an external tcp-server) cannot be combined with nodeName, hostNetwork, bindInterface or bindAddress"),
    validation = Rule::new("!has(self.service) || !self.service || (!has(self.address) && !self.hostNetwork && !has(self.bindInterface) && !has(self.bindAddress))").message("server.service reaches a server pod the operator runs on its pod address: it cannot be combined with server.address, hostNetwork, bindInterface or bindAddress"),
    validation = Rule::new("!(has(self.bindInterface) && has(self.bindAddress))").message("set bindInterface or bindAddress, not both"),
)]
pub struct ServerEndpoint {
    /// Node to run the server pod on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub node_name: Option<String>,
    /// Use the node's network namespace.
    #[serde(default)]
    pub host_network: bool,
    /// Listen on this interface's address; the client connects to it (e.g. the vxlan device
    /// for the vxlan->vxlan case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 15))]
    pub bind_interface: Option<String>,
    /// Listen on this address; the client connects to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 45))]
    pub bind_address: Option<String>,
    /// Reach the server pod through a ClusterIP Service the operator creates for it (the
    /// kube-proxy or eBPF Service path) instead of the pod's own address, so one benchmark can
    /// compare pod, Service and host network paths.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub service: bool,
    /// Host or IP of an external `netbench-loadgen server` (outside the cluster, behind the
    /// egress node); no server pod is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub address: Option<String>,
    /// TCP port of the server's control connection.
    #[serde(default = "default_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
}

fn default_port() -> u16 {
    5201
}
