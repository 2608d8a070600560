#!/usr/bin/env bash
# The real-network test bed for the EgressBenchmark e2e tests on the single-node test cluster.
#
#   egress-net.sh up      build it (idempotent: removes a leftover first)
#   egress-net.sh down    remove everything it created (never fails on absence)
#   egress-net.sh env     print the shell variables describing it
#
# nb-node0's kubelet runs on this machine, so hostNetwork pods share the root network namespace.
# "up" gives that namespace devices of our own (never the machine's interfaces) and an external
# "target" host behind them:
#
#   root namespace (the node)                         namespace nbe-target (outside the cluster)
#   nbe-veth0 198.18.20.1/30  <------ veth ------>   nbe-veth1 198.18.20.2/30
#   nbe-vx0   198.18.21.1/24  <-- vxlan VNI 4220 --> nbe-vx1   198.18.21.2/24   (UDP 4790, over the veth)
#                                                    netbench-loadgen tcp-server on port 5201
#                                                    route 198.19.128.0/17 (pods) via 198.18.20.1
#
# A hostNetwork pod reaches the target over the veth (node-to-node) or, bound to nbe-vx0, over the
# vxlan (vxlan-to-vxlan); a normal pod goes pod -> node (ip_forward is on for the cluster) ->
# nbe-veth0 -> target (pod-to-target). Only nbe-* devices may be tuned (offload tests).
#
# The tcp-server is the static loadgen binary tests/e2e/setup.sh builds (NB_LOADGEN overrides),
# copied into $NBE_STATE (default /run/netbench-egress-net) with its pid file and log, so a
# rebuild in the shared target directory cannot change or remove it mid-test.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
ns=nbe-target
veth_root=nbe-veth0 veth_target=nbe-veth1
vx_root=nbe-vx0 vx_target=nbe-vx1
veth_root_ip=198.18.20.1 veth_target_ip=198.18.20.2
vx_root_ip=198.18.21.1 vx_target_ip=198.18.21.2
vni=4220 vx_port=4790 server_port=5201
pod_cidr=198.19.128.0/17
state=${NBE_STATE:-/run/netbench-egress-net}
pidfile=$state/tcp-server.pid
log=$state/tcp-server.log
loadgen=${NB_LOADGEN:-${CARGO_TARGET_DIR:-$repo/target}/x86_64-unknown-linux-gnu/image/netbench-loadgen}
server_bin=$state/netbench-loadgen

usage() { echo "usage: $0 up|down|env" >&2; exit 2; }
die() { echo "egress-net: $*" >&2; exit 1; }

print_env() {
  cat <<EOT
NBE_NETNS=$ns
NBE_VETH_ROOT=$veth_root
NBE_VETH_TARGET=$veth_target
NBE_VETH_ROOT_IP=$veth_root_ip
NBE_VETH_TARGET_IP=$veth_target_ip
NBE_VXLAN_ROOT=$vx_root
NBE_VXLAN_TARGET=$vx_target
NBE_VXLAN_ROOT_IP=$vx_root_ip
NBE_VXLAN_TARGET_IP=$vx_target_ip
NBE_VXLAN_VNI=$vni
NBE_VXLAN_PORT=$vx_port
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
  # Anything else left inside our namespace was started by this script (or a test using it).
  if ip netns list 2>/dev/null | grep -qw "^$ns"; then
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  fi
  # Deleting a veth end removes its peer; the vxlan devices go with their namespace / explicitly.
  ip link del "$vx_root" 2>/dev/null || true
  ip link del "$veth_root" 2>/dev/null || true
}

wait_listening() {
  for _ in $(seq 50); do
    if ip netns exec "$ns" ss -Htln "sport = :$server_port" | grep -q .; then return 0; fi
    server_pid >/dev/null || break
    sleep 0.1
  done
  echo "--- $log:" >&2; tail -n 20 "$log" >&2 || true
  die "the tcp-server in $ns is not listening on port $server_port"
}

up() {
  command -v ip >/dev/null || die "'ip' (iproute2) is not installed"
  [[ -x $loadgen ]] || die "no loadgen binary at $loadgen: run tests/e2e/setup.sh first (or set NB_LOADGEN)"
  [[ $(cat /proc/sys/net/ipv4/ip_forward) == 1 ]] || die "ip_forward is off: start the test cluster first (tests/cluster/up.sh)"
  down
  trap 'down' ERR
  mkdir -p "$state"
  install -m 0755 "$loadgen" "$server_bin"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add "$veth_root" type veth peer name "$veth_target" netns "$ns"
  ip addr add "$veth_root_ip/30" dev "$veth_root"
  ip -n "$ns" addr add "$veth_target_ip/30" dev "$veth_target"
  ip link set "$veth_root" up
  ip -n "$ns" link set "$veth_target" up
  ip link add "$vx_root" type vxlan id "$vni" dstport "$vx_port" \
    local "$veth_root_ip" remote "$veth_target_ip" dev "$veth_root"
  ip -n "$ns" link add "$vx_target" type vxlan id "$vni" dstport "$vx_port" \
    local "$veth_target_ip" remote "$veth_root_ip" dev "$veth_target"
  ip addr add "$vx_root_ip/24" dev "$vx_root"
  ip -n "$ns" addr add "$vx_target_ip/24" dev "$vx_target"
  ip link set "$vx_root" up
  ip -n "$ns" link set "$vx_target" up
  # Pods' traffic arrives masqueraded to the node's address by the bridge CNI; the route also
  # covers a CNI without masquerading.
  ip -n "$ns" route add "$pod_cidr" via "$veth_root_ip" dev "$veth_target"
  # setsid: the server outlives this script (and the test that ran it) until `down`.
  setsid ip netns exec "$ns" "$server_bin" tcp-server --port "$server_port" \
    </dev/null >"$log" 2>&1 &
  echo $! >"$pidfile"
  wait_listening
  trap - ERR
}

case ${1:-} in
  up) up ;;
  down) down ;;
  env) print_env ;;
  *) usage ;;
esac
