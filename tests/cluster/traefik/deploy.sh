#!/usr/bin/env bash
# deploy.sh [CONTROLLER_NODE] [BACKEND_NODE] [GATEWAY_NODE]: Traefik and its example backend on
# the running cluster, the controller pinned to CONTROLLER_NODE (default nb-node1) and the nginx
# backends to BACKEND_NODE (default nb-node2), so a load generator on a third node measures the
# controller across the network. Builds the binary and image when missing (cold: ~17 min).
# Idempotent. Waits for both rollouts and for http://hello.bench.local/ through the controller's
# ClusterIP. Then the same binary as a Gateway API implementation (deploy-gateway.sh:
# gateway.yaml, Deployment gateway-traefik/traefik-gateway) on GATEWAY_NODE (default: the same
# node as the Ingress Traefik), until http://hello-gw.bench.local/ answers through it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../images.sh"
need_root

controller_node=${1:-nb-node1}
backend_node=${2:-nb-node2}
gateway_node=${3:-$controller_node}
[[ -f $NB_KUBECONFIG ]] || die "cluster not up (run tests/cluster/up.sh first)"

"$NB_CLUSTER_DIR/build.sh" --with-traefik >/dev/null
"$NB_CLUSTER_DIR/traefik/image.sh" --import >/dev/null
kc apply -f "$NB_CLUSTER_DIR/traefik/traefik.yaml" >&2
pin() {
    kc -n "$1" patch deployment "$2" --type merge \
        -p "{\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"kubernetes.io/hostname\":\"$3\"}}}}}" >&2
}
pin ingress-traefik traefik "$controller_node"
pin ingress-backend nginx "$backend_node"
kc -n ingress-traefik rollout status deployment/traefik --timeout=180s >&2
kc -n ingress-backend rollout status deployment/nginx --timeout=180s >&2
wait_hello hello.bench.local ingress-traefik traefik
log "traefik on $controller_node routes hello.bench.local to nginx on $backend_node"
"$NB_CLUSTER_DIR/traefik/deploy-gateway.sh" "$gateway_node"
