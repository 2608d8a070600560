#!/usr/bin/env bash
# image.sh [--import] [TRAEFIK]: build the image netbench/traefik:<version> (version from
# go.mod without the v, e.g. 3.7.13; entrypoint /traefik, user 65532:65532) from the static
# binary TRAEFIK (default $(bin_dir)/traefik, built by tests/cluster/build.sh --with-traefik)
# and print its docker-archive tar path. With --import also import it into the running
# cluster's containerd. The same as
#   NB_IMAGE_USER=65532:65532 tests/cluster/images.sh image netbench/traefik:3.7.13 /traefik BIN/traefik
# except that this never imports unless asked.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../images.sh"

do_import=false
if [[ ${1:-} == --import ]]; then
    do_import=true
    shift
fi
bin=${1:-$(bin_dir)/traefik}
[[ -x $bin ]] || die "no traefik binary at $bin (build it: tests/cluster/build.sh --with-traefik)"
need_cmds jq tar sha256sum go
version=$(go mod edit -json "$NB_CLUSTER_DIR/traefik/go.mod" |
    jq -r '.Require[] | select(.Path == "github.com/traefik/traefik/v3") | .Version')
tar=$(NB_IMAGE_USER=65532:65532 build_image "netbench/traefik:${version#v}" /traefik "$bin=/traefik")
if $do_import; then import_image "$tar"; fi
echo "$tar"
