#!/usr/bin/env bash
# netbench-loadgen tcp-client/tcp-server vs iperf3, side by side on the same paths.
#
#   bench/tcp-vs-iperf3.sh [ROUNDS] [SECONDS]      (default 5 rounds x 5 s, one stream)
#   PATHS="loopback vxlan" bench/tcp-vs-iperf3.sh  (a subset of the paths below)
#
# Paths (network namespaces built by tests/netns/topology.sh, removed on exit):
#   loopback      127.0.0.1 on the host
#   veth          node A -> node B over the veth pair            ("node -> node")
#   vxlan         A -> B over the vxlan overlay, offload on       ("vxlan -> vxlan")
#   vxlan-tx-off  the same with tx-checksumming off on both vxlan devices (restored afterwards)
#   egress        A -> gateway B -> target namespace              ("pod -> egress node -> target")
# Each round runs both tools back to back, alternating which goes first. Like the BASELINES.md
# method, processes are not pinned by default: on a 2-core machine pinning server and client to
# one CPU each halves veth/vxlan throughput (the receive path runs in softirq on the sender's CPU)
# and makes the figures hostage to whatever else runs on those CPUs. PIN=1 pins servers to CPU 0
# and clients to CPU 1 (same for both tools). Prints per-path medians and the ratio
# netbench/iperf3 of the receiver figures. Needs root, iperf3, iproute2, jq (taskset with PIN=1).
set -euo pipefail

rounds=${1:-5}
secs=${2:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
topo="$here/tests/netns/topology.sh"
# shellcheck source=bench/lib.sh
source "$here/bench/lib.sh"

if [ "${PIN:-0}" = 1 ]; then server_cpu=(taskset -c 0); client_cpu=(taskset -c 1); else server_cpu=(); client_cpu=(); fi
bench_require iperf3 ip jq cargo "${server_cpu[@]:0:1}"

echo "building netbench-loadgen (release)..." >&2
(cd "$here" && cargo build --release -q -p loadgen --bin netbench-loadgen)
lg="$here/target/release/netbench-loadgen"

bench_topology bn --target

start_servers() { # ns
  local pre; ns_prefix "$1"
  # Simple commands (no shell function) so that $! is the server itself (ip and taskset exec it).
  "${pre[@]}" "${server_cpu[@]}" iperf3 -s -p 5201 >/dev/null 2>&1 & pids+=($!)
  "${pre[@]}" "${server_cpu[@]}" "$lg" tcp-server -p 5202 >/dev/null 2>&1 & pids+=($!)
  wait_port "$1" 5201; wait_port "$1" 5202
}

run_iperf3() { # ns host -> bits/s
  in_ns "$1" "${client_cpu[@]}" iperf3 -c "$2" -p 5201 -t "$secs" -J | jq '.end.sum_received.bits_per_second'
}

run_netbench() { # ns host -> bits/s
  in_ns "$1" "${client_cpu[@]}" "$lg" tcp-client -c "$2" -p 5202 -t "$secs" --output json | jq '.receiver.bits_per_second'
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

gbit() { awk -v b="$1" 'BEGIN {printf "%.2f", b/1e9}'; }

results=()
bench_path() { # label client-ns server-ns host
  local label=$1 cns=$2 sns=$3 host=$4 i a b
  local -a ip=() nb=() pair=()
  start_servers "$sns"
  for i in $(seq "$rounds"); do
    if (( i % 2 )); then
      a=$(run_iperf3 "$cns" "$host"); b=$(run_netbench "$cns" "$host")
    else
      b=$(run_netbench "$cns" "$host"); a=$(run_iperf3 "$cns" "$host")
    fi
    ip+=("$a"); nb+=("$b"); pair+=("$(awk -v a="$a" -v b="$b" 'BEGIN {print b/a}')")
    printf '%-13s round %d  iperf3 %6s  netbench %6s Gbit/s\n' "$label" "$i" "$(gbit "$a")" "$(gbit "$b")" >&2
  done
  stop_servers
  local mi mn mp
  mi=$(printf '%s\n' "${ip[@]}" | median)
  mn=$(printf '%s\n' "${nb[@]}" | median)
  mp=$(printf '%s\n' "${pair[@]}" | median)
  results+=("$(awk -v l="$label" -v i="$mi" -v n="$mn" -v p="$mp" 'BEGIN {printf "%-13s %8.2f %10.2f %7.3f %12.3f", l, i/1e9, n/1e9, n/i, p}')")
}

offload_both() { # on|off
  ip netns exec "$NS_A" "$lg" offload set -i "$VXLAN_A" -f "tx-checksumming=$1" >/dev/null
  ip netns exec "$NS_B" "$lg" offload set -i "$VXLAN_B" -f "tx-checksumming=$1" >/dev/null
}

paths=${PATHS:-loopback veth vxlan vxlan-tx-off egress}
for path in $paths; do
  case $path in
    loopback) bench_path loopback host host 127.0.0.1 ;;
    veth) bench_path veth "$NS_A" "$NS_B" "$VETH_IP_B" ;;
    vxlan) bench_path vxlan "$NS_A" "$NS_B" "$VXLAN_IP_B" ;;
    vxlan-tx-off)
      offload_both off
      bench_path vxlan-tx-off "$NS_A" "$NS_B" "$VXLAN_IP_B"
      offload_both on ;;
    egress) bench_path egress "$NS_A" "$NS_T" "$TARGET_IP" ;;
    *) echo "bench: unknown path $path" >&2; exit 2 ;;
  esac
done

echo
echo "TCP throughput, 1 stream, ${secs} s, median of ${rounds} rounds (receiver Gbit/s)"
# ratio = median netbench / median iperf3; paired = median of the per-round ratios (each round's
# two runs are back to back, so this one is less sensitive to load changes between rounds).
printf '%-13s %8s %10s %7s %12s\n' path iperf3 netbench ratio paired-ratio
printf '%s\n' "${results[@]}"
