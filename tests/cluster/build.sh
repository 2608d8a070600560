#!/usr/bin/env bash
# Build the cluster's Go binaries and the test tools into $NB_CACHE/bin/<source hash>/ (each
# binary reused when already there):
#   core      k8s (hyperkube: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
#             kube-proxy, kubectl; k8s.io/kubernetes as a module dependency), etcd, coredns (a
#             few plugins), pause (pod sandbox), probe (tiny HTTP client for tests)
#   kwok      sigs.k8s.io/kwok (fake nodes) and its stage config        --with-kwok
#   traefik   github.com/traefik/traefik/v3 (the ingress controller)    --with-traefik
#   tools     helm (v4, chart tests), helm3 (Helm v3, the same chart tests and tests/compat) and
#             actionlint (the release workflow)                          --with-tools
# Usage: build.sh [--with-kwok] [--with-traefik] [--with-tools] [--all] | --tools-only (helm,
# helm3, actionlint alone: the chart tests). Prints the directory.
#
# Every module (this directory's go.mod, coredns/, kwok/, traefik/ completed by
# traefik/prepare.sh, ../chart/tools/) is one member of a single Go workspace, assembled in
# $NB_CACHE/work/<hash>/ from workspace.go.work and go.work.sum (both checked in). Go's minimal
# version selection then picks ONE version of every shared module (client-go, api, apimachinery,
# grpc, protobuf, ...), and -trimpath keys the build cache by module path and version only, so
# what the binaries share is compiled once instead of once per binary. All static
# (CGO_ENABLED=0). GOMODCACHE/GOCACHE stay in Go's default places so they persist.
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_cmds go sha256sum jq
out=$(bin_dir)
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

wanted=(k8s etcd coredns pause probe)
for arg in "$@"; do
    case $arg in
        --with-kwok) wanted+=(kwok) ;;
        --with-traefik) wanted+=(traefik) ;;
        --with-tools) wanted+=(helm helm3 actionlint) ;;
        --all) wanted+=(kwok traefik helm helm3 actionlint) ;;
        --tools-only) wanted=(helm helm3 actionlint) ;;
        *) die "usage: build.sh [--with-kwok] [--with-traefik] [--with-tools] [--all] | --tools-only" ;;
    esac
done

# present BINARY: built already (kwok together with its stage config).
present() { [[ -x $out/$1 ]] && { [[ $1 != kwok ]] || [[ -f $out/kwok-stages.yaml ]]; }; }
missing=()
for b in "${wanted[@]}"; do
    present "$b" || [[ " ${missing[*]} " == *" $b "* ]] || missing+=("$b")
done
if ((${#missing[@]} == 0)); then
    log "binaries up to date in $out"
    echo "$out"
    exit 0
fi

# workspace: the assembled workspace for these sources (made once per source hash).
workspace() {
    local dir tmp
    dir=$NB_CACHE/work/$(source_hash)
    if [[ ! -f $dir/go.work ]]; then
        tmp=$dir.tmp.$$
        rm -rf "$tmp"
        mkdir -p "$tmp"/{cluster,coredns,kwok,traefik,tools}
        cp -r "$NB_CLUSTER_DIR"/go.mod "$NB_CLUSTER_DIR"/go.sum "$NB_CLUSTER_DIR"/cmd "$tmp/cluster/"
        cp "$NB_CLUSTER_DIR"/coredns/{go.mod,go.sum,main.go} "$tmp/coredns/"
        cp "$NB_CLUSTER_DIR"/kwok/{go.mod,go.sum,main.go} "$tmp/kwok/"
        cp "$NB_CLUSTER_DIR"/traefik/{go.mod,go.sum} "$tmp/traefik/"
        "$NB_CLUSTER_DIR/traefik/prepare.sh" "$tmp/traefik" >&2
        cp "$NB_CLUSTER_DIR"/../chart/tools/{go.mod,go.sum} "$tmp/tools/"
        cp "$NB_CLUSTER_DIR/go.work.sum" "$tmp/go.work.sum"
        cp "$NB_CLUSTER_DIR/workspace.go.work" "$tmp/go.work"
        rm -rf "$dir"
        mv "$tmp" "$dir"
        # Keep the three newest workspaces.
        find "$NB_CACHE/work" -mindepth 1 -maxdepth 1 -type d ! -name '*.tmp.*' -printf '%T@ %p\n' |
            sort -rn | tail -n +4 | cut -d' ' -f2- | xargs -r rm -rf
    fi
    echo "$dir"
}
work=$(workspace)

# What `go build` is given for each binary (the binary is named after the package's last element).
package_of() {
    case $1 in
        k8s | etcd | pause | probe) echo "./cluster/cmd/$1" ;;
        coredns | kwok | traefik) echo "./$1" ;;
        helm) echo helm.sh/helm/v4/cmd/helm ;;
        helm3) echo helm.sh/helm/v3/cmd/helm ;;
        actionlint) echo github.com/rhysd/actionlint/cmd/actionlint ;;
    esac
}
# module_version PATH: the version of module PATH the workspace selected.
module_version() { (cd "$work" && go list -m -f '{{.Version}}' "$1"); }

now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# One -ldflags for every binary: each -X names a package of one of them only.
ldflags="-s -w$(k8s_version_ldflags "$NB_K8S_VERSION" "$now")"
traefik_version=$(module_version github.com/traefik/traefik/v3)
helm_version=$(module_version helm.sh/helm/v4)
helm3_version=$(module_version helm.sh/helm/v3)
actionlint_version=$(module_version github.com/rhysd/actionlint)
ldflags+=" -X github.com/traefik/traefik/v3/pkg/version.Version=$traefik_version"
ldflags+=" -X github.com/traefik/traefik/v3/pkg/version.BuildDate=$now"
ldflags+=" -X helm.sh/helm/v4/internal/version.version=$helm_version"
ldflags+=" -X helm.sh/helm/v3/internal/version.version=$helm3_version"
# Helm 3's default Kubernetes version (`helm template`, lint's deprecation checks) is 1.20 unless
# its Makefile's ldflags set it from client-go's; without them the chart's kubeVersion (>=1.30)
# refuses `helm template`. Helm 4 reads client-go's version from the build info itself.
client_go=$(module_version k8s.io/client-go)
client_go=${client_go#v0.}
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=${client_go%%.*}"
done
ldflags+=" -X github.com/rhysd/actionlint.version=$actionlint_version"

# helm3's main package is named like helm's, so it gets a `go build -o` of its own, after the
# others (what it shares with them is compiled by then).
pkgs=()
for b in "${missing[@]}"; do [[ $b == helm3 ]] || pkgs+=("$(package_of "$b")"); done
begin_build "$out"
log "building ${missing[*]} in one Go workspace (cold: about 25 min for all on 2 cores)"
if ((${#pkgs[@]} > 0)); then
    (cd "$work" && go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
fi
if [[ " ${missing[*]} " == *" helm3 "* ]]; then
    (cd "$work" && go build -trimpath -ldflags "$ldflags" -o "$tmp/helm3" "$(package_of helm3)")
fi

# Each binary says the version it was built from. The output is read whole before it is
# matched: `cmd | grep -q` under pipefail fails when grep stops reading before cmd has written
# everything (cmd dies of SIGPIPE).
says() { local text; text=$("${@:2}") && grep -q -- "$1" <<<"$text"; }
for b in "${missing[@]}"; do
    case $b in
        k8s) says "^Kubernetes $NB_K8S_VERSION\$" "$tmp/k8s" kube-apiserver --version ||
            die "k8s --version does not say $NB_K8S_VERSION: $("$tmp/k8s" kube-apiserver --version)" ;;
        traefik) says "^Version: *$traefik_version\$" "$tmp/traefik" version ||
            die "traefik version does not say $traefik_version: $("$tmp/traefik" version)" ;;
        helm) says "^${helm_version%%+*}" "$tmp/helm" version --short ||
            die "helm version does not say $helm_version: $("$tmp/helm" version --short)" ;;
        helm3) says "^${helm3_version%%+*}" "$tmp/helm3" version --short ||
            die "helm3 version does not say $helm3_version: $("$tmp/helm3" version --short)" ;;
        actionlint) says "^${actionlint_version#v}\$\|^$actionlint_version\$" "$tmp/actionlint" -version ||
            die "actionlint -version does not say $actionlint_version: $("$tmp/actionlint" -version | head -1)" ;;
    esac
done
if [[ " ${missing[*]} " == *" kwok "* ]]; then
    # The stages kwokctl uses by default: node init + heartbeat, pod ready/complete/delete.
    kwok_dir=$(cd "$work" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
    for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
        pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
        echo "---"
        cat "$kwok_dir/kustomize/stage/$f"
    done >"$tmp/kwok-stages.yaml"
fi
# Keep the three newest builds (other checkouts may use them), drop older ones.
finish_build "$out" 3
log "built ${missing[*]} in $((SECONDS - start))s into $out"
echo "$out"
