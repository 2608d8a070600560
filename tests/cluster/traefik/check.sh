#!/usr/bin/env bash
# check.sh [TRAEFIK]: check the built traefik binary for real, outside Kubernetes, on 127.0.0.1
# only. Exit 0 = pass. TRAEFIK defaults to $(bin_dir)/traefik (tests/cluster/build.sh
# --with-traefik builds it). It checks:
#   - `traefik version` says the version go.mod pins;
#   - Debian's nginx (nginx-light) on a free port answers GET / with "hello";
#   - traefik, run as uid/gid 65532 like in the cluster, with two entry points (web, and
#     traefik for /ping) and a file provider routing Host(hello.bench.local) on web to that
#     nginx: /ping says OK, GET / with that Host comes back "hello" through traefik, another
#     Host gets traefik's 404;
#   - the Gateway API setup (gateway.yaml): the CRD bundle gateway-api-crds.sh finds (offline,
#     hash as in go.sum) has a CRD for every gateway.networking.k8s.io resource the ClusterRole
#     names; traefik started with exactly the container args of gateway.yaml (addresses moved
#     to 127.0.0.1 ports, the API server an unanswered 127.0.0.1 port) accepts them, starts its
#     kubernetesgateway provider, says OK on /ping and 404 on web (no routes without an API).
# Everything it starts is stopped by PID and its temporary directory removed, pass or fail.
# No sleep is used to wait for anything: each wait polls its condition until a deadline.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

need_cmds nginx curl python3 setpriv go jq
bin=${1:-$(bin_dir)/traefik}
[[ -x $bin ]] || die "no traefik binary at $bin (build it: tests/cluster/build.sh --with-traefik)"
bin=$(realpath "$bin")
version=$(go mod edit -json "$NB_CLUSTER_DIR/traefik/go.mod" |
    jq -r '.Require[] | select(.Path == "github.com/traefik/traefik/v3") | .Version')

work=$(mktemp -d)
chmod 755 "$work"
pids=()
cleanup() {
    local rc=$? pid
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if ((rc != 0)); then
        for f in "$work"/traefik*.log; do
            [[ -f $f ]] || continue
            echo "--- ${f##*/} (tail)" >&2
            tail -n 30 "$f" >&2
        done
    fi
    cd /
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT

# poll SECONDS PID WHAT CMD...: run CMD until it succeeds; fail after SECONDS or when PID exits.
poll() {
    local limit=$1 pid=$2 what=$3 deadline=$((SECONDS + $1))
    shift 3
    until "$@" >/dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || die "$what: the process exited"
        ((SECONDS < deadline)) || die "$what: not within ${limit}s"
        sleep 0.1 # pause between attempts; the condition above is what is waited for
    done
}
# body_is URL TEXT [CURL ARGS...]: the body at URL is exactly TEXT (status 2xx).
body_is() {
    local url=$1 want=$2
    shift 2
    [[ $(curl -fsS --max-time 2 "$@" "$url") == "$want" ]]
}

# 1. version
out=$("$bin" version)
grep -q "^Version: *$version\$" <<<"$out" || die "traefik version does not say $version: $out"
log "traefik version: $version"

# 2. six free ports on 127.0.0.1 (held open together so they differ, then released)
read -r p_nginx p_web p_ping p_gw_web p_gw_ping p_api < <(python3 -c '
import socket
s = [socket.socket() for _ in range(6)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')

# 3. nginx answering "hello"
cat >"$work/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $work/nginx.pid;
error_log stderr warn;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $work/body;
    proxy_temp_path $work/proxy;
    fastcgi_temp_path $work/fastcgi;
    uwsgi_temp_path $work/uwsgi;
    scgi_temp_path $work/scgi;
    server {
        listen 127.0.0.1:$p_nginx;
        location / {
            default_type text/plain;
            return 200 "hello\n";
        }
    }
}
EOF
nginx -e stderr -p "$work" -c "$work/nginx.conf" 2>"$work/nginx.log" &
pids+=($!)
poll 10 "${pids[-1]}" "nginx on 127.0.0.1:$p_nginx" body_is "http://127.0.0.1:$p_nginx/" hello
log "nginx answers on 127.0.0.1:$p_nginx"

# 4. traefik as 65532:65532, file provider
cat >"$work/dynamic.yaml" <<EOF
http:
  routers:
    hello:
      rule: Host(\`hello.bench.local\`)
      entryPoints: [web]
      service: nginx
  services:
    nginx:
      loadBalancer:
        servers:
          - url: http://127.0.0.1:$p_nginx
EOF
chmod 644 "$work/dynamic.yaml"
# A clean environment with HOME and the working directory in $work: traefik looks for a
# traefik.toml in ., $HOME/.config and /etc/traefik, and a search path it may not read (root's
# home) is an error.
cd "$work"
env -i HOME="$work" PATH=/usr/bin:/bin \
    setpriv --reuid=65532 --regid=65532 --clear-groups --inh-caps=-all --bounding-set=-all \
    "$bin" \
    --entryPoints.web.address="127.0.0.1:$p_web" \
    --entryPoints.traefik.address="127.0.0.1:$p_ping" \
    --ping=true \
    --providers.file.filename="$work/dynamic.yaml" \
    --log.level=INFO \
    --log.noColor=true \
    --accesslog=false \
    --global.checkNewVersion=false \
    --global.sendAnonymousUsage=false \
    >"$work/traefik.log" 2>&1 &
pids+=($!)
tpid=${pids[-1]}
poll 20 "$tpid" "traefik /ping on 127.0.0.1:$p_ping" body_is "http://127.0.0.1:$p_ping/ping" OK
log "traefik /ping: OK"
# The file provider's routes arrive shortly after the entry points open: poll for them.
poll 20 "$tpid" "hello through traefik" \
    body_is "http://127.0.0.1:$p_web/" hello -H 'Host: hello.bench.local'
log "GET http://hello.bench.local/ through traefik (127.0.0.1:$p_web): hello"
code=$(curl -sS --max-time 2 -o /dev/null -w '%{http_code}' -H 'Host: other.bench.local' \
    "http://127.0.0.1:$p_web/")
[[ $code == 404 ]] || die "Host other.bench.local: want 404 from traefik, got $code"
log "Host other.bench.local: 404 (no route)"
[[ $(ps -o uid= -p "$tpid" | tr -d ' ') == 65532 ]] || die "traefik does not run as uid 65532"

# 5. Gateway API: the CRD bundle covers the ClusterRole's resources
crds=$("$NB_CLUSTER_DIR/traefik/gateway-api-crds.sh")
resources=$(awk '/^kind: ClusterRole$/ { role = 1 } /^---/ { role = 0 }
    role && /gateway.networking.k8s.io/ { gw = 1; next } role && /apiGroups/ { gw = 0 }
    role && gw && /resources:/ { inres = 1 } role && gw && /verbs:/ { inres = 0 }
    role && gw && inres { gsub(/resources:|[][,]/, " "); print }' \
    "$NB_CLUSTER_DIR/traefik/gateway.yaml" | tr -s ' ' '\n' | grep -v '^$' | grep -v / | sort -u)
[[ -n $resources ]] || die "no gateway.networking.k8s.io resources found in gateway.yaml's ClusterRole"
for r in $resources; do
    [[ -f $crds/gateway.networking.k8s.io_$r.yaml ]] || die "no CRD for $r in $crds"
done
log "Gateway API CRDs in $crds cover $(wc -w <<<"$resources") resources of the ClusterRole"

# 6. traefik with gateway.yaml's args: accepted, gateway provider started
mapfile -t gw_args < <(grep -oP '^\s+- \K--\S+' "$NB_CLUSTER_DIR/traefik/gateway.yaml")
((${#gw_args[@]} > 0)) || die "no container args found in gateway.yaml"
for i in "${!gw_args[@]}"; do
    case ${gw_args[i]} in
        --entryPoints.web.address=*) gw_args[i]=--entryPoints.web.address=127.0.0.1:$p_gw_web ;;
        --entryPoints.traefik.address=*) gw_args[i]=--entryPoints.traefik.address=127.0.0.1:$p_gw_ping ;;
    esac
done
env -i HOME="$work" PATH=/usr/bin:/bin \
    setpriv --reuid=65532 --regid=65532 --clear-groups --inh-caps=-all --bounding-set=-all \
    "$bin" "${gw_args[@]}" --providers.kubernetesgateway.endpoint="http://127.0.0.1:$p_api" \
    >"$work/traefik-gateway.log" 2>&1 &
pids+=($!)
gpid=${pids[-1]}
poll 20 "$gpid" "traefik (gateway.yaml args) /ping on 127.0.0.1:$p_gw_ping" \
    body_is "http://127.0.0.1:$p_gw_ping/ping" OK
poll 10 "$gpid" "traefik (gateway.yaml args) starting its gateway provider" \
    grep -q 'Starting provider \*gateway.Provider' "$work/traefik-gateway.log"
code=$(curl -sS --max-time 2 -o /dev/null -w '%{http_code}' -H 'Host: hello-gw.bench.local' \
    "http://127.0.0.1:$p_gw_web/")
[[ $code == 404 ]] || die "gateway traefik without an API server: want 404 on web, got $code"
log "traefik with gateway.yaml's args: provider kubernetesgateway started, /ping OK, web 404"
log "PASS"
