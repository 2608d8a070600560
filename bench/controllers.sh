#!/usr/bin/env bash
# Controllers side by side on the 3-node test cluster: deploy/examples/ingress-controllers.yaml
# (Traefik as Ingress controller, Traefik's Gateway API provider, Envoy Gateway; 32 connections
# with keep-alive from nb-node0, 15 s after 3 s of warm-up, 3 samples interleaved), then the same
# comparison by hand with wrk from nb-node0's network namespace (3 s unrecorded, then 15 s; the
# same interleaved order, 3 rounds), and the ratio netbench / wrk per controller.
#
#   bench/controllers.sh        (needs root; brings the cluster up with tests/e2e/setup.sh and
#                                leaves it up: tests/cluster/down.sh)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/netbench/target}
eval "$("$repo/tests/e2e/setup.sh")"
source "$repo/tests/cluster/lib.sh"
need_cmds wrk jq
ns=netbench-controllers
kc create namespace "$ns" --dry-run=client -o yaml | kc apply -f - >/dev/null

echo "=== netbench: deploy/examples/ingress-controllers.yaml"
kc -n "$ns" delete ib controllers --ignore-not-found --wait=true >/dev/null
kc apply -f "$repo/deploy/examples/ingress-controllers.yaml" >/dev/null
deadline=$((SECONDS + 1200)) phase=
while ((SECONDS < deadline)); do
    phase=$(kc -n "$ns" get ib controllers -o jsonpath='{.status.phase}')
    [[ $phase == Succeeded || $phase == Failed ]] && break
    sleep 5
done
[[ $phase == Succeeded ]] || {
    kc -n "$ns" get ib controllers -o yaml >&2
    die "IngressBenchmark controllers ended in phase '$phase'"
}
ours=$(kc -n "$ns" get ib controllers -o json)
jq -r '.status.comparison.summary' <<<"$ours"

# The controllers as the example names them: name, Service (namespace/name), Host header.
controllers=(
    "traefik ingress-traefik/traefik hello.bench.local"
    "traefik-gateway gateway-traefik/traefik-gateway hello-gw.bench.local"
    "envoy-gateway envoy-gateway-system/envoy-bench hello-eg.bench.local"
)
declare -A rps p99 runs
# wrk_once NAME SERVICE HOST: one 15 s run after 3 s unrecorded; adds its requests/s and p99.
wrk_once() {
    local name=$1 svc=$2 host=$3 ip out r p
    ip=$(kc -n "${svc%/*}" get service "${svc#*/}" -o jsonpath='{.spec.clusterIP}')
    in_node nb-node0 wrk -t1 -c32 -d3s -H "Host: $host" "http://$ip/" >/dev/null
    out=$(in_node nb-node0 wrk -t1 -c32 -d15s --latency -H "Host: $host" "http://$ip/")
    grep -qE 'Non-2xx|Socket errors' <<<"$out" && { echo "$out" >&2; die "wrk saw errors through $name"; }
    r=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    # "99%   4.21ms" (or us, s): in ms.
    p=$(awk '$1 == "99%" {v=$2; u=v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
        print (u == "us" ? v / 1000 : (u == "s" ? v * 1000 : v))}' <<<"$out")
    rps[$name]=$(awk -v a="${rps[$name]:-0}" -v b="$r" 'BEGIN {print a + b}')
    p99[$name]=$(awk -v a="${p99[$name]:-0}" -v b="$p" 'BEGIN {print a + b}')
    runs[$name]=$((${runs[$name]:-0} + 1))
}
echo "=== wrk -t1 -c32 -d15s (keep-alive) from nb-node0, 3 interleaved rounds"
for round in 0 1 2; do
    order=(0 1 2)
    ((round % 2 == 1)) && order=(2 1 0)
    for i in "${order[@]}"; do
        # shellcheck disable=SC2086
        wrk_once ${controllers[$i]}
    done
done
printf '%-16s %12s %12s %8s %12s %12s\n' controller "netbench rps" "wrk rps" ratio "netbench p99" "wrk p99"
for c in "${controllers[@]}"; do
    name=${c%% *}
    jq -r --arg n "$name" --arg wr "${rps[$name]}" --arg wp "${p99[$name]}" --arg k "${runs[$name]}" '
        .status.comparison.rows[] | select(.name == $n) |
        [$n, (.rps | floor), (($wr | tonumber) / ($k | tonumber) | floor),
         ((.rps / (($wr | tonumber) / ($k | tonumber))) * 100 | floor / 100),
         "\(.p99Ms * 100 | floor / 100)ms", "\((($wp | tonumber) / ($k | tonumber)) * 100 | floor / 100)ms"]
        | @tsv' <<<"$ours" | awk -F'\t' '{printf "%-16s %12s %12s %8s %12s %12s\n", $1, $2, $3, $4, $5, $6}'
done
