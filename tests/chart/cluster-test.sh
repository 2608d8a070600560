#!/usr/bin/env bash
# The chart and the plain manifests against the real test cluster (tests/cluster), as root:
#   1. kubectl path: `kubectl apply -f deploy/` -> operator Ready (leader) -> the first run of
#      README.md (deploy/examples/target.yaml + ingress-simple.yaml in default) Succeeds ->
#      `kubectl delete -f deploy/` -> no netbench object left
#   1b. a namespace-scoped install (watchNamespaces={default}) from the packaged chart: its RBAC
#      (pods and benchmarks in default only), the same first run Succeeds, a benchmark in
#      another namespace is left alone; uninstalled, nothing left
#   2. Helm path: `helm install` of the previous chart version (the package in
#      tests/chart/previous-release/) -> a benchmark Succeeds -> `helm upgrade` to this chart as `helm package` made it
#      (.ci/release.sh chart) -> CRDs upgraded, the benchmark and its result kept -> `helm test`
#      passes, and fails when its benchmark fails (pinned helm, sweeps allowed in the test
#      namespace: the opt-in Role)
#   3. prometheus.sh (real Prometheus scrapes the operator during ingress-simple, a two-step CPU
#      sweep and egress-pod-to-pod; with all three selected, every dashboard expression must
#      return data)
#   4. uninstall as docs/install.md says -> nothing left but the CRDs (crds.keep) -> delete the
#      CRDs -> nothing left
#
#   cluster-test.sh [--netbench-images] [--no-clean]
#
# An existing netbench install (e.g. the one tests/e2e/setup.sh leaves) is removed first: all
# benchmarks, the Helm release, everything in deploy/, CRDs included. --no-clean refuses to
# start instead. (--force-clean is accepted: the default.)
#
# --netbench-images: import the operator and loadgen images that `.ci/release.sh images host`
# built into dist/images/; without it they must already be in the cluster (tests/e2e/setup.sh
# imports them). The cluster stays up (tests/cluster/down.sh).
# NOTE: the cluster is shared: this test installs into netbench-system and deletes the netbench
# CRDs at the end (the uninstall check), so do not run it while another netbench test runs.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $(id -u) -eq 0 ]] || die "must run as root"
need_cmds jq curl python3 ctr

netbench_images=false force_clean=true
while (($#)); do
    case $1 in
        --force-clean | --no-clean)
            [[ $1 == --no-clean ]] && force_clean=false
            shift
            continue
            ;;
        --netbench-images)
            netbench_images=true
            shift
            continue
            ;;
        *) die "unknown argument $1 (see the header of $0)" ;;
    esac
    shift 2
done

cluster=$NBC_REPO/tests/cluster
eval "$("$cluster/up.sh")" || die "tests/cluster/up.sh failed"
helm=$(helm_bin)
bench_ns=netbench-chart-e2e
crds=(ingressbenchmarks.netbench.io egressbenchmarks.netbench.io benchmarkresults.netbench.io)

if $netbench_images; then (source "$cluster/images.sh" && import_netbench_images); fi
# Every node must hold both images (each node has its own containerd).
for sock in /run/netbench-cluster/nodes/*/containerd.sock; do
    images=$(ctr --address "$sock" -n k8s.io images ls -q)
    for ref in "localhost/netbench/operator:$NB_VERSION" "localhost/netbench/loadgen:$NB_VERSION"; do
        grep -q "$ref" <<<"$images" || die "image $ref is not on the node of $sock: pass --netbench-images"
    done
done

# wait_operator NS: the operator's pod is Ready (only the Lease holder is).
wait_operator() {
    kubectl -n "$1" rollout status deployment/netbench-operator --timeout=180s >/dev/null ||
        die "operator not ready: $(kubectl -n "$1" get pods -o wide; kubectl -n "$1" logs deployment/netbench-operator --tail=30)"
    log "operator Ready in $1"
}

# leftovers: netbench objects still in the cluster (empty = none). Arg: also count CRDs (yes/no).
leftovers() {
    local found=
    found+=$(kubectl get clusterroles,clusterrolebindings -l app.kubernetes.io/part-of=netbench -o name)$'\n'
    found+=$(kubectl get namespace "$NBC_NAMESPACE" -o name --ignore-not-found)$'\n'
    # Roles outside the release namespace (targets.denyApiServer's Role in default).
    found+=$(kubectl get roles,rolebindings -n default -l app.kubernetes.io/part-of=netbench -o name)$'\n'
    found+=$(kubectl get pods,secrets,configmaps -A -l app.kubernetes.io/managed-by=netbench-operator -o name)$'\n'
    [[ $1 == no ]] || found+=$(kubectl get crd "${crds[@]}" -o name --ignore-not-found)$'\n'
    grep -v "^$" <<<"$found" || true
}

# first_run WHAT: the first run of a new user, as README.md says it: the target that ships with the
# project and ingress-simple.yaml, applied together to the namespace "default", Succeeded; then
# both removed.
first_run() {
    local examples=$NBC_REPO/deploy/examples phase
    kubectl apply -f "$examples/target.yaml" -f "$examples/ingress-simple.yaml" >/dev/null
    kubectl wait ib/ingress-simple --for=jsonpath='{.status.phase}'=Succeeded --timeout=240s >/dev/null || {
        phase=$(kubectl get ib/ingress-simple -o jsonpath='{.status}')
        die "$1: ingress-simple against the shipped target did not succeed: $phase"
    }
    log "$1: target.yaml + ingress-simple.yaml Succeeded ($(kubectl get ib ingress-simple --no-headers))"
    kubectl delete -f "$examples/ingress-simple.yaml" -f "$examples/target.yaml" --wait=true >/dev/null
}

# Test target: the Service ingress-simple.yaml names, in our own namespace.
kubectl create namespace "$bench_ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
(source "$cluster/lib.sh" && nginx_yaml nginx-target "$bench_ns" "" 8080) |
    kubectl -n "$bench_ns" apply -f - >/dev/null
kubectl -n "$bench_ns" rollout status deployment/nginx-target --timeout=120s >/dev/null
# ingress-simple.yaml pointed at that Service, and a two-step CPU sweep of the same target (so
# the per-step and linear-scaling panels have data; sweeps need security.sweepNamespaces).
tmp=$(mktemp -d /tmp/netbench-chart-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
sed "s#http://netbench-target\.default\.svc\.cluster\.local/#http://nginx-target.$bench_ns.svc.cluster.local:8080/#" \
    "$NBC_REPO/deploy/examples/ingress-simple.yaml" >"$tmp/simple.yaml"
grep -q "nginx-target.$bench_ns.svc" "$tmp/simple.yaml" || die "ingress-simple.yaml's target URL changed: update the sed above"
cat >"$tmp/sweep.yaml" <<EOF2
apiVersion: netbench.io/v1alpha1
kind: IngressBenchmark
metadata:
  name: chart-sweep
spec:
  target:
    url: http://nginx-target.$bench_ns.svc.cluster.local:8080/
  load: {connections: 10, threads: 1, duration: 5s, warmup: 1s, keepAlive: true, timeout: 2s}
  workers: {replicas: 1}
  sweep:
    targetRef: {kind: Deployment, name: nginx-target, namespace: $bench_ns, container: nginx}
    steps: [{cpu: 100m}, {cpu: 200m}]
    settle: 2s
  cleanup: Always
EOF2

# egress-pod-to-pod.yaml with short cases (pod to pod needs no opt-in), so the egress panels
# (throughput per case, overhead against the baseline, retransmits, live bits/s) have data.
sed 's/duration: 5s/duration: 3s/' "$NBC_REPO/deploy/examples/egress-pod-to-pod.yaml" >"$tmp/egress.yaml"
# egress-protocols.yaml with short cases, so the request/response and UDP panels (transactions,
# latency per case, loss, jitter, live transactions) have data.
sed 's/duration: [35]s/duration: 2s/' "$NBC_REPO/deploy/examples/egress-protocols.yaml" >"$tmp/protocols.yaml"

if $force_clean && [[ -n $(leftovers yes) ]]; then
    log "removing the existing netbench install: $(leftovers yes | tr '\n' ' ')"
    kubectl delete benchmarks --all -A --wait=true >/dev/null 2>&1 || true
    "$helm" uninstall "$NBC_RELEASE" -n "$NBC_NAMESPACE" --wait >/dev/null 2>&1 || true
    kubectl delete -f "$NBC_REPO/deploy/" --ignore-not-found --wait=true >/dev/null
fi
# Bindings made by others for the operator's ServiceAccount (tests/e2e/sweep-rbac.yaml) would
# let the sweep below pass without the chart's own opt-in Role: remove them.
for b in $(kubectl get clusterrolebindings -o json | jq -r --arg ns "$NBC_NAMESPACE" '.items[]
        | select(.metadata.labels["app.kubernetes.io/part-of"] != "netbench")
        | select(any(.subjects[]?; .kind == "ServiceAccount" and .name == "netbench-operator" and .namespace == $ns))
        | .metadata.name'); do
    log "removing clusterrolebinding $b (grants to the operator's ServiceAccount outside the chart)"
    kubectl delete clusterrolebinding "$b" >/dev/null
done

log "== 1. plain manifests: kubectl apply -f deploy/"
[[ -z $(leftovers yes) ]] || die "netbench objects exist before the test: $(leftovers yes)"
"$NBC_DIR/render-deploy.sh" --check
kubectl apply -f "$NBC_REPO/deploy/crds.yaml" >/dev/null
kubectl wait --for condition=established --timeout=60s "${crds[@]/#/crd/}" >/dev/null
kubectl apply -f "$NBC_REPO/deploy/operator.yaml" >/dev/null
wait_operator "$NBC_NAMESPACE"
first_run "plain manifests"
kubectl delete -f "$NBC_REPO/deploy/" --wait=true >/dev/null
[[ -z $(leftovers yes) ]] || die "left after kubectl delete -f deploy/: $(leftovers yes)"
log "PASS plain manifests install, run and delete cleanly"

log "== 1b. a namespace-scoped install (watchNamespaces) from the packaged chart"
NB_HELM=$helm "$NBC_REPO/.ci/release.sh" chart
"$helm" install "$NBC_RELEASE" "$NBC_REPO/dist/netbench-$NB_VERSION.tgz" --namespace "$NBC_NAMESPACE" --create-namespace \
    --set 'watchNamespaces={default}' --set tests.enabled=false --wait --timeout 180s >/dev/null ||
    die "namespace-scoped helm install failed"
wait_operator "$NBC_NAMESPACE"
# Its rights: pods and benchmarks in the watched namespace only; nothing namespaced cluster-wide.
operator_sa=system:serviceaccount:$NBC_NAMESPACE:netbench-operator
can() { kubectl auth can-i "$@" --as="$operator_sa" 2>/dev/null || true; }
[[ $(can create pods -n default) == yes ]] || die "the namespace-scoped operator cannot create pods in default"
[[ $(can watch ingressbenchmarks.netbench.io -n default) == yes ]] || die "cannot watch benchmarks in default"
for denied in "create pods -n $bench_ns" "list pods --all-namespaces" "create services -n $bench_ns" \
    "create benchmarkresults.netbench.io -n $bench_ns" "create events.events.k8s.io -n $bench_ns"; do
    # shellcheck disable=SC2086 # the words of one can-i question
    [[ $(can $denied) == no ]] || die "a namespace-scoped operator may: $denied"
done
[[ $(can list nodes) == yes ]] || die "the namespace-scoped operator cannot list nodes"
# A benchmark outside the watched namespaces is left alone: applied first, still without status
# (and without pods) once the watched one has Succeeded.
kubectl -n "$bench_ns" apply -f "$tmp/simple.yaml" >/dev/null
first_run "a namespace-scoped install"
[[ -z $(kubectl -n "$bench_ns" get ib ingress-simple -o jsonpath='{.status}') ]] ||
    die "a benchmark outside watchNamespaces was acted on: $(kubectl -n "$bench_ns" get ib ingress-simple -o jsonpath='{.status}')"
[[ -z $(kubectl -n "$bench_ns" get pods -l app.kubernetes.io/managed-by=netbench-operator -o name) ]] ||
    die "worker pods were created outside watchNamespaces"
[[ -z $(kubectl -n "$bench_ns" get ib ingress-simple -o jsonpath='{.metadata.finalizers}') ]] ||
    die "a benchmark outside watchNamespaces got the operator's finalizer"
kubectl -n "$bench_ns" delete ib ingress-simple --wait=true >/dev/null
"$helm" uninstall "$NBC_RELEASE" -n "$NBC_NAMESPACE" --wait >/dev/null
kubectl delete namespace "$NBC_NAMESPACE" --wait=true >/dev/null
kubectl delete crd "${crds[@]}" --wait=true >/dev/null
[[ -z $(leftovers yes) ]] || die "left after the namespace-scoped uninstall: $(leftovers yes)"
log "PASS namespace-scoped install: Roles in default only, the first run Succeeded, other namespaces left alone"

log "== 2. helm install of the previous chart, a run, helm upgrade to this chart's package, helm test"
# The previous release's chart package (tests/chart/previous-release/: no git history needed).
prev_chart=$(ls "$NBC_DIR"/previous-release/netbench-*.tgz)
[[ $(wc -l <<<"$prev_chart") == 1 ]] || die "tests/chart/previous-release must hold one chart package: $prev_chart"
prev_version=$(tar -xOzf "$prev_chart" netbench/Chart.yaml | sed -n 's/^version: //p')
[[ $(basename "$prev_chart") == "netbench-$prev_version.tgz" ]] || die "$prev_chart holds chart version $prev_version"
[[ $prev_version != "$NB_VERSION" ]] || die "the previous chart is this version ($NB_VERSION): replace it after a release"
# The previous chart runs this checkout's images (CI does not rebuild the previous operator): what
# this proves is the chart and CRD upgrade path, and that benchmarks and results survive it. Its
# default operator image was the short name netbench/operator: the full local one is set.
"$helm" install "$NBC_RELEASE" "$prev_chart" --namespace "$NBC_NAMESPACE" --create-namespace \
    --set image.repository=localhost/netbench/operator --set image.tag="$NB_VERSION" \
    --set loadgen.image="localhost/netbench/loadgen:$NB_VERSION" \
    --set "security.sweepNamespaces={$bench_ns}" --wait --timeout 180s >/dev/null || die "helm install of chart $prev_version failed"
wait_operator "$NBC_NAMESPACE"
sed 's/^  name: ingress-simple$/  name: before-upgrade/; s/duration: 20s/duration: 3s/' "$tmp/simple.yaml" >"$tmp/before.yaml"
kubectl -n "$bench_ns" apply -f "$tmp/before.yaml" >/dev/null
kubectl -n "$bench_ns" wait ib/before-upgrade --for=jsonpath='{.status.phase}'=Succeeded --timeout=180s >/dev/null ||
    die "before-upgrade did not succeed under chart $prev_version: $(kubectl -n "$bench_ns" get ib before-upgrade -o jsonpath='{.status}')"
result=$(kubectl -n "$bench_ns" get ib before-upgrade -o jsonpath='{.status.latestResult}')
[[ -n $result ]] || die "before-upgrade has no latestResult"
log "chart $prev_version: before-upgrade Succeeded, result $result"

# `helm package`'s output (.ci/release.sh chart), upgraded onto the release. --take-ownership: the
# previous chart installed its CRDs from crds/, outside Helm's ownership (docs/install.md).
NB_HELM=$helm "$NBC_REPO/.ci/release.sh" chart
"$helm" upgrade "$NBC_RELEASE" "$NBC_REPO/dist/netbench-$NB_VERSION.tgz" --namespace "$NBC_NAMESPACE" --take-ownership \
    --set "security.sweepNamespaces={$bench_ns}" --wait --timeout 180s >/dev/null || die "helm upgrade to $NB_VERSION failed"
wait_operator "$NBC_NAMESPACE"
release=$("$helm" list -n "$NBC_NAMESPACE" -o json | jq -c --arg r "$NBC_RELEASE" '.[] | select(.name == $r) | {status, chart}')
[[ $release == "{\"status\":\"deployed\",\"chart\":\"netbench-$NB_VERSION\"}" ]] ||
    die "release not deployed at $NB_VERSION: $release"
# The CRDs are now this chart's (its schema, the keep policy), and what ran before is untouched.
for crd in "${crds[@]}"; do
    kubectl get crd "$crd" -o json | python3 -c '
import json, sys, yaml
live = json.load(sys.stdin)
name = live["metadata"]["name"]
want = yaml.safe_load(open(sys.argv[1] + "/" + name + ".yaml"))
assert live["metadata"].get("annotations", {}).get("helm.sh/resource-policy") == "keep", name + ": no keep policy"
assert live["spec"]["versions"] == want["spec"]["versions"], name + ": schema is not the chart'"'"'s"
' "$NBC_CHART/files/crds" || die "CRD $crd was not upgraded"
done
[[ $(kubectl -n "$bench_ns" get ib before-upgrade -o jsonpath='{.status.phase}') == Succeeded ]] ||
    die "before-upgrade changed after the upgrade: $(kubectl -n "$bench_ns" get ib before-upgrade -o jsonpath='{.status}')"
kubectl -n "$bench_ns" get benchmarkresult "$result" >/dev/null || die "result $result is gone after the upgrade"
log "PASS helm upgrade $prev_version -> $NB_VERSION: CRDs upgraded, benchmark and result kept"
kubectl -n "$bench_ns" delete ib before-upgrade --wait=true >/dev/null

"$helm" test "$NBC_RELEASE" -n "$NBC_NAMESPACE" --timeout 300s >/dev/null ||
    die "helm test failed: $(kubectl -n "$NBC_NAMESPACE" get ib,pods -o wide; kubectl -n "$NBC_NAMESPACE" logs "$NBC_RELEASE-operator-test" --tail=20)"
log "PASS helm test (a benchmark against the operator's /healthz Succeeded, checked by netbench watch)"
# The test fails when its benchmark fails: a loopback target, which the operator refuses.
"$helm" upgrade "$NBC_RELEASE" "$NBC_REPO/dist/netbench-$NB_VERSION.tgz" --namespace "$NBC_NAMESPACE" --reuse-values \
    --set tests.targetUrl=http://127.0.0.1:1/ --wait --timeout 180s >/dev/null || die "helm upgrade (tests.targetUrl) failed"
wait_operator "$NBC_NAMESPACE"
if "$helm" test "$NBC_RELEASE" -n "$NBC_NAMESPACE" --timeout 300s >"$tmp/test.out" 2>&1; then
    die "helm test passed against a refused target"
fi
# What `helm test --logs` shows: netbench watch's last line, the run Failed with the refusal.
watch_log=$(kubectl -n "$NBC_NAMESPACE" logs "$NBC_RELEASE-operator-test" --tail=5)
grep -q "Failed.*127.0.0.1 is inside 127.0.0.0/8" <<<"$watch_log" ||
    die "the failed helm test's log does not say why: $watch_log"
log "PASS helm test fails when its benchmark fails: $(tail -1 <<<"$watch_log")"
"$helm" upgrade "$NBC_RELEASE" "$NBC_REPO/dist/netbench-$NB_VERSION.tgz" --namespace "$NBC_NAMESPACE" --reuse-values \
    --set tests.targetUrl= --wait --timeout 180s >/dev/null || die "helm upgrade (tests.targetUrl reset) failed"
wait_operator "$NBC_NAMESPACE"
kubectl -n "$NBC_NAMESPACE" delete ib,pod "$NBC_RELEASE-operator-test" --ignore-not-found --wait=true >/dev/null
grep -q dashboard <<<"$(kubectl -n "$NBC_NAMESPACE" get configmap -l grafana_dashboard=1 -o name)" ||
    die "no dashboard ConfigMap with the sidecar label"

log "== 3. real Prometheus + every dashboard expression"
"$NBC_DIR/prometheus.sh" --namespace "$NBC_NAMESPACE" --bench-namespace "$bench_ns" \
    --benchmark "$tmp/simple.yaml" --benchmark "$tmp/sweep.yaml" --benchmark "$tmp/egress.yaml" \
    --benchmark "$tmp/protocols.yaml"

log "== 4. uninstall as documented"
kubectl delete benchmarks --all -A --wait=true >/dev/null
"$helm" uninstall "$NBC_RELEASE" -n "$NBC_NAMESPACE" --wait >/dev/null
kubectl delete namespace "$NBC_NAMESPACE" --wait=true >/dev/null
left=$(leftovers no)
[[ -z $left ]] || die "left after helm uninstall: $left"
[[ $(kubectl get crd "${crds[@]}" -o name | wc -l) == 3 ]] || die "helm uninstall removed CRDs (crds.keep keeps them)"
log "PASS helm uninstall leaves only the CRDs (crds.keep)"
kubectl delete crd "${crds[@]}" --wait=true >/dev/null
[[ -z $(leftovers yes) ]] || die "left after deleting the CRDs: $(leftovers yes)"
kubectl delete namespace "$bench_ns" --wait=true >/dev/null
log "PASS nothing of netbench is left; all chart cluster tests passed"
