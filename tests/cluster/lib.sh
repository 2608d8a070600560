# shellcheck shell=bash
# Shared settings and helpers for tests/cluster/*.sh. Source it; do not run it.
#
# Everything the cluster creates lives in three places, all removed by down.sh except the cache:
#   NB_STATE  persistent state (certs, kubeconfigs, etcd data, containerd root, kubelet root, logs)
#   NB_RUN    runtime files (sockets, PID files)
#   NB_CACHE  built binaries and images, kept across runs (keyed by a hash of their sources)

set -euo pipefail

NB_CLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NB_STATE=${NB_CLUSTER_STATE:-/var/lib/netbench-cluster}
NB_RUN=${NB_CLUSTER_RUN:-/run/netbench-cluster}
NB_CACHE=${NB_CLUSTER_CACHE:-/var/cache/netbench/cluster}

# Kubernetes version built from the Go module proxy (keep in sync with go.mod).
NB_K8S_VERSION=v1.37.2

# Network plan: all inside 198.19.0.0/16 (benchmark-testing range), away from the machine's own
# 192.0.2.0/24 and from the 198.18.0.0/24 / 198.19.0.0/24 ranges the tcp tests use.
#
# Each real node is a network namespace of its own (named like the node) whose "NIC" eth0 is a
# veth to the switch, a bridge in the root namespace; the control plane (etcd, apiserver,
# controller-manager, scheduler, CoreDNS) runs in the root namespace on the switch's address.
# Pods on different nodes talk over a vxlan overlay between the nodes' NICs (flannel's layout:
# device nb-vxlan0 holding the .0 address of the node's pod range, a route per other node).
# The last node is the egress node: the external target host (namespace nb-target) sits behind
# it, and pod traffic to the target is routed there over the overlay and masqueraded there.
# Real nodes nb-node0 .. nb-node$((NB_NODES-1)): 3 unless set, or as many as the running cluster has.
NB_NODES=${NB_NODES:-$(cat "$NB_STATE/node-count" 2>/dev/null || echo 3)}
NB_SWITCH=nb-switch           # root-namespace bridge joining the nodes and the control plane
NB_APISERVER_IP=198.19.255.1  # on the switch: apiserver bind/advertise address, CoreDNS
NB_NODE_PREFIX=24             # nodes are 198.19.255.10 + index on the switch
NB_NODE_NIC=eth0              # a node's NIC (inside its namespace)
NB_VXLAN_DEV=nb-vxlan0        # the overlay device on every node
NB_VXLAN_VNI=1
NB_VXLAN_PORT=8472            # flannel's vxlan port
NB_VXLAN_MTU=1450
NB_POD_CIDR=198.19.128.0/18   # cluster CIDR (128-191: the switch and target ranges stay outside); a /24 per node
NB_SVC_CIDR=198.19.64.0/18
NB_SVC_KUBERNETES_IP=198.19.64.1
NB_DNS_IP=198.19.64.10
NB_CNI_BRIDGE=nb-cni0         # per node, inside its namespace
NB_TARGET_NS=nb-target        # the external target host, behind the egress node
NB_TARGET_NET=198.19.254.0/24
NB_TARGET_IP=198.19.254.2     # the target's address (its eth0)
NB_TARGET_GW_IP=198.19.254.1  # the egress node's address towards the target (its eth1)
NB_CLUSTER_DOMAIN=cluster.local
NB_APISERVER_PORT=6443
NB_ETCD_CLIENT_PORT=32379
NB_ETCD_PEER_PORT=32380

# netbench's own version (Cargo.toml), the tag of its images as .ci/release.sh builds them.
NB_VERSION=$("$NB_CLUSTER_DIR/../../.ci/release.sh" version)
NB_OPERATOR_IMAGE=localhost/netbench/operator:$NB_VERSION
NB_LOADGEN_IMAGE=localhost/netbench/loadgen:$NB_VERSION

# Image tags (never `latest`). Images are imported under docker.io/<name>.
NB_PAUSE_IMAGE=netbench/pause:3.10-nb1
NB_NGINX_IMAGE=netbench/nginx-target:0.1.0
NB_PROBE_IMAGE=netbench/probe:0.1.0

NB_PKI=$NB_STATE/pki
NB_LOGS=$NB_STATE/logs
NB_PIDS=$NB_RUN/pids
NB_KUBECONFIG=$NB_STATE/admin.kubeconfig

node_name() { echo "nb-node$1"; }
node_ip() { echo "198.19.255.$((10 + $1))"; }
node_index() { echo "${1#nb-node}"; }
egress_node() { node_name $((NB_NODES - 1)); }
node_dir() { echo "$NB_STATE/nodes/$1"; }
node_run() { echo "$NB_RUN/nodes/$1"; }
node_containerd_sock() { echo "$NB_RUN/nodes/$1/containerd.sock"; }
cluster_nodes() {
    local i
    for ((i = 0; i < NB_NODES; i++)); do node_name "$i"; done
}
# in_node NODE CMD...: run CMD in NODE's network namespace only (unlike `ip netns exec`, which
# also gives it a mount namespace of its own: the kubelet's volume mounts must be seen by
# containerd and runc, so every node shares the machine's mounts).
in_node() {
    local node=$1
    shift
    nsenter --net="/run/netns/$node" -- "$@"
}

# Sysctls the cluster (we, kubelet or kube-proxy) may change; up.sh saves them, down.sh restores.
NB_SYSCTLS=(
    net.ipv4.ip_forward
    net.bridge.bridge-nf-call-iptables
    net.bridge.bridge-nf-call-ip6tables
    net.ipv4.conf.all.route_localnet
    vm.overcommit_memory
    vm.panic_on_oom
    kernel.panic
    kernel.panic_on_oops
    kernel.keys.root_maxkeys
    kernel.keys.root_maxbytes
    net.netfilter.nf_conntrack_max
    net.netfilter.nf_conntrack_tcp_timeout_established
    net.netfilter.nf_conntrack_tcp_timeout_close_wait
)

log() { printf '[cluster %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() {
    printf '[cluster] ERROR: %s\n' "$*" >&2
    exit 1
}

need_root() { [[ $(id -u) -eq 0 ]] || die "must run as root"; }

need_cmds() {
    local c missing=()
    for c in "$@"; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
    ((${#missing[@]} == 0)) || die "missing commands: ${missing[*]} (run tests/install-deps.sh)"
}

# Hash of everything that determines the Go binaries: module files, sources, build script, Go version.
source_hash() {
    (
        cd "$NB_CLUSTER_DIR"
        go version
        cat go.mod go.sum workspace.go.work go.work.sum coredns/go.mod coredns/go.sum kwok/go.mod kwok/go.sum build.sh
        cat traefik/go.mod traefik/go.sum traefik/ext/go.mod traefik/prepare.sh
        cat ../chart/tools/go.mod ../chart/tools/go.sum
        find cmd coredns kwok traefik -name '*.go' -print0 | sort -z | xargs -0 cat
    ) | sha256sum | cut -c1-16
}

bin_dir() { echo "$NB_CACHE/bin/$(source_hash)"; }

# kubectl from the hyperkube binary, talking to our cluster.
kc() { "$(bin_dir)/k8s" kubectl --kubeconfig "$NB_KUBECONFIG" "$@"; }

# established SECONDS KUBECTL-ARGS...: until the CRDs named are Established, at most SECONDS.
# `kubectl wait --for condition=established` fails at once ("accessor error") when it reads a
# just-created CRD before its status has conditions: it is asked again.
established() {
    local deadline=$((SECONDS + $1))
    shift
    until kc wait --for condition=established --timeout=5s "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || { kc wait --for condition=established --timeout=1s "$@"; return 1; }
        sleep 0.5
    done
}

# write_file PATH: write stdin to PATH only if the content differs (kube-proxy exits when its
# config file changes, so a second up.sh must not touch unchanged files).
write_file() {
    local tmp
    tmp=$(mktemp "$1.XXXXXX")
    cat >"$tmp"
    if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv "$tmp" "$1"; fi
}

pid_alive() { [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null; }

# component_pid NAME: the PID recorded for NAME if that process still runs, else empty.
component_pid() {
    local f=$NB_PIDS/$1.pid pid
    [[ -f $f ]] || return 0
    pid=$(cat "$f")
    if pid_alive "$pid"; then echo "$pid"; fi
}

# start_component NAME CMD...: run CMD in the background with its own log, record its PID.
start_component() {
    local name=$1
    shift
    mkdir -p "$NB_PIDS" "$NB_LOGS"
    if [[ -n $(component_pid "$name") ]]; then
        log "$name already running (pid $(component_pid "$name"))"
        return 0
    fi
    log "starting $name"
    # setsid: own session, so a terminal's Ctrl-C does not reach it and down.sh kills it by PID.
    setsid "$@" >>"$NB_LOGS/$name.log" 2>&1 </dev/null &
    echo $! >"$NB_PIDS/$name.pid"
}

# fail_with_log NAME MESSAGE: print the tail of NAME's log and exit non-zero.
fail_with_log() {
    local name=$1
    shift
    printf '[cluster] ERROR: %s\n--- last 40 lines of %s ---\n' "$*" "$NB_LOGS/$name.log" >&2
    tail -n 40 "$NB_LOGS/$name.log" >&2 2>/dev/null || true
    exit 1
}

# nginx_yaml NAME NAMESPACE REPLICAS PORT [POD_SPEC]: a Deployment NAME of REPLICAS test nginx
# pods (none given: the Deployment's default) of $NB_NGINX_IMAGE (serves on 8080, ready once /
# answers) and a Service NAME on PORT in front of them, in NAMESPACE. POD_SPEC: lines (each
# ending in a newline, indented by 6) added to the pod spec.
nginx_yaml() {
    local replicas=""
    [[ -z $3 ]] || replicas="  replicas: $3
"
    cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1, namespace: $2}
spec:
${replicas}  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
${5:-}      containers:
      - name: nginx
        image: $NB_NGINX_IMAGE
        imagePullPolicy: Never
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 2}
---
apiVersion: v1
kind: Service
metadata: {name: $1, namespace: $2}
spec:
  selector: {app: $1}
  ports: [{port: $4, targetPort: 8080}]
EOF
}

# wait_hello HOST NAMESPACE SERVICE: waits (60 s at most) until Service SERVICE of NAMESPACE (an
# ingress controller or a Gateway) answers "hello" (the test backend) for Host HOST.
wait_hello() {
    local host=$1 ip deadline
    ip=$(kc -n "$2" get service "$3" -o jsonpath='{.spec.clusterIP}')
    deadline=$((SECONDS + 60))
    until [[ $(curl -s -m 2 -H "Host: $host" "http://$ip/") == hello ]]; do
        ((SECONDS < deadline)) || die "http://$host/ through $3 ($ip) does not answer hello"
        sleep 1 # pause between attempts; the answer above is what is waited for
    done
}

# start_etcd_member BIN NAME CLIENT_PORT PEER_PORT: starts etcd BIN as the one member NAME of its
# cluster, data in $NB_STATE/etcd, listening on 127.0.0.1 (no fsync: the data is thrown away), and
# waits until it is healthy.
start_etcd_member() {
    start_component etcd "$1" --name "$2" --data-dir "$NB_STATE/etcd" \
        --listen-client-urls "http://127.0.0.1:$3" \
        --advertise-client-urls "http://127.0.0.1:$3" \
        --listen-peer-urls "http://127.0.0.1:$4" \
        --initial-advertise-peer-urls "http://127.0.0.1:$4" \
        --initial-cluster "$2=http://127.0.0.1:$4" \
        --unsafe-no-fsync --log-level warn
    wait_for etcd 60 curl -sf "http://127.0.0.1:$3/health"
}

# k8s_version_ldflags VERSION DATE: the -X flags (each after a space) that stamp Kubernetes
# VERSION (v1.MINOR.PATCH) and build DATE into component-base and client-go, as its release build
# does: what `--version` and the API server's /version report.
k8s_version_ldflags() {
    local minor=${1#v1.} pkg
    minor=${minor%%.*}
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        printf ' -X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s' "$pkg" "$1" "$pkg" "$pkg" "$minor"
        printf ' -X %s.gitTreeState=clean -X %s.buildDate=%s' "$pkg" "$pkg" "$2"
    done
}

# begin_build OUT: sets tmp to a fresh OUT.tmp.<pid> for a build to fill (removed when the
# script exits) and start to now (in $SECONDS).
begin_build() {
    tmp="$1.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    trap 'rm -rf "$tmp"' EXIT
    start=$SECONDS
}

# finish_build OUT KEEP: moves what the build made in $tmp into OUT, then removes the builds
# beside OUT but the KEEP newest.
finish_build() {
    mkdir -p "$1"
    mv "$tmp"/* "$1/"
    find "$(dirname "$1")" -mindepth 1 -maxdepth 1 -type d ! -name '*.tmp.*' -printf '%T@ %p\n' |
        sort -rn | tail -n +$(($2 + 1)) | cut -d' ' -f2- | xargs -r rm -rf
}

# wait_for NAME SECONDS CMD...: retry CMD until it succeeds; fail with NAME's log on timeout or
# if NAME's process died.
wait_for() {
    local name=$1 secs=$2
    shift 2
    local deadline=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        if [[ -f $NB_PIDS/$name.pid && -z $(component_pid "$name") ]]; then
            fail_with_log "$name" "$name exited"
        fi
        ((SECONDS < deadline)) || fail_with_log "$name" "$name not ready after ${secs}s"
        sleep 1
    done
}
