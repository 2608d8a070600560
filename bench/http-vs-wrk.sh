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

# One run in a fresh namespace: prints the requests/s the tool reported.
run_one() {
    local tool=$1 mode=$2 out
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
        wrk/keepalive) out=$(ip netns exec "$NS" taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" "$url") ;;
        wrk/close) out=$(ip netns exec "$NS" taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" -H 'Connection: close' "$url") ;;
        loadgen/keepalive) out=$(ip netns exec "$NS" taskset -c 1 "$LOADGEN" http -t1 -c"$CONNS" -d"$DURATION" "$url") ;;
        loadgen/close) out=$(ip netns exec "$NS" taskset -c 1 "$LOADGEN" http -t1 -c"$CONNS" -d"$DURATION" --no-keepalive "$url") ;;
        oha/keepalive) out=$(ip netns exec "$NS" taskset -c 1 oha --no-tui -z "$DURATION" -c "$CONNS" "$url") ;;
        oha/close) out=$(ip netns exec "$NS" taskset -c 1 oha --no-tui -z "$DURATION" -c "$CONNS" --disable-keepalive "$url") ;;
    esac
    kill "$NGINX_PID"; wait "$NGINX_PID" 2>/dev/null || true; NGINX_PID=""
    ip netns del "$NS"; NS=""
    echo "$out" | awk '/Requests\/sec:/ {print $2; exit}' | head -1
}

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.2f\n", (a[NR/2]+a[NR/2+1])/2}'; }

echo "http-vs-wrk: $ROUNDS rounds, -t1 -c$CONNS -d$DURATION, nginx on CPU 0, client on CPU 1, fresh netns per run"
for mode in $MODES; do
    tools="wrk loadgen"
    [ "$HAVE_OHA" = 1 ] && tools="$tools oha"
    declare -A runs=()
    for r in $(seq "$ROUNDS"); do
        order=$tools
        [ $((r % 2)) = 0 ] && order=$(echo "$tools" | awk '{for (i=NF; i>0; i--) printf "%s ", $i}')
        line="  $mode round $r:"
        for tool in $order; do
            rps=$(run_one "$tool" "$mode")
            runs[$tool]="${runs[$tool]:-} $rps"
            line="$line $tool=$rps"
        done
        echo "$line"
    done
    wrk_med=$(echo "${runs[wrk]}" | tr ' ' '\n' | grep . | median)
    lg_med=$(echo "${runs[loadgen]}" | tr ' ' '\n' | grep . | median)
    printf '%-10s median RPS: wrk %s, netbench-loadgen %s, ratio %.3f\n' "$mode" "$wrk_med" "$lg_med" \
        "$(awk -v a="$lg_med" -v b="$wrk_med" 'BEGIN {print a / b}')"
    if [ "$HAVE_OHA" = 1 ]; then
        oha_med=$(echo "${runs[oha]}" | tr ' ' '\n' | grep . | median)
        printf '%-10s median RPS: oha %s, ratio oha/wrk %.3f\n' "$mode" "$oha_med" \
            "$(awk -v a="$oha_med" -v b="$wrk_med" 'BEGIN {print a / b}')"
    fi
    unset runs
done
