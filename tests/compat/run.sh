#!/usr/bin/env bash
# The compatibility matrix (tests/compat/README.md): netbench's CRDs, their CEL rules, the
# examples, the plain manifests and the Helm chart against the OLDEST Kubernetes the README
# claims (a kube-apiserver built from its Go modules by tests/compat/build.sh, at the version
# apiserver/go.mod requires: v1.34.4, as 1.30-1.33 refuse the IngressBenchmark CRD), with Helm 4
# and Helm 3 (tests/cluster/build.sh --with-tools). Kubernetes 1.37.2 is the main test cluster's
# (tests/cluster/crd-check.sh, tests/chart/cluster-test.sh), not run here.
#
# Only etcd and the API server, on loopback, with throwaway certificates in a temporary
# directory: no nodes, no controller-manager (Deployments just sit, nothing becomes Ready). Each
# part gets a fresh API server over its own etcd prefix, so its objects never meet the others':
#   kubectl  crds/manifests/*.yaml applied server-side, without warnings, Established (a CEL rule
#            the release cannot compile, or whose estimated cost is too high, fails here); the cases of
#            cel-cases.yaml (accepted, or refused with the rule's message); a BenchmarkResult
#            refused an update (oldSelf); every deploy/examples/*.yaml; deploy/crds.yaml and
#            deploy/operator.yaml; the chart as Helm 4 and Helm 3 render it (default values,
#            tests/chart/values-nondefault.yaml, default plus namespace.create and
#            networkPolicy.enabled), all applied server-side
#   helm4, helm3  lint --strict and template (default and non-default values; --kube-version of
#            the API server accepted by the chart's kubeVersion), package, then on the API server:
#            install (README's command, default values), upgrade to the non-default values,
#            uninstall (the CRDs stay: crds.keep), install of the non-default values as a release
#            of their own (crds.install=false: the kept CRDs serve); namespace.create=true with and
#            without --create-namespace is tried and reported as a note. No --wait: nothing
#            becomes Ready.
# Prints a matrix at the end; exits non-zero when anything failed. Everything it started is
# stopped and its directory removed on exit (NB_COMPAT_KEEP=1 keeps the directory: logs, certs).
# Ports (loopback): NB_COMPAT_APISERVER_PORT (36443), NB_COMPAT_ETCD_PORT (36379) and the next.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d /tmp/netbench-compat.XXXXXX)
# tests/cluster/lib.sh, with its state and runtime directories (certs, logs, PID files) in ours.
# shellcheck disable=SC2034 # read by lib.sh
NB_CLUSTER_STATE=$work/state NB_CLUSTER_RUN=$work/run
# shellcheck source=SCRIPTDIR/../cluster/lib.sh
source "$repo/tests/cluster/lib.sh"
# shellcheck source=SCRIPTDIR/../cluster/pki.sh
source "$repo/tests/cluster/pki.sh"
need_cmds openssl curl python3 jq
python3 -c 'import yaml' 2>/dev/null || die "python3-yaml missing (apt-get install -y python3-yaml)"

# shellcheck disable=SC2034 # write_kubeconfig's server
NB_APISERVER_IP=127.0.0.1
NB_APISERVER_PORT=${NB_COMPAT_APISERVER_PORT:-36443}
etcd_port=${NB_COMPAT_ETCD_PORT:-36379}
etcd_peer_port=$((etcd_port + 1))
started=$SECONDS

stop_component() { # stop_component NAME: SIGTERM, then SIGKILL after 30 s; forget its PID.
    local name=$1 pid deadline
    pid=$(component_pid "$name")
    if [[ -n $pid ]]; then
        kill "$pid" 2>/dev/null || true
        deadline=$((SECONDS + 30))
        while pid_alive "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
        if pid_alive "$pid"; then kill -9 "$pid" 2>/dev/null || true; fi
        wait "$pid" 2>/dev/null || true
    fi
    rm -f "$NB_PIDS/$name.pid"
}
cleanup() {
    local rc=$?
    stop_component kube-apiserver
    stop_component etcd
    if [[ ${NB_COMPAT_KEEP:-} == 1 ]]; then log "kept $work"; else rm -rf "$work"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$NB_APISERVER_PORT" "$etcd_port" "$etcd_peer_port"; do
    port_free "$p" || die "port $p on 127.0.0.1 is in use (set NB_COMPAT_APISERVER_PORT / NB_COMPAT_ETCD_PORT)"
done

# --- binaries ---------------------------------------------------------------------------------
bin=$("$NB_CLUSTER_DIR/build.sh" --with-tools) || die "tests/cluster/build.sh --with-tools failed"
apiserver=$("$here/build.sh") || die "tests/compat/build.sh failed"
declare -A helm_bin=([helm4]=$bin/helm [helm3]=$bin/helm3)
k() { "$bin/k8s" kubectl --kubeconfig "$NB_KUBECONFIG" "$@"; }
k8s_version=$("$apiserver" --version | awk '{print $2}')
k8s_minor=${k8s_version#v1.}
k8s_minor=${k8s_minor%%.*}
declare -A helm_version
for h in helm4 helm3; do helm_version[$h]=$("${helm_bin[$h]}" version --short); done
log "kube-apiserver $k8s_version ($apiserver), etcd $("$bin/etcd" --version | sed -n 's/^etcd Version: //p'), kubectl $NB_K8S_VERSION, helm ${helm_version[helm4]} and ${helm_version[helm3]}"

# --- results ----------------------------------------------------------------------------------
failed=0
declare -A result # result[ROW]: PASS, or FAIL with the count of failed checks
rows=()
row=""
begin_row() {
    row=$1
    rows+=("$row")
    result[$row]=PASS
    log "--- $row"
}
pass() { echo "ok   $*"; }
failures=()
notes=() # what the matrix reports beside it, not checks
fail() {
    echo "FAIL $*"
    failed=$((failed + 1))
    failures+=("$row: ${*%:}")
    result[$row]=FAIL
}
indent() { sed 's/^/     /'; }

# --- etcd and the API server ------------------------------------------------------------------
mkdir -p "$NB_PKI"
chmod 700 "$NB_PKI"
openssl ecparam -name prime256v1 -genkey -noout -out "$NB_PKI/ca.key"
openssl req -x509 -new -key "$NB_PKI/ca.key" -subj "/CN=netbench-compat-ca" -days 2 \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" -out "$NB_PKI/ca.crt" 2>/dev/null
openssl ecparam -name prime256v1 -genkey -noout -out "$NB_PKI/sa.key"
openssl ec -in "$NB_PKI/sa.key" -pubout -out "$NB_PKI/sa.pub" 2>/dev/null
gen_cert apiserver kube-apiserver "" "DNS:localhost,IP:127.0.0.1"
gen_cert admin netbench-admin system:masters
write_kubeconfig admin admin

start_etcd_member "$bin/etcd" compat "$etcd_port" "$etcd_peer_port"

apiserver_ready() {
    curl -sf --cacert "$NB_PKI/ca.crt" --cert "$NB_PKI/admin.crt" --key "$NB_PKI/admin.key" \
        "https://127.0.0.1:$NB_APISERVER_PORT/readyz"
}
# fresh_apiserver PART: (re)start the API server on an etcd prefix of PART's own, so PART sees an
# empty cluster; ready when /readyz says so and the default namespace exists.
fresh_apiserver() {
    stop_component kube-apiserver
    start_component kube-apiserver "$apiserver" \
        --etcd-servers "http://127.0.0.1:$etcd_port" --etcd-prefix "/compat-$1" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$NB_APISERVER_PORT" \
        --tls-cert-file "$NB_PKI/apiserver.crt" --tls-private-key-file "$NB_PKI/apiserver.key" \
        --client-ca-file "$NB_PKI/ca.crt" \
        --service-account-key-file "$NB_PKI/sa.pub" \
        --service-account-signing-key-file "$NB_PKI/sa.key" \
        --service-account-issuer "https://kubernetes.default.svc.$NB_CLUSTER_DOMAIN" \
        --service-cluster-ip-range "$NB_SVC_CIDR" \
        --authorization-mode RBAC --allow-privileged=true --profiling=false --v=1 \
        --endpoint-reconciler-type none # newer releases refuse a loopback address for it
    wait_for kube-apiserver 180 apiserver_ready
    wait_for kube-apiserver 60 k get namespace default
    local v
    v=$(k version -o json 2>/dev/null | jq -r .serverVersion.gitVersion)
    [[ $v == "$k8s_version" ]] || die "the API server says $v, not $k8s_version"
}

# apply WHAT [--dry-run=server] -f FILE...: server-side apply that must succeed without a warning.
apply() {
    local what=$1 out
    shift
    if ! out=$(k apply --server-side "$@" 2>&1); then
        fail "$what:"
        indent <<<"$out"
    elif grep -qi "warning" <<<"$out"; then
        fail "$what (applied, with warnings):"
        indent <<<"$out"
    else
        pass "$what"
    fi
}
namespaces() { # namespaces NAME...: create those missing
    local ns
    for ns in "$@"; do
        k create namespace "$ns" --dry-run=client -o yaml | k apply --server-side -f - >/dev/null
    done
}
# A stand-in for the prometheus-operator's ServiceMonitor CRD (the chart's serviceMonitor.enabled).
servicemonitor_crd() {
    k apply --server-side -f - >/dev/null <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
EOF
    k wait --for condition=established --timeout=30s crd/servicemonitors.monitoring.coreos.com >/dev/null ||
        fail "the ServiceMonitor stand-in CRD is not Established"
}
# nondefault_prereqs: the namespaces the non-default values put objects in (opt-in Roles, the
# dashboard; read from Helm 4's render, less the one it creates) and the ServiceMonitor CRD.
nondefault_prereqs() {
    local nss
    mapfile -t nss < <(python3 -c '
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
made = {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
print("\n".join(sorted({d["metadata"]["namespace"] for d in docs if d["metadata"].get("namespace")} - made)))
' "$work/helm4/render/nondefault.yaml")
    ((${#nss[@]} == 0)) || namespaces "${nss[@]}"
    servicemonitor_crd
}

chart=$repo/charts/netbench
nondefault=$repo/tests/chart/values-nondefault.yaml
crd_names=(ingressbenchmarks.netbench.io egressbenchmarks.netbench.io benchmarkresults.netbench.io)

# --- Helm without a cluster: lint, template, package --------------------------------------------
declare -A pkg
for h in helm4 helm3; do
    helm=${helm_bin[$h]}
    export HELM_CACHE_HOME=$work/$h/cache HELM_CONFIG_HOME=$work/$h/config HELM_DATA_HOME=$work/$h/data
    begin_row "$h: lint, template, package"
    mkdir -p "$work/$h/render"
    for v in default nondefault; do
        args=()
        [[ $v == nondefault ]] && args=(-f "$nondefault")
        if out=$("$helm" lint --strict "$chart" "${args[@]}" 2>&1); then pass "$h lint --strict ($v values)"; else
            fail "$h lint --strict ($v values):"
            indent <<<"$out"
        fi
    done
    for v in default nondefault optin; do
        case $v in
            default) args=(netbench "$chart" -n netbench-system) ;;
            nondefault) args=(nbt "$chart" -n bench-system -f "$nondefault") ;;
            optin) args=(netbench "$chart" -n netbench-system --set namespace.create=true --set networkPolicy.enabled=true) ;;
        esac
        if "$helm" template "${args[@]}" >"$work/$h/render/$v.yaml" 2>"$work/$h/render/$v.err"; then
            pass "$h template ($v values): $(grep -c '^kind:' "$work/$h/render/$v.yaml") objects"
        else
            fail "$h template ($v values):"
            indent <"$work/$h/render/$v.err"
        fi
    done
    # Chart.yaml's kubeVersion must admit the version tested here, and refuse older releases
    # (it would claim what nothing tests).
    if out=$("$helm" template netbench "$chart" --kube-version "${k8s_version#v}" 2>&1 >/dev/null); then
        pass "$h template --kube-version ${k8s_version#v}"
    else
        fail "$h template --kube-version ${k8s_version#v}:"
        indent <<<"$out"
    fi
    older=1.$((k8s_minor - 1)).0
    if "$helm" template netbench "$chart" --kube-version "$older" >/dev/null 2>&1; then
        fail "$h template --kube-version $older is accepted: Chart.yaml's kubeVersion ($(sed -n 's/^kubeVersion: *//p' "$chart/Chart.yaml")) admits releases older than the one tested here"
    else
        pass "$h template --kube-version $older refused by the chart's kubeVersion"
    fi
    mkdir -p "$work/$h/pkg"
    if out=$("$helm" package "$chart" -d "$work/$h/pkg" 2>&1) && pkg[$h]=$(compgen -G "$work/$h/pkg/netbench-*.tgz"); then
        pass "$h package: $(basename "${pkg[$h]}")"
    else
        fail "$h package:"
        indent <<<"$out"
        pkg[$h]=$chart
    fi
done
# Same objects from both (the text differs in blank lines only); differing objects are a note,
# not a failure: both renders are applied to the API server below.
for v in default nondefault optin; do
    if out=$(python3 - "$work/helm4/render/$v.yaml" "$work/helm3/render/$v.yaml" 2>&1 <<'EOF'
import sys, yaml
a, b = ([d for d in yaml.safe_load_all(open(f)) if d] for f in sys.argv[1:])
if a != b:
    name = lambda d: f"{d.get('kind')}/{d.get('metadata', {}).get('name')}"
    print("objects only or otherwise in helm4's:", sorted({name(d) for d in a if d not in b}))
    print("objects only or otherwise in helm3's:", sorted({name(d) for d in b if d not in a}))
    sys.exit(1)
EOF
    ); then
        pass "helm4 and helm3 render the same objects ($v values)"
    else
        echo "note helm4 and helm3 render different objects ($v values):"
        indent <<<"$out"
    fi
done

# --- kubectl: CRDs, CEL rules, examples, plain manifests, rendered chart ----------------------------
log "starting kube-apiserver $k8s_version (part: kubectl)"
fresh_apiserver kubectl

begin_row "CRDs and their CEL rules (create, compile, Established)"
for crd in "$repo"/crds/manifests/*.yaml; do
    apply "CRD ${crd#"$repo"/}" -f "$crd"
done
declare -A established # established[KIND]: its CRD is
for c in "${crd_names[@]}"; do
    if ! out=$(k wait --for condition=established --timeout=30s "crd/$c" 2>&1); then
        fail "$c not Established:"
        indent <<<"$out"
        continue
    fi
    # Every condition but Established and NamesAccepted (e.g. NonStructuralSchema) is a problem.
    other=$(k get crd "$c" -o json | jq -r '.status.conditions[] | select(.type != "Established" and .type != "NamesAccepted" or .status != "True") | "\(.type)=\(.status): \(.message)"')
    if [[ -n $other ]]; then
        fail "$c conditions:"
        indent <<<"$other"
    else
        pass "$c Established"
        established[$(k get crd "$c" -o jsonpath='{.spec.names.kind}')]=1
    fi
done

begin_row "CEL rules judge objects (cel-cases.yaml, BenchmarkResult oldSelf)"
mkdir -p "$work/cel"
python3 - "$here/cel-cases.yaml" "$work/cel" >"$work/cel/index" <<'EOF'
import json, sys, yaml
cases = yaml.safe_load(open(sys.argv[1]))
def merge(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(a[k], v) if k in a else v
        return out
    return b
for kind in ("accept", "refuse"):
    for i, c in enumerate(cases[kind]):
        obj = json.loads(json.dumps(cases["bases"][c["base"]]))
        obj["spec"] = merge(obj["spec"], c["spec"])
        path = f"{sys.argv[2]}/{kind}-{i:02}.json"
        json.dump(obj, open(path, "w"))
        print("\x1f".join([kind, path, c.get("expect", ""), c["what"], obj["kind"]]))
EOF
declare -A unjudged # unjudged[KIND]: cases not sent, its CRD being refused
while IFS=$'\x1f' read -r kind file expect what object_kind; do
    if [[ -z ${established[$object_kind]:-} ]]; then
        unjudged[$object_kind]=$((${unjudged[$object_kind]:-0} + 1))
    elif [[ $kind == accept ]]; then
        apply "accepted: $what" --dry-run=server -f "$file"
    elif out=$(k apply --server-side --dry-run=server -f "$file" 2>&1); then
        fail "refused: $what was accepted"
    elif grep -qF -- "$expect" <<<"$out"; then
        pass "refused: $what"
        grep -F -- "$expect" <<<"$out" | head -3 | cut -c1-400 | indent
    else
        fail "refused: $what, but without \"$expect\":"
        indent <<<"$out"
    fi
done <"$work/cel/index"
for kind in "${!unjudged[@]}"; do fail "${unjudged[$kind]} cases of $kind not judged: its CRD was refused"; done
result_yaml() { # result_yaml PHASE: a BenchmarkResult
    cat <<EOF
apiVersion: netbench.io/v1alpha1
kind: BenchmarkResult
metadata: {name: compat-result, namespace: default}
spec:
  benchmark: {kind: IngressBenchmark, name: compat, namespace: default}
  benchmarkSpec: "{}"
  benchmarkUid: 00000000-0000-0000-0000-000000000000
  phase: $1
  runId: compat-1
  specHash: "0"
EOF
}
apply "a BenchmarkResult created" -f <(result_yaml Succeeded)
expect="a BenchmarkResult is immutable"
if [[ -z ${established[BenchmarkResult]:-} ]]; then
    fail "a BenchmarkResult's update not judged: its CRD was refused"
elif out=$(k apply --server-side -f <(result_yaml Failed) 2>&1); then
    fail "refused: a BenchmarkResult's update was accepted"
elif grep -qF "$expect" <<<"$out"; then
    pass "refused: a BenchmarkResult's update (oldSelf)"
    grep -F "$expect" <<<"$out" | head -3 | indent
else
    fail "refused: a BenchmarkResult's update, but without \"$expect\":"
    indent <<<"$out"
fi

begin_row "deploy/examples/*.yaml"
for ex in "$repo"/deploy/examples/*.yaml; do
    # Examples name their namespace (or use default); create it so the object itself is judged.
    mapfile -t nss < <(sed -n 's/^  namespace: *//p' "$ex" | sort -u)
    ((${#nss[@]} == 0)) || namespaces "${nss[@]}"
    apply "example ${ex#"$repo"/}" -f "$ex"
done

begin_row "deploy/crds.yaml + deploy/operator.yaml"
apply "deploy/crds.yaml, deploy/operator.yaml (README: kubectl apply --server-side)" \
    -f "$repo/deploy/crds.yaml" -f "$repo/deploy/operator.yaml"

begin_row "the chart rendered, applied with kubectl"
nondefault_prereqs
namespaces netbench-system # deploy/operator.yaml made it; the default values do not render it
for h in helm4 helm3; do
    for v in default nondefault optin; do
        [[ -s $work/$h/render/$v.yaml ]] || continue
        apply "$h template ($v values)" -f "$work/$h/render/$v.yaml"
    done
done

# --- Helm 4 and Helm 3 against the API server ---------------------------------------------------
helm_check() { # helm_check WHAT CMD...: a helm command that must succeed
    local what=$1 out
    shift
    if out=$("$@" 2>&1); then pass "$what"; else
        fail "$what:"
        indent <<<"$out"
    fi
}
release_is() { # release_is RELEASE NAMESPACE REVISION: deployed at REVISION
    local st
    st=$("$helm" status "$1" -n "$2" --kubeconfig "$NB_KUBECONFIG" -o json 2>&1 | jq -r '"\(.info.status) \(.version)"' 2>&1) || true
    if [[ $st == "deployed $3" ]]; then pass "$1 is deployed, revision $3"; else fail "$1: $st (want deployed $3)"; fi
}
exists() { # exists WHAT KUBECTL-GET-ARGS...: at least one object
    local what=$1 out
    shift
    if out=$(k get "$@" -o name 2>&1) && [[ -n $out && $out != *"No resources found"* ]]; then
        pass "$what"
    else
        fail "$what:"
        indent <<<"${out:-nothing}"
    fi
}
for h in helm4 helm3; do
    helm=${helm_bin[$h]}
    export HELM_CACHE_HOME=$work/$h/cache HELM_CONFIG_HOME=$work/$h/config HELM_DATA_HOME=$work/$h/data
    log "starting kube-apiserver $k8s_version (part: $h)"
    fresh_apiserver "$h"
    begin_row "$h: install, upgrade, uninstall"
    nondefault_prereqs
    kcfg=(--kubeconfig "$NB_KUBECONFIG")
    # The release lives in bench-system, the namespace the non-default values are written for
    # (their watchNamespaces lists it: helm test's benchmark runs there).
    ns=bench-system
    helm_check "$h install netbench -n $ns --create-namespace (default values)" \
        "$helm" install netbench "${pkg[$h]}" -n $ns --create-namespace "${kcfg[@]}"
    release_is netbench $ns 1
    exists "CRDs from the chart" crd "${crd_names[@]}"
    exists "Deployment netbench-operator" -n $ns deployment netbench-operator
    helm_check "$h upgrade netbench (non-default values, namespace.create=false, crds.install=true)" \
        "$helm" upgrade netbench "${pkg[$h]}" -n $ns -f "$nondefault" \
        --set namespace.create=false --set crds.install=true "${kcfg[@]}"
    release_is netbench $ns 2
    exists "Deployment nb (fullnameOverride)" -n $ns deployment nb
    replicas=$(k get -n $ns deployment nb -o jsonpath='{.spec.replicas}' 2>&1 || true)
    if [[ $replicas == 2 ]]; then pass "Deployment nb has 2 replicas"; else fail "Deployment nb has replicas '$replicas', want 2"; fi
    exists "ServiceMonitor nb" -n $ns servicemonitor nb
    exists "NetworkPolicy nb" -n $ns networkpolicy nb
    exists "Roles in the watched namespace bench-a" -n bench-a role
    helm_check "$h uninstall netbench" "$helm" uninstall netbench -n $ns "${kcfg[@]}"
    exists "CRDs kept after uninstall (crds.keep)" crd "${crd_names[@]}"
    if out=$(k get -n $ns deployment nb -o name 2>&1); then fail "Deployment nb left after uninstall: $out"; else pass "Deployment nb gone"; fi
    helm_check "$h install nbt (non-default values, crds.install=false: the kept CRDs serve)" \
        "$helm" install nbt "${pkg[$h]}" -n $ns -f "$nondefault" --set namespace.create=false "${kcfg[@]}"
    release_is nbt $ns 1
    exists "Deployment nb" -n $ns deployment nb
    # namespace.create=true, as docs/install.md and the chart's README say (without
    # --create-namespace), then with it: a note of what each Helm does, not a check.
    for create in "" --create-namespace; do
        name=nsc${create:+-created}
        if out=$("$helm" install "$name" "${pkg[$h]}" -n "$name" ${create:+"$create"} --set namespace.create=true \
            --set crds.install=false --set fullnameOverride="$name" "${kcfg[@]}" 2>&1); then
            notes+=("$h install with namespace.create=true ${create:-without --create-namespace}: installed")
        else
            notes+=("$h install with namespace.create=true ${create:-without --create-namespace}: $(tr -s '\n\t' '  ' <<<"$out" | cut -c1-160)")
        fi
    done
done

# --- matrix -------------------------------------------------------------------------------------
# Where the main test cluster (Kubernetes 1.37.2, tests/run-all.sh) covers the same row.
on_main() {
    case $1 in
        helm4:\ lint*) echo "tests/chart/static.sh (no cluster)" ;;
        helm3:\ lint*) echo "tests/chart/static.sh (no cluster)" ;;
        helm4:*) echo "tests/chart/cluster-test.sh (upgrade, test, uninstall)" ;;
        helm3:*) echo "not run" ;;
        CRDs* | CEL* | deploy/examples*) echo "tests/cluster/crd-check.sh (+ cargo test -p crds)" ;;
        deploy/crds*) echo "tests/chart/cluster-test.sh" ;;
        *) echo "tests/e2e/setup.sh, tests/chart/cluster-test.sh" ;;
    esac
}
echo
echo "compatibility matrix (tests/compat/run.sh, $((SECONDS - started)) s; each row is checks on one API server)"
printf '  %-64s %-17s %s\n' "" "Kubernetes ${k8s_version#v}" "Kubernetes ${NB_K8S_VERSION#v} (main test cluster, separately)"
for r in "${rows[@]}"; do
    printf '  %-64s %-17s %s\n' "$r" "${result[$r]}" "$(on_main "$r")"
done
echo "  helm4 = Helm ${helm_version[helm4]}, helm3 = Helm ${helm_version[helm3]}; kubectl ${NB_K8S_VERSION} (the API server judges every object)"
((${#notes[@]} == 0)) || printf 'note %s\n' "${notes[@]}"
if ((failed > 0)); then
    echo "$failed check(s) failed (details above):"
    printf '  %s\n' "${failures[@]}"
    exit 1
fi
echo "all compatibility checks passed"
