#!/usr/bin/env bash
# The EgressBenchmark e2e tests' view of the test cluster's network (tests/cluster: each node a
# network namespace with NIC eth0 on a switch, the vxlan overlay device nb-vxlan0, and the
# target host nb-target behind the egress node) plus the external tcp-server on the target.
#
#   egress-net.sh up      start the tcp-server in nb-target (idempotent: stops a leftover first)
#   egress-net.sh down    stop it (never fails on absence)
#   egress-net.sh env     print the shell variables describing the topology
#
#   nb-node0 (client node)        nb-node1 (server node)        nb-node2 (egress node)
#   eth0 198.19.255.10 ---------- eth0 198.19.255.11 ---------- eth0 198.19.255.12 (the switch)
#   nb-vxlan0 <========== vxlan overlay, VNI 1, UDP 8472, over the eth0s ==========> nb-vxlan0
#                                                                eth1 198.19.254.1
#                                                                  |  (masquerades pods)
#                                                 nb-target:     eth0 198.19.254.2, tcp-server :5201
#
# node->node: hostNetwork client on nb-node0 bound to eth0 -> hostNetwork server on nb-node1
# bound to eth0; vxlan->vxlan: the same bound to nb-vxlan0; pod->egress node->target: a normal
# pod on nb-node0 to 198.19.254.2 (routed over the overlay to nb-node2, masqueraded there).
# Only eth0 and nb-vxlan0 of nodes the admin allows are ever tuned (offload tests).
#
# The tcp-server is the static loadgen binary tests/e2e/setup.sh builds (NB_LOADGEN overrides),
# copied into $NBE_STATE (default /run/netbench-egress-net) with its pid file and log, so a
# rebuild in the shared target directory cannot change or remove it mid-test.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/tests/cluster/lib.sh"
server_port=5201
state=${NBE_STATE:-/run/netbench-egress-net}
pidfile=$state/tcp-server.pid
log=$state/tcp-server.log
loadgen=${NB_LOADGEN:-${CARGO_TARGET_DIR:-$repo/target}/x86_64-unknown-linux-gnu/image/netbench-loadgen}
server_bin=$state/netbench-loadgen

usage() { echo "usage: $0 up|down|env" >&2; exit 2; }
fail() { echo "egress-net: $*" >&2; exit 1; }

print_env() {
  cat <<EOT
NBE_CLIENT_NODE=$(node_name 0)
NBE_SERVER_NODE=$(node_name 1)
NBE_EGRESS_NODE=$(egress_node)
NBE_NIC=$NB_NODE_NIC
NBE_VXLAN=$NB_VXLAN_DEV
NBE_TARGET_NETNS=$NB_TARGET_NS
NBE_TARGET_IP=$NB_TARGET_IP
NBE_SERVER_PORT=$server_port
NBE_SERVER_PIDFILE=$pidfile
NBE_SERVER_LOG=$log
NBE_LOADGEN=$server_bin
EOT
}

# Our tcp-server: the pid from the pid file, if that process is still a netbench-loadgen.
server_pid() {
  local pid
  pid=$(cat "$pidfile" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'netbench-loadgen tcp-server' || return 1
  echo "$pid"
}

down() {
  local pid
  if pid=$(server_pid); then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile" "$server_bin"
}

wait_listening() {
  for _ in $(seq 50); do
    if ip netns exec "$NB_TARGET_NS" ss -Htln "sport = :$server_port" | grep -q .; then return 0; fi
    server_pid >/dev/null || break
    sleep 0.1
  done
  echo "--- $log:" >&2; tail -n 20 "$log" >&2 || true
  fail "the tcp-server in $NB_TARGET_NS is not listening on port $server_port"
}

up() {
  [[ -x $loadgen ]] || fail "no loadgen binary at $loadgen: run tests/e2e/setup.sh first (or set NB_LOADGEN)"
  [[ -e /run/netns/$NB_TARGET_NS ]] || fail "no target host: start the test cluster first (tests/cluster/up.sh)"
  ((NB_NODES >= 3)) || fail "the egress tests need 3 nodes; the cluster has $NB_NODES (NB_NODES=3 tests/cluster/up.sh)"
  down
  mkdir -p "$state"
  install -m 0755 "$loadgen" "$server_bin"
  # setsid: the server outlives this script (and the test that ran it) until `down`.
  setsid ip netns exec "$NB_TARGET_NS" "$server_bin" tcp-server --port "$server_port" \
    </dev/null >"$log" 2>&1 &
  echo $! >"$pidfile"
  wait_listening
}

case ${1:-} in
  up) up ;;
  down) down ;;
  env) print_env ;;
  *) usage ;;
esac
