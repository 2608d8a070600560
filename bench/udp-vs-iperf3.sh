#!/usr/bin/env bash
# netbench-loadgen udp-stream vs iperf3 -u, side by side on the same paths, in one run.
#
#   bench/udp-vs-iperf3.sh [SECONDS]                     (default 4 s per fixed-rate run)
#   LADDER="100M 1G" PROBE_SECS=2 bench/udp-vs-iperf3.sh  (a shorter loss-free ladder)
#   PATHS="veth" RATES="100M 1G" bench/udp-vs-iperf3.sh  (subsets)
#
# Paths (network namespaces built by tests/netns/topology.sh, removed on exit):
#   veth    node A -> node B over the veth pair         datagrams of 1472 bytes (MTU 1500)
#   vxlan   A -> B over the vxlan overlay (MTU 1450)    datagrams of 1422 bytes
# Both tools send the same datagram size, one stream, client in A, server in B.
#
# 1. Fixed offered rates (RATES, default "100M 1G 4G": low, typical, and beyond what one
#    sender thread does here): each tool's received rate and loss at the same offered rate
#    (-b), back to back, alternating which goes first.
# 2. Maximum loss-free rate: the same search for both tools, a ladder of offered rates (LADDER,
#    default 50M .. 3G) where at each rung every tool runs once, back to back (alternating the
#    order), so each rate sees the same conditions for both. A probe of PROBE_SECS (default 3) is
#    loss-free when its receiver counts less than LOSS_FREE percent lost (default 0.1). The figure
#    is the highest RECEIVED rate of a loss-free probe (a sender that cannot reach the offered
#    rate loses nothing but does not deliver it either). A bisection was tried first and dropped:
#    on a shared machine one unlucky probe moves its bracket for good.
#
# Receive buffers: netbench asks for 4 MiB per receiving socket (forced past net.core.rmem_max,
# as root may); iperf3 keeps the kernel's default (it cannot exceed rmem_max, a host sysctl this
# script does not touch). That is each tool's default behaviour, and part of what is compared;
# so that the engines are compared too, a third column runs netbench with iperf3's buffer
# ("nb-w": -w half of net.core.rmem_default, which the kernel doubles back to it).
# PIN=1 pins servers to CPU 0 and clients to CPU 1 (same for both tools). Needs root, iperf3,
# iproute2, jq, cargo (taskset with PIN=1). The binary is built with `cargo build --release`
# (CARGO_TARGET_DIR respected) and copied aside, so a concurrent build cannot swap it mid-run.
set -euo pipefail

secs=${1:-4}
probe_secs=${PROBE_SECS:-3}
loss_free=${LOSS_FREE:-0.1}
ladder_rates=${LADDER:-50M 100M 200M 300M 500M 700M 1G 1.5G 2G 3G}
rates=${RATES:-100M 1G 4G}
paths=${PATHS:-veth vxlan}
here=$(cd "$(dirname "$0")/.." && pwd)
topo="$here/tests/netns/topology.sh"

if [ "${PIN:-0}" = 1 ]; then server_cpu=(taskset -c 0); client_cpu=(taskset -c 1); else server_cpu=(); client_cpu=(); fi
for bin in iperf3 ip jq cargo awk ${server_cpu[0]:-}; do
  command -v "$bin" >/dev/null || { echo "bench: $bin is not installed" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "bench: needs root (network namespaces)" >&2; exit 1; }

echo "building netbench-loadgen (release)..." >&2
(cd "$here" && cargo build --release -q -p loadgen --bin netbench-loadgen)
work=$(mktemp -d)
cp "${CARGO_TARGET_DIR:-$here/target}/release/netbench-loadgen" "$work/netbench-loadgen"
lg="$work/netbench-loadgen"

name=bu$$
name=${name:0:8}
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$topo" down "$name"
  rm -rf "$work"
}
trap cleanup EXIT
"$topo" up "$name"
eval "$("$topo" env "$name")"

wait_port() { # ns port
  for _ in $(seq 100); do
    ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q . && return 0
    sleep 0.05
  done
  echo "bench: nothing listens on $2 in $1" >&2; exit 1
}

start_servers() {
  ip netns exec "$NS_B" "${server_cpu[@]}" iperf3 -s -p 5201 >/dev/null 2>&1 & pids+=($!)
  ip netns exec "$NS_B" "${server_cpu[@]}" "$lg" server -p 5202 >/dev/null 2>&1 & pids+=($!)
  wait_port "$NS_B" 5201; wait_port "$NS_B" 5202
}

stop_servers() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}

# Each prints "received_bits_per_second loss_percent jitter_ms" for one run.
run_iperf3() { # host len rate seconds
  ip netns exec "$NS_A" "${client_cpu[@]}" iperf3 -c "$1" -p 5201 -u -l "$2" -b "$3" -t "$4" -J 2>/dev/null |
    jq -r '.end.sum_received | "\(.bits_per_second) \(.lost_percent) \(.jitter_ms)"' ||
    echo "0 100 0" # a failed run: nothing delivered
}

run_netbench() { # host len rate seconds [extra args]
  ip netns exec "$NS_A" "${client_cpu[@]}" "$lg" client -u -c "$1" -p 5202 -l "$2" -b "$3" -t "$4" -J "${@:5}" |
    jq -r '"\(.received.bits_per_second) \(.loss_percent) \(.jitter_ms // 0)"' ||
    echo "0 100 0" # a failed run: nothing delivered
}

# netbench with the receive buffer iperf3 gets (the kernel's default).
rmem_default=$(cat /proc/sys/net/core/rmem_default)
run_nbw() { run_netbench "$@" -w $((rmem_default / 2)); }

to_bps() { # 100M -> 100000000
  awk -v r="$1" 'BEGIN { n = r + 0; s = substr(r, length(r)); m = 1;
    if (s == "K" || s == "k") m = 1e3; if (s == "M" || s == "m") m = 1e6; if (s == "G" || s == "g") m = 1e9;
    printf "%.0f", n * m }'
}

mbit() { awk -v b="$1" 'BEGIN {printf "%.1f", b/1e6}'; }

fixed=()
fixed_rates() { # label host len
  local label=$1 host=$2 len=$3 rate a b c
  for rate in $rates; do
    if (( ${#fixed[@]} % 2 )); then
      a=$(run_iperf3 "$host" "$len" "$rate" "$secs"); b=$(run_netbench "$host" "$len" "$rate" "$secs")
      c=$(run_nbw "$host" "$len" "$rate" "$secs")
    else
      c=$(run_nbw "$host" "$len" "$rate" "$secs"); b=$(run_netbench "$host" "$len" "$rate" "$secs")
      a=$(run_iperf3 "$host" "$len" "$rate" "$secs")
    fi
    read -r ia il ij <<<"$a"; read -r na nl nj <<<"$b"; read -r wa wl _ <<<"$c"
    printf '%-6s %6s  iperf3 %9s Mbit/s loss %7.3f%%   netbench %9s loss %7.3f%%   nb-w %9s loss %7.3f%%\n' \
      "$label" "$rate" "$(mbit "$ia")" "$il" "$(mbit "$na")" "$nl" "$(mbit "$wa")" "$wl" >&2
    fixed+=("$(awk -v l="$label" -v r="$rate" -v ia="$ia" -v il="$il" -v ij="$ij" -v na="$na" -v nl="$nl" -v nj="$nj" -v wa="$wa" -v wl="$wl" \
      'BEGIN {printf "%-6s %7s %9.1f %7.3f %7.3f %9.1f %7.3f %7.3f %6.2f %9.1f %7.3f", l, r, ia/1e6, il, ij, na/1e6, nl, nj, (ia > 0 ? na/ia : 0), wa/1e6, wl}')")
  done
}

# The loss-free ladder: every rate of LADDER for all three, back to back at each rung (the
# same conditions for each tool at each rate), alternating which goes first.
ladders=()
ladder() { # label host len
  local label=$1 host=$2 len=$3 rate tool out got loss i=0
  local -A best=([iperf3]=0 [netbench]=0 [nbw]=0) best_at=([iperf3]=- [netbench]=- [nbw]=-)
  for rate in $ladder_rates; do
    local order=(iperf3 netbench nbw)
    (( i++ % 2 )) && order=(nbw netbench iperf3)
    local line="$label $(printf '%6s' "$rate")"
    for tool in "${order[@]}"; do
      out=$("run_$tool" "$host" "$len" "$rate" "$probe_secs")
      read -r got loss _ <<<"$out"
      if awk -v l="$loss" -v t="$loss_free" 'BEGIN {exit !(l < t)}'; then
        if awk -v a="${best[$tool]}" -v b="$got" 'BEGIN {exit !(b > a)}'; then
          best[$tool]=$got; best_at[$tool]=$rate
        fi
      fi
      line+=$(printf '  %-8s %9s Mbit/s %7.3f%%' "$tool" "$(mbit "$got")" "$loss")
    done
    echo "$line" >&2
  done
  ladders+=("$(awk -v l="$label" -v a="${best[iperf3]}" -v b="${best[netbench]}" -v c="${best[nbw]}" \
    -v ra="${best_at[iperf3]}" -v rb="${best_at[netbench]}" -v rc="${best_at[nbw]}" \
    'BEGIN {printf "%-6s %9.1f (%5s) %9.1f (%5s) %6.2f %9.1f (%5s) %6.2f", l, a/1e6, ra, b/1e6, rb, (a > 0 ? b/a : 0), c/1e6, rc, (a > 0 ? c/a : 0)}')")
}

start_servers
for path in $paths; do
  case $path in
    veth) host=$VETH_IP_B len=1472 ;;
    vxlan) host=$VXLAN_IP_B len=1422 ;;
    *) echo "bench: unknown path $path" >&2; exit 2 ;;
  esac
  label=$path
  fixed_rates "$path" "$host" "$len"
  ladder "$path" "$host" "$len"
done
stop_servers

echo
echo "UDP, 1 stream, same datagram size, offered rate per run (-b), ${secs} s per run; received Mbit/s,"
echo "loss %, jitter ms; ratio = netbench/iperf3 received; nb-w = netbench with iperf3's receive buffer"
printf '%-6s %7s %9s %7s %7s %9s %7s %7s %6s %9s %7s\n' path offered iperf3 loss% jit-ms netbench loss% jit-ms ratio nb-w loss%
printf '%s\n' "${fixed[@]}"
echo
echo "Maximum loss-free rate (loss < ${loss_free}%): received Mbit/s of the best loss-free rung (offered"
echo "rate in brackets) of the ladder ${ladder_rates}, ${probe_secs} s per probe"
printf '%-6s %17s %17s %6s %17s %6s\n' path iperf3 netbench ratio nb-w ratio
printf '%s\n' "${ladders[@]}"
