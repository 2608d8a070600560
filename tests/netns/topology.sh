#!/usr/bin/env bash
# Test topology for netbench TCP/offload tests: network namespaces as "nodes".
#
#   topology.sh up NAME [--target]    build it (idempotent: tears down a leftover first)
#   topology.sh down NAME             remove everything NAME created (never fails on absence)
#   topology.sh env NAME              print the shell variables describing it
#
# Layout (NAME is a short unique suffix, at most 8 characters):
#   ${NAME}a  "node A": veth nva-NAME 198.18.0.1/30, vxlan nxa-NAME (VNI 42, port 4789) 198.19.0.1/24
#   ${NAME}b  "node B": veth nvb-NAME 198.18.0.2/30, vxlan nxb-NAME 198.19.0.2/24
#   with --target, ${NAME}t "egress target": veth ntt-NAME 198.18.1.2/30, reached from A through B
#   (the "egress gateway"; forwarding is enabled inside namespace B only) on veth ntb-NAME 198.18.1.1/30.
#
# Everything lives inside the namespaces: deleting them removes every device. Nothing touches the
# host's own interfaces or sysctls.
set -euo pipefail

usage() { echo "usage: $0 up|down|env NAME [--target]" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 name=$2 target=${3:-}
[[ $name =~ ^[a-z0-9]{1,8}$ ]] || { echo "topology: NAME must be 1-8 of [a-z0-9], got '$name'" >&2; exit 2; }

ns_a=nb${name}a ns_b=nb${name}b ns_t=nb${name}t

print_env() {
  cat <<EOT
NS_A=$ns_a
NS_B=$ns_b
NS_T=$ns_t
VETH_A=nva-$name
VETH_B=nvb-$name
VXLAN_A=nxa-$name
VXLAN_B=nxb-$name
VETH_IP_A=198.18.0.1
VETH_IP_B=198.18.0.2
VXLAN_IP_A=198.19.0.1
VXLAN_IP_B=198.19.0.2
TARGET_IP=198.18.1.2
EOT
}

down() {
  for ns in "$ns_a" "$ns_b" "$ns_t"; do
    ip netns del "$ns" 2>/dev/null || true
  done
}

up() {
  command -v ip >/dev/null || { echo "topology: 'ip' (iproute2) is not installed" >&2; exit 1; }
  down
  trap 'down' ERR
  ip netns add "$ns_a"
  ip netns add "$ns_b"
  # Create the veth pair directly inside the namespaces: it never exists in the host namespace.
  ip -n "$ns_a" link add "nva-$name" type veth peer name "nvb-$name" netns "$ns_b"
  ip -n "$ns_a" addr add 198.18.0.1/30 dev "nva-$name"
  ip -n "$ns_b" addr add 198.18.0.2/30 dev "nvb-$name"
  for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
  ip -n "$ns_a" link set "nva-$name" up
  ip -n "$ns_b" link set "nvb-$name" up
  ip -n "$ns_a" link add "nxa-$name" type vxlan id 42 dstport 4789 local 198.18.0.1 remote 198.18.0.2 dev "nva-$name"
  ip -n "$ns_b" link add "nxb-$name" type vxlan id 42 dstport 4789 local 198.18.0.2 remote 198.18.0.1 dev "nvb-$name"
  ip -n "$ns_a" addr add 198.19.0.1/24 dev "nxa-$name"
  ip -n "$ns_b" addr add 198.19.0.2/24 dev "nxb-$name"
  ip -n "$ns_a" link set "nxa-$name" up
  ip -n "$ns_b" link set "nxb-$name" up
  if [ "$target" = "--target" ]; then
    ip netns add "$ns_t"
    ip -n "$ns_b" link add "ntb-$name" type veth peer name "ntt-$name" netns "$ns_t"
    ip -n "$ns_b" addr add 198.18.1.1/30 dev "ntb-$name"
    ip -n "$ns_t" addr add 198.18.1.2/30 dev "ntt-$name"
    ip -n "$ns_t" link set lo up
    ip -n "$ns_b" link set "ntb-$name" up
    ip -n "$ns_t" link set "ntt-$name" up
    # B is the egress gateway: forwarding only inside its own namespace.
    ip netns exec "$ns_b" sysctl -qw net.ipv4.ip_forward=1
    ip -n "$ns_a" route add 198.18.1.0/30 via 198.18.0.2
    ip -n "$ns_t" route add 198.18.0.0/30 via 198.18.1.1
  elif [ -n "$target" ]; then
    usage
  fi
  trap - ERR
}

case $cmd in
  up) up ;;
  down) down ;;
  env) print_env ;;
  *) usage ;;
esac
