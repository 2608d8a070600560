#!/usr/bin/env bash
# netbench-loadgen's request/response tests vs the usual peers, side by side on the same paths.
#
#   bench/rr-vs-peers.sh [ROUNDS] [SECONDS]       (default 3 rounds x 5 s)
#   PATHS="veth" bench/rr-vs-peers.sh             (a subset of: veth vxlan)
#   PIN=0 bench/rr-vs-peers.sh                    (do not pin; default: servers on CPU 0, clients on CPU 1)
#   SIZE=64 CRR_CONNECTS=8000 bench/rr-vs-peers.sh
#
# Paths (network namespaces built by tests/netns/topology.sh, removed on exit):
#   veth   node A -> node B over the veth pair
#   vxlan  A -> B over the vxlan overlay
# Tests, one stream, SIZE-byte request and response (default 64 B, so every peer can do it):
#   tcp-rr   netbench tcp-rr  vs sockperf ping-pong --tcp, qperf tcp_lat, iperf 2 --bounceback
#   udp-rr   netbench udp-rr  vs sockperf ping-pong (udp), qperf udp_lat
#   tcp-crr  netbench tcp-crr (1 B each way) vs iperf 2 --connect-only=N (connect + close only:
#            LESS work per transaction than tcp-crr, which also sends a request and reads an
#            answer; no Debian peer does connect-request-response-close). Never pinned: with
#            client and server on one CPU each, every transaction wakes the other side across
#            CPUs several times (netbench: 4.3k/s pinned vs 11k/s unpinned on loopback), while
#            iperf's connect-only never involves its server process at all. iperf closes first,
#            so its client keeps every port in TIME_WAIT for 60 s and, without help, slows to
#            ~1k connects/s in the round after its previous one; namespace A therefore gets
#            net.ipv4.tcp_tw_reuse=1 (netbench's client never holds TIME_WAIT: its server closes
#            first, see loadgen/src/rr/crr.rs).
# Latencies are round trips in microseconds: sockperf and qperf print half the round trip, so
# their figures are doubled here. Percentiles where the tool has them: sockperf and netbench
# give p50/p99; qperf and iperf 2's bounceback only a mean (iperf's histogram bins are 100 us).
# CPU per transaction is measured the same way for every tool, from outside, both ways:
# - process: CPU time (user + system, /proc/PID/stat incl. reaped children) of the client
#   process and of the server process during the run, over the transactions of the run;
# - node: the machine's busy CPU time (/proc/stat: user + nice + system + irq + softirq, every
#   CPU) during the run over its transactions: netperf's service demand (-c/-C). Both ends
#   share this machine, so it is the two ends' nodes together.
# netbench's own node figure (its report's node_cpu_us_per_transaction of the client: both
# ends read this one machine's /proc/stat here, so one end's figure is already the whole
# machine; adding the server's would count it twice) is printed beside it as "self", to check
# the two agree.
# Each round runs every tool back to back, alternating the order; the table shows the median of
# the rounds and ratios netbench/peer (latency: < 1 means netbench is lower; rate: > 1 means
# netbench is faster). Needs root, iproute2, jq, sockperf, qperf, iperf (2), taskset.
set -euo pipefail

rounds=${1:-3}
secs=${2:-5}
size=${SIZE:-64}
crr_connects=${CRR_CONNECTS:-8000}
here=$(cd "$(dirname "$0")/.." && pwd)
topo="$here/tests/netns/topology.sh"
# shellcheck source=bench/lib.sh
source "$here/bench/lib.sh"

if [ "${PIN:-1}" = 1 ]; then server_cpu=(taskset -c 0); client_cpu=(taskset -c 1); else server_cpu=(); client_cpu=(); fi
bench_require ip jq sockperf qperf iperf cargo taskset

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "building netbench-loadgen (release)..." >&2
(cd "$here" && cargo build --release -q -p loadgen --bin netbench-loadgen)
# A copy: a shared target directory may get another checkout's build while this runs.
cp "${CARGO_TARGET_DIR:-$here/target}/release/netbench-loadgen" "$tmp/netbench-loadgen"
lg="$tmp/netbench-loadgen"
bench_dirs+=("$tmp")
bench_topology br
# Inside the client namespace only: lets iperf's connect-only reuse its own TIME_WAIT ports.
ip netns exec "$NS_A" sysctl -qw net.ipv4.tcp_tw_reuse=1

# Servers in B (simple commands: ip and taskset exec them, so $! is the server itself).
declare -A server_pid
start_server() { # key proto port command...
  local key=$1 proto=$2 port=$3; shift 3
  ip netns exec "$NS_B" "${server_cpu[@]}" "$@" >/dev/null 2>&1 & pids+=($!)
  server_pid[$key]=$!
  wait_port "$NS_B" "$port" "$proto"
}
start_server netbench t 5301 "$lg" server -p 5301
start_server sockperf-tcp t 5302 sockperf server --tcp -i 0.0.0.0 -p 5302
start_server sockperf-udp u 5303 sockperf server -i 0.0.0.0 -p 5303
start_server qperf t 5304 qperf --listen_port 5304
start_server iperf t 5305 iperf -s -p 5305

# CPU seconds (user + system, children included) of a running process.
cpu_of() { awk -v tck="$(getconf CLK_TCK)" '{ print ($14 + $15 + $16 + $17) / tck }' "/proc/$1/stat"; }

# Runs a client in A, pinned unless $unpinned is set; its stdout goes to $tmp/out, its CPU
# seconds (from the shell that waited for it) to $tmp/cpu.
unpinned=
run_client() {
  local pin=("${client_cpu[@]}")
  [ -n "$unpinned" ] && pin=()
  sh -c '"$@" > "'"$tmp"'/out" 2> "'"$tmp"'/err"; read -r l < /proc/$$/stat; echo "$l" | awk -v tck='"$(getconf CLK_TCK)"' "{ print (\$16 + \$17) / tck }" > "'"$tmp"'/cpu"' \
    sh ip netns exec "$NS_A" "${pin[@]}" "$@"
}

# Busy CPU seconds of the whole machine so far (every CPU; /proc/stat's first line).
node_busy() { awk -v tck="$(getconf CLK_TCK)" '/^cpu / { print ($2 + $3 + $4 + $7 + $8) / tck; exit }' /proc/stat; }

# Lets server $1 run on every CPU (tcp-crr) or pins it back.
server_on_all_cpus() { [ "${PIN:-1}" = 1 ] && taskset -a -p -c "0-$(($(nproc) - 1))" "${server_pid[$1]}" >/dev/null; return 0; }
server_pinned() { [ "${PIN:-1}" = 1 ] && taskset -a -p -c 0 "${server_pid[$1]}" >/dev/null; return 0; }

# Each runner prints: p50_us p99_us mean_us transactions_per_s transactions; measure adds
# process_cpu_s node_cpu_s self_node_us_per_tx (round trips in microseconds; "-" where the tool
# does not say).
measure() { # server-key runner args...
  local key=$1; shift
  local before after node_before node_after
  rm -f "$tmp/self"
  node_before=$(node_busy)
  before=$(cpu_of "${server_pid[$key]}")
  local fig; fig=$("$@")
  after=$(cpu_of "${server_pid[$key]}")
  node_after=$(node_busy)
  local self=-
  [ -s "$tmp/self" ] && self=$(cat "$tmp/self")
  echo "$fig $(awk -v a="$before" -v b="$after" -v c="$(cat "$tmp/cpu")" 'BEGIN { print b - a + c }') $(awk -v a="$node_before" -v b="$node_after" 'BEGIN { print b - a }') $self"
}

nb_rr() { # protocol host [extra...]
  local proto=$1 host=$2; shift 2
  run_client "$lg" client -c "$host" -p 5301 --protocol "$proto" -t "$secs" --json "$@"
  jq -r '"\(.latency.p50_us) \(.latency.p99_us) \(.latency.mean_us) \(.transactions_per_second) \(.counts.transactions)"' "$tmp/out"
  jq -r '.node_cpu_us_per_transaction.client // "-"' "$tmp/out" > "$tmp/self"
}

sockperf_pp() { # tcp|udp host
  local port=5303 flag=()
  [ "$1" = tcp ] && { port=5302; flag=(--tcp); }
  run_client sockperf ping-pong "${flag[@]}" -i "$2" -p "$port" -m "$size" -t "$secs"
  sed 's/\x1b\[[0-9;]*m//g' "$tmp/out" | awk '
    /\[Total Run\]/ { for (i = 1; i <= NF; i++) if ($i ~ /^ReceivedMessages=/) { split($i, a, "="); total = a[2] } }
    /\[Valid Duration\]/ { for (i = 1; i <= NF; i++) { if ($i ~ /^RunTime=/) { split($i, a, "="); t = a[2] + 0 } if ($i ~ /^ReceivedMessages=/) { split($i, a, "="); n = a[2] } } }
    /avg-latency=/ { match($0, /avg-latency=[0-9.]+/); mean = substr($0, RSTART + 12, RLENGTH - 12) * 2 }
    /percentile 50.000/ { p50 = $NF * 2 } /percentile 99.000/ { p99 = $NF * 2 }
    END { printf "%s %s %s %s %s\n", p50, p99, mean, n / t, total }'
}

qperf_lat() { # tcp_lat|udp_lat host
  run_client qperf "$2" --listen_port 5304 -m "$size" -t "$secs" -vvs "$1"
  tr -d ',' < "$tmp/out" | awk -v secs="$secs" '
    $1 == "latency" { v = $3; if ($4 == "ms") v *= 1000; if ($4 == "ns") v /= 1000; mean = v * 2 }
    $1 == "loc_send_msgs" { n = $3 }
    END { printf "- - %s %s %s\n", mean, n / secs, n }'
}

iperf_bb() { # host
  run_client iperf -c "$1" -p 5305 --bounceback --bounceback-period 0 -l "$size" -t "$secs" -i 1000
  awk '/BB cnt=avg/ { header = 1; next }
    header && / sec / && $0 ~ /=[0-9.]+\/[0-9.]+\/[0-9.]+\/[0-9.]+ ms/ {
      for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+=[0-9.]+\//) { split($i, a, "[=/]"); n = a[1]; mean = a[2] * 1000 }
      for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+-[0-9.]+$/) { split($i, t, "-"); secs = t[2] - t[1] } }
    END { printf "- - %s %s %s\n", mean, n / secs, n }' "$tmp/out"
}

nb_crr() { # host
  nb_rr tcp-crr "$1" --request-size 1
}

iperf_connect() { # host: N connects, timed (iperf 2 prints no rate for them)
  local t0 t1
  t0=$(date +%s.%N)
  run_client iperf -c "$1" -p 5305 --connect-only="$crr_connects"
  t1=$(date +%s.%N)
  local n; n=$(grep -c "connected with" "$tmp/out" || true)
  awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "- - - %s %s\n", n / (b - a), n }'
}

num() { if [ -z "$1" ] || [ "$1" = - ]; then echo -; else printf '%.1f' "$1"; fi; }

median() { sort -g | awk '{a[NR]=$1} END { if (NR == 0 || a[1] == "-") print "-"; else print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2) }'; }

# results[path|test|tool] = lines of figures, one per round
declare -A results
declare -a order
record() { # path test tool figures
  local k="$1|$2|$3"
  [ -n "${results[$k]+x}" ] || order+=("$k")
  results[$k]+="$4"$'\n'
}

bench_path() { # label host
  local label=$1 host=$2 i
  for i in $(seq "$rounds"); do
    local -a tools=(
      "tcp-rr|netbench|netbench|nb_rr tcp-rr $host --request-size $size"
      "tcp-rr|sockperf|sockperf-tcp|sockperf_pp tcp $host"
      "tcp-rr|qperf|qperf|qperf_lat tcp_lat $host"
      "tcp-rr|iperf2-bounceback|iperf|iperf_bb $host"
      "udp-rr|netbench|netbench|nb_rr udp-rr $host --request-size $size"
      "udp-rr|sockperf|sockperf-udp|sockperf_pp udp $host"
      "udp-rr|qperf|qperf|qperf_lat udp_lat $host"
      "tcp-crr|netbench|netbench|nb_crr $host"
      "tcp-crr|iperf2-connect-only|iperf|iperf_connect $host"
    )
    local n=${#tools[@]} j idx
    for j in $(seq 0 $((n - 1))); do
      # Alternate the order between rounds.
      if (( i % 2 )); then idx=$j; else idx=$((n - 1 - j)); fi
      IFS='|' read -r test tool key cmd <<< "${tools[$idx]}"
      local fig
      if [ "$test" = tcp-crr ]; then
        unpinned=1; server_on_all_cpus "$key"
        # shellcheck disable=SC2086
        fig=$(measure "$key" $cmd)
        unpinned=; server_pinned "$key"
      else
        # shellcheck disable=SC2086
        fig=$(measure "$key" $cmd)
      fi
      record "$label" "$test" "$tool" "$fig"
      printf '%-6s round %d  %-8s %-20s %s\n' "$label" "$i" "$test" "$tool" "$fig" >&2
    done
  done
}

paths=${PATHS:-veth vxlan}
for path in $paths; do
  case $path in
    veth) bench_path veth "$VETH_IP_B" ;;
    vxlan) bench_path vxlan "$VXLAN_IP_B" ;;
    *) echo "bench: unknown path $path" >&2; exit 2 ;;
  esac
done

col() { # figures-lines column -> median
  awk -v c="$2" '{ print $c }' <<< "$1" | grep -v '^$' | median
}

echo
echo "Request/response, 1 stream, ${size} B each way (tcp-crr: 1 B), ${secs} s, median of ${rounds} rounds; latency = round trip in us"
echo "proc-us/tx = (client + server process CPU) / transactions; node-us/tx = the machine's busy CPU (/proc/stat, netperf's service demand) / transactions, both read from outside; self = netbench's own node figure"
echo "ratios netbench/peer (latency: <1 = netbench lower; rate: >1 = netbench faster)"
printf '%-6s %-8s %-20s %8s %8s %8s %12s %10s %10s %8s %9s %9s %9s\n' path test tool p50 p99 mean trans/s proc-us/tx node-us/tx self p50-ratio p99-ratio rate-ratio
for k in "${order[@]}"; do
  IFS='|' read -r path test tool <<< "$k"
  lines=${results[$k]}
  p50=$(col "$lines" 1); p99=$(col "$lines" 2); mean=$(col "$lines" 3); tps=$(col "$lines" 4)
  cpu=$(awk '{ if ($5 > 0) print $6 / $5 * 1e6 }' <<< "$lines" | median)
  node=$(awk '{ if ($5 > 0) print $7 / $5 * 1e6 }' <<< "$lines" | median)
  self=$(col "$lines" 8)
  ours=${results["$path|$test|netbench"]}
  o50=$(col "$ours" 1); o99=$(col "$ours" 2); omean=$(col "$ours" 3); otps=$(col "$ours" 4)
  r50=-; r99=-; rr=-
  if [ "$tool" != netbench ]; then
    if [ "$test" = tcp-crr ]; then
      rr=$(awk -v a="$otps" -v b="$tps" 'BEGIN { printf "%.2f", a / b }')
    elif [ "$p50" = - ]; then
      # The peer gives a mean only: compare means.
      r50=$(awk -v a="$omean" -v b="$mean" 'BEGIN { printf "%.2f(mean)", a / b }')
    else
      r50=$(awk -v a="$o50" -v b="$p50" 'BEGIN { printf "%.2f", a / b }')
      r99=$(awk -v a="$o99" -v b="$p99" 'BEGIN { printf "%.2f", a / b }')
    fi
  fi
  printf '%-6s %-8s %-20s %8s %8s %8s %12.0f %10s %10s %8s %9s %9s %9s\n' "$path" "$test" "$tool" \
    "$(num "$p50")" "$(num "$p99")" "$(num "$mean")" "$tps" "$(num "$cpu")" "$(num "$node")" "$(num "$self")" "$r50" "$r99" "$rr"
done
