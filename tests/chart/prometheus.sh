#!/usr/bin/env bash
# Real Prometheus (Debian's package, run as a host process) scrapes the installed operator while
# an IngressBenchmark runs; then EVERY PromQL expression of the dashboard must return data.
#
#   prometheus.sh [--namespace NS] [--service NAME] [--bench-namespace NS] [--benchmark FILE]...
#                 [--timeout SECONDS]
#
# Expects: KUBECONFIG of a running cluster (tests/cluster/up.sh), the chart installed (release
# namespace NS, default netbench-system; Service NAME, default netbench-operator), and whatever
# the benchmark FILEs (default deploy/examples/ingress-simple.yaml) target. It applies each FILE
# in turn in --bench-namespace (default netbench-chart-e2e) while Prometheus scrapes, so the live
# series are captured, checks the dashboard once per benchmark (variable $benchmark = its name)
# and once with all of them selected (as Grafana renders a multi-value variable: (a|b|c)), and
# deletes them afterwards. Prometheus scrapes every endpoint of the Service's port "http"
# (from its EndpointSlices, as a ServiceMonitor would).
#
# An expression without data fails, except where the cluster's real state explains it, and then
# it is printed as EMPTY with the reason: per benchmark, the other kind's panels and
# netbench_ingress_scaling_efficiency without a sweep (needs two or more steps), route-change and
# controller-workload series without spec.routeChanges / controllers[].workloads, route-scale
# series without a controllers[].route.count above 1; egress series
# when no EgressBenchmark has succeeded; netbench_reconcile_errors_total when the operator's own
# /metrics shows no reconcile error. With all benchmarks selected only the last (and route and
# workload series no benchmark here asks for) is excused.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_cmds prometheus promtool kubectl curl jq python3

ns=netbench-system svc=netbench-operator bench_ns=netbench-chart-e2e timeout=300
bench_files=()
while (($#)); do
    case $1 in
        --namespace) ns=$2 ;;
        --service) svc=$2 ;;
        --bench-namespace) bench_ns=$2 ;;
        --benchmark) bench_files+=("$2") ;;
        --timeout) timeout=$2 ;;
        *) die "unknown argument $1 (see the header of $0)" ;;
    esac
    shift 2
done
((${#bench_files[@]})) || bench_files=("$NBC_REPO/deploy/examples/ingress-simple.yaml")
[[ -n ${KUBECONFIG:-} ]] || die "KUBECONFIG is not set (eval \"\$(tests/cluster/up.sh)\")"
kubectl -n "$ns" get service "$svc" >/dev/null || die "Service $ns/$svc not found: install the chart first"

# scaled FILE: the benchmark makes a route scale (a controller's route.count above 1).
scaled() {
    local c
    for c in $(kubectl -n "$bench_ns" get -f "$1" -o jsonpath='{.spec.controllers[*].route.count}' 2>/dev/null); do
        ((c > 1)) && return 0
    done
    return 1
}

work=$(mktemp -d /tmp/netbench-prom.XXXXXX)
prom_pid=
cleanup() {
    [[ -n $prom_pid ]] && kill "$prom_pid" 2>/dev/null && wait "$prom_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# Debian's prometheus is built without kubernetes_sd, so the targets come from the Service's
# EndpointSlices (port named "http", ready or not: stand-bys serve /metrics too), the same set
# a ServiceMonitor (or kubernetes_sd with role endpointslice) would scrape.
targets=$(kubectl -n "$ns" get endpointslices -l "kubernetes.io/service-name=$svc" -o json | jq -c '
    [.items[] | (.ports[] | select(.name == "http") | .port) as $port
     | .endpoints[] | {targets: ["\(.addresses[0]):\($port)"],
                       labels: {pod: (.targetRef.name // ""), namespace: "'"$ns"'", service: "'"$svc"'"}}]')
[[ $(jq length <<<"$targets") -gt 0 ]] || die "Service $ns/$svc has no endpoints on a port named http"
echo "$targets" >"$work/targets.json"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
prom=http://127.0.0.1:$port

cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 2s
  scrape_timeout: 2s
scrape_configs:
  - job_name: netbench-operator
    # The metrics carry their own namespace label (the benchmark's): keep it, as the chart's
    # ServiceMonitor does with honorLabels (otherwise it becomes exported_namespace).
    honor_labels: true
    file_sd_configs:
      - files: [$work/targets.json]
YAML
promtool check config "$work/prometheus.yml" >/dev/null || die "generated prometheus.yml is invalid"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
    --web.listen-address="127.0.0.1:$port" --log.level=warn >"$work/prometheus.log" 2>&1 &
prom_pid=$!
log "prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') on $prom (pid $prom_pid)"

up=0
for _ in $(seq 60); do
    up=$(curl -sf "$prom/api/v1/targets" | jq '[.data.activeTargets[] | select(.health == "up")] | length' 2>/dev/null || echo 0)
    ((up > 0)) && break
    kill -0 "$prom_pid" 2>/dev/null || die "prometheus exited: $(tail -5 "$work/prometheus.log")"
    sleep 1
done
((up > 0)) || die "prometheus does not scrape the operator: $(curl -s "$prom/api/v1/targets" | jq -c '.data.activeTargets[] | {scrapeUrl, health, lastError}')"
log "prometheus scrapes $up operator endpoint(s)"

# A refused worker-API request (unknown run, wrong token): a real refusal, counted by the
# operator in netbench_api_rejected_total, so the "Worker API refusals" panel has data.
svc_ip=$(kubectl -n "$ns" get service "$svc" -o jsonpath='{.spec.clusterIP}')
svc_port=$(kubectl -n "$ns" get service "$svc" -o jsonpath='{.spec.ports[?(@.name=="http")].port}')
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Authorization: Bearer not-a-token' \
    -H 'Content-Type: application/json' -d '{}' "http://$svc_ip:$svc_port/v1/runs/netbench-chart-test/register")
[[ $code == 4* ]] || die "worker API accepted a request with a made-up run and token (HTTP $code)"
log "worker API refused a bogus request with HTTP $code"

kubectl create namespace "$bench_ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
start=$(date +%s)
for f in "${bench_files[@]}"; do
    name=$(kubectl create --dry-run=client -o jsonpath='{.metadata.name}' -f "$f")
    kubectl -n "$bench_ns" delete -f "$f" --ignore-not-found --wait=true >/dev/null
    kubectl -n "$bench_ns" apply -f "$f" >/dev/null
    log "applied $bench_ns/$name; waiting up to ${timeout}s"
    phase=
    deadline=$((SECONDS + timeout))
    while ((SECONDS < deadline)); do
        phase=$(kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.status.phase}')
        [[ $phase == Succeeded || $phase == Failed ]] && break
        sleep 2
    done
    kubectl -n "$bench_ns" get -f "$f"
    [[ $phase == Succeeded ]] || die "$bench_ns/$name ended in phase '${phase:-none}': $(kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.status.conditions}')"
done
sleep 6 # three scrapes after the last update
end=$(date +%s)

# Which empty results the cluster's state explains.
may_be_empty=()
if ! kubectl get egressbenchmarks -A -o jsonpath='{.items[*].status.phase}' 2>/dev/null | grep -qw Succeeded; then
    may_be_empty+=(--may-be-empty 'netbench_egress_(bits_per_second|overhead_percent|retransmits)=no EgressBenchmark has succeeded in this cluster, so no egress series exist')
fi
if ! curl -sf "http://$svc_ip:$svc_port/metrics" | grep -q '^netbench_reconcile_errors_total'; then
    may_be_empty+=(--may-be-empty 'netbench_reconcile_errors_total=the operator reports no failed reconcile (its /metrics has no netbench_reconcile_errors_total series)')
fi
# Change points need 6 succeeded results of one spec with a shift; each benchmark here runs once.
change_points=()
if ! curl -sf "http://$svc_ip:$svc_port/metrics" | grep -q '^netbench_change_point_runs_ago'; then
    change_points=(--may-be-empty 'netbench_change_point_(runs_ago|timestamp_seconds)=no benchmark has a change point (they need 6 succeeded results of one spec; its /metrics has no netbench_change_point_runs_ago series)')
fi

status=0
for f in "${bench_files[@]}"; do
    name=$(kubectl create --dry-run=client -o jsonpath='{.metadata.name}' -f "$f")
    extra=()
    if [[ $(kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.kind}') == EgressBenchmark ]]; then
        extra=(--may-be-empty "netbench_ingress_[a-z_]+=$name is an EgressBenchmark; ingress panels are for IngressBenchmarks")
        protocols=$(kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.spec.cases[*].protocol}')
        [[ -n $(kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.spec.cases[*].topology}') ]] ||
            extra+=(--may-be-empty "netbench_egress_pair_value=$name has no case with a topology; the node-pair matrix is for those")
        if ! grep -qE 'rr|udp' <<<"$protocols"; then
            extra+=(--may-be-empty "netbench_(egress_transactions_per_second|egress_latency_seconds|egress_loss_ratio|egress_jitter_seconds|live_transactions_per_second)=$name measures TCP streams only (protocols: $protocols)")
        fi
    else
        extra=(--may-be-empty "netbench_egress_[a-z_]+=$name is an IngressBenchmark; egress panels are for EgressBenchmarks")
        extra+=(--may-be-empty "netbench_live_(transactions_per_second|loss_ratio)=$name is an IngressBenchmark; live transactions and loss are for request/response and UDP egress cases")
        [[ -n $(kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.spec.sweep}') ]] ||
            extra+=(--may-be-empty "netbench_ingress_scaling_efficiency=$name has no sweep; efficiency needs two or more steps")
        [[ -n $(kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.spec.routeChanges}') ]] ||
            extra+=(--may-be-empty "netbench_ingress_route_change(s|_propagation_seconds)=$name changes no route under load (spec.routeChanges)")
        [[ -n $(kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.spec.controllers[*].workloads}') ]] ||
            extra+=(--may-be-empty "netbench_ingress_workload_(cpu_cores|memory_bytes)=$name lists no controller workloads (controllers[].workloads)")
        scaled "$f" ||
            extra+=(--may-be-empty "netbench_ingress_route_scale_(seconds|routes)=$name makes no route scale (controllers[].route.count above 1)")
        if ! scaled "$f" || [[ -z $(kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.spec.controllers[*].workloads}') ]]; then
            extra+=(--may-be-empty "netbench_ingress_workload_memory_per_route_bytes=$name has no route scale beside controller workloads")
        fi
    fi
    [[ -n $(kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.spec.baseline}') ]] ||
        extra+=(--may-be-empty "netbench_regression=$name has no baseline; verdicts need one")
    log "dashboard with namespace=$bench_ns benchmark=$name"
    "$NBC_DIR/check-dashboard.py" "$NBC_CHART/dashboards/netbench.json" --prometheus "$prom" \
        --start "$((start - 30))" --end "$end" --var "namespace=$bench_ns" --var "benchmark=$name" \
        "${may_be_empty[@]}" "${change_points[@]}" "${extra[@]}" || status=1
done
# All benchmarks selected, as a Grafana multi-value variable renders them: every panel must have
# data unless the cluster's state explains it (reconcile errors only).
names=()
for f in "${bench_files[@]}"; do
    names+=("$(kubectl create --dry-run=client -o jsonpath='{.metadata.name}' -f "$f")")
done
all="($(IFS='|'; echo "${names[*]}"))"
log "dashboard with namespace=$bench_ns benchmark=$all"
errors_explained=(--may-be-empty "netbench_regression=none of the benchmarks here has a baseline")
route_changes=$(for f in "${bench_files[@]}"; do kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.spec.routeChanges}' 2>/dev/null; done)
[[ -n $route_changes ]] ||
    errors_explained+=(--may-be-empty "netbench_ingress_route_change(s|_propagation_seconds)=none of the benchmarks here changes routes under load")
workloads=$(for f in "${bench_files[@]}"; do kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.spec.controllers[*].workloads}' 2>/dev/null; done)
[[ -n $workloads ]] ||
    errors_explained+=(--may-be-empty "netbench_ingress_workload_(cpu_cores|memory_bytes)=none of the benchmarks here lists controller workloads")
any_scale=false
for f in "${bench_files[@]}"; do scaled "$f" && any_scale=true; done
$any_scale ||
    errors_explained+=(--may-be-empty "netbench_ingress_route_scale_(seconds|routes)=none of the benchmarks here makes a route scale")
scale_beside_workloads=false
for f in "${bench_files[@]}"; do
    scaled "$f" && [[ -n $(kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.spec.controllers[*].workloads}') ]] &&
        scale_beside_workloads=true
done
$scale_beside_workloads ||
    errors_explained+=(--may-be-empty "netbench_ingress_workload_memory_per_route_bytes=none of the benchmarks here makes a route scale beside controller workloads")
topologies=$(for f in "${bench_files[@]}"; do kubectl -n "$bench_ns" get -f "$f" -o jsonpath='{.spec.cases[*].topology}' 2>/dev/null; done)
[[ -n $topologies ]] ||
    errors_explained+=(--may-be-empty "netbench_egress_pair_value=none of the benchmarks here has a case with a topology")
[[ ${#may_be_empty[@]} -gt 0 && ${may_be_empty[-1]} == netbench_reconcile_errors_total=* ]] &&
    errors_explained+=(--may-be-empty "${may_be_empty[-1]}")
"$NBC_DIR/check-dashboard.py" "$NBC_CHART/dashboards/netbench.json" --prometheus "$prom" \
    --start "$((start - 30))" --end "$end" --var "namespace=$bench_ns" --var "benchmark=$all" \
    "${errors_explained[@]}" "${change_points[@]}" || status=1
for f in "${bench_files[@]}"; do
    kubectl -n "$bench_ns" delete -f "$f" --wait=true >/dev/null || status=1
done
((status == 0)) || die "dashboard queries failed against real Prometheus"
log "every dashboard expression returned data or is explained above"
