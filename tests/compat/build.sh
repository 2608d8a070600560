#!/usr/bin/env bash
# Build kube-apiserver of the oldest Kubernetes netbench claims to support (tests/compat/apiserver:
# k8s.io/kubernetes as a module dependency, at the version its go.mod requires, every staging
# module replaced by its published v0.MINOR.PATCH; set-version.sh writes it) into
# $NB_CACHE/compat/<source hash>/kube-apiserver-1.MINOR, reused when already there. Prints the
# binary's path.
#
# Its own module, not a member of tests/cluster's Go workspace (there Go would select one version
# of k8s.io/api, apimachinery, client-go, ... for 1.30 and 1.37 together). Static (CGO_ENABLED=0),
# -trimpath, GOMODCACHE/GOCACHE in Go's defaults like tests/cluster/build.sh.
# shellcheck source=SCRIPTDIR/../cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cluster/lib.sh"

need_cmds go sha256sum
COMPAT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
COMPAT_K8S_VERSION=$(cd "$COMPAT_DIR/apiserver" && GOWORK=off go list -m -f '{{.Version}}' k8s.io/kubernetes) ||
    die "apiserver/go.mod names no k8s.io/kubernetes version"
minor=${COMPAT_K8S_VERSION#v1.}
minor=${minor%%.*}

compat_hash() {
    (
        cd "$COMPAT_DIR"
        go version
        cat apiserver/go.mod apiserver/go.sum apiserver/*.go build.sh
    ) | sha256sum | cut -c1-16
}
out=$NB_CACHE/compat/$(compat_hash)
name=kube-apiserver-1.$minor
if [[ -x $out/$name ]]; then
    log "kube-apiserver $COMPAT_K8S_VERSION up to date in $out"
    echo "$out/$name"
    exit 0
fi

export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOWORK=off
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w$(k8s_version_ldflags "$COMPAT_K8S_VERSION" "$now")"
# Go 1.26 links it as it is (no -checklinkname=0 needed: no dependency of 1.30.14's kube-apiserver
# pulls a runtime symbol that Go 1.23+ refuses).

begin_build "$out"
log "building kube-apiserver $COMPAT_K8S_VERSION (cold: 6-7 min on 2 cores beside other builds, 6 CPU-minutes)"
(cd "$COMPAT_DIR/apiserver" && go build -trimpath -ldflags "$ldflags" -o "$tmp/$name" .)
"$tmp/$name" --version | grep -qx "Kubernetes $COMPAT_K8S_VERSION" ||
    die "kube-apiserver --version does not say $COMPAT_K8S_VERSION: $("$tmp/$name" --version)"
# Keep the two newest builds, drop older ones.
finish_build "$out" 2
log "built kube-apiserver $COMPAT_K8S_VERSION in $((SECONDS - start))s into $out"
echo "$out/$name"
