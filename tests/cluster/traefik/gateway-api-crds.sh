#!/usr/bin/env bash
# gateway-api-crds.sh [--apply]: the Gateway API CRDs, standard channel, of the
# sigs.k8s.io/gateway-api version Traefik was built against (traefik/go.mod; v1.6.1 with
# v3.7.13), taken from the Go module cache instead of being checked in (1.2 MB of YAML).
# Prints the directory holding them (<module>/config/crd/standard). With --apply it also
# applies them to the running cluster with server-side apply (the CRDs are too large for the
# last-applied annotation of a client-side apply) and waits until every CRD is Established.
#
# The module comes from the cache when it is there (GOPROXY=off: no network), else from the
# module proxy; either way its hash must equal the h1: line in traefik/go.sum, so the YAML is
# exactly the pinned release. The directory holds, per upstream's config/crd/kustomization.yaml:
# GatewayClass, Gateway, HTTPRoute, GRPCRoute, ReferenceGrant, BackendTLSPolicy, ListenerSet,
# TCPRoute, TLSRoute, UDPRoute and the ValidatingAdmissionPolicy "safe-upgrades" (refuses
# installing CRDs of releases before v1.6 over these).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

need_cmds go jq
mod=sigs.k8s.io/gateway-api
version=$(go mod edit -json "$NB_CLUSTER_DIR/traefik/go.mod" |
    jq -r --arg m "$mod" '.Require[] | select(.Path == $m) | .Version')
[[ -n $version ]] || die "$mod is not required by traefik/go.mod"
want=$(awk -v m="$mod" -v v="$version" '$1 == m && $2 == v { print $3 }' "$NB_CLUSTER_DIR/traefik/go.sum")
[[ -n $want ]] || die "no checksum for $mod $version in traefik/go.sum"

# Outside any module (traefik/ must not run go commands, see its go.mod).
json=$(cd / && GOPROXY=off GOSUMDB=off go mod download -json "$mod@$version" 2>/dev/null) ||
    json=$(cd / && go mod download -json "$mod@$version") ||
    die "cannot get $mod@$version: $(jq -r '.Error // empty' <<<"$json")"
sum=$(jq -r '.Sum' <<<"$json")
[[ $sum == "$want" ]] || die "$mod@$version has hash $sum, traefik/go.sum says $want"
dir=$(jq -r '.Dir' <<<"$json")/config/crd/standard
[[ -f $dir/gateway.networking.k8s.io_httproutes.yaml ]] || die "no standard-channel CRDs in $dir"

if [[ ${1:-} == --apply ]]; then
    [[ -f $NB_KUBECONFIG ]] || die "cluster not up (run tests/cluster/up.sh first)"
    kc apply --server-side --field-manager=netbench-cluster -f "$dir" >&2
    # Each file with a CRD holds one, gateway.networking.k8s.io_<plural>.yaml -> CRD
    # <plural>.gateway.networking.k8s.io (the policy's file has none).
    crds=()
    while read -r f; do
        f=${f##*_}
        crds+=("crd/${f%.yaml}.gateway.networking.k8s.io")
    done < <(grep -l '^kind: CustomResourceDefinition$' "$dir"/*.yaml)
    kc wait --for condition=Established --timeout=60s "${crds[@]}" >&2
    log "Gateway API $version CRDs (standard channel) applied"
elif [[ -n ${1:-} ]]; then
    die "usage: gateway-api-crds.sh [--apply]"
fi
echo "$dir"
