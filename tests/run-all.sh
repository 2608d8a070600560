#!/usr/bin/env bash
# The one command that runs every test: `tests/run-all.sh` (as root; installs what it needs).
#  1. dependencies (apt packages, rustfmt, clippy)
#  2. formatting and lints
#  3. cargo test: the fast tier (unit, property, CRD sync/CEL/example, API handler tests) plus,
#     with the system-tests features, loadgen tests against real nginx, iperf3 and network
#     namespaces
#  4. the real 3-node cluster (tests/cluster): smoke test, CRDs and examples against the API server
#  5. the Helm chart without a cluster: lint, template, schema, dashboard, deploy/ in sync
#  6. end-to-end: operator and loadgen images from this checkout, Traefik as ingress controller,
#     the e2e tests (both kinds across the nodes, node failures, the seed ingress sweep, the
#     target host's tcp-server from tests/e2e/egress-net.sh), then the chart and plain manifests
#     installed for real with Prometheus checking the dashboard; cluster down
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n=== %s\n' "$*"; }

step "dependencies"
tests/install-deps.sh

step "cargo fmt --check"
cargo fmt --all -- --check

# The fast tier (`cargo test --workspace --exclude e2e`: no root, no servers) plus the tests that
# need real servers or root, switched on by the system-tests features.
system=(--features loadgen/system-tests,operator/system-tests)

step "cargo clippy"
cargo clippy --workspace --all-targets "${system[@]}" -- -D warnings

step "cargo test (unit, property, CRDs, API handlers; loadgen and workers against real servers)"
cargo test --workspace --exclude e2e --no-fail-fast "${system[@]}" 2>&1

step "cluster smoke test"
tests/cluster/smoke.sh

step "CRDs and examples against the real API server"
tests/cluster/crd-check.sh

step "Helm chart, dashboard and deploy/ (static)"
tests/chart/static.sh

step "end-to-end tests"
# The target's tcp-server and the cluster go even if a test fails or leaks something.
trap 'tests/e2e/egress-net.sh down >/dev/null 2>&1 || true; tests/cluster/down.sh >/dev/null 2>&1 || true' EXIT
eval "$(tests/e2e/setup.sh)"
cargo test -p e2e --no-fail-fast -- --test-threads=1 2>&1

step "chart and manifests on the cluster, Prometheus and the dashboard"
tests/chart/cluster-test.sh
