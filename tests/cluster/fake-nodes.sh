#!/usr/bin/env bash
# Add COUNT fake nodes (kwok) to the running cluster, for scheduling/pinning and scale tests:
#   fake-nodes.sh COUNT [CPU] [MEMORY]     e.g. fake-nodes.sh 4 8 32Gi
# Nodes are named nb-fake-0..COUNT-1, labelled netbench.io/fake-node=true and
# type=kwok, and tainted kwok.x-k8s.io/node=fake:NoSchedule so only pods that tolerate it land
# there (real workloads stay on the real nodes nb-nodeN). kwok marks their pods Running without running
# anything. Idempotent; kwok is built on first use (build.sh --with-kwok) and stopped by down.sh.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root

count=${1:?usage: fake-nodes.sh COUNT [CPU] [MEMORY]}
cpu=${2:-8}
memory=${3:-32Gi}
[[ $count =~ ^[0-9]+$ ]] || die "COUNT must be a number"
[[ -f $NB_KUBECONFIG ]] || die "cluster not up (run up.sh first)"

BIN=$("$NB_CLUSTER_DIR/build.sh" --with-kwok)
# Node Leases renewed every 10 s (a quarter of 40 s): the heartbeat stage alone updates node
# status only every 20-45 s, longer than the controller-manager's 20 s grace period
# (up.sh), so without leases fake nodes flap NotReady and the operator fails runs on them
# (NodeLost).
start_component kwok "$BIN/kwok" --kubeconfig "$NB_KUBECONFIG" \
    --config "$BIN/kwok-stages.yaml" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --node-ip 198.19.253.1 --cidr 198.19.240.0/21 \
    --node-lease-duration-seconds 40 --server-address ""
sleep 1
[[ -n $(component_pid kwok) ]] || fail_with_log kwok "kwok exited"

for ((i = 0; i < count; i++)); do
    kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: nb-fake-$i
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels:
    kubernetes.io/hostname: nb-fake-$i
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/role: agent
    type: kwok
    netbench.io/fake-node: "true"
spec:
  taints: [{key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}]
status:
  allocatable: {cpu: "$cpu", memory: $memory, pods: "110"}
  capacity: {cpu: "$cpu", memory: $memory, pods: "110"}
EOF
done
deadline=$((SECONDS + 60))
for ((i = 0; i < count; i++)); do
    until [[ $(kc get node "nb-fake-$i" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]; do
        ((SECONDS < deadline)) || fail_with_log kwok "fake node nb-fake-$i not Ready after 60s"
        sleep 1
    done
done
log "$count fake node(s) Ready"
