#!/usr/bin/env bash
# Bring up the test cluster (NB_NODES real nodes, default 3) (idempotent: reuses built binaries/images and running
# components). Prints `export KUBECONFIG=...` on stdout at the end. Undo with down.sh.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$NB_CLUSTER_DIR/pki.sh"
source "$NB_CLUSTER_DIR/images.sh"

need_root
need_cmds go nsenter bridge containerd containerd-shim-runc-v2 runc ctr iptables ip openssl jq curl setsid mount findmnt
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] ||
    die "CNI plugins missing in /usr/lib/cni (apt-get install -y containernetworking-plugins)"

# --- host preparation (recorded once so down.sh can put the machine back) -----------------
prepare_host() {
    local s
    if [[ ! -f $NB_STATE/host.saved ]]; then
        {
            for s in "${NB_SYSCTLS[@]}"; do
                [[ -e /proc/sys/${s//.//} ]] && echo "sysctl $s $(sysctl -n "$s")"
            done
            findmnt -rno TARGET,PROPAGATION | sed 's/^/propagation /'
            for ipt in iptables ip6tables; do
                for table in filter nat mangle raw; do
                    { $ipt -w -t $table -S 2>/dev/null || true; } |
                        sed -nE "s/^-N ((KUBE|CNI)-[^ ]+).*/chain $ipt $table \1/p"
                done
            done
            for s in /run/containerd /var/log/containers /run/netns /var/run/netns /sys/fs/cgroup/*/k8s.io; do
                [[ -e $s ]] && echo "existed $s"
            done
            { ls /run/netns 2>/dev/null || true; } | sed 's/^/netns /'
        } >"$NB_STATE/host.saved.tmp"
        mv "$NB_STATE/host.saved.tmp" "$NB_STATE/host.saved"
    fi
    # Pod volume mounts (kubelet root dir, containerd state) need shared propagation. Only the
    # mount holding our state is changed (not recursively, so other mounts keep theirs); down.sh
    # restores it.
    local m
    for m in "$(findmnt -no TARGET -T "$NB_STATE")" "$(findmnt -no TARGET -T "$NB_RUN")"; do
        [[ $(findmnt -no PROPAGATION --mountpoint "$m") == shared ]] || mount --make-shared "$m"
    done
    # The switch: the control plane's address, one port per node.
    if ! ip link show "$NB_SWITCH" >/dev/null 2>&1; then
        ip link add "$NB_SWITCH" type bridge
    fi
    ip addr replace "$NB_APISERVER_IP/$NB_NODE_PREFIX" dev "$NB_SWITCH"
    ip link set "$NB_SWITCH" up
}

# make_node_netns NODE: the node's network namespace, its NIC on the switch, forwarding on.
# Everything a node changes (sysctls, iptables, routes, devices) stays in its namespace.
make_node_netns() {
    local node=$1 ip ctl
    ip=$(node_ip "$(node_index "$node")")
    if [[ ! -e /run/netns/$node ]]; then
        ip netns add "$node"
        ip -n "$node" link set lo up
    fi
    if ! ip link show "$node" >/dev/null 2>&1; then
        ip link add "$node" type veth peer name "$NB_NODE_NIC" netns "$node"
        ip link set "$node" master "$NB_SWITCH" up
    fi
    ip -n "$node" addr replace "$ip/$NB_NODE_PREFIX" dev "$NB_NODE_NIC"
    ip -n "$node" link set "$NB_NODE_NIC" up
    in_node "$node" sysctl -qw net.ipv4.ip_forward=1
    in_node "$node" sysctl -qw net.bridge.bridge-nf-call-iptables=1
    # The node's cgroup root (kubelet's cgroupRoot must exist); a cpuset cgroup takes tasks only
    # once it has cpus and mems.
    for ctl in /sys/fs/cgroup/*/; do
        [[ -L ${ctl%/} ]] && continue
        mkdir -p "$ctl$node"
        if [[ -f ${ctl}cpuset.cpus ]]; then
            [[ -n $(cat "$ctl$node/cpuset.cpus") ]] || cat "${ctl}cpuset.cpus" >"$ctl$node/cpuset.cpus"
            [[ -n $(cat "$ctl$node/cpuset.mems") ]] || cat "${ctl}cpuset.mems" >"$ctl$node/cpuset.mems"
        fi
    done
}

# make_target_host: namespace nb-target behind the egress node (its eth0 <-> eth1 there).
make_target_host() {
    local egress
    egress=$(egress_node)
    if [[ ! -e /run/netns/$NB_TARGET_NS ]]; then
        ip netns add "$NB_TARGET_NS"
        ip -n "$NB_TARGET_NS" link set lo up
    fi
    if ! ip -n "$egress" link show eth1 >/dev/null 2>&1; then
        ip -n "$egress" link add eth1 type veth peer name eth0 netns "$NB_TARGET_NS"
    fi
    ip -n "$egress" addr replace "$NB_TARGET_GW_IP/24" dev eth1
    ip -n "$NB_TARGET_NS" addr replace "$NB_TARGET_IP/24" dev eth0
    ip -n "$egress" link set eth1 up
    ip -n "$NB_TARGET_NS" link set eth0 up
}

# --- etcd and control plane -----------------------------------------------------------------
start_etcd() {
    start_etcd_member "$BIN/etcd" nb "$NB_ETCD_CLIENT_PORT" "$NB_ETCD_PEER_PORT"
}

apiserver_ready() {
    curl -sf --cacert "$NB_PKI/ca.crt" --cert "$NB_PKI/admin.crt" --key "$NB_PKI/admin.key" \
        "https://$NB_APISERVER_IP:$NB_APISERVER_PORT/readyz"
}

start_apiserver() {
    start_component kube-apiserver "$K8S" kube-apiserver \
        --etcd-servers "http://127.0.0.1:$NB_ETCD_CLIENT_PORT" \
        --bind-address "$NB_APISERVER_IP" --advertise-address "$NB_APISERVER_IP" \
        --secure-port "$NB_APISERVER_PORT" \
        --tls-cert-file "$NB_PKI/apiserver.crt" --tls-private-key-file "$NB_PKI/apiserver.key" \
        --client-ca-file "$NB_PKI/ca.crt" \
        --kubelet-client-certificate "$NB_PKI/apiserver-kubelet-client.crt" \
        --kubelet-client-key "$NB_PKI/apiserver-kubelet-client.key" \
        --kubelet-preferred-address-types InternalIP \
        --service-account-key-file "$NB_PKI/sa.pub" \
        --service-account-signing-key-file "$NB_PKI/sa.key" \
        --service-account-issuer "https://kubernetes.default.svc.$NB_CLUSTER_DOMAIN" \
        --service-cluster-ip-range "$NB_SVC_CIDR" \
        --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
        --allow-privileged=true --profiling=false --v=1
    wait_for kube-apiserver 180 apiserver_ready
}

start_controllers() {
    start_component kube-controller-manager "$K8S" kube-controller-manager \
        --kubeconfig "$NB_STATE/controller-manager.kubeconfig" \
        --authentication-kubeconfig "$NB_STATE/controller-manager.kubeconfig" \
        --authorization-kubeconfig "$NB_STATE/controller-manager.kubeconfig" \
        --bind-address 127.0.0.1 --leader-elect=false \
        --service-account-private-key-file "$NB_PKI/sa.key" --root-ca-file "$NB_PKI/ca.crt" \
        --cluster-signing-cert-file "$NB_PKI/ca.crt" --cluster-signing-key-file "$NB_PKI/ca.key" \
        --use-service-account-credentials=true \
        --allocate-node-cidrs=true --cluster-cidr "$NB_POD_CIDR" --node-cidr-mask-size 24 \
        --node-monitor-period 2s --node-monitor-grace-period 20s \
        --service-cluster-ip-range "$NB_SVC_CIDR" --profiling=false --v=1
    # NB_SCHEDULER_QPS / NB_SCHEDULER_BURST: the scheduler's own client rate limit (unset:
    # Kubernetes' 50 requests/s after a burst of 100, one binding per pod; bench/operator-scale.sh
    # reads how long its requests waited for it).
    local limits=() v
    for v in NB_SCHEDULER_QPS NB_SCHEDULER_BURST; do
        [[ -z ${!v:-} || ${!v} =~ ^[1-9][0-9]{0,5}$ ]] || die "$v must be a whole number (1-999999): ${!v}"
    done
    [[ -n ${NB_SCHEDULER_QPS:-} ]] && limits+=(--kube-api-qps "$NB_SCHEDULER_QPS")
    [[ -n ${NB_SCHEDULER_BURST:-} ]] && limits+=(--kube-api-burst "$NB_SCHEDULER_BURST")
    start_component kube-scheduler "$K8S" kube-scheduler \
        --kubeconfig "$NB_STATE/scheduler.kubeconfig" \
        --authentication-kubeconfig "$NB_STATE/scheduler.kubeconfig" \
        --authorization-kubeconfig "$NB_STATE/scheduler.kubeconfig" \
        --bind-address 127.0.0.1 --leader-elect=false --profiling=false --v=1 "${limits[@]}"
    wait_for kube-controller-manager 60 curl -skf https://127.0.0.1:10257/healthz
    wait_for kube-scheduler 60 curl -skf https://127.0.0.1:10259/healthz
}

# --- nodes ----------------------------------------------------------------------------------
start_containerd() {
    local node=$1 dir run sock
    dir=$(node_dir "$node")
    run=$(node_run "$node")
    sock=$(node_containerd_sock "$node")
    mkdir -p "$dir/containerd" "$dir/cni/net.d" "$run/containerd"
    write_file "$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$run/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/$NB_PAUSE_IMAGE"
  # These machines withhold CAP_SYS_RESOURCE even from root, so runc cannot lower
  # oom_score_adj below containerd's own (the pause container asks for -998): clamp instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
        Root = "$run/runc"
EOF
    start_component "containerd-$node" nsenter --net="/run/netns/$node" -- \
        containerd --config "$dir/containerd/config.toml"
    wait_for "containerd-$node" 30 ctr --address "$sock" version
}

# load_images: build the standard images, then import every image in the cache into every
# node (so images added earlier with `images.sh image`, e.g. the operator's, come back after
# down.sh/up.sh).
load_images() {
    build_standard_images >/dev/null
    import_image "$NB_IMAGES"/*.tar
}

start_kubelet() {
    local node=$1 dir ip
    dir=$(node_dir "$node")
    ip=$(node_ip "$(node_index "$node")")
    mkdir -p "$dir/kubelet" "$dir/pod-logs"
    write_file "$dir/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $NB_PKI/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$(node_containerd_sock "$node")
# cgroup v1 host and containerd 1.6 (which cannot report its driver). Each node's pods live
# under a cgroup root of their own.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$node
failSwapOn: false
clusterDNS: [$NB_DNS_IP]
clusterDomain: $NB_CLUSTER_DOMAIN
resolvConf: /etc/resolv.conf
# One per node: a kubelet removes the log directories of pods its runtime does not know.
podLogsDir: $dir/pod-logs
# No registry to pull from: never garbage-collect or evict the imported images.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "0%", imagefs.available: "0%", nodefs.inodesFree: "0%", imagefs.inodesFree: "0%"}
serializeImagePulls: false
maxPods: 110
EOF
    start_component "kubelet-$node" nsenter --net="/run/netns/$node" -- \
        "$K8S" kubelet --config "$dir/kubelet-config.yaml" \
        --kubeconfig "$NB_STATE/kubelet-$node.kubeconfig" --hostname-override "$node" \
        --node-ip "$ip" --root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" --v=1
}

# pod_cidr NODE: the node's pod range, assigned by the controller-manager when it registers.
pod_cidr() { kc get node "$1" -o jsonpath='{.spec.podCIDR}' 2>/dev/null; }

wait_registered() {
    local node=$1 deadline=$((SECONDS + 120))
    until [[ -n $(pod_cidr "$node") ]]; do
        [[ -n $(component_pid "kubelet-$node") ]] || fail_with_log "kubelet-$node" "the kubelet of $node exited"
        ((SECONDS < deadline)) || fail_with_log "kubelet-$node" "$node has no podCIDR after 120s"
        sleep 1
    done
}

# vxlan_mac NODE: a fixed, locally administered MAC for the node's overlay device.
vxlan_mac() { printf '02:6e:62:00:00:%02x' "$(node_index "$1")"; }
# overlay_ip NODE: the node's address on the overlay, the first one of its pod range.
overlay_ip() {
    local cidr
    cidr=$(pod_cidr "$1")
    echo "${cidr%/*}"
}

# write_cni_config NODE: the bridge CNI on the node's pod range. No masquerading there:
# setup_pod_network does it for traffic leaving the cluster only, as flannel does.
write_cni_config() {
    local node=$1 cidr dir
    cidr=$(pod_cidr "$node")
    dir=$(node_dir "$node")
    write_file "$dir/cni/net.d/10-netbench.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "netbench",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NB_CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "mtu": $NB_VXLAN_MTU,
      "ipam": {
        "type": "host-local",
        "dataDir": "$dir/cni/ipam",
        "ranges": [[{"subnet": "$cidr", "gateway": "${cidr%.0/*}.1"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
}

# setup_pod_network: per node, the CNI config, the overlay device, a route to every other
# node's pods through it, masquerading of pod traffic that leaves the cluster (except towards
# the target, which goes over the overlay to the egress node and is masqueraded there); in the
# root namespace, routes to every node's pods and (via nb-node0's kube-proxy) to the Service
# range, so tests on this machine reach pods and ClusterIPs.
setup_pod_network() {
    local node other egress
    egress=$(egress_node)
    for node in $(cluster_nodes); do
        write_cni_config "$node"
        if ! ip -n "$node" link show "$NB_VXLAN_DEV" >/dev/null 2>&1; then
            ip -n "$node" link add "$NB_VXLAN_DEV" address "$(vxlan_mac "$node")" mtu "$NB_VXLAN_MTU" \
                type vxlan id "$NB_VXLAN_VNI" dstport "$NB_VXLAN_PORT" nolearning \
                local "$(node_ip "$(node_index "$node")")" dev "$NB_NODE_NIC"
        fi
        ip -n "$node" addr replace "$(overlay_ip "$node")/32" dev "$NB_VXLAN_DEV"
        ip -n "$node" link set "$NB_VXLAN_DEV" up
        for other in $(cluster_nodes); do
            [[ $other == "$node" ]] && continue
            ip -n "$node" neigh replace "$(overlay_ip "$other")" lladdr "$(vxlan_mac "$other")" \
                dev "$NB_VXLAN_DEV" nud permanent
            bridge -n "$node" fdb replace "$(vxlan_mac "$other")" dev "$NB_VXLAN_DEV" \
                dst "$(node_ip "$(node_index "$other")")"
            ip -n "$node" route replace "$(pod_cidr "$other")" via "$(overlay_ip "$other")" \
                dev "$NB_VXLAN_DEV" onlink
        done
        if [[ $node != "$egress" ]]; then
            ip -n "$node" route replace "$NB_TARGET_NET" via "$(overlay_ip "$egress")" \
                dev "$NB_VXLAN_DEV" onlink
        fi
        if ! in_node "$node" iptables -w -t nat -S NB-MASQ >/dev/null 2>&1; then
            in_node "$node" iptables -w -t nat -N NB-MASQ
            in_node "$node" iptables -w -t nat -A NB-MASQ -d "$NB_POD_CIDR" -j RETURN
            in_node "$node" iptables -w -t nat -A NB-MASQ -d "$NB_TARGET_NET" -o "$NB_VXLAN_DEV" -j RETURN
            in_node "$node" iptables -w -t nat -A NB-MASQ -s "$NB_POD_CIDR" -j MASQUERADE
            in_node "$node" iptables -w -t nat -A POSTROUTING -j NB-MASQ
        fi
        # Locally sent packets to a ClusterIP are routed before kube-proxy's DNAT: they need a
        # route (nodes have no default route, so nothing leaves the test's ranges).
        ip -n "$node" route replace "$NB_SVC_CIDR" dev "$NB_NODE_NIC"
        ip route replace "$(pod_cidr "$node")" via "$(node_ip "$(node_index "$node")")" dev "$NB_SWITCH"
    done
    ip route replace "$NB_SVC_CIDR" via "$(node_ip 0)" dev "$NB_SWITCH"
}

start_kube_proxy() {
    local node=$1 ip
    ip=$(node_ip "$(node_index "$node")")
    write_file "$(node_dir "$node")/kube-proxy-config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $NB_STATE/kube-proxy.kubeconfig}
hostnameOverride: $node
mode: iptables
clusterCIDR: $NB_POD_CIDR
bindAddress: $ip
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$ip/32"]
iptables: {localhostNodePorts: false}
# Zero means: leave the machine's conntrack sysctls as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
    start_component "kube-proxy-$node" nsenter --net="/run/netns/$node" -- \
        "$K8S" kube-proxy --config "$(node_dir "$node")/kube-proxy-config.yaml" --v=1
}

wait_ready() {
    local node=$1 deadline=$((SECONDS + 120))
    wait_for "kube-proxy-$node" 60 in_node "$node" curl -sf http://127.0.0.1:10256/healthz
    until [[ $(kc get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]; do
        [[ -n $(component_pid "kubelet-$node") ]] || fail_with_log "kubelet-$node" "the kubelet of $node exited"
        ((SECONDS < deadline)) || fail_with_log "kubelet-$node" "node $node not Ready after 120s"
        sleep 1
    done
    log "node $node Ready"
}

# --- cluster DNS: CoreDNS as a host process behind the kube-dns Service -----------------------
start_coredns() {
    kc apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "netbench:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "netbench:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "netbench:coredns"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "netbench:coredns"}]
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  clusterIP: $NB_DNS_IP
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-host
  namespace: kube-system
  labels: {kubernetes.io/service-name: kube-dns, endpointslice.kubernetes.io/managed-by: netbench-up-sh}
addressType: IPv4
endpoints: [{addresses: ["$NB_APISERVER_IP"], conditions: {ready: true}}]
ports:
- {name: dns, port: 53, protocol: UDP}
- {name: dns-tcp, port: 53, protocol: TCP}
EOF
    write_file "$NB_STATE/Corefile" <<EOF
.:53 {
    bind $NB_APISERVER_IP
    errors
    health $NB_APISERVER_IP:18080
    ready $NB_APISERVER_IP:18181
    kubernetes $NB_CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
        kubeconfig $NB_STATE/coredns.kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 30
    loadbalance
}
EOF
    start_component coredns "$BIN/coredns" -conf "$NB_STATE/Corefile"
    wait_for coredns 60 curl -sf "http://$NB_APISERVER_IP:18181/ready"
}

main() {
    local start=$SECONDS node
    # Components and pods inherit this: raise the soft open-files limit to the hard one (the
    # soft 1024 would cap nginx and the load generators; root cannot go above the hard one here).
    ulimit -n "$(ulimit -Hn)"
    prepare_host
    make_pki
    for node in $(cluster_nodes); do make_node_netns "$node"; done
    make_target_host
    start_etcd
    start_apiserver
    start_controllers
    for node in $(cluster_nodes); do start_containerd "$node"; done
    load_images
    # One at a time, so that node N gets the Nth pod range (easier to read; nothing relies on it).
    for node in $(cluster_nodes); do
        start_kubelet "$node"
        wait_registered "$node"
    done
    setup_pod_network
    for node in $(cluster_nodes); do start_kube_proxy "$node"; done
    for node in $(cluster_nodes); do wait_ready "$node"; done
    start_coredns
    log "cluster up in $((SECONDS - start))s: nodes $(cluster_nodes | tr '\n' ' ')(egress node $(egress_node); target host $NB_TARGET_IP in namespace $NB_TARGET_NS)"
    echo "export KUBECONFIG=$NB_KUBECONFIG"
    echo "export PATH=$BIN/kubectl-path:\$PATH  # kubectl"
}

BIN=$("$NB_CLUSTER_DIR/build.sh")
K8S=$BIN/k8s
mkdir -p "$NB_STATE" "$NB_RUN" "$NB_LOGS" "$NB_PIDS"
chmod 700 "$NB_STATE"
# The node count is fixed while the cluster exists.
if [[ -f $NB_STATE/node-count ]]; then
    [[ $(cat "$NB_STATE/node-count") == "$NB_NODES" ]] ||
        die "the cluster runs with $(cat "$NB_STATE/node-count") nodes, not NB_NODES=$NB_NODES: down.sh first"
else
    [[ $NB_NODES =~ ^[1-9]$ ]] || die "NB_NODES must be 1..9, not '$NB_NODES'"
    echo "$NB_NODES" >"$NB_STATE/node-count"
fi
mkdir -p "$BIN/kubectl-path"
[[ -L $BIN/kubectl-path/kubectl ]] || ln -sf ../k8s "$BIN/kubectl-path/kubectl"
if [[ ${1:-} == --only ]]; then
    # Debugging aid: run selected steps, e.g. `up.sh --only prepare_host start_containerd`.
    shift
    for f in "$@"; do "$f"; done
else
    main
fi
