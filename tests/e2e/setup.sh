#!/usr/bin/env bash
# Brings up the test cluster with everything the e2e tests need: the nginx target
# (nginx-target.netbench-target), the CRDs, and the operator and loadgen images built from this
# checkout by .ci/release.sh (buildah, FROM scratch), with the operator installed from deploy/
# (the manifests rendered from the chart) plus the permissions the tests exercise: sweeps within a benchmark's own
# namespace, anywhere (sweep-rbac.yaml), and
# hostNetwork workers and offload Jobs in the egress tests' e2e-egpriv-* namespaces only
# (egress-rbac.yaml), so other namespaces (e2e-egdeny-*, the ingress tests') are still refused.
# Idempotent. Prints the environment lines (KUBECONFIG, PATH) like tests/cluster/up.sh.
# HTTPRoutes a benchmark creates are allowed in the controller tests' e2e-ctl-* namespaces
# (route-rbac.yaml). Traefik (Ingress and Gateway API) and Envoy Gateway are the controllers.
#   setup.sh [--no-traefik]   (--no-traefik: tests/demo.sh, which needs no ingress controller)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/tests/cluster/lib.sh"
source "$repo/tests/cluster/images.sh"

traefik=true
[[ ${1:-} == --no-traefik ]] && traefik=false

# The cluster's Go binaries build in the background while Rust builds the images' binaries: on a
# fresh machine both are long, and each leaves a core idle part of the time (a no-op when
# tests/run-all.sh built them already).
go_flags=()
$traefik && go_flags+=(--with-traefik)
go_log=$(mktemp /tmp/netbench-setup-go.XXXXXX)
"$repo/tests/cluster/build.sh" "${go_flags[@]}" >"$go_log" 2>&1 &
go_pid=$!
trap 'kill "$go_pid" 2>/dev/null || true; rm -f "$go_log"' EXIT

# The operator and loadgen images exactly as a release builds them (.ci/release.sh: static
# binaries, then the Containerfiles' offline FROM scratch stage with buildah), from the `image`
# profile (release without whole-program LTO: much faster to build on 2 cores; the code is the
# same), inspected, then imported into every node's containerd.
export NB_PROFILE=${NB_PROFILE:-image}
"$repo/.ci/release.sh" binaries host >&2
"$repo/.ci/release.sh" images host >&2
"$repo/.ci/release.sh" check-images host >&2

wait "$go_pid" || {
    cat "$go_log" >&2
    die "tests/cluster/build.sh ${go_flags[*]} failed"
}
"$repo/tests/cluster/demo.sh" --netbench-images >&2

# The ingress controller of the seed experiment: Traefik on nb-node1, its backends on nb-node2
# (workers of the seed test run on nb-node0); deploy.sh also puts Traefik as a Gateway API
# implementation (gateway-traefik/traefik-gateway, no CPU request) on nb-node1.
# Envoy Gateway (a second Gateway API implementation, another data plane) puts its Envoy on
# nb-node1 too and its control plane on nb-node2: the controller comparison tests.
if $traefik; then
    "$repo/tests/cluster/traefik/deploy.sh" nb-node1 nb-node2 >&2
    "$repo/tests/cluster/envoy-gateway/deploy.sh" nb-node1 nb-node2 >&2
fi

kc apply -f "$repo/crds/manifests/" >&2
established 60 -f "$repo/crds/manifests/" >&2
kc apply -f "$repo/deploy/operator.yaml" >&2
# The operator on nb-node0, with the load generators of the node tests: the seed sweep's 2-CPU
# step needs all of nb-node1's allocatable CPU for Traefik.
kc -n netbench-system patch deployment netbench-operator --type merge \
    -p '{"spec":{"template":{"spec":{"nodeSelector":{"kubernetes.io/hostname":"nb-node0"}}}}}' >&2
# deploy/ has netbench-system enforce Pod Security "restricted" (no offload Jobs by default); the
# offload Jobs enabled below run there and need "privileged", as the chart sets it when
# security.offloadNamespaces is not empty.
kc label namespace netbench-system --overwrite pod-security.kubernetes.io/enforce=privileged >&2
kc apply -f "$repo/tests/e2e/sweep-rbac.yaml" >&2
kc apply -f "$repo/tests/e2e/egress-rbac.yaml" >&2
kc apply -f "$repo/tests/e2e/route-rbac.yaml" >&2
kc apply -f "$repo/tests/e2e/usage-rbac.yaml" >&2
# Sweeps: every namespace within itself (pairs "*=."), and the seed test's namespaces (and
# bench/seeds.sh's netbench-seeds) the Traefik Deployment; netbench-seeds may also use
# hostNetwork workers and offload Jobs, for the egress seed. Offload: only the nodes' NIC and overlay
# devices (tests/e2e/egress-net.sh), on the client and server nodes (labelled here; never the
# egress node), with the default features.
for node in nb-node0 nb-node1; do
    kc label --overwrite node "$node" netbench.io/e2e-offload=allowed >&2
done
kc -n netbench-system set env deployment/netbench-operator \
    NETBENCH_SWEEP_TARGETS='*=.,e2e-seed-*=ingress-traefik/traefik,netbench-seeds=ingress-traefik/traefik' NETBENCH_IMAGE_PULL_POLICY=Never NETBENCH_WORKER_START_TIMEOUT=60 \
    NETBENCH_HOST_NETWORK_NAMESPACES='e2e-egpriv-*,netbench-seeds' NETBENCH_OFFLOAD_NAMESPACES='e2e-egpriv-*,netbench-seeds' \
    NETBENCH_OFFLOAD_INTERFACES='eth0,nb-vxlan0' NETBENCH_OFFLOAD_NODE_SELECTOR='netbench.io/e2e-offload=allowed' \
    NETBENCH_ROUTE_NAMESPACES='e2e-ctl-*' NETBENCH_ROUTE_GATEWAYS='gateway-envoy/bench,gateway-traefik/bench' \
    NETBENCH_USAGE_TARGETS='e2e-ctl-*=.,e2e-ctl-*=envoy-gateway-system,e2e-ctl-*=ingress-traefik/traefik,e2e-ctl-*=gateway-traefik/traefik-gateway' >&2
# A new image under the same tag needs new pods.
kc -n netbench-system rollout restart deployment/netbench-operator >&2
# (rollout status can lose track of a ReplicaSet replaced by the second rollout: retry)
for attempt in 1 2 3; do
    kc -n netbench-system rollout status deployment/netbench-operator --timeout=180s >&2 && break
    [[ $attempt == 3 ]] && exit 1
    sleep 2
done
"$repo/tests/cluster/up.sh" 2>/dev/null | grep '^export'
