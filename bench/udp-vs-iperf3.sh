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
#    loss-free when its receiver counts less than LOSS_FREE percent lost (default 0.1) AND its
#    sender sent at least 99 % of the offered rate: a sender short of CPU loses nothing of the
#    little it sends, and such a rung is refused for every tool (netbench: more than 1 % of its
#    schedule missed; iperf3: its sum_sent rate). The figure is the highest RECEIVED rate of a
#    loss-free probe. A bisection was tried first and dropped:
#    on a shared machine one unlucky probe moves its bracket for good.
#
# Receive buffers: netbench asks for 4 MiB per receiving socket (forced past net.core.rmem_max,
# as root may); iperf3 keeps the kernel's default (it cannot exceed rmem_max, a host sysctl this
# script does not touch). That is each tool's default behaviour, and part of what is compared;
# so that the engines are compared too, a third column runs netbench with iperf3's buffer
# ("nb-w": -w half of net.core.rmem_default, which the kernel doubles back to it).
# CPU, both ways, read the same way for every tool from outside: the machine's busy CPU
# (/proc/stat: user + nice + system + irq + softirq, every CPU; netperf's service demand) over the
# GB received ("node s/GB"); netbench's own figure beside it ("self": the client's
# node_cpu_seconds_per_gb, which here is the whole machine, as both ends share it).
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
# shellcheck source=bench/lib.sh
source "$here/bench/lib.sh"

if [ "${PIN:-0}" = 1 ]; then server_cpu=(taskset -c 0); client_cpu=(taskset -c 1); else server_cpu=(); client_cpu=(); fi
bench_require iperf3 ip jq cargo awk "${server_cpu[@]:0:1}"

echo "building netbench-loadgen (release)..." >&2
(cd "$here" && cargo build --release -q -p loadgen --bin netbench-loadgen)
work=$(mktemp -d)
cp "${CARGO_TARGET_DIR:-$here/target}/release/netbench-loadgen" "$work/netbench-loadgen"
lg="$work/netbench-loadgen"
bench_dirs+=("$work")
bench_topology bu

start_servers() {
  ip netns exec "$NS_B" "${server_cpu[@]}" iperf3 -s -p 5201 >/dev/null 2>&1 & pids+=($!)
  ip netns exec "$NS_B" "${server_cpu[@]}" "$lg" server -p 5202 >/dev/null 2>&1 & pids+=($!)
  wait_port "$NS_B" 5201; wait_port "$NS_B" 5202
}

# Busy CPU seconds of the whole machine so far (every CPU; /proc/stat's first line).
node_busy() { awk -v tck="$(getconf CLK_TCK)" '/^cpu / { print ($2 + $3 + $4 + $7 + $8) / tck; exit }' /proc/stat; }

# Each prints "received_bits_per_second loss_percent jitter_ms sent_bits_per_second
# received_bytes node_cpu_seconds self_node_s_per_gb" for one run (node CPU read around it).
run_iperf3() { # host len rate seconds
  local before; before=$(node_busy)
  local fig
  fig=$(ip netns exec "$NS_A" "${client_cpu[@]}" iperf3 -c "$1" -p 5201 -u -l "$2" -b "$3" -t "$4" -J 2>/dev/null |
    jq -r '.end | "\(.sum_received.bits_per_second) \(.sum_received.lost_percent) \(.sum_received.jitter_ms) \(.sum_sent.bits_per_second) \(.sum_received.bytes)"') ||
    fig="0 100 0 0 0" # a failed run: nothing delivered
  echo "$fig $(awk -v a="$before" -v b="$(node_busy)" 'BEGIN { print b - a }') -"
}

run_netbench() { # host len rate seconds [extra args]
  local before; before=$(node_busy)
  local fig
  fig=$(ip netns exec "$NS_A" "${client_cpu[@]}" "$lg" client -u -c "$1" -p 5202 -l "$2" -b "$3" -t "$4" -J "${@:5}" |
    jq -r '"\(.received.bits_per_second) \(.loss_percent) \(.jitter_ms // 0) \(.sent.bits_per_second) \(.received.bytes) \(.node_cpu_seconds_per_gb.client // "-")"') ||
    fig="0 100 0 0 0 -" # a failed run: nothing delivered
  read -r a b c d e self <<<"$fig"
  echo "$a $b $c $d $e $(awk -v x="$before" -v y="$(node_busy)" 'BEGIN { print y - x }') $self"
}

# Node CPU seconds per GB received of a runner's line ("-" when nothing was received).
node_per_gb() { awk '{ if ($5 > 0) printf "%.3f", $6 / ($5 / 1e9); else printf "-" }' <<<"$1"; }

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
    read -r ia il ij is _ <<<"$a"; read -r na nl nj ns _ _ nself <<<"$b"; read -r wa wl _ <<<"$c"
    printf '%-6s %6s  iperf3 %9s Mbit/s (sent %s) loss %7.3f%%   netbench %9s (sent %s) loss %7.3f%%   nb-w %9s loss %7.3f%%\n' \
      "$label" "$rate" "$(mbit "$ia")" "$(mbit "$is")" "$il" "$(mbit "$na")" "$(mbit "$ns")" "$nl" "$(mbit "$wa")" "$wl" >&2
    fixed+=("$(awk -v l="$label" -v r="$rate" -v ia="$ia" -v il="$il" -v ij="$ij" -v na="$na" -v nl="$nl" -v nj="$nj" -v wa="$wa" -v wl="$wl" \
      -v ic="$(node_per_gb "$a")" -v nc="$(node_per_gb "$b")" -v self="$nself" \
      'BEGIN {printf "%-6s %7s %9.1f %7.3f %7.3f %9.1f %7.3f %7.3f %6.2f %9.1f %7.3f %9s %9s %9s", l, r, ia/1e6, il, ij, na/1e6, nl, nj, (ia > 0 ? na/ia : 0), wa/1e6, wl, ic, nc, (self == "-" ? "-" : sprintf("%.3f", self))}')")
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
    local line
    line="$label $(printf '%6s' "$rate")"
    for tool in "${order[@]}"; do
      out=$("run_$tool" "$host" "$len" "$rate" "$probe_secs")
      read -r got loss _ sent _ <<<"$out"
      # Loss-free only if the sender offered the rung: 99 % of it sent at least.
      if awk -v l="$loss" -v t="$loss_free" -v s="$sent" -v o="$(to_bps "$rate")" 'BEGIN {exit !(l < t && s >= 0.99 * o)}'; then
        if awk -v a="${best[$tool]}" -v b="$got" 'BEGIN {exit !(b > a)}'; then
          best[$tool]=$got; best_at[$tool]=$rate
        fi
      fi
      line+=$(printf '  %-8s %9s Mbit/s (sent %s) %7.3f%%' "$tool" "$(mbit "$got")" "$(mbit "$sent")" "$loss")
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
echo "loss %, jitter ms; ratio = netbench/iperf3 received; nb-w = netbench with iperf3's receive buffer;"
echo "node s/GB = the machine's busy CPU seconds per GB received, read from outside (i: iperf3, n: netbench), self = netbench's own"
printf '%-6s %7s %9s %7s %7s %9s %7s %7s %6s %9s %7s %9s %9s %9s\n' path offered iperf3 loss% jit-ms netbench loss% jit-ms ratio nb-w loss% i-node n-node n-self
printf '%s\n' "${fixed[@]}"
echo
echo "Maximum loss-free rate (loss < ${loss_free}% and at least 99 % of the offered rate sent): received"
echo "Mbit/s of the best loss-free rung (offered rate in brackets) of the ladder ${ladder_rates}, ${probe_secs} s per probe"
printf '%-6s %17s %17s %6s %17s %6s\n' path iperf3 netbench ratio nb-w ratio
printf '%s\n' "${ladders[@]}"
