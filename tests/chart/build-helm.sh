#!/usr/bin/env bash
# Build the pinned helm (tools/go.mod: helm.sh/helm/v4) into $NBC_CACHE/bin/<hash>/helm, reusing
# it when already there. GOMODCACHE/GOCACHE stay in Go's default places; same flags as
# tests/cluster/build.sh (CGO_ENABLED=0, no -trimpath) so the shared k8s.io packages come from
# its build cache. Prints the helm path.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_cmds go sha256sum
hash=$(cat "$NBC_DIR/tools/go.mod" "$NBC_DIR/tools/go.sum" "$NBC_DIR/build-helm.sh" <(go env GOVERSION) |
    sha256sum | cut -c1-16)
out=$NBC_CACHE/bin/$hash
if [[ -x $out/helm ]]; then
    echo "$out/helm"
    exit 0
fi
version=$(cd "$NBC_DIR/tools" && go list -m -f '{{.Version}}' helm.sh/helm/v4)
tmp="$out.tmp.$$"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
log "building helm $version (cold build: several minutes on 2 cores)"
start=$SECONDS
(cd "$NBC_DIR/tools" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" \
    -o "$tmp/helm" helm.sh/helm/v4/cmd/helm)
"$tmp/helm" version --short >/dev/null || die "built helm does not run"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
# Keep the three newest builds, drop older ones.
find "$NBC_CACHE/bin" -mindepth 1 -maxdepth 1 -type d ! -name '*.tmp.*' -printf '%T@ %p\n' |
    sort -rn | tail -n +4 | cut -d' ' -f2- | xargs -r rm -rf
log "built helm $version in $((SECONDS - start))s: $out/helm"
echo "$out/helm"
