#!/usr/bin/env bash
# Build container images as docker-archive tars from local files (no registry, no Docker) and
# import them into every node's containerd.
#
#   images.sh build                    build the standard images (pause, nginx-target, probe);
#                                      prints one tar path per line
#   images.sh import TAR...            import tars into the running cluster's containerd
#   images.sh image NAME:TAG ENTRYPOINT FILE...
#                                      build one image from static binaries / files, import it
#                                      if the cluster runs, print its tar path
#
# FILE is SRC (copied to /basename) or SRC=/DEST. ENTRYPOINT is a space-separated command, e.g.
# "/operator" or "/loadgen --serve". Environment: NB_IMAGE_USER (default 0:0), NB_IMAGE_ENV
# (space-separated K=V added to PATH=...). A static binary needs nothing else: the image always
# has /etc/passwd, /etc/group, /etc/nsswitch.conf, /etc/hosts and /tmp. Example (the lead's
# operator, built with RUSTFLAGS='-C target-feature=+crt-static' cargo build --release
# --target x86_64-unknown-linux-gnu):
#   tests/cluster/images.sh image localhost/netbench/operator:0.1.0 /operator \
#       target/x86_64-unknown-linux-gnu/release/operator
# Pods then use image: localhost/netbench/operator:0.1.0 with imagePullPolicy: Never (or IfNotPresent).
#
# Sourcing this file gives the functions build_image and import_image.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NB_IMAGES=$NB_CACHE/images

# image_base_files ROOT: the small /etc every image gets.
image_base_files() {
    local root=$1
    mkdir -p "$root/etc" "$root/tmp"
    chmod 1777 "$root/tmp"
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnetbench:x:65532:65532:netbench:/tmp:/sbin/nologin\n' >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\nnetbench:x:65532:\n' >"$root/etc/group"
    printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
    printf '127.0.0.1 localhost\n' >"$root/etc/hosts"
}

# build_image NAME:TAG ENTRYPOINT FILE...: see the header. Prints the tar path.
build_image() {
    local ref=$1 entry=$2
    shift 2
    [[ $ref == *:* && ${ref##*:} != latest ]] || die "image $ref needs an explicit tag other than latest"
    local user=${NB_IMAGE_USER:-0:0} env="PATH=/usr/local/bin:/usr/bin:/bin ${NB_IMAGE_ENV:-}"
    local spec src dest key
    key=$(
        printf '%s\n' "$ref" "$entry" "$user" "$env" v2
        for spec in "$@"; do
            src=${spec%%=*}
            [[ -f $src ]] || die "build_image $ref: no such file: $src"
            printf '%s %s\n' "$spec" "$(sha256sum <"$src" | cut -c1-64)"
        done
    )
    key=$(sha256sum <<<"$key" | cut -c1-16)
    local tar="$NB_IMAGES/${ref//[\/:]/_}-$key.tar"
    if [[ -f $tar ]]; then
        echo "$tar"
        return 0
    fi
    mkdir -p "$NB_IMAGES"
    local work
    work=$(mktemp -d)
    mkdir -p "$work/rootfs"
    image_base_files "$work/rootfs"
    for spec in "$@"; do
        src=${spec%%=*}
        dest=/$(basename "$src")
        [[ $spec == *=* ]] && dest=${spec#*=}
        mkdir -p "$work/rootfs$(dirname "$dest")"
        cp -L "$src" "$work/rootfs$dest"
    done
    tar -C "$work/rootfs" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
        -cf "$work/layer.tar" .
    local diff_id config_sha
    diff_id=$(sha256sum "$work/layer.tar" | cut -c1-64)
    # shellcheck disable=SC2086
    jq -n --arg user "$user" --arg diff "sha256:$diff_id" \
        --argjson entry "$(printf '%s\n' $entry | jq -R . | jq -s .)" \
        --argjson env "$(printf '%s\n' $env | jq -R . | jq -s .)" \
        '{architecture: "amd64", os: "linux", created: "1970-01-01T00:00:00Z",
          config: {Entrypoint: $entry, Env: $env, User: $user, WorkingDir: "/"},
          rootfs: {type: "layers", diff_ids: [$diff]},
          history: [{created: "1970-01-01T00:00:00Z", created_by: "netbench images.sh"}]}' \
        >"$work/config.json"
    config_sha=$(sha256sum "$work/config.json" | cut -c1-64)
    mv "$work/config.json" "$work/$config_sha.json"
    jq -n --arg cfg "$config_sha.json" --arg ref "$ref" \
        '[{Config: $cfg, RepoTags: [$ref], Layers: ["layer.tar"]}]' >"$work/manifest.json"
    tar -C "$work" -cf "$tar.tmp" manifest.json "$config_sha.json" layer.tar
    mv "$tar.tmp" "$tar"
    rm -rf "$work"
    # Keep only the newest build of this NAME:TAG in the cache.
    find "$NB_IMAGES" -maxdepth 1 -name "${ref//[\/:]/_}-*.tar" ! -path "$tar" -delete
    log "built image $ref -> $tar"
    echo "$tar"
}

# import_image TAR...: import into every node's containerd (namespace k8s.io, used by the CRI).
import_image() {
    local tar node sock
    for node in $(cluster_nodes); do
        sock=$(node_containerd_sock "$node")
        [[ -S $sock ]] || die "containerd of $node is not running ($sock)"
        for tar in "$@"; do
            ctr --address "$sock" -n k8s.io images import --no-unpack=false "$tar" >/dev/null ||
                die "ctr images import $tar into $node failed"
        done
    done
}

# import_netbench_images: the operator and loadgen images that `.ci/release.sh images host`
# built from this checkout (dist/images/, docker-archive), into every node's containerd.
import_netbench_images() {
    local repo img tar arch
    repo=$(cd "$NB_CLUSTER_DIR/../.." && pwd)
    case $(uname -m) in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) die "unsupported machine $(uname -m)" ;; esac
    for img in operator loadgen; do
        tar=$repo/dist/images/netbench-${img}_${NB_VERSION}_linux_$arch.tar
        [[ -f $tar ]] || die "$tar missing: build it with .ci/release.sh binaries host && .ci/release.sh images host"
        import_image "$tar"
        log "imported netbench/$img:$NB_VERSION from ${tar#"$repo"/}"
    done
}

# cluster_running: every node's containerd is up.
cluster_running() {
    local node
    for node in $(cluster_nodes); do [[ -S $(node_containerd_sock "$node") ]] || return 1; done
}

# build_nginx_image: Debian's nginx binary plus the libraries ldd lists, listening on 8080 as
# uid 65532, answering "hello" on /.
build_nginx_image() {
    local nginx=/usr/sbin/nginx work files=() lib
    [[ -x $nginx ]] || die "nginx not installed (apt-get install -y nginx-light)"
    work=$NB_CACHE/nginx-files
    mkdir -p "$work"
    cat >"$work/nginx.conf" <<'EOF'
daemon off;
worker_processes 1;
pid /tmp/nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path /tmp/body;
    proxy_temp_path /tmp/proxy;
    fastcgi_temp_path /tmp/fastcgi;
    uwsgi_temp_path /tmp/uwsgi;
    scgi_temp_path /tmp/scgi;
    keepalive_requests 1000000;
    server {
        listen 8080 reuseport;
        location / {
            default_type text/plain;
            return 200 "hello\n";
        }
    }
}
EOF
    files=("$nginx=/usr/sbin/nginx" "$work/nginx.conf=/etc/nginx/nginx.conf")
    for lib in $(ldd "$nginx" | grep -o '/[^ ]*'); do
        files+=("$lib=$lib")
    done
    NB_IMAGE_USER=65532:65532 build_image "$NB_NGINX_IMAGE" "/usr/sbin/nginx -e stderr" "${files[@]}"
}

build_standard_images() {
    local bins
    bins=$("$NB_CLUSTER_DIR/build.sh")
    build_image "$NB_PAUSE_IMAGE" /pause "$bins/pause"
    NB_IMAGE_USER=65532:65532 build_image "$NB_PROBE_IMAGE" /probe "$bins/probe"
    build_nginx_image
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    need_cmds jq tar sha256sum ctr
    case ${1:-} in
        build) build_standard_images ;;
        import)
            shift
            import_image "$@"
            ;;
        image)
            shift
            (($# >= 3)) || die "usage: images.sh image NAME:TAG ENTRYPOINT FILE..."
            tar=$(build_image "$@")
            if cluster_running; then import_image "$tar"; fi
            echo "$tar"
            ;;
        *) die "usage: images.sh build | import TAR... | image NAME:TAG ENTRYPOINT FILE..." ;;
    esac
fi
