# shellcheck shell=bash
# Shared settings and helpers for tests/chart/*.sh. Source it; do not run it.
set -euo pipefail

NBC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NBC_REPO=$(cd "$NBC_DIR/../.." && pwd)
NBC_CHART=$NBC_REPO/charts/netbench
NBC_CACHE=${NB_CHART_CACHE:-/var/cache/netbench/chart}
# netbench's version (Cargo.toml), the tag of the images the chart deploys by default.
NB_VERSION=$("$NBC_REPO/.ci/release.sh" version)
# Values used to render deploy/*.yaml (the plain manifests); documented in tests/chart/README.md.
NBC_RELEASE=netbench
NBC_NAMESPACE=netbench-system

log() { printf '[chart %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() {
    printf '[chart] ERROR: %s\n' "$*" >&2
    exit 1
}
need_cmds() {
    local c missing=()
    for c in "$@"; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
    ((${#missing[@]} == 0)) || die "missing commands: ${missing[*]} (apt-get install -y \$(cat tests/apt-packages.txt))"
}

# helm_bin: path of the pinned helm (tools/go.mod), built with the cluster's Go workspace by
# tests/cluster/build.sh --with-tools when missing.
helm_bin() {
    local dir
    dir=$("$NBC_REPO/tests/cluster/build.sh" --tools-only) || die "building helm failed"
    echo "$dir/helm"
}
# actionlint_bin: path of the pinned actionlint (tools/go.mod), built like helm.
actionlint_bin() {
    local dir
    dir=$("$NBC_REPO/tests/cluster/build.sh" --tools-only) || die "building actionlint failed"
    echo "$dir/actionlint"
}
