#!/usr/bin/env bash
# deploy-gateway.sh [GATEWAY_NODE]: Traefik as a Gateway API implementation (gateway.yaml) on the
# running cluster, next to the Ingress Traefik; deploy.sh runs it after traefik.yaml, whose
# image (netbench/traefik:3.7.13) and example backend (ingress-backend/nginx) it uses. Installs
# the Gateway API CRDs (standard channel, the version traefik/go.mod pins, from the Go module
# cache: gateway-api-crds.sh), applies gateway.yaml, pins the controller to GATEWAY_NODE (default
# nb-node1, the Ingress Traefik's node: a load generator on nb-node0 reaches both controllers
# over the same path, and both reach the backends on nb-node2 the same way), then waits for the
# rollout, for Gateway bench to be Programmed, for HTTPRoute hello-gw to be Accepted, and for
# http://hello-gw.bench.local/ to answer "hello" through the controller's ClusterIP. Idempotent.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need_root

gateway_node=${1:-nb-node1}
[[ -f $NB_KUBECONFIG ]] || die "cluster not up (run tests/cluster/up.sh first)"
kc get namespace ingress-backend >/dev/null 2>&1 ||
    die "namespace ingress-backend (the example backend) missing: run tests/cluster/traefik/deploy.sh"

"$NB_CLUSTER_DIR/traefik/gateway-api-crds.sh" --apply >/dev/null
kc apply -f "$NB_CLUSTER_DIR/traefik/gateway.yaml" >&2
kc -n gateway-traefik patch deployment traefik-gateway --type merge \
    -p "{\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"kubernetes.io/hostname\":\"$gateway_node\"}}}}}" >&2
kc -n gateway-traefik rollout status deployment/traefik-gateway --timeout=180s >&2
kc -n gateway-traefik wait gateway/bench --for condition=Programmed --timeout=60s >&2
kc -n ingress-backend wait httproute/hello-gw --timeout=60s \
    --for 'jsonpath={.status.parents[?(@.parentRef.name=="bench")].conditions[?(@.type=="Accepted")].status}=True' >&2
wait_hello hello-gw.bench.local gateway-traefik traefik-gateway
log "traefik-gateway on $gateway_node routes hello-gw.bench.local (HTTPRoute) to ingress-backend/nginx"
