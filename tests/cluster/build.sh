#!/usr/bin/env bash
# Build the cluster's Go binaries into $NB_CACHE/bin/<source hash>/ (reused when already there):
#   k8s      hyperkube: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
#            kube-proxy, kubectl (k8s.io/kubernetes as a module dependency)
#   etcd     go.etcd.io/etcd/server/v3/etcdmain
#   coredns  github.com/coredns/coredns/coremain with a few plugins (separate module)
#   pause    pod sandbox process;  probe  tiny HTTP client for tests
#   kwok     sigs.k8s.io/kwok (separate module), only with --with-kwok
#   traefik  github.com/traefik/traefik/v3 cmd/traefik (separate module traefik/), only with
#            --with-traefik (a cold build takes long; see README.md)
# Usage: build.sh [--with-kwok] [--with-traefik]   (either, both, any order)
# All static (CGO_ENABLED=0). GOMODCACHE/GOCACHE stay in Go's default places so they persist.
# Prints the binary directory on stdout.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_cmds go sha256sum
out=$(bin_dir)
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

with_kwok=false
with_traefik=false
for arg in "$@"; do
    case $arg in
        --with-kwok) with_kwok=true ;;
        --with-traefik) with_traefik=true ;;
        *) die "usage: build.sh [--with-kwok] [--with-traefik]" ;;
    esac
done

# build_kwok: the optional kwok binary (fake nodes) and its stage config, into $out.
build_kwok() {
    [[ -x $out/kwok && -f $out/kwok-stages.yaml ]] && return 0
    log "building kwok"
    local dir f
    (cd "$NB_CLUSTER_DIR/kwok" && go build -ldflags "-s -w" -o "$out/kwok.tmp" .)
    dir=$(cd "$NB_CLUSTER_DIR/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
    # The stages kwokctl uses by default: node init + heartbeat, pod ready/complete/delete.
    for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
        pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
        echo "---"
        cat "$dir/kustomize/stage/$f"
    done >"$out/kwok-stages.yaml.tmp"
    mv "$out/kwok-stages.yaml.tmp" "$out/kwok-stages.yaml"
    mv "$out/kwok.tmp" "$out/kwok"
}

# build_traefik: the optional Traefik binary (ingress controller), into $out. Built in a
# temporary copy of the module traefik/ that traefik/prepare.sh completes with cmd/traefik/*.go
# from the module cache (the main package cannot be imported) and a trimmed lego (see there).
build_traefik() {
    [[ -x $out/traefik ]] && return 0
    need_cmds jq
    local work version ldflags start=$SECONDS pkg=github.com/traefik/traefik/v3/pkg/version
    version=$(go mod edit -json "$NB_CLUSTER_DIR/traefik/go.mod" |
        jq -r '.Require[] | select(.Path == "github.com/traefik/traefik/v3") | .Version')
    ldflags="-s -w -X $pkg.Version=$version -X $pkg.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    log "building traefik $version (cold build: about 18 min on 2 cores)"
    work=$(mktemp -d "${TMPDIR:-/tmp}/nb-traefik.XXXXXX")
    (
        trap 'rm -rf "$work"' EXIT
        cp "$NB_CLUSTER_DIR/traefik/go.mod" "$NB_CLUSTER_DIR/traefik/go.sum" "$work/"
        "$NB_CLUSTER_DIR/traefik/prepare.sh" "$work"
        cd "$work"
        # -trimpath: the build directory (and ./lego in it) differs each time; without it,
        # Go's cache keys include that directory and lego would be recompiled on every build.
        go build -trimpath -ldflags "$ldflags" -o "$out/traefik.tmp" .
    )
    "$out/traefik.tmp" version | grep -q "^Version: *$version\$" ||
        die "traefik version does not say $version: $("$out/traefik.tmp" version)"
    mv "$out/traefik.tmp" "$out/traefik"
    log "built traefik in $((SECONDS - start))s"
}

build_optional() {
    if $with_kwok; then build_kwok; fi
    if $with_traefik; then build_traefik; fi
}

if [[ -x $out/k8s && -x $out/etcd && -x $out/coredns && -x $out/pause && -x $out/probe ]]; then
    build_optional
    log "binaries up to date in $out"
    echo "$out"
    exit 0
fi

minor=${NB_K8S_VERSION#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$NB_K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done

tmp="$out.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
log "building k8s, etcd, pause, probe (cold build: tens of minutes on 2 cores)"
(cd "$NB_CLUSTER_DIR" && go build -ldflags "$ldflags" -o "$tmp/" ./cmd/k8s ./cmd/etcd ./cmd/pause ./cmd/probe)
log "building coredns"
(cd "$NB_CLUSTER_DIR/coredns" && go build -ldflags "-s -w" -o "$tmp/coredns" .)
"$tmp/k8s" kube-apiserver --version | grep -qx "Kubernetes $NB_K8S_VERSION" ||
    die "k8s --version does not say $NB_K8S_VERSION: $("$tmp/k8s" kube-apiserver --version)"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
# Keep the three newest builds (other checkouts may use them), drop older ones.
find "$NB_CACHE/bin" -mindepth 1 -maxdepth 1 -type d ! -name '*.tmp.*' -printf '%T@ %p\n' |
    sort -rn | tail -n +4 | cut -d' ' -f2- | xargs -r rm -rf
build_optional
log "built in $((SECONDS - start))s into $out"
echo "$out"
