#!/usr/bin/env bash
# set-version.sh VERSION (e.g. 1.30.14): point tests/compat/apiserver/go.mod at Kubernetes VERSION
# (k8s.io/kubernetes vVERSION; every staging module its go.mod replaces with ./staging/src/...
# replaced by the published v0.MINOR.PATCH; the go line of that release, whose GODEBUG defaults
# the binary then keeps) and tidy go.sum. build.sh and run.sh read the version from go.mod.
set -euo pipefail
if (($# != 1)) || ! [[ $1 =~ ^1\.[0-9]+\.[0-9]+$ ]]; then
    echo "usage: set-version.sh 1.MINOR.PATCH" >&2
    exit 2
fi
v=$1
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/apiserver" && pwd)
export GOWORK=off GOFLAGS=-mod=mod
modfile=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@v$v" | jq -r .GoMod)
gover=$(sed -n 's/^go //p' "$modfile")
{
    echo "// Module used only to build the kube-apiserver of the oldest Kubernetes netbench claims to support"
    echo "// (../README.md; written by ../set-version.sh). Not part of tests/cluster's Go workspace: Go would"
    echo "// select one version of k8s.io/api, apimachinery, ... for both, and these must stay at v0.${v#1.}."
    echo "// \`go $gover\`, the Go of that release: the binary's GODEBUG defaults follow the main module's go line."
    echo "module netbench.local/tests/compat/apiserver"
    echo
    echo "go $gover"
    echo
    echo "require k8s.io/kubernetes v$v"
    echo
    echo "// k8s.io/kubernetes replaces its staging modules with ./staging/src/k8s.io/...; outside its"
    echo "// repository those are the published modules of the same release."
    echo "replace ("
    grep -o 'k8s.io/[a-z0-9-]* => ./staging' "$modfile" | sed 's| => ./staging||' | sort -u |
        while read -r m; do printf '\t%s => %s v0.%s\n' "$m" "$m" "${v#1.}"; done
    echo ")"
} >"$dir/go.mod"
rm -f "$dir/go.sum"
(cd "$dir" && go mod tidy)
echo "tests/compat/apiserver: Kubernetes v$v (go $gover)"
