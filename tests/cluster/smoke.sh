#!/usr/bin/env bash
# Smoke test of the real single-node cluster: up.sh, node Ready, `kubectl get nodes`, an nginx
# Deployment served through a ClusterIP Service name to another pod, the kubernetes Service
# reachable from a pod, then down.sh must leave no process, device, mount or chain behind.
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

step "kubectl get nodes"
kc get nodes -o wide || fail "kubectl get nodes"
[[ $(kc get node "$NB_NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]] ||
    fail "node $NB_NODE_NAME is not Ready"
kc version || fail "kubectl version"

step "nginx Deployment behind a ClusterIP Service"
kc apply -f - <<EOF || fail "apply"
apiVersion: v1
kind: Namespace
metadata: {name: $NS}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx, namespace: $NS}
spec:
  replicas: 2
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec:
      containers:
      - name: nginx
        image: $NB_NGINX_IMAGE
        imagePullPolicy: Never
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 2}
---
apiVersion: v1
kind: Service
metadata: {name: nginx, namespace: $NS}
spec:
  selector: {app: nginx}
  ports: [{port: 80, targetPort: 8080}]
EOF
kc -n "$NS" rollout status deployment/nginx --timeout=180s || fail "nginx rollout"

# probe_pod NAME ARGS...: run the probe image to completion; fail unless it succeeds.
probe_pod() {
    local name=$1
    shift
    local args
    args=$(printf '"%s",' "$@")
    kc apply -f - <<EOF || fail "apply $name"
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: $NS}
spec:
  restartPolicy: Never
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

step "GET http://nginx/ (Service name, cluster DNS, kube-proxy) from another pod"
probe_pod probe-nginx -timeout 90s http://nginx/
step "GET https://kubernetes.default.svc/version from a pod (in-cluster API access)"
probe_pod probe-api -timeout 60s -cacert /var/run/secrets/kubernetes.io/serviceaccount/ca.crt \
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
"$NB_CLUSTER_DIR/down.sh" || fail "down.sh failed"
left=()
for pid in $pids; do pid_alive "$pid" && left+=("pid $pid")
done
for proc in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$proc/cmdline") || continue
    [[ $cmd == *"$NB_RUN"* || $cmd == *"$NB_STATE"* || $cmd == *"$NB_CACHE/bin/"* ]] &&
        left+=("process ${proc#/proc/}: $cmd")
done
for dev in "$NB_CNI_BRIDGE" "$NB_NODE_DEV"; do
    ip link show "$dev" >/dev/null 2>&1 && left+=("device $dev")
done
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
