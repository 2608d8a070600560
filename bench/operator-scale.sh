#!/usr/bin/env bash
# The operator at scale: the REAL operator and API server with workers on kwok fake nodes, played
# by netbench-sim (tests/sim: the real worker protocol, pod-bound tokens, realistic reports).
#
#   bench/operator-scale.sh            the table: 1 and 64 workers in one run, 1, 50, 200 and
#                                      1000 concurrent benchmarks of one worker (IngressBenchmark);
#                                      64 and 256 workers in one run (EgressBenchmark, one
#                                      tcp-stream case with topology pairs: 32 and 128); the
#                                      queue's fairness (one namespace's 100 benchmarks and 20
#                                      namespaces' one each, at once); then the hostile block
#   bench/operator-scale.sh --short    CI: 64 workers in one run, 20 concurrent benchmarks and
#                                      128 egress workers in one run (pairs: 64), then the
#                                      hostile block; ASSERTS correctness (all Succeeded,
#                                      merged percentiles exact, pairs and sums as sent, nothing
#                                      left behind, every lie refused and counted, operator
#                                      restartCount 0), not speed
#
# NB_SCALE_ROWS="b200 fair" runs those rows only (names: w1 w64 b20 b50 b200 b1000 e64 e128 e256
# fair fair1000), then the hostile block. fair1000 (not in the table by default: its busy
# namespace's 980 benchmarks are deleted at its end, which loads the cluster for minutes) is the
# queue's fairness at 1000 benchmarks: 980 in one namespace, 20 namespaces of one.
# NB_SCALE_EGRESS_PROTOCOL=P runs the egress rows' case with protocol P (tcp-stream, the default;
# tcp-rr, tcp-crr, udp-rr or udp-stream, each with the operator's defaults for its flags), e.g.
#   NB_SCALE_EGRESS_PROTOCOL=udp-rr bench/operator-scale.sh --short
# netbench-sim plays each protocol's client (its report passes the operator's checks: tests/sim
# tests/protocols.rs), and the check compares the pair rows with what the clients sent: receiver
# bits/s for the stream protocols, transactions/s for the request/response ones.
# NB_SCALE_METRICS_DIR=DIR keeps the operator's /metrics before and after each row there, the
# API server's requests by verb and resource with their latency, and how long the scheduler's
# requests waited for its own client limit (bench/api-by-resource.py reads them).
# Needs the test cluster with the operator deployed (tests/cluster/up.sh, tests/e2e/setup.sh).
# Adds NB_SCALE_FAKE_NODES (default 8) kwok nodes, bench/operator-scale.yaml (a FlowSchema that
# counts the operator's API requests), and uses namespaces scale-<tag>-*, all removed at exit.
# The operator's cap on workers per run (NETBENCH_MAX_WORKERS, default 16) is raised to 256 (128
# with --short) for the run, its connections per client address to 512 (the simulator is one
# address for every worker), and its workers are given the kwok nodes' toleration
# (NETBENCH_WORKER_TOLERATIONS, Helm value workerTolerations), each restored at exit: THIS
# REDEPLOYS THE OPERATOR TWICE (do not run beside the e2e tests). 256 workers in one run are an EgressBenchmark (IngressBenchmark's
# workers.replicas is at most 64): pairs: 128, clients round-robin on the first half of the fake
# nodes, servers on the second half, each client given only its own server at the barrier.
#
# Per row: creation -> Succeeded minus the measured time (the operator's overhead; p50 and max
# over the benchmarks, each from when a watch of the row's benchmarks first showed it to when it
# showed it Succeeded or Failed), the same from the moment the row's apply began (the user's
# view; 16 kubectl processes create the row's objects, each its share one after another), start
# spread (status.steps[].startSkewMs, or for egress
# status.cases[0].aggregate.startSpreadMs: latest client start minus earliest), reconcile p99
# (netbench_reconcile_duration_seconds over the row, interpolated in its buckets: how long a
# reconcile held its object) and its work's p99 (netbench_reconcile_work_duration_seconds: the
# whole work, including what went on behind the reconcile past its 50 ms grace), the operator
# process's RSS (before the row, peak during it) and CPU seconds (from /proc on this machine),
# the CPU seconds of the API server and of the rest of the control plane (etcd, scheduler,
# controller manager, kwok; /proc too), the operator's API requests per benchmark (the API
# server's apiserver_flowcontrol_dispatched_requests_total of its FlowSchema), and whether every status's
# merged percentiles equal those of one histogram of all samples the simulator sent (egress: the
# case has a row per pair, each pair on its named nodes, aggregate.sum = the sum of the rows =
# what the clients sent, every client given exactly its own server; netbench-sim check --kind
# egress).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/tests/cluster/lib.sh"

short=false
case ${1:-} in
    --short) short=true ;;
    "") ;;
    *) die "usage: bench/operator-scale.sh [--short]" ;;
esac
# kubectl's binary found once: lib.sh's kc hashes the cluster's sources (go version, every .go
# file) to find it on every call, CPU taken from the machine the rows measure.
kc_bin="$(bin_dir)/k8s"
[[ -x $kc_bin ]] || die "no kubectl at $kc_bin (tests/cluster/up.sh builds it)"
kc() { "$kc_bin" kubectl --kubeconfig "$NB_KUBECONFIG" "$@"; }
fake_nodes=${NB_SCALE_FAKE_NODES:-8}
egress_protocol=${NB_SCALE_EGRESS_PROTOCOL:-tcp-stream}
case $egress_protocol in
    tcp-stream | tcp-rr | tcp-crr | udp-rr | udp-stream) ;;
    *) die "NB_SCALE_EGRESS_PROTOCOL must be one of tcp-stream, tcp-rr, tcp-crr, udp-rr, udp-stream (got '$egress_protocol')" ;;
esac
duration_ms=${NB_SCALE_DURATION_MS:-2000}
need_workers=256
$short && need_workers=128
((fake_nodes >= 2)) || die "NB_SCALE_FAKE_NODES must be at least 2 (clients and servers on separate halves)"

[[ -f $NB_KUBECONFIG ]] || die "the test cluster is not up (tests/cluster/up.sh, then tests/e2e/setup.sh)"
kc -n netbench-system get deployment netbench-operator >/dev/null 2>&1 ||
    die "the operator is not deployed (tests/e2e/setup.sh)"
need_cmds curl python3 file

# Optimised as the images' binaries are: a debug build took about 6 ms of CPU per worker it
# played (the operator itself about 6), CPU the control plane and operator under test share.
log "building netbench-sim (${NB_PROFILE:-image} profile)"
NB_PROFILE=${NB_PROFILE:-image} "$repo/.ci/release.sh" binaries host netbench-sim >&2
sim_bin=$repo/dist/bin/linux-$("$repo/.ci/release.sh" arch host)/netbench-sim

"$NB_CLUSTER_DIR/fake-nodes.sh" "$fake_nodes" >&2
tag=$(printf '%04x' $((RANDOM * 2 % 65536)))
work=$(mktemp -d /tmp/netbench-scale.XXXXXX)
sim_pid=
restoring=false
clk_tck=$(getconf CLK_TCK)

now_ms() { date +%s%3N; }

# The row's watch (watch_ends below): its subshell, then the pipeline in it.
watch_pid=
stop_watch() {
    [[ -n $watch_pid ]] || return 0
    local children=()
    mapfile -t children < <(pgrep -P "$watch_pid" || true)
    # The subshell first (so that it does not report its pipeline killed), then the pipeline.
    kill "$watch_pid" 2>/dev/null || true
    wait "$watch_pid" 2>/dev/null || true
    ((${#children[@]} == 0)) || kill "${children[@]}" 2>/dev/null || true
    watch_pid=
}

cleanup() {
    local rc=$?
    stop_watch
    if [[ -n $sim_pid ]]; then
        kill "$sim_pid" 2>/dev/null || true
        wait "$sim_pid" 2>/dev/null || true
    fi
    kc delete namespace -l "netbench.io/scale-tag=$tag" --wait=false >/dev/null 2>&1 || true
    local deadline=$((SECONDS + 180))
    while [[ -n $(kc get namespace -l "netbench.io/scale-tag=$tag" -o name 2>/dev/null) ]]; do
        ((SECONDS < deadline)) || {
            log "namespaces of tag $tag still terminating after 180 s"
            break
        }
        sleep 1
    done
    if $restoring; then
        log "restoring the operator's ${restore_env[*]} (redeploys it)"
        kc -n netbench-system set env deployment/netbench-operator "${restore_env[@]}" >/dev/null ||
            log "WARNING: the operator's settings were NOT restored; restore them by hand: kubectl -n netbench-system set env deployment/netbench-operator ${restore_env[*]@Q}"
        kc -n netbench-system rollout status deployment/netbench-operator --timeout=180s >/dev/null || true
    fi
    kc delete -f "$repo/bench/operator-scale.yaml" --ignore-not-found >/dev/null 2>&1 || true
    if ((rc != 0)); then
        log "failed; the simulator's log ends:"
        tail -n 30 "$work/sim.log" >&2 || true
    fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT

kc apply -f "$repo/bench/operator-scale.yaml" >/dev/null

# The operator's settings for the run (it reads them only on start), each restored at exit:
# - the cap on workers per run;
# - the connections one client address may hold (default 64): the simulator is every worker
#   behind ONE address (real pods have one each), and with 48 requests in flight beside its idle
#   connections it reached the 64 in some runs (refused as too_many_connections);
# - the workers' tolerations (Helm value workerTolerations): the kwok nodes' taint, as an admin
#   whose benchmark nodes are tainted sets it.
# Each as NAME=value to restore (also an empty value), or NAME- (unset) when the Deployment had
# none; one set from valueFrom could not be restored by `set env`, so the bench refuses to start.
saved=$(kc -n netbench-system get deployment netbench-operator -o json | python3 -c '
import json, sys
env = json.load(sys.stdin)["spec"]["template"]["spec"]["containers"][0].get("env") or []
by_name = {e["name"]: e for e in env}
for name in sys.argv[1:]:
    e = by_name.get(name)
    if e is None:
        print(name + "-")
    elif "valueFrom" in e:
        sys.exit(f"the operator takes {name} from valueFrom: the bench could not restore it")
    else:
        print(name + "=" + e.get("value", ""))
' NETBENCH_MAX_WORKERS NETBENCH_API_MAX_CONNECTIONS_PER_CLIENT NETBENCH_WORKER_TOLERATIONS) ||
    die "cannot read the operator's settings to restore them"
mapfile -t restore_env <<<"$saved"
current=$(sed -n 's/^NETBENCH_MAX_WORKERS=//p' <<<"$saved")
max_workers=$(( ${current:-16} > need_workers ? ${current:-16} : need_workers ))
kwok_toleration='[{"key":"kwok.x-k8s.io/node","operator":"Exists","effect":"NoSchedule"}]'
log "setting NETBENCH_MAX_WORKERS=$max_workers, 512 connections per client and the kwok toleration for workers (redeploys the operator)"
restoring=true
kc -n netbench-system set env deployment/netbench-operator "NETBENCH_MAX_WORKERS=$max_workers" \
    NETBENCH_API_MAX_CONNECTIONS_PER_CLIENT=512 "NETBENCH_WORKER_TOLERATIONS=$kwok_toleration" >/dev/null
kc -n netbench-system rollout status deployment/netbench-operator --timeout=180s >/dev/null

op_pod() {
    kc -n netbench-system get pods -l app.kubernetes.io/component=operator \
        --field-selector=status.phase=Running -o jsonpath='{.items[0].metadata.name}'
}
op_ip() { kc -n netbench-system get pod "$(op_pod)" -o jsonpath='{.status.podIP}'; }
# The operator's process on this machine: the process of its pod's cgroup that is not pause.
op_pid() {
    local uid pid
    uid=$(kc -n netbench-system get pod "$(op_pod)" -o jsonpath='{.metadata.uid}')
    while read -r pid; do
        [[ $(cat "/proc/$pid/comm" 2>/dev/null) == pause ]] && continue
        echo "$pid"
        return 0
    done < <(grep -l -e "$uid" -e "${uid//-/_}" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3)
    return 1
}
cpu_seconds() { awk -v t="$clk_tck" '{printf "%.2f", ($14 + $15) / t}' "/proc/$1/stat"; }
# The test cluster's own processes on this machine, by their command lines (tests/cluster/up.sh):
# the API server, and etcd, the scheduler, the controller manager and kwok. Their CPU over a row
# is what the workers' starts cost the cluster besides the operator's.
for pattern in '/k8s kube-apiserver ' '/etcd --name ' '/k8s kube-scheduler ' '/k8s kube-controller-manager ' '/kwok --kubeconfig '; do
    pgrep -f "$pattern" >/dev/null || die "no process of the test cluster on this machine matches '$pattern'"
done
apiserver_pids=$(pgrep -f '/k8s kube-apiserver ' | tr '\n' ' ')
control_plane_pids=$(pgrep -f '/k8s kube-(scheduler|controller-manager) |/etcd --name |/kwok --kubeconfig ' | tr '\n' ' ')
cpu_of() {
    local pid total=0
    for pid in "$@"; do
        [[ -r /proc/$pid/stat ]] || continue
        total=$(awk -v s="$total" -v t="$clk_tck" '{printf "%.2f", s + ($14 + $15) / t}' "/proc/$pid/stat")
    done
    echo "$total"
}
# shellcheck disable=SC2086 # the pid lists are words
cluster_cpu() { echo "$(cpu_of $apiserver_pids) $(cpu_of $control_plane_pids)"; }
rss_mib() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
op_metrics() { curl -sf --max-time 10 "http://$1:8080/metrics"; }
# The operator's requests (its FlowSchema), and every client's by verb and resource with their
# latency (kept with NB_SCALE_METRICS_DIR: the API server's view of a row).
api_metrics() {
    kc get --raw /metrics |
        grep -E '^apiserver_(flowcontrol_dispatched_requests_total|request_total|request_duration_seconds_(sum|count))' || true
}

# The scheduler's client-side rate limiter (kube-scheduler --kube-api-qps, 50 by default, burst
# 100): how long its requests (the pods' bindings) waited for a token (kept with
# NB_SCALE_METRICS_DIR; bench/api-by-resource.py reads them).
scheduler_metrics() {
    curl -s --max-time 10 --cacert "$NB_PKI/ca.crt" --cert "$NB_PKI/admin.crt" --key "$NB_PKI/admin.key" \
        -k https://127.0.0.1:10259/metrics | grep -E '^rest_client_rate_limiter_duration_seconds' || true
}

# deltas BEFORE_OP AFTER_OP BEFORE_API AFTER_API: "reconcile_p99_ms work_p99_ms reconciles requests" and the
# refusals by reason.
deltas() {
    python3 - "$@" <<'PY'
import re, sys
def parse(path):
    out = {}
    for line in open(path):
        if line.startswith('#') or not line.strip():
            continue
        m = re.match(r'([a-zA-Z_:]+)(\{[^}]*\})?\s+(\S+)', line)
        if m:
            out[(m.group(1), m.group(2) or '')] = float(m.group(3))
    return out
b, a, ab, aa = (parse(p) for p in sys.argv[1:5])
d = lambda k: a.get(k, 0.0) - b.get(k, 0.0)
def p99_of(histogram):
    buckets = {}
    for (name, labels) in a:
        if name == histogram + '_bucket':
            le = re.search(r'le="([^"]+)"', labels).group(1)
            buckets[float(le)] = buckets.get(float(le), 0.0) + d((name, labels))
    total = buckets.get(float('inf'), 0.0)
    p99 = float('nan')
    if total > 0:
        rank, prev_bound, prev_count = 0.99 * total, 0.0, 0.0
        for bound in sorted(buckets):
            if buckets[bound] >= rank:
                if bound == float('inf'):
                    p99 = prev_bound
                else:
                    p99 = prev_bound + (bound - prev_bound) * (rank - prev_count) / max(buckets[bound] - prev_count, 1e-9)
                break
            prev_bound, prev_count = bound, buckets[bound]
    return p99, total
p99, total = p99_of('netbench_reconcile_duration_seconds')
work_p99, _ = p99_of('netbench_reconcile_work_duration_seconds')
req = sum(aa.get(k, 0.0) - ab.get(k, 0.0) for k in aa if k[0] == 'apiserver_flowcontrol_dispatched_requests_total' and 'flow_schema="netbench-operator-scale"' in k[1])
rej = {re.search(r'reason="([^"]+)"', l).group(1): int(d((n, l))) for (n, l) in a if n == 'netbench_api_rejected_total' and d((n, l)) > 0}
print(f"{p99 * 1000:.1f} {work_p99 * 1000:.1f} {int(total)} {int(req)}")
print(' '.join(f"{k}={v}" for k, v in sorted(rej.items())) or '-')
PY
}

# wait_for DESCRIPTION SECONDS COMMAND...: until COMMAND succeeds, or die.
wait_for() {
    local what=$1 limit=$2 deadline=$((SECONDS + $2))
    shift 2
    until "$@"; do
        ((SECONDS < deadline)) || die "$what: not within ${limit}s"
        sleep 0.5
    done
}

# make_namespaces ROW COUNT: namespaces scale-<tag>-ROW-<i>, each with a Service "target" (no
# endpoints: the simulator makes no request) as the benchmark's target.
make_namespaces() {
    local row=$1 count=$2 i ns
    for ((i = 0; i < count; i++)); do
        ns=scale-$tag-$row-$i
        cat <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $ns
  labels: {netbench.io/scale: "true", netbench.io/scale-tag: "$tag", netbench.io/scale-row: "$tag-$row"}
---
apiVersion: v1
kind: Service
metadata: {name: target, namespace: $ns}
spec: {ports: [{port: 80, targetPort: 8080}]}
---
EOF
    done | kc apply -f - >/dev/null
    # The controller-manager makes each namespace's ServiceAccount (20 requests/s by default).
    wait_for "ServiceAccount default in the row's $count namespaces" $((120 + count / 5)) service_accounts_ready "$row" "$count"
}
service_accounts_ready() {
    local n
    n=$(kc get serviceaccounts -A --field-selector metadata.name=default \
        -o jsonpath='{range .items[*]}{.metadata.namespace}{"\n"}{end}' | grep -c "^scale-$tag-$1-" || true)
    ((n == $2))
}

# benchmarks ROW COUNT WORKERS [KIND]: one IngressBenchmark (or EgressBenchmark) per namespace of
# the row.
benchmarks() {
    local row=$1 count=$2 workers=$3 kind=${4:-ingress} i
    for ((i = 0; i < count; i++)); do
        if [[ $kind == egress ]]; then
            egress_benchmark "scale-$tag-$row-$i" "$row" $((workers / 2))
            continue
        fi
        ingress_benchmark "scale-$tag-$row-$i" "$row" b "$workers"
    done
}

# ingress_benchmark NAMESPACE ROW NAME WORKERS
ingress_benchmark() {
    cat <<EOF
apiVersion: netbench.io/v1alpha1
kind: IngressBenchmark
metadata:
  name: $3
  namespace: $1
  labels: {netbench.io/scale-row: "$tag-$2"}
spec:
  target: {url: "http://target.$1.svc/"}
  load: {connections: 4, threads: 2, duration: ${duration_ms}ms, warmup: 0s, timeout: 1s}
  workers:
    replicas: $4
    nodeSelector: {netbench.io/fake-node: "true"}
---
EOF
}

# node_list FROM TO: fake nodes FROM..TO-1 as a YAML flow list.
node_list() {
    local from=$1 to=$2 i out=()
    for ((i = from; i < to; i++)); do out+=("nb-fake-$i"); done
    local IFS=,
    echo "[${out[*]}]"
}

# egress_benchmark NAMESPACE ROW PAIRS: one case (tcp-stream, or NB_SCALE_EGRESS_PROTOCOL) of PAIRS
# client/server pairs, clients on the first half of the fake nodes and servers on the second
# (2 x PAIRS worker pods).
egress_benchmark() {
    local half=$((fake_nodes / 2))
    cat <<EOF
apiVersion: netbench.io/v1alpha1
kind: EgressBenchmark
metadata:
  name: b
  namespace: $1
  labels: {netbench.io/scale-row: "$tag-$2"}
spec:
  cases:
    - name: pairs
      protocol: $egress_protocol
      client: {}
      server: {}
      duration: ${duration_ms}ms
      topology:
        pairs: $3
        clientNodes: {names: $(node_list 0 "$half")}
        serverNodes: {names: $(node_list "$half" "$fake_nodes")}
---
EOF
}

# watch_ends KIND SELECTOR FILE: every change of the selected benchmarks as "ms created_ms key
# phase" lines in FILE (ms when the line was read from the watch, created_ms the benchmark's
# creationTimestamp, to the second; phase "-" before it has one), from a kubectl watch in the
# background (the pipeline's subshell in watch_pid; watch_restarts counts the watches started
# after the first). A row's end times are read from it: a poll (a kubectl run and a LIST of every
# benchmark's status every 0.2 s) loaded the 2 cores it measures and, its period growing to
# seconds under load, made each end time late by up to that period. custom-columns, not
# jsonpath: a watch's first list comes in pages (500 objects each), which jsonpath prints as one
# List each ("/"), custom-columns object by object. The lines are stamped by python, which reads
# a pipe in blocks (bash's read takes it a byte at a time and fell behind a burst).
watch_restarts=0
watch_ends() {
    local kind=$1 selector=$2 file=$3
    (
        "$kc_bin" kubectl --kubeconfig "$NB_KUBECONFIG" get "${kind}benchmarks" -A -l "$selector" \
            --watch --no-headers 2>>"$work/watch.log" \
            -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name,CREATED:.metadata.creationTimestamp,PHASE:.status.phase |
            python3 -u -c '
import datetime, sys, time
for line in iter(sys.stdin.readline, ""):
    f = line.split()
    if len(f) != 4:
        continue
    try:
        created = datetime.datetime.strptime(f[2], "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        continue
    created_ms = int(created.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
    phase = "-" if f[3] == "<none>" else f[3]
    print(int(time.time() * 1000), created_ms, f[0] + "/" + f[1], phase, flush=True)
' >>"$file"
    ) &
    watch_pid=$!
}
# ends FILE: "key ms phase created_ms" for each benchmark in FILE that reached Succeeded or
# Failed, at the first such line. created_ms is when the watch first showed the benchmark (its
# creation), unless that was more than 2 s after its creationTimestamp (the watch was not yet
# listening, or was started again and listed it): then the creationTimestamp, which is up to 1
# s early (it is to the second) and so never makes an overhead look smaller.
ends() {
    awk '!($3 in created) {created[$3] = ($1 - $2 > 2000) ? $2 : $1}
        ($4 == "Succeeded" || $4 == "Failed") && !ended[$3]++ {print $3, $1, $4, created[$3]}' "$1"
}
# await_ends WHAT COUNT SECONDS SELECTOR KIND FILE [PREFIX LONE]: until COUNT benchmarks ended in
# FILE (or, with PREFIX, LONE of those whose key does not start with PREFIX), or die; a watch
# that ended early (the API server closes a watcher that falls behind) is started again, its
# list giving the phases then (an end seen in it is late by the gap, never early), at most 5
# times. Samples the operator's RSS into peak meanwhile (when pid is set).
await_ends() {
    local what=$1 count=$2 limit=$3 selector=$4 kind=$5 file=$6 prefix=${7:-} lone=${8:-0}
    local deadline=$((SECONDS + limit)) rss ended
    while :; do
        if [[ -n $prefix ]]; then
            ended=$(ends "$file" | grep -vc "^$prefix" || true)
            ((ended >= lone)) && break
        else
            ended=$(ends "$file" | wc -l)
            ((ended >= count)) && break
        fi
        ((SECONDS < deadline)) || die "$what: $ended/$count benchmarks ended within $limit s"
        if ! kill -0 "$watch_pid" 2>/dev/null; then
            watch_restarts=$((watch_restarts + 1))
            ((watch_restarts <= 5)) || die "$what: the watch of the row's benchmarks ended 6 times ($(tail -n1 "$work/watch.log" 2>/dev/null))"
            log "$what: the watch ended ($(tail -n1 "$work/watch.log" 2>/dev/null)); watching again"
            watch_ends "$kind" "$selector" "$file"
        fi
        if [[ -n ${pid:-} ]]; then
            rss=$(rss_mib "$pid")
            peak=$(awk -v a="${peak:-0}" -v b="$rss" 'BEGIN {print (b > a) ? b : a}')
        fi
        sleep 0.2
    done
    ends "$file" | wc -l
}

# apply_at_once FILE: FILE's objects (YAML documents ending in ---) created by up to 16 kubectl
# processes at once, each its share one after another (on this loaded machine 200 took 8 s and
# 1000 took 70 s). One kubectl apply creates a file's objects one after another (200 took 18 s),
# so fewer of them ran at once than the row says.
apply_at_once() {
    local file=$1 dir=$work/apply parts=16 pids=() rc=0 part
    rm -rf "$dir"
    mkdir -p "$dir"
    awk -v dir="$dir" -v parts="$parts" '
        /^---$/ { n++; next }
        { f = dir "/" (n % parts) ".yaml"; if (!(f in last) || last[f] != n) { if (f in last) print "---" > f; last[f] = n }; print > f }
    ' "$file"
    for part in "$dir"/*.yaml; do
        kc apply -f "$part" >/dev/null &
        pids+=($!)
    done
    for part in "${pids[@]}"; do wait "$part" || rc=1; done
    ((rc == 0)) || die "kubectl apply of $file failed"
}

# phases ROW [KIND]: "namespace phase" per benchmark of the row.
phases() {
    kc get "${2:-ingress}benchmarks" -A -l "netbench.io/scale-row=$tag-$1" \
        -o jsonpath='{range .items[*]}{.metadata.namespace}{" "}{.status.phase}{"\n"}{end}'
}

# nothing_left ROW: no worker pod in the row's namespaces, no report ConfigMap kept for them.
nothing_left() {
    local pods reports
    pods=$(kc get pods -A -l app.kubernetes.io/managed-by=netbench-operator \
        -o jsonpath='{range .items[*]}{.metadata.namespace}{"\n"}{end}' | grep -c "^scale-$tag-$1-" || true)
    reports=$(kc -n netbench-system get configmaps -l netbench.io/report=true \
        -o jsonpath='{range .items[*]}{.metadata.labels.netbench\.io/namespace}{"\n"}{end}' | grep -c "^scale-$tag-$1-" || true)
    ((pods == 0 && reports == 0))
}

restarts() {
    kc -n netbench-system get pods -l app.kubernetes.io/component=operator \
        -o jsonpath='{range .items[*]}{.status.containerStatuses[0].restartCount}{"\n"}{end}' |
        awk '{s += $1} END {print s + 0}'
}

log "starting netbench-sim"
KUBECONFIG=$NB_KUBECONFIG RUST_BACKTRACE=0 "$sim_bin" run --record "$work/record" --namespace-prefix "scale-$tag-" \
    --lie-namespace "scale-$tag-lies-0" --late-namespace "scale-$tag-late-0" \
    --lies "$work/lies.jsonl" 2>"$work/sim.log" &
sim_pid=$!
# The simulator watches before anything is applied: its first line says so.
sim_watching() {
    kill -0 "$sim_pid" 2>/dev/null || die "netbench-sim exited: $(grep -v '^ ' "$work/sim.log" | tail -n 5)"
    grep -q "watching worker pods" "$work/sim.log"
}
wait_for "netbench-sim watching" 60 sim_watching

pid=$(op_pid) || die "cannot find the operator's process in /proc"
ip=$(op_ip)
printf '| workers per run | benchmarks | overhead p50 / max (s) | from the apply p50 / max (s) | start spread max (ms) | reconcile p99 / its work p99 (ms) | RSS before / peak (MiB) | operator CPU (s) | API server / rest of the control plane CPU (s) | API requests per benchmark | per worker | merged = all samples |\n' >"$work/table"
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n' >>"$work/table"
failures=()

# settle: until the namespaces of earlier rows are gone (at most 10 minutes). Their deletion
# (the namespace controller lists and deletes every resource type in each) would otherwise load
# the API server during the next row, which measures the operator's overhead, not theirs.
settle() {
    wait_for_quietly 600 earlier_rows_gone ||
        log "namespaces of earlier rows still terminating after 600 s: the next row shares the API server with their deletion"
}

earlier_rows_gone() {
    [[ -z $(kc get namespace -l "netbench.io/scale-tag=$tag,netbench.io/scale-row" -o name 2>/dev/null) ]]
}

# row NAME WORKERS BENCHMARKS [KIND]: KIND ingress (default) or egress (WORKERS/2 pairs).
row() {
    local name=$1 workers=$2 count=$3 kind=${4:-ingress}
    settle
    log "row $name: $count $kind benchmark(s) of $workers worker(s)"
    make_namespaces "$name" "$count"
    pid=$(op_pid) || die "cannot find the operator's process in /proc"
    ip=$(op_ip)
    local rss_before cpu_before cluster_before peak t0
    rss_before=$(rss_mib "$pid")
    cpu_before=$(cpu_seconds "$pid")
    cluster_before=$(cluster_cpu)
    peak=$rss_before
    op_metrics "$ip" >"$work/op.before"
    api_metrics >"$work/api.before"
    scheduler_metrics >"$work/scheduler.before"
    benchmarks "$name" "$count" "$workers" "$kind" >"$work/$name.yaml"
    : >"$work/$name.watch"
    watch_ends "$kind" "netbench.io/scale-row=$tag-$name" "$work/$name.watch"
    t0=$(now_ms)
    apply_at_once "$work/$name.yaml"
    await_ends "row $name" "$count" 900 "netbench.io/scale-row=$tag-$name" "$kind" "$work/$name.watch" >/dev/null
    stop_watch
    op_metrics "$ip" >"$work/op.after"
    api_metrics >"$work/api.after"
    scheduler_metrics >"$work/scheduler.after"
    if [[ -n ${NB_SCALE_METRICS_DIR:-} ]]; then
        # The operator's series before and after the row (e.g. where a reconcile's time goes:
        # netbench_reconcile_step_duration_seconds); the operator is redeployed at exit.
        mkdir -p "$NB_SCALE_METRICS_DIR"
        cp "$work/op.before" "$NB_SCALE_METRICS_DIR/$name.before.prom"
        cp "$work/op.after" "$NB_SCALE_METRICS_DIR/$name.after.prom"
        cp "$work/api.before" "$NB_SCALE_METRICS_DIR/$name.apiserver.before.prom"
        cp "$work/api.after" "$NB_SCALE_METRICS_DIR/$name.apiserver.after.prom"
        cp "$work/scheduler.before" "$NB_SCALE_METRICS_DIR/$name.scheduler.before.prom"
        cp "$work/scheduler.after" "$NB_SCALE_METRICS_DIR/$name.scheduler.after.prom"
        cp "$work/$name.watch" "$NB_SCALE_METRICS_DIR/$name.watch"
    fi
    local cpu_after cluster_after
    cpu_after=$(cpu_seconds "$pid")
    cluster_after=$(cluster_cpu)
    local overheads from_apply failed
    # The operator's overhead counts from each benchmark's creation; "from the apply" from the
    # moment the row's apply began (the user's view: the creation of the row's objects in).
    overheads=$(ends "$work/$name.watch" | awk -v d="$duration_ms" '{print ($2 - $4 - d) / 1000}' | sort -n)
    from_apply=$(ends "$work/$name.watch" | awk -v t0="$t0" -v d="$duration_ms" '{print ($2 - t0 - d) / 1000}' | sort -n)
    failed=$(ends "$work/$name.watch" | awk '$3 != "Succeeded"' | wc -l)
    local p50 max apply_p50 apply_max
    p50=$(p50_of <<<"$overheads")
    max=$(tail -n1 <<<"$overheads")
    apply_p50=$(p50_of <<<"$from_apply")
    apply_max=$(tail -n1 <<<"$from_apply")
    KUBECONFIG=$NB_KUBECONFIG "$sim_bin" check --kind "$kind" -l "netbench.io/scale-row=$tag-$name" \
        --record "$work/record" >"$work/$name.check" 2>>"$work/sim.log" || true
    local checked exact spread
    checked=$(grep -c . "$work/$name.check" || true)
    exact=$(grep -c '"exact":true' "$work/$name.check" || true)
    spread=$(python3 -c '
import json, sys
v = [s["startSkewMs"][0] for l in open(sys.argv[1]) for s in json.loads(l).get("steps", []) if s.get("startSkewMs", [None])[0] is not None]
print(max(v) if v else "n/a")' "$work/$name.check")
    local d reconcile work_p99 reconciles requests refusals
    d=$(deltas "$work/op.before" "$work/op.after" "$work/api.before" "$work/api.after")
    read -r reconcile work_p99 reconciles requests <<<"$(head -n1 <<<"$d")"
    refusals=$(tail -n1 <<<"$d")
    local per_bench per_worker
    per_bench=$(awk -v r="$requests" -v n="$count" 'BEGIN {printf "%.0f", r / n}')
    per_worker=$(awk -v r="$requests" -v n="$count" -v w="$workers" 'BEGIN {printf "%.1f", r / n / w}')
    local label=$workers
    if [[ $kind == egress ]]; then
        label="$workers (egress, $((workers / 2)) pairs)"
        [[ $egress_protocol == tcp-stream ]] || label="$workers (egress $egress_protocol, $((workers / 2)) pairs)"
    fi
    printf '| %s | %s | %s / %.2f | %s / %.2f | %s | %s | %s / %s | %.1f | %s | %s | %s | %s/%s |\n' \
        "$label" "$count" "$p50" "$max" "$apply_p50" "$apply_max" "$spread" "$reconcile / $work_p99" "$rss_before" "$peak" \
        "$(awk -v a="$cpu_after" -v b="$cpu_before" 'BEGIN {print a - b}')" \
        "$(awk -v a="$cluster_after" -v b="$cluster_before" 'BEGIN {split(a, x, " "); split(b, y, " "); printf "%.1f / %.1f", x[1] - y[1], x[2] - y[2]}')" \
        "$per_bench" "$per_worker" "$exact" "$checked" >>"$work/table"
    # The machine's load average (1, 5, 15 min) as the row ends: the figures are this 2-core
    # machine's, shared with the API server, etcd, kwok and the simulator.
    local load
    read -r load _ < <(cut -d' ' -f1-3 /proc/loadavg | tr ' ' '/')
    log "row $name: $failed failed, $exact/$checked exact, $reconciles reconciles, refusals: $refusals, load average $load"
    if ((failed > 0)); then
        failures+=("row $name: $failed benchmark(s) did not succeed")
        grep -v '"phase":"Succeeded"' "$work/$name.check" | head -n 3 | cut -c1-400 >&2
    fi
    if ((exact != count || checked != count)); then
        failures+=("row $name: status as sent for $exact of $count")
        grep -v '"exact":true' "$work/$name.check" | head -n 3 | cut -c1-600 >&2 || true
    fi
    [[ $refusals == - ]] || failures+=("row $name: honest workers were refused: $refusals")
    if wait_for_quietly 120 nothing_left "$name"; then :; else
        failures+=("row $name: worker pods or report ConfigMaps left 120 s after the end")
    fi
    kc delete namespace -l "netbench.io/scale-row=$tag-$name" --wait=false >/dev/null
}

# p50_of: the median of the sorted numbers on stdin, two decimals.
p50_of() { awk '{a[NR] = $1} END {printf "%.2f", a[int((NR + 1) / 2)]}'; }

wait_for_quietly() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || return 1
        sleep 0.5
    done
}

# The hostile block: in namespace lies-0 worker w0 (of 2) posts a report for w1, one for step 1,
# one for another run, and (after the run succeeded) its report again; in late-0 worker w0
# withholds its report until the run failed at its deadline, then posts it. The runs must end
# Succeeded and Failed; every lie must get a 4xx and be counted in netbench_api_rejected_total.
hostile() {
    log "hostile: lying workers (the late one waits for the run's deadline, about 1.5 min)"
    make_namespaces lies 1
    make_namespaces late 1
    ip=$(op_ip)
    op_metrics "$ip" >"$work/op.before"
    { benchmarks lies 1 2; benchmarks late 1 1; } | kc apply -f - >/dev/null
    wait_for "the lying workers' runs ending" 600 hostile_ended
    wait_for "five lies answered" 120 lies_answered
    op_metrics "$ip" >"$work/op.after"
    local d refusals
    d=$(deltas "$work/op.before" "$work/op.after" /dev/null /dev/null)
    refusals=$(tail -n1 <<<"$d")
    local lies_phase late_phase
    lies_phase=$(phases lies | awk '{print $2}')
    late_phase=$(phases late | awk '{print $2}')
    python3 - "$work/lies.jsonl" "$refusals" "$lies_phase" "$late_phase" >"$work/hostile" <<'PY' || failures+=("hostile: $(tail -n1 "$work/hostile")")
import json, sys
lies = [json.loads(l) for l in open(sys.argv[1])]
counted = dict(kv.split('=') for kv in sys.argv[2].split()) if sys.argv[2] != '-' else {}
print('| lie | answer | refused |')
print('| --- | --- | --- |')
for l in lies:
    print(f"| {l['lie']} | {l['status']} {l['answer'][:70]} | {l['refused']} |")
total = sum(int(v) for v in counted.values())
print(f"\nrefusals counted by the operator (netbench_api_rejected_total): {sys.argv[2]}; lying run {sys.argv[3]}, late run {sys.argv[4]}")
bad = [l['lie'] for l in lies if not l['refused']]
if bad or len(lies) < 5 or total < len(lies) or sys.argv[3] != 'Succeeded' or sys.argv[4] != 'Failed':
    print(f"FAIL: not refused: {bad}; lies {len(lies)}; counted {total}; phases {sys.argv[3]}/{sys.argv[4]}")
    sys.exit(1)
PY
    wait_for_quietly 120 nothing_left lies || failures+=("hostile: children of the lying run left")
    wait_for_quietly 120 nothing_left late || failures+=("hostile: children of the late run left")
}
hostile_ended() {
    [[ $(phases lies | awk '{print $2}') =~ ^(Succeeded|Failed)$ ]] &&
        [[ $(phases late | awk '{print $2}') =~ ^(Succeeded|Failed)$ ]]
}
lies_answered() { [[ -f $work/lies.jsonl ]] && (($(grep -c . "$work/lies.jsonl") >= 5)); }

# fairness BUSY LONE [lone-first]: one namespace applies BUSY benchmarks of one worker and LONE
# other namespaces one each, in one apply (the busy namespace's first). The queue takes
# namespaces in rounds and runs at most maxRunsPerNamespace of one namespace at once, so every
# lone namespace's run must end before half of the busy namespace's have: checked. With
# lone-first (the 1000 row: the busy namespace would take about an hour to drain two at a time)
# the row ends once every lone namespace's run ended, and counts the busy namespace's ended by
# then; its other benchmarks go with their namespace.
fairness() {
    local busy=$1 lone=$2 lone_first=${3:-} i
    settle
    log "fairness: one namespace applies $busy benchmarks, $lone other namespaces one each"
    make_namespaces fair $((lone + 1))
    {
        for ((i = 0; i < busy; i++)); do ingress_benchmark "scale-$tag-fair-0" fair "b$i" 1; done
        for ((i = 1; i <= lone; i++)); do ingress_benchmark "scale-$tag-fair-$i" fair b 1; done
    } >"$work/fair.yaml"
    local t0 total=$((busy + lone))
    : >"$work/fair.watch"
    watch_ends ingress "netbench.io/scale-row=$tag-fair" "$work/fair.watch"
    t0=$(now_ms)
    kc apply -f "$work/fair.yaml" >/dev/null
    if [[ -n $lone_first ]]; then
        await_ends fairness "$total" 1800 "netbench.io/scale-row=$tag-fair" ingress "$work/fair.watch" "scale-$tag-fair-0/" "$lone" >/dev/null
    else
        await_ends fairness "$total" 1800 "netbench.io/scale-row=$tag-fair" ingress "$work/fair.watch" >/dev/null
    fi
    stop_watch
    ends "$work/fair.watch" >"$work/fair.done"
    python3 - "$work/fair.done" "$t0" "$duration_ms" "scale-$tag-fair-0/" "$busy" "$lone" >"$work/fairness" <<'PY' ||
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
t0, d, busy_prefix = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
over = lambda r: (int(r[1]) - t0 - d) / 1000
busy = sorted(over(r) for r in rows if r[0].startswith(busy_prefix))
lone = sorted(over(r) for r in rows if not r[0].startswith(busy_prefix))
failed = [r[0] for r in rows if r[2] != 'Succeeded']
p50 = lambda v: v[(len(v) - 1) // 2]
print('| namespace | benchmarks | overhead p50 / max (s) |')
print('| --- | --- | --- |')
n_busy = int(sys.argv[5])
if len(busy) == n_busy:
    print(f'| one busy namespace | {len(busy)} | {p50(busy):.2f} / {busy[-1]:.2f} |')
else:
    # lone-first: the row ended with the lone namespaces; the busy one's had not all ended.
    shown = f'{p50(busy):.2f} / {busy[-1]:.2f}' if busy else '-'
    print(f'| one busy namespace | {n_busy} ({len(busy)} ended when the last lone one did) | {shown} |')
print(f'| {len(lone)} namespaces of one | {len(lone)} | {p50(lone):.2f} / {lone[-1]:.2f} |')
# Every lone run ended before half of the busy namespace's had.
starved = len([b for b in busy if b <= lone[-1]]) >= n_busy / 2
if failed or starved:
    print(f'FAIL: failed {failed[:5]}; the last lone run ({lone[-1]:.2f} s) ended after half of the busy namespace\'s')
    sys.exit(1)
PY
        failures+=("fairness: $(tail -n1 "$work/fairness")")
    kc delete namespace -l "netbench.io/scale-row=$tag-fair" --wait=false >/dev/null
}

# run_row NAME: one row of the table by its name.
run_row() {
    case $1 in
        w1) row w1 1 1 ;;
        w64) row w64 64 1 ;;
        b20) row b20 1 20 ;;
        b50) row b50 1 50 ;;
        b200) row b200 1 200 ;;
        b1000) row b1000 1 1000 ;;
        e64) row e64 64 1 egress ;;
        e128) row e128 128 1 egress ;;
        e256) row e256 256 1 egress ;;
        fair) fairness 100 20 ;;
        fair1000) fairness 980 20 lone-first ;;
        *) die "unknown row $1 (w1 w64 b20 b50 b200 b1000 e64 e128 e256 fair fair1000)" ;;
    esac
}

restarts_before=$(restarts)
rows="w1 w64 b50 b200 b1000 e64 e256 fair"
$short && rows="w64 b20 e128"
for r in ${NB_SCALE_ROWS:-$rows}; do run_row "$r"; done
hostile
restarts_after=$(restarts)
((restarts_after == restarts_before)) || failures+=("the operator restarted ($restarts_before -> $restarts_after)")

echo
echo "Operator at scale ($(date -u +%Y-%m-%d), $fake_nodes kwok nodes, ${duration_ms} ms runs, workers played by netbench-sim):"
echo
cat "$work/table"
if [[ -f $work/fairness ]]; then
    echo
    cat "$work/fairness"
fi
echo
echo "Goals (issue 33): overhead < 5 s at 256 workers; 200 benchmarks p50 < 5 s, max < 8 s;"
echo "reconcile p99 < 100 ms; start spread < 100 ms at 256; RSS < 256 MiB with 1000 benchmarks;"
echo "API requests per worker <= 4, per benchmark at 1000 no more than at 200."
echo
cat "$work/hostile"
if ((${#failures[@]} > 0)); then
    printf 'FAILED: %s\n' "${failures[@]}" >&2
    exit 1
fi
echo
echo "all checks passed"
