#!/usr/bin/env bash
# Brings up the test cluster with everything the e2e tests need: the nginx target
# (nginx-target.netbench-target), the CRDs, and the operator and loadgen images built from this
# checkout as static binaries, with the operator installed from deploy/ (the manifests rendered
# from the chart) plus the permissions the tests exercise: sweeps within a benchmark's own
# namespace, anywhere (sweep-rbac.yaml), and
# hostNetwork workers and offload Jobs in the egress tests' e2e-egpriv-* namespaces only
# (egress-rbac.yaml), so other namespaces (e2e-egdeny-*, the ingress tests') are still refused.
# Idempotent. Prints the environment lines (KUBECONFIG, PATH) like tests/cluster/up.sh.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/tests/cluster/lib.sh"
source "$repo/tests/cluster/images.sh"

# Static binaries (no libc needed in the image). The `image` profile is release without
# whole-program LTO, to keep test builds short; the code is the same.
target=x86_64-unknown-linux-gnu
export RUSTFLAGS='-C target-feature=+crt-static'
(cd "$repo" && cargo build --profile image --target $target -p operator -p loadgen --bin netbench-operator --bin netbench-loadgen) >&2
bindir=${CARGO_TARGET_DIR:-$repo/target}/$target/image

"$repo/tests/cluster/demo.sh" >&2
NB_IMAGE_USER=65532:65532 import_image "$(NB_IMAGE_USER=65532:65532 build_image netbench/operator:0.1.0 /operator "$bindir/netbench-operator=/operator")" >&2
NB_IMAGE_USER=65532:65532 import_image "$(NB_IMAGE_USER=65532:65532 build_image netbench/loadgen:0.1.0 /loadgen "$bindir/netbench-loadgen=/loadgen")" >&2

# The ingress controller of the seed experiment: Traefik on nb-node1, its backends on nb-node2
# (workers of the seed test run on nb-node0).
"$repo/tests/cluster/traefik/deploy.sh" nb-node1 nb-node2 >&2

kc apply -f "$repo/crds/manifests/" >&2
kc wait --for condition=established --timeout=60s -f "$repo/crds/manifests/" >&2
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
    NETBENCH_OFFLOAD_INTERFACES='eth0,nb-vxlan0' NETBENCH_OFFLOAD_NODE_SELECTOR='netbench.io/e2e-offload=allowed' >&2
# A new image under the same tag needs new pods.
kc -n netbench-system rollout restart deployment/netbench-operator >&2
# (rollout status can lose track of a ReplicaSet replaced by the second rollout: retry)
for attempt in 1 2 3; do
    kc -n netbench-system rollout status deployment/netbench-operator --timeout=180s >&2 && break
    [[ $attempt == 3 ]] && exit 1
    sleep 2
done
"$repo/tests/cluster/up.sh" 2>/dev/null | grep '^export'
