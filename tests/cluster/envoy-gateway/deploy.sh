#!/usr/bin/env bash
# deploy.sh [GATEWAY_NODE] [CONTROLLER_NODE]: Envoy Gateway v1.9.1 as a second Gateway API
# implementation on the running cluster (optional: tests/e2e/setup.sh does not run it). Needs
# tests/cluster/traefik/deploy.sh first (the example backend ingress-backend/nginx and the Gateway
# API v1.6.1 CRDs, the version Envoy Gateway v1.9.1 also requires). Steps:
#   - images netbench/envoy-gateway:v1.9.1 and netbench/envoy:1.39.1 (build.sh --import);
#   - Envoy Gateway's CRDs (gateway.envoyproxy.io) server-side, and its Helm chart rendered with
#     values.yaml by the cluster's helm (build.sh --with-tools), both from the Go module
#     github.com/envoyproxy/gateway@v1.9.1 in the module cache (hash pinned below);
#   - the control plane (namespace envoy-gateway-system) on CONTROLLER_NODE (default nb-node2),
#     the Envoy data plane of Gateway gateway-envoy/bench on GATEWAY_NODE (default nb-node1,
#     with the Traefik controllers), then waits until http://hello-eg.bench.local/ answers hello
#     through Service envoy-gateway-system/envoy-bench.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need_root
need_cmds go jq curl

gateway_node=${1:-nb-node1}
controller_node=${2:-nb-node2}
mod=github.com/envoyproxy/gateway
version=v1.9.1
sum=h1:vAVp6/AlBXJ1aOhp1mxL7fNEzVEfjADUguUhm2wzxQY=
here=$NB_CLUSTER_DIR/envoy-gateway
[[ -f $NB_KUBECONFIG ]] || die "cluster not up (run tests/cluster/up.sh first)"
kc get namespace ingress-backend >/dev/null 2>&1 ||
    die "namespace ingress-backend (the example backend) missing: run tests/cluster/traefik/deploy.sh"

"$here/build.sh" --import >/dev/null
helm=$("$NB_CLUSTER_DIR/build.sh" --with-tools)/helm
"$NB_CLUSTER_DIR/traefik/gateway-api-crds.sh" --apply >/dev/null

json=$(cd / && GOPROXY=off GOSUMDB=off go mod download -json "$mod@$version" 2>/dev/null) ||
    json=$(cd / && go mod download -json "$mod@$version") || die "cannot get $mod@$version"
[[ $(jq -r .Sum <<<"$json") == "$sum" ]] || die "$mod@$version: hash differs from $sum"
moddir=$(jq -r .Dir <<<"$json")

kc apply --server-side --field-manager=netbench-cluster \
    -f "$moddir/charts/gateway-helm/charts/crds/crds/generated/" >&2
mapfile -t crds < <(kc get crd -o name | grep '\.gateway\.envoyproxy\.io$')
kc wait --for condition=Established --timeout=60s "${crds[@]}" >&2

# The chart ships values.tmpl.yaml (upstream's release fills in the image); values.yaml here
# sets the images, so the placeholders only need to be valid YAML.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$moddir/charts/gateway-helm" "$work/"
chmod -R u+w "$work"
# shellcheck disable=SC2016 # ${...} are the template's literal placeholders
sed -e 's/\${GatewayImage}/netbench\/envoy-gateway:v1.9.1/' -e 's/\${GatewayImagePullPolicy}/Never/' \
    "$work/gateway-helm/values.tmpl.yaml" >"$work/gateway-helm/values.yaml"
"$helm" template eg "$work/gateway-helm" --namespace envoy-gateway-system \
    --set createNamespace=true -f "$here/values.yaml" \
    --set-string "deployment.pod.nodeSelector.kubernetes\.io/hostname=$controller_node" \
    --set-string "certgen.job.nodeSelector.kubernetes\.io/hostname=$controller_node" \
    >"$work/eg.yaml"
# The certgen Job (a Helm hook) is immutable once created and removes itself 30 s after it
# finished; its Secrets stay, so a second run skips it.
if kc -n envoy-gateway-system get secret envoy-gateway >/dev/null 2>&1; then
    kc apply -f - >&2 < <("$helm" template eg "$work/gateway-helm" --namespace envoy-gateway-system \
        --set createNamespace=true -f "$here/values.yaml" --no-hooks \
        --set-string "deployment.pod.nodeSelector.kubernetes\.io/hostname=$controller_node")
else
    kc apply -f "$work/eg.yaml" >&2
    kc -n envoy-gateway-system wait job/eg-gateway-helm-certgen --for condition=Complete --timeout=120s >&2
fi
kc -n envoy-gateway-system rollout status deployment/envoy-gateway --timeout=180s >&2

kc apply -f - >&2 < <(sed "s/GATEWAY_NODE/$gateway_node/" "$here/gateway.yaml")
kc -n gateway-envoy wait gateway/bench --for condition=Programmed --timeout=180s >&2
kc -n envoy-gateway-system rollout status deployment/envoy-bench --timeout=180s >&2
kc -n ingress-backend wait httproute/hello-eg --timeout=60s \
    --for 'jsonpath={.status.parents[?(@.parentRef.name=="bench")].conditions[?(@.type=="Accepted")].status}=True' >&2
wait_hello hello-eg.bench.local envoy-gateway-system envoy-bench
log "envoy-bench on $gateway_node routes hello-eg.bench.local (HTTPRoute) to ingress-backend/nginx"
