#!/usr/bin/env bash
# The one command that runs every test: `tests/run-all.sh` (as root; installs what it needs).
#  1. dependencies (apt packages, rustfmt, clippy); then the Go build of the test cluster and
#     tools (tests/cluster/build.sh --all: Kubernetes, etcd, CoreDNS, kwok, Traefik, helm,
#     helm3, actionlint, one Go workspace) starts in the background at a lower priority, so the
#     cores the Rust steps leave idle (links, the last crates, tests waiting on servers) build
#     it; beside it, lower still, the oldest tested kube-apiserver (tests/compat/build.sh)
#  2. formatting and lints
#  3. cargo test: the fast tier (unit, property, CRD sync/CEL/example, API handler tests) plus,
#     with the system-tests features, loadgen tests against real nginx, iperf3 and network
#     namespaces
#     ... then, while the Go build may still run, the e2e test binaries and the release binaries
#  4. the real 3-node cluster (tests/cluster): smoke test, CRDs and examples against the API server
#  5. the Helm chart without a cluster: lint, template, schema (Helm 4 and Helm 3), dashboard,
#     deploy/ in sync; then the compatibility matrix (tests/compat/run.sh): CRDs, CEL rules,
#     examples and the chart against the oldest Kubernetes the README claims (API server and
#     etcd only, on loopback), installed and upgraded with Helm 4 and Helm 3
#  6. end-to-end: the operator and loadgen images built by the release script (.ci/release.sh:
#     static binaries, buildah FROM scratch) and imported into the nodes, Traefik as ingress
#     controller, the e2e tests (both kinds across the nodes, node failures, the seed ingress
#     sweep, the target host's tcp-server from tests/e2e/egress-net.sh); then the operator at
#     scale in its short form (bench/operator-scale.sh --short: kwok nodes, netbench-sim workers,
#     correctness asserted, not speed)
#  7. the release pipeline for this architecture (tests/release/check.sh: actionlint, every
#     .ci/release.sh command, reproducible images)
#  8. the chart and plain manifests installed for real (helm upgrade from the previous version,
#     helm test, Prometheus checking the dashboard); cluster down
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n=== [%s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

step "dependencies"
tests/install-deps.sh

go_log=$(mktemp /tmp/netbench-go-build.XXXXXX)
nice -n 10 tests/cluster/build.sh --all >"$go_log" 2>&1 &
go_pid=$!
compat_log=$(mktemp /tmp/netbench-compat-build.XXXXXX)
nice -n 15 tests/compat/build.sh >"$compat_log" 2>&1 &
compat_pid=$!
trap 'kill "$go_pid" "$compat_pid" 2>/dev/null || true' EXIT

step "cargo fmt --check"
cargo fmt --all -- --check

# The fast tier (`cargo test --workspace --exclude e2e`: no root, no servers) plus the tests that
# need real servers or root, switched on by the system-tests features.
system=(--features loadgen/system-tests,operator/system-tests)

step "cargo clippy"
cargo clippy --workspace --all-targets "${system[@]}" -- -D warnings

step "cargo test (unit, property, CRDs, API handlers; loadgen and workers against real servers)"
cargo test --workspace --exclude e2e --no-fail-fast "${system[@]}" 2>&1

# What the later steps compile, compiled now while the Go build still runs: the e2e test
# binaries and the release binaries the images are packed from (tests/e2e/setup.sh then finds
# them built).
step "compile ahead: e2e tests, release binaries (image profile)"
cargo test -p e2e --no-run 2>&1
NB_PROFILE=image .ci/release.sh binaries host
NB_PROFILE=image .ci/release.sh binaries host netbench-sim
# cargo-cyclonedx (the release's SBOMs, tests/release/check.sh) at the version release.sh pins,
# built from crates.io once into /var/cache/netbench/tools (outside the clone, kept across runs).
.ci/release.sh sbom-tool >/dev/null

step "Go build of the cluster and tools (started after the dependencies)"
if ! wait "$go_pid"; then
    cat "$go_log"
    echo "tests/cluster/build.sh --all failed" >&2
    exit 1
fi
tail -n 3 "$go_log"

step "cluster smoke test"
tests/cluster/smoke.sh

step "CRDs and examples against the real API server"
tests/cluster/crd-check.sh

step "Helm chart, dashboard and deploy/ (static)"
tests/chart/static.sh

step "compatibility: the oldest Kubernetes claimed (API server only), Helm 4 and Helm 3"
if ! wait "$compat_pid"; then
    cat "$compat_log"
    echo "tests/compat/build.sh failed" >&2
    exit 1
fi
tail -n 1 "$compat_log"
tests/compat/run.sh

step "end-to-end tests"
# The target's tcp-server and the cluster go even if a test fails or leaks something.
trap 'tests/e2e/egress-net.sh down >/dev/null 2>&1 || true; tests/cluster/down.sh >/dev/null 2>&1 || true' EXIT
eval "$(tests/e2e/setup.sh)"
cargo test -p e2e --no-fail-fast -- --test-threads=1 2>&1

step "operator at scale, short form: 64 simulated workers in one run, 20 concurrent benchmarks, lying workers"
bench/operator-scale.sh --short

step "release pipeline: actionlint, .ci/release.sh for this architecture, reproducible images"
tests/release/check.sh

step "chart and manifests on the cluster: helm upgrade, helm test, Prometheus and the dashboard"
tests/chart/cluster-test.sh
step "all tests passed"
