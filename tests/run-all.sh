#!/usr/bin/env bash
# The one command that runs every test: `tests/run-all.sh` (as root; installs what it needs).
#  1. dependencies (apt packages, rustfmt, clippy)
#  2. formatting and lints
#  3. cargo test: unit tests, CRD sync/CEL/example tests, loadgen tests against real nginx,
#     iperf3 and network namespaces
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n=== %s\n' "$*"; }

step "dependencies"
tests/install-deps.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test"
cargo test --workspace --no-fail-fast 2>&1
