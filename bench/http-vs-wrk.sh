#!/usr/bin/env bash
# netbench-loadgen http vs wrk (and oha if installed), side by side on the same cores.
#
# Method (shared/BASELINES.md): Debian nginx, one worker, `return 200 "hello\n"`, pinned to
# CPU 0; the load generator pinned to CPU 1; same connections, threads and duration; the tools
# alternate inside each round; keep-alive and `Connection: close` modes. Every single run gets
# a fresh network namespace (nginx and client inside it), so TIME_WAIT sockets left by one run
# never slow the next, and the host's sysctls are never touched.
#
# Usage: bench/http-vs-wrk.sh            (env: ROUNDS=5 DURATION=6s CONNS=50 MODES="keepalive close")
# Needs root, nginx, wrk, iproute2, taskset. Prints per-run figures, medians and ratios.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-6s}
CONNS=${CONNS:-50}
MODES=${MODES:-"keepalive close"}
PORT=8080
ROOT=$(cd "$(dirname "$0")/.." && pwd)

for tool in nginx wrk ip taskset awk; do
    command -v "$tool" >/dev/null || { echo "http-vs-wrk: '$tool' is not installed (apt-get install -y nginx-light wrk iproute2)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "http-vs-wrk: must run as root (network namespaces)" >&2; exit 1; }

if [ -z "${NO_BUILD:-}" ]; then
    (cd "$ROOT" && cargo build --release -q -p loadgen --bin netbench-loadgen)
fi
LOADGEN=${LOADGEN:-$ROOT/target/release/netbench-loadgen}
HAVE_OHA=$(command -v oha >/dev/null && echo 1 || echo 0)

WORK=$(mktemp -d /tmp/http-vs-wrk.XXXXXX)
NS=""
NGINX_PID=""
cleanup() {
    [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null && wait "$NGINX_PID" 2>/dev/null || true
    [ -n "$NS" ] && ip netns del "$NS" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
error_log $WORK/error.log;
pid $WORK/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    server {
        listen 127.0.0.1:$PORT;
        location / { return 200 "hello\n"; }
    }
}
CONF

# One run in a fresh namespace: prints "RPS CPU_US_PER_REQUEST" for the tool. The CPU time is
# the client's own user+system time (rusage of the child), so the efficiency figure holds
# even when other work shares the machine.
run_one() {
    local tool=$1 mode=$2 out cpu cmd
    NS="nbhttp-$$-$RANDOM"
    ip netns add "$NS"
    ip -n "$NS" link set lo up
    ip netns exec "$NS" taskset -c 0 nginx -c "$WORK/nginx.conf" -p "$WORK" -g 'daemon off;' &
    NGINX_PID=$!
    for _ in $(seq 100); do
        ip netns exec "$NS" bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null && break
        sleep 0.05
    done
    local url="http://127.0.0.1:$PORT/"
    case "$tool/$mode" in
        wrk/keepalive) cmd=(wrk -t1 -c"$CONNS" -d"$DURATION" "$url") ;;
        wrk/close) cmd=(wrk -t1 -c"$CONNS" -d"$DURATION" -H 'Connection: close' "$url") ;;
        loadgen/keepalive) cmd=("$LOADGEN" http -t1 -c"$CONNS" -d"$DURATION" "$url") ;;
        loadgen/close) cmd=("$LOADGEN" http -t1 -c"$CONNS" -d"$DURATION" --no-keepalive "$url") ;;
        oha/keepalive) cmd=(oha --no-tui -z "$DURATION" -c "$CONNS" "$url") ;;
        oha/close) cmd=(oha --no-tui -z "$DURATION" -c "$CONNS" --disable-keepalive "$url") ;;
    esac
    local TIMEFORMAT='%3U %3S'
    cpu=$( { time ip netns exec "$NS" taskset -c 1 "${cmd[@]}" >"$WORK/out" 2>/dev/null; } 2>&1 )
    out=$(cat "$WORK/out")
    kill "$NGINX_PID"; wait "$NGINX_PID" 2>/dev/null || true; NGINX_PID=""
    ip netns del "$NS"; NS=""
    local rps
    rps=$(echo "$out" | awk '/Requests\/sec:/ {print $2; exit}')
    awk -v rps="$rps" -v cpu="$cpu" -v d="${DURATION%s}" \
        'BEGIN {split(cpu, c, " "); printf "%s %.2f\n", rps, (rps > 0 ? (c[1] + c[2]) * 1e6 / (rps * d) : 0)}'
}

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.2f\n", (a[NR/2]+a[NR/2+1])/2}'; }

echo "http-vs-wrk: $ROUNDS rounds, -t1 -c$CONNS -d$DURATION, nginx on CPU 0, client on CPU 1, fresh netns per run"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
col() { echo "$1" | tr ' ' '\n' | grep . | awk -F/ -v i="$2" '{print $i}' | median; }

for mode in $MODES; do
    tools="wrk loadgen"
    [ "$HAVE_OHA" = 1 ] && tools="$tools oha"
    declare -A runs=()
    for r in $(seq "$ROUNDS"); do
        order=$tools
        [ $((r % 2)) = 0 ] && order=$(echo "$tools" | awk '{for (i=NF; i>0; i--) printf "%s ", $i}')
        line="  $mode round $r:"
        for tool in $order; do
            read -r rps cpu < <(run_one "$tool" "$mode")
            runs[$tool]="${runs[$tool]:-} $rps/$cpu"
            line="$line $tool=$rps (${cpu}us cpu/req)"
        done
        echo "$line"
    done
    wrk_rps=$(col "${runs[wrk]}" 1); wrk_cpu=$(col "${runs[wrk]}" 2)
    lg_rps=$(col "${runs[loadgen]}" 1); lg_cpu=$(col "${runs[loadgen]}" 2)
    echo "$mode: median RPS wrk $wrk_rps, netbench-loadgen $lg_rps, ratio $(ratio "$lg_rps" "$wrk_rps")" \
        "| client CPU us/request wrk $wrk_cpu, netbench-loadgen $lg_cpu (wrk/netbench $(ratio "$wrk_cpu" "$lg_cpu"))"
    if [ "$HAVE_OHA" = 1 ]; then
        oha_rps=$(col "${runs[oha]}" 1)
        echo "$mode: median RPS oha $oha_rps, ratio oha/wrk $(ratio "$oha_rps" "$wrk_rps")"
    fi
    unset runs
done
