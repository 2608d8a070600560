#!/usr/bin/env bash
# Smoke test of the real multi-node cluster: up.sh, every node Ready, an nginx pod on each node
# served through a ClusterIP Service name to a pod on every node, pod to pod across nodes over
# the vxlan overlay (its counters grow), this machine to pods and ClusterIPs, a pod to the
# external target host through the egress node (which masquerades it), the kubernetes Service
# reachable from a pod, then down.sh must leave no process, namespace, device, mount, cgroup or
# chain behind.
# With kwok (NB_SMOKE_KWOK=0 skips it): fake nodes take pods pinned to them, and only those.
# Exit status non-zero on any failure. Needs root. Set NB_SMOKE_KEEP=1 to leave the cluster up.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root

NS=nb-smoke
step() { printf '\n=== smoke: %s\n' "$*" >&2; }
fail() {
    printf '\n=== smoke: FAILED: %s\n' "$*" >&2
    if [[ -f $NB_KUBECONFIG ]]; then
        kc get nodes -o wide >&2
        kc get pods -A -o wide >&2
        kc -n "$NS" describe pods >&2
        kc get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -n 30 >&2
        for p in $(kc -n "$NS" get pods -o name 2>/dev/null); do kc -n "$NS" logs "$p" >&2; done
    fi
    exit 1
}

cleanup() {
    local rc=$?
    if [[ ${NB_SMOKE_KEEP:-0} == 1 ]]; then return; fi
    if [[ $rc -ne 0 ]]; then "$NB_CLUSTER_DIR/down.sh" >&2 || true; fi
}
trap cleanup EXIT

# The machine's sysctls before the cluster touched them (unless a cluster is already up).
sysctls_before=
if [[ ! -f $NB_STATE/host.saved ]]; then
    for s in "${NB_SYSCTLS[@]}"; do sysctls_before+="$s=$(sysctl -n "$s" 2>/dev/null) "; done
fi

step "up.sh"
start=$SECONDS
"$NB_CLUSTER_DIR/up.sh" || fail "up.sh failed"
log "up.sh took $((SECONDS - start))s"

step "kubectl get nodes: all $NB_NODES Ready"
kc get nodes -o wide || fail "kubectl get nodes"
for node in $(cluster_nodes); do
    [[ $(kc get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]] ||
        fail "node $node is not Ready"
done
kc version || fail "kubectl version"

step "an nginx pod on every node behind a ClusterIP Service"
# One per real node (none on a kwok fake node).
spread='      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: nginx}}}
      nodeSelector: {kubernetes.io/os: linux}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms: [{matchExpressions: [{key: netbench.io/fake-node, operator: DoesNotExist}]}]
'
kc apply -f - <<EOF || fail "apply"
apiVersion: v1
kind: Namespace
metadata: {name: $NS}
---
$(nginx_yaml nginx "$NS" "$NB_NODES" 80 "$spread")
EOF
kc -n "$NS" rollout status deployment/nginx --timeout=180s || fail "nginx rollout"
# nginx_ip NODE: the address of the nginx pod on NODE.
nginx_ip() {
    kc -n "$NS" get pods -l app=nginx --field-selector "spec.nodeName=$1" -o jsonpath='{.items[0].status.podIP}'
}
for node in $(cluster_nodes); do
    [[ -n $(nginx_ip "$node") ]] || fail "no nginx pod on $node"
done

# probe_pod NAME NODE ARGS...: run the probe image on NODE to completion; fail unless it succeeds.
probe_pod() {
    local name=$1 node=$2
    shift 2
    local args
    args=$(printf '"%s",' "$@")
    kc apply -f - <<EOF || fail "apply $name"
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: $NS}
spec:
  restartPolicy: Never
  nodeName: $node
  containers:
  - name: probe
    image: $NB_PROBE_IMAGE
    imagePullPolicy: Never
    args: [${args%,}]
EOF
    local deadline=$((SECONDS + 150)) phase=
    while ((SECONDS < deadline)); do
        phase=$(kc -n "$NS" get pod "$name" -o jsonpath='{.status.phase}')
        [[ $phase == Succeeded || $phase == Failed ]] && break
        sleep 2
    done
    kc -n "$NS" logs "$name" >&2
    [[ $phase == Succeeded ]] || fail "$name ended in phase '$phase'"
}

step "GET http://nginx/ (Service name, cluster DNS, kube-proxy) from a pod on every node"
for node in $(cluster_nodes); do
    probe_pod "probe-nginx-$node" "$node" -timeout 90s http://nginx/
done

last=$(egress_node)
vxlan_rx() { ip -n "$1" -s -j link show dev "$NB_VXLAN_DEV" | jq '.[0].stats64.rx.bytes'; }
if [[ $last != nb-node0 ]]; then
    step "pod on nb-node0 -> pod on $last: over the overlay ($NB_VXLAN_DEV counters grow)"
    before=$(vxlan_rx "$last")
    probe_pod probe-overlay nb-node0 -timeout 60s "http://$(nginx_ip "$last"):8080/"
    after=$(vxlan_rx "$last")
    log "$last $NB_VXLAN_DEV rx bytes: $before -> $after"
    ((after > before)) || fail "nothing arrived on $last's $NB_VXLAN_DEV"
fi

step "this machine reaches every pod IP and the ClusterIP"
for node in $(cluster_nodes); do
    [[ $(curl -sf -m 5 "http://$(nginx_ip "$node"):8080/") == hello ]] || fail "pod on $node unreachable from this machine"
done
cip=$(kc -n "$NS" get service nginx -o jsonpath='{.spec.clusterIP}')
for ((i = 0; i < 4 * NB_NODES; i++)); do
    [[ $(curl -sf -m 5 "http://$cip/") == hello ]] || fail "ClusterIP $cip unreachable from this machine (try $i)"
done

step "pod on nb-node0 -> egress node $last -> target host $NB_TARGET_IP (masqueraded by $last)"
target_dir=$(mktemp -d)
cat >"$target_dir/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $target_dir/nginx.pid;
error_log stderr warn;
events {}
http {
    log_format peer '\$remote_addr';
    access_log $target_dir/access.log peer;
    client_body_temp_path $target_dir;
    server { listen $NB_TARGET_IP:8080; location / { return 200 "hello\\n"; } }
}
EOF
setsid ip netns exec "$NB_TARGET_NS" /usr/sbin/nginx -c "$target_dir/nginx.conf" -e stderr </dev/null >"$target_dir/log" 2>&1 &
target_pid=$!
probe_pod probe-target nb-node0 -timeout 60s "http://$NB_TARGET_IP:8080/"
peers=$(sort -u "$target_dir/access.log" | tr '\n' ' ')
kill "$target_pid" 2>/dev/null
wait "$target_pid" 2>/dev/null
rm -rf "$target_dir"
log "the target saw requests from: $peers"
[[ $peers == "$NB_TARGET_GW_IP " ]] || fail "the target saw '$peers', not only the egress node's $NB_TARGET_GW_IP"

step "GET https://kubernetes.default.svc/version from a pod (in-cluster API access)"
probe_pod probe-api "$last" -timeout 60s -cacert /var/run/secrets/kubernetes.io/serviceaccount/ca.crt \
    https://kubernetes.default.svc/version

if [[ ${NB_SMOKE_KWOK:-1} == 1 ]]; then
    step "kwok fake nodes: pods pinned by nodeSelector land there, others do not"
    "$NB_CLUSTER_DIR/fake-nodes.sh" 2 || fail "fake-nodes.sh"
    kc apply -f - <<EOF || fail "apply fake-pinned"
apiVersion: apps/v1
kind: Deployment
metadata: {name: fake-pinned, namespace: $NS}
spec:
  replicas: 4
  selector: {matchLabels: {app: fake-pinned}}
  template:
    metadata: {labels: {app: fake-pinned}}
    spec:
      nodeSelector: {netbench.io/fake-node: "true"}
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
      containers: [{name: c, image: $NB_PROBE_IMAGE, imagePullPolicy: Never}]
EOF
    kc -n "$NS" rollout status deployment/fake-pinned --timeout=60s || fail "fake-pinned rollout"
    nodes=$(kc -n "$NS" get pods -l app=fake-pinned -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u)
    echo "fake-pinned pods on: $(echo $nodes)" >&2
    grep -qv '^nb-fake-' <<<"$nodes" && fail "a pinned pod landed outside the fake nodes"
    nginx_nodes=$(kc -n "$NS" get pods -l app=nginx -o jsonpath='{.items[*].spec.nodeName}')
    [[ $nginx_nodes == *nb-fake-* ]] && fail "an nginx pod landed on a fake node"
fi

if [[ ${NB_SMOKE_KEEP:-0} == 1 ]]; then
    step "PASSED (cluster left up: NB_SMOKE_KEEP=1)"
    exit 0
fi

step "down.sh leaves nothing behind"
pids=$(cat "$NB_PIDS"/*.pid)
nodes=$(cluster_nodes)
"$NB_CLUSTER_DIR/down.sh" || fail "down.sh failed"
left=()
for pid in $pids; do pid_alive "$pid" && left+=("pid $pid")
done
for proc in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$proc/cmdline") || continue
    [[ $cmd == *"$NB_RUN"* || $cmd == *"$NB_STATE"* || $cmd == *"$NB_CACHE/bin/"* ]] &&
        left+=("process ${proc#/proc/}: $cmd")
done
for dev in "$NB_SWITCH" $nodes; do
    ip link show "$dev" >/dev/null 2>&1 && left+=("device $dev")
done
for netns in $nodes "$NB_TARGET_NS"; do
    [[ -e /run/netns/$netns ]] && left+=("network namespace $netns")
done
ls -d /sys/fs/cgroup/*/nb-node* >/dev/null 2>&1 && left+=("nb-node* cgroups")
findmnt -rno TARGET | grep -qE "^($NB_STATE|$NB_RUN)" && left+=("mounts under $NB_STATE or $NB_RUN")
iptables-save 2>/dev/null | grep -qE '^:(KUBE|CNI)-' && left+=("iptables chains KUBE-*/CNI-*")
[[ -e $NB_STATE || -e $NB_RUN ]] && left+=("state directories")
ls /sys/fs/cgroup/*/kubepods >/dev/null 2>&1 && left+=("kubepods cgroups")
if [[ -n $sysctls_before ]]; then
    for kv in $sysctls_before; do
        [[ $(sysctl -n "${kv%%=*}" 2>/dev/null) == "${kv#*=}" ]] || left+=("sysctl ${kv%%=*} not restored")
    done
fi
((${#left[@]} == 0)) || fail "left behind after down.sh: ${left[*]}"
trap - EXIT
step "PASSED"
