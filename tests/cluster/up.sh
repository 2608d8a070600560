#!/usr/bin/env bash
# Bring up the single-node test cluster (idempotent: reuses built binaries/images and running
# components). Prints `export KUBECONFIG=...` on stdout at the end. Undo with down.sh.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$NB_CLUSTER_DIR/pki.sh"
source "$NB_CLUSTER_DIR/images.sh"

need_root
need_cmds go containerd containerd-shim-runc-v2 runc ctr iptables ip openssl jq curl setsid mount findmnt
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
    sysctl -qw net.ipv4.ip_forward=1
    sysctl -qw net.bridge.bridge-nf-call-iptables=1
    # The node address lives on its own device; no dummy module on these machines, so a bridge
    # without ports stands in for it.
    if ! ip link show "$NB_NODE_DEV" >/dev/null 2>&1; then
        ip link add "$NB_NODE_DEV" type bridge
    fi
    ip addr replace "$NB_NODE_IP/32" dev "$NB_NODE_DEV"
    ip link set "$NB_NODE_DEV" up
}

# --- etcd and control plane -----------------------------------------------------------------
start_etcd() {
    start_component etcd "$BIN/etcd" --name nb --data-dir "$NB_STATE/etcd" \
        --listen-client-urls "http://127.0.0.1:$NB_ETCD_CLIENT_PORT" \
        --advertise-client-urls "http://127.0.0.1:$NB_ETCD_CLIENT_PORT" \
        --listen-peer-urls "http://127.0.0.1:$NB_ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$NB_ETCD_PEER_PORT" \
        --initial-cluster "nb=http://127.0.0.1:$NB_ETCD_PEER_PORT" \
        --unsafe-no-fsync --log-level warn
    wait_for etcd 60 curl -sf "http://127.0.0.1:$NB_ETCD_CLIENT_PORT/health"
}

apiserver_ready() {
    curl -sf --cacert "$NB_PKI/ca.crt" --cert "$NB_PKI/admin.crt" --key "$NB_PKI/admin.key" \
        "https://$NB_NODE_IP:$NB_APISERVER_PORT/readyz"
}

start_apiserver() {
    start_component kube-apiserver "$K8S" kube-apiserver \
        --etcd-servers "http://127.0.0.1:$NB_ETCD_CLIENT_PORT" \
        --bind-address "$NB_NODE_IP" --advertise-address "$NB_NODE_IP" \
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
        --service-cluster-ip-range "$NB_SVC_CIDR" --profiling=false --v=1
    start_component kube-scheduler "$K8S" kube-scheduler \
        --kubeconfig "$NB_STATE/scheduler.kubeconfig" \
        --authentication-kubeconfig "$NB_STATE/scheduler.kubeconfig" \
        --authorization-kubeconfig "$NB_STATE/scheduler.kubeconfig" \
        --bind-address 127.0.0.1 --leader-elect=false --profiling=false --v=1
    wait_for kube-controller-manager 60 curl -skf https://127.0.0.1:10257/healthz
    wait_for kube-scheduler 60 curl -skf https://127.0.0.1:10259/healthz
}

# --- container runtime ----------------------------------------------------------------------
start_containerd() {
    local dir=$NB_STATE/containerd
    mkdir -p "$dir" "$NB_STATE/cni/net.d" "$NB_RUN/containerd"
    write_file "$dir/config.toml" <<EOF
version = 2
root = "$dir/root"
state = "$NB_RUN/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$NB_CONTAINERD_SOCK"
[ttrpc]
  address = "$NB_RUN/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/$NB_PAUSE_IMAGE"
  # These machines withhold CAP_SYS_RESOURCE even from root, so runc cannot lower
  # oom_score_adj below containerd's own (the pause container asks for -998): clamp instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NB_STATE/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
        Root = "$NB_RUN/runc"
EOF
    start_component containerd containerd --config "$dir/config.toml"
    wait_for containerd 30 ctr --address "$NB_CONTAINERD_SOCK" version
}

write_cni_config() {
    write_file "$NB_STATE/cni/net.d/10-netbench.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "netbench",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NB_CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$NB_STATE/cni/ipam",
        "ranges": [[{"subnet": "$NB_NODE_POD_CIDR", "gateway": "$NB_POD_GW"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
}

# load_images: build the standard images, then import every image in the cache (so images
# added earlier with `images.sh image`, e.g. the operator's, come back after down.sh/up.sh).
load_images() {
    build_standard_images >/dev/null
    import_image "$NB_IMAGES"/*.tar
}

# --- node -----------------------------------------------------------------------------------
start_kubelet() {
    local dir=$NB_STATE/kubelet
    mkdir -p "$dir" "$NB_STATE/pod-logs"
    write_file "$NB_STATE/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NB_NODE_IP
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $NB_PKI/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$NB_CONTAINERD_SOCK
# cgroup v1 host and containerd 1.6 (which cannot report its driver).
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
clusterDNS: [$NB_DNS_IP]
clusterDomain: $NB_CLUSTER_DOMAIN
resolvConf: /etc/resolv.conf
podLogsDir: $NB_STATE/pod-logs
# No registry to pull from: never garbage-collect or evict the imported images.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "0%", imagefs.available: "0%", nodefs.inodesFree: "0%", imagefs.inodesFree: "0%"}
serializeImagePulls: false
maxPods: 110
EOF
    start_component kubelet "$K8S" kubelet --config "$NB_STATE/kubelet-config.yaml" \
        --kubeconfig "$NB_STATE/kubelet.kubeconfig" --hostname-override "$NB_NODE_NAME" \
        --node-ip "$NB_NODE_IP" --root-dir "$dir" --cert-dir "$dir/pki" --v=1
    wait_for kubelet 120 kc get node "$NB_NODE_NAME"
    local deadline=$((SECONDS + 120))
    until [[ $(kc get node "$NB_NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]; do
        [[ -n $(component_pid kubelet) ]] || fail_with_log kubelet "kubelet exited"
        ((SECONDS < deadline)) || fail_with_log kubelet "node $NB_NODE_NAME not Ready after 120s"
        sleep 2
    done
    log "node $NB_NODE_NAME Ready"
}

start_kube_proxy() {
    write_file "$NB_STATE/kube-proxy-config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $NB_STATE/kube-proxy.kubeconfig}
hostnameOverride: $NB_NODE_NAME
mode: iptables
clusterCIDR: $NB_POD_CIDR
bindAddress: $NB_NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$NB_NODE_IP/32"]
iptables: {localhostNodePorts: false}
# Zero means: leave the machine's conntrack sysctls as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
    start_component kube-proxy "$K8S" kube-proxy --config "$NB_STATE/kube-proxy-config.yaml" --v=1
    wait_for kube-proxy 60 curl -sf http://127.0.0.1:10256/healthz
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
endpoints: [{addresses: ["$NB_NODE_IP"], conditions: {ready: true}, nodeName: $NB_NODE_NAME}]
ports:
- {name: dns, port: 53, protocol: UDP}
- {name: dns-tcp, port: 53, protocol: TCP}
EOF
    write_file "$NB_STATE/Corefile" <<EOF
.:53 {
    bind $NB_NODE_IP
    errors
    health $NB_NODE_IP:18080
    ready $NB_NODE_IP:18181
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
    wait_for coredns 60 curl -sf "http://$NB_NODE_IP:18181/ready"
}

main() {
    local start=$SECONDS
    # Components and pods inherit this: raise the soft open-files limit to the hard one (the
    # soft 1024 would cap nginx and the load generators; root cannot go above the hard one here).
    ulimit -n "$(ulimit -Hn)"
    prepare_host
    make_pki
    start_etcd
    start_apiserver
    start_controllers
    start_containerd
    load_images
    write_cni_config
    start_kubelet
    start_kube_proxy
    start_coredns
    log "cluster up in $((SECONDS - start))s; images: $NB_PAUSE_IMAGE $NB_NGINX_IMAGE $NB_PROBE_IMAGE"
    echo "export KUBECONFIG=$NB_KUBECONFIG"
    echo "export PATH=$BIN/kubectl-path:\$PATH  # kubectl"
}

BIN=$("$NB_CLUSTER_DIR/build.sh")
K8S=$BIN/k8s
mkdir -p "$NB_STATE" "$NB_RUN" "$NB_LOGS" "$NB_PIDS"
chmod 700 "$NB_STATE"
mkdir -p "$BIN/kubectl-path"
[[ -L $BIN/kubectl-path/kubectl ]] || ln -sf ../k8s "$BIN/kubectl-path/kubectl"
if [[ ${1:-} == --only ]]; then
    # Debugging aid: run selected steps, e.g. `up.sh --only prepare_host start_containerd`.
    shift
    for f in "$@"; do "$f"; done
else
    main
fi
