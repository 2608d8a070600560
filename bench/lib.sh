# shellcheck shell=bash
# shellcheck disable=SC2154 # topo and name: set by the sourcing script, and by bench_topology
# Shared by the bench scripts that compare netbench-loadgen with its peers in network
# namespaces (tcp-vs-iperf3.sh, udp-vs-iperf3.sh, rr-vs-peers.sh). Sourced once `topo` names
# tests/netns/topology.sh; not run by itself.

# Background servers to stop (each script adds the pids of the ones it starts).
pids=()
# Directories to remove at exit, after the topology.
bench_dirs=()

# Fails unless run as root with every command named installed.
bench_require() { # command...
  for bin in "$@"; do
    command -v "$bin" >/dev/null || { echo "bench: $bin is not installed" >&2; exit 1; }
  done
  [ "$(id -u)" = 0 ] || { echo "bench: needs root (network namespaces)" >&2; exit 1; }
}

# Stops the servers in $pids and forgets them.
stop_servers() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}

# At exit: stops the servers, removes the topology $name, then the $bench_dirs.
bench_cleanup() {
  stop_servers
  "$topo" down "$name"
  for d in "${bench_dirs[@]}"; do rm -rf "$d"; done
}

# Builds the namespaces (`topology.sh up NAME ARGS...`; NAME is PREFIX and this shell's pid,
# at most 8 characters), removed at exit by bench_cleanup, and sets their variables (NS_A ...).
bench_topology() { # prefix [topology.sh up arguments...]
  name=$1$$
  name=${name:0:8}
  shift
  trap bench_cleanup EXIT
  "$topo" up "$name" "$@"
  eval "$("$topo" env "$name")"
}

# The command prefix that runs something in namespace $1 ("host" = no namespace).
ns_prefix() { if [ "$1" = host ]; then pre=(); else pre=(ip netns exec "$1"); fi; }
in_ns() { local pre; ns_prefix "$1"; shift; "${pre[@]}" "$@"; }

# Waits until something listens on `port` in `ns` (over TCP, or `proto` u: UDP).
wait_port() { # ns port [proto(t|u), named in the error when given]
  for _ in $(seq 100); do
    in_ns "$1" ss -Hln"${3:-t}" "sport = :$2" | grep -q . && return 0
    sleep 0.05
  done
  echo "bench: nothing listens on ${3:+$3/}$2 in $1" >&2; exit 1
}
