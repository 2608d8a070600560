#!/usr/bin/env bash
# Chart tests that need no cluster: helm lint / template (pinned helm built from its Go module)
# with default and non-default values, assertions on the rendered objects, values.schema.json
# rejecting bad values (all of these with Helm 4 and Helm 3: helm and helm3 of
# tests/cluster/build.sh --with-tools), the dashboard's structure and PromQL syntax, deploy/ in
# sync (rendered by Helm 4).
# Exit 0 = everything passed.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_cmds python3 promtool
python3 -c 'import yaml' 2>/dev/null || die "python3-yaml missing (apt-get install -y python3-yaml)"
helm4=$(helm_bin)
helm3=$(dirname "$helm4")/helm3
[[ -x $helm3 ]] || die "helm3 missing beside $helm4"
log "helm: $("$helm4" version --short), helm3: $("$helm3" version --short)"
dash=$NBC_CHART/dashboards/netbench.json
fail=0
run() {
    local what=$1
    shift
    if "$@"; then log "PASS $what"; else
        log "FAIL $what"
        fail=1
    fi
}

# values.schema.json must refuse these (each would otherwise render something broken).
bad_values=(
    "replicas=-1"
    "security.sweepNamespaces={Bad_Namespace}"
    "security.sweepTargets={team-a}"
    "security.offloadInterfaces={eth0 ; rm}"
    "image.pullPolicy=Sometimes"
    "serviceMonitor.interval=soon"
    "apiUrl=netbench-operator:8080"
    "notAValue=1"
    "caps.maxWorkers=0"
    "caps.maxRunsPerNamespace=-1"
    "targets.allowed={not a cidr!}"
    "targets.resolveTimeout=0"
    "namespace.podSecurity=lenient"
    "networkPolicy.nodeCIDRs={10.0.0.0}"
    "networkPolicy.prometheusNamespaceSelector=monitoring"
    "crds.install=maybe"
    "crds.upgrade=true"
    "loadgen.image=localhost/netbench/loadgen:0.1.0"
    "tests.timeout=soon"
    "tests.targetUrl=ftp://example.com/"
    "security.runAsUser=0"
    "security.runAsUser=root"
    "resources.limit.cpu=1"
    "resources.requests.cpu=lots"
    "tolerations[0].keyy=x"
    "tolerations[0].operator=Maybe"
    "workerTolerations[0].efect=NoSchedule"
    "workerTolerations[0].effect=NoRun"
    "workerTolerations[0].operator=Exists,workerTolerations[0].value=x"
    "workerTolerations[0].value=x"
    "workerTolerations[0].key=a,workerTolerations[0].effect=NoSchedule,workerTolerations[0].tolerationSeconds=5"
    "workerTolerations=notalist"
    "workerTolerations[0].key=,workerTolerations[0].operator=Equal"
    "workerTolerations[0].key=a b"
    "workerTolerations[0].key=a,workerTolerations[0].value=x y"
    "workerTolerations[0].key=a,workerTolerations[0].operator=Lt"
    "imagePullSecrets[0].nam=x"
    "affinity.nodeAfinity.x=y"
    "watchNamespaces={team-*}"
    "watchNamespaces={team-a,team-a}"
    "watchNamespaces={Team}"
)
for helm in "$helm4" "$helm3"; do
    hv=$("$helm" version --short)
    run "helm lint ($hv, default values)" "$helm" lint --strict "$NBC_CHART"
    run "helm lint ($hv, non-default values)" "$helm" lint --strict "$NBC_CHART" -f "$NBC_DIR/values-nondefault.yaml"
    run "helm template + assertions ($hv, default values)" bash -c \
        "set -o pipefail; '$helm' template netbench '$NBC_CHART' -n netbench-system | '$NBC_DIR/check-rendered.py' default '$dash'"
    run "helm template + assertions ($hv, non-default values)" bash -c \
        "set -o pipefail; '$helm' template nbt '$NBC_CHART' -n bench-system -f '$NBC_DIR/values-nondefault.yaml' | '$NBC_DIR/check-rendered.py' nondefault '$dash'"
    # Default values with the release Namespace (Pod Security: restricted) and the NetworkPolicy
    # (workers only) switched on; without them (above) neither renders.
    run "helm template + assertions ($hv, default values, namespace.create, networkPolicy.enabled)" bash -c \
        "set -o pipefail; '$helm' template netbench '$NBC_CHART' -n netbench-system --set namespace.create=true --set networkPolicy.enabled=true | '$NBC_DIR/check-rendered.py' default-optin '$dash'"

    # A deleted value (null) is no toleration, not a value the operator cannot read.
    run "helm template ($hv, workerTolerations=null renders [])" bash -c \
        "set -o pipefail; '$helm' template netbench '$NBC_CHART' --set workerTolerations=null | grep -A1 'name: NETBENCH_WORKER_TOLERATIONS' | grep -qF 'value: \"[]\"'"

    for v in "${bad_values[@]}"; do
        if out=$("$helm" template netbench "$NBC_CHART" --set "$v" 2>&1); then
            log "FAIL schema ($hv) accepted --set $v"
            fail=1
        elif grep -q "schema" <<<"$out"; then
            log "PASS schema ($hv) rejects --set $v"
        else
            log "FAIL --set $v ($hv) failed, but not by the schema: $out"
            fail=1
        fi
    done
    # A namespace-scoped install whose helm test could never run (its benchmark would sit in an
    # unwatched release namespace) is refused with what to do.
    if out=$("$helm" template netbench "$NBC_CHART" -n netbench-system --set 'watchNamespaces={team-a}' 2>&1); then
        log "FAIL ($hv) rendered helm test's benchmark outside watchNamespaces"
        fail=1
    elif grep -q "watchNamespaces does not list" <<<"$out"; then
        log "PASS ($hv) refuses helm test outside watchNamespaces"
    else
        log "FAIL ($hv) watchNamespaces without the release namespace failed otherwise: $out"
        fail=1
    fi
done

run "dashboard structure and PromQL syntax" "$NBC_DIR/check-dashboard.py" "$dash" --static
run "deploy/ in sync with the chart" "$NBC_DIR/render-deploy.sh" --check
# kubectl apply -f deploy/ creates the namespace enforcing restricted (no offload by default).
run "deploy/operator.yaml: Namespace enforces Pod Security restricted" python3 -c '
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ns = [d for d in docs if d["kind"] == "Namespace"]
assert docs[0]["kind"] == "Namespace", "the Namespace comes first"
labels = ns[0]["metadata"]["labels"]
assert labels["pod-security.kubernetes.io/enforce"] == "restricted", labels
assert labels["pod-security.kubernetes.io/warn"] == "restricted", labels
assert not [d for d in docs if d["kind"] == "NetworkPolicy"], "NetworkPolicy in deploy/"
' "$NBC_REPO/deploy/operator.yaml"
((fail == 0)) || die "chart static tests failed"
log "all chart static tests passed"
