#!/usr/bin/env bash
# Both seed experiments on the 3-node test cluster, from their examples, with the peers (iperf3,
# wrk) on the same paths right after, so docs/reproducing-the-seeds.md can put them side by side.
#
#   bench/seeds.sh [ingress|egress|all]     (default all; needs root)
#
# ingress: deploy/examples/ingress-controller-sweep.yaml: Traefik (nb-node1) swept over 250m, 500m,
#          1 and 2 CPUs by a worker on nb-node0, no keep-alive; then wrk from nb-node0's network
#          namespace against Traefik at its restored 2 CPUs (Connection: close), as a reference.
# egress:  deploy/examples/egress-seed-test-cluster.yaml: node->node, vxlan->vxlan, vxlan with
#          tx checksumming off on both ends, pod->egress node->target; then iperf3 between the same
#          nodes' namespaces on the same devices (offload on, then off on both ends, restored).
# Brings everything up with tests/e2e/setup.sh (cluster, images, operator, Traefik, permissions
# for namespace netbench-seeds). Prints the tables; the cluster stays up (tests/cluster/down.sh).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-all}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/netbench/target}
eval "$("$repo/tests/e2e/setup.sh")"
source "$repo/tests/cluster/lib.sh"
ns=netbench-seeds
kc create namespace "$ns" --dry-run=client -o yaml | kc apply -f - >/dev/null

# run_example KIND NAME FILE: apply FILE afresh and wait (up to 20 min) until it ends.
run_example() {
    local kind=$1 name=$2 file=$3 phase= deadline=$((SECONDS + 1200))
    kc -n "$ns" delete "$kind" "$name" --ignore-not-found --wait=true >/dev/null
    kc apply -f "$file" >/dev/null
    while ((SECONDS < deadline)); do
        phase=$(kc -n "$ns" get "$kind" "$name" -o jsonpath='{.status.phase}')
        [[ $phase == Succeeded || $phase == Failed ]] && break
        sleep 5
    done
    [[ $phase == Succeeded ]] || {
        kc -n "$ns" get "$kind" "$name" -o yaml >&2
        die "$kind $name ended in phase '$phase'"
    }
}

ingress() {
    echo "=== ingress seed: Traefik CPU sweep (netbench)"
    run_example ib ingress-controller-sweep "$repo/deploy/examples/ingress-controller-sweep.yaml"
    kc -n "$ns" get ib ingress-controller-sweep -o json | jq -r '
        .status.steps[] | "\(.cpu)\t\(.rps | floor) RPS\tp50 \(.latencyMs.p50) ms\tp99 \(.latencyMs.p99) ms\terrors \([.errors[]] | add)"'
    kc -n "$ns" get ib ingress-controller-sweep -o jsonpath='{.status.scaling.summary}{"\n"}'
    if command -v wrk >/dev/null; then
        echo "=== ingress reference: wrk -t1 -c32 -d15s, Connection: close, from nb-node0, Traefik at 2 CPUs"
        kc -n ingress-traefik rollout status deployment/traefik --timeout=120s >/dev/null
        ip=$(kc -n ingress-traefik get service traefik -o jsonpath='{.spec.clusterIP}')
        in_node nb-node0 wrk -t1 -c32 -d15s -H 'Host: hello.bench.local' -H 'Connection: close' \
            "http://$ip/" | grep -E 'Requests/sec|Latency|Non-2xx|Socket errors' || true
    fi
}

egress() {
    echo "=== egress seed (netbench)"
    "$repo/tests/e2e/egress-net.sh" up
    trap '"$repo/tests/e2e/egress-net.sh" down' RETURN
    run_example eb egress-seed "$repo/deploy/examples/egress-seed-test-cluster.yaml"
    kc -n "$ns" wait eb egress-seed --for=condition=OffloadRestored --timeout=300s >/dev/null
    kc -n "$ns" get eb egress-seed -o json | jq -r '
        .status.cases[] | "\(.name)\t\(.receiverBitsPerSecond / 1e9 * 100 | floor / 100) Gbit/s\tretransmits \(.retransmits)\toverhead \(.overheadPercent // "-")"'
    kc -n "$ns" get eb egress-seed
    if command -v iperf3 >/dev/null; then
        echo "=== egress reference: iperf3 -t 10, nb-node0 -> nb-node1, one stream"
        local a b pid
        a=$(node_ip 1)
        b=$(kc get node nb-node1 -o jsonpath='{.spec.podCIDR}')
        b=${b%/*}
        in_node nb-node1 iperf3 -s -D -I /run/netbench-seeds-iperf3.pid >/dev/null
        pid=$(cat /run/netbench-seeds-iperf3.pid)
        iperf() { in_node nb-node0 iperf3 -c "$1" -B "$2" -t 10 -J | jq -r '.end.sum_received.bits_per_second / 1e9 * 100 | floor / 100'; }
        echo "node-to-node     $(iperf "$a" "$(node_ip 0)") Gbit/s"
        local vx0
        vx0=$(kc get node nb-node0 -o jsonpath='{.spec.podCIDR}')
        vx0=${vx0%/*}
        echo "vxlan-to-vxlan   $(iperf "$b" "$vx0") Gbit/s"
        local node before=()
        for node in nb-node0 nb-node1; do before+=("$(in_node "$node" ethtool -k nb-vxlan0)"); done
        for node in nb-node0 nb-node1; do in_node "$node" ethtool -K nb-vxlan0 tx off >/dev/null 2>&1; done
        echo "vxlan-csum-off   $(iperf "$b" "$vx0") Gbit/s"
        kill "$pid"
        # Put back every feature that was on (tx off also switched off the ones needing it).
        local i=0 f
        for node in nb-node0 nb-node1; do
            for f in $(sed -nE 's/^\t?([a-z0-9-]+): on$/\1/p' <<<"${before[$i]}"); do
                in_node "$node" ethtool -K nb-vxlan0 "$f" on >/dev/null 2>&1 || true
            done
            [[ $(in_node "$node" ethtool -k nb-vxlan0) == "${before[$i]}" ]] ||
                die "nb-vxlan0 on $node differs from before the iperf3 run: check ethtool -k"
            i=$((i + 1))
        done
    fi
}

case $what in
    ingress) ingress ;;
    egress) egress ;;
    all) ingress; egress ;;
    *) die "usage: bench/seeds.sh [ingress|egress|all]" ;;
esac
