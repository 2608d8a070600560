#!/usr/bin/env bash
# Check the generated CRDs and the example benchmarks against the real API server: every
# crds/manifests/*.yaml must be accepted and become Established (this is where CEL cost limits
# and schema errors show up), and every deploy/examples/*.yaml must pass a server-side dry run.
# Brings the cluster up if needed (and leaves it up). Exit non-zero on the first failure.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root
repo=$(cd "$NB_CLUSTER_DIR/../.." && pwd)

"$NB_CLUSTER_DIR/up.sh" >/dev/null || die "up.sh failed"
compgen -G "$repo/crds/manifests/*.yaml" >/dev/null || die "no CRDs in crds/manifests/"

failed=0
for crd in "$repo"/crds/manifests/*.yaml; do
    if out=$(kc apply -f "$crd" 2>&1) && established 30 -f "$crd" >/dev/null; then
        if grep -qi "warning" <<<"$out"; then
            echo "FAIL CRD ${crd#"$repo"/} applies with warnings:"
            sed 's/^/     /' <<<"$out"
            failed=1
        fi
        echo "ok   CRD ${crd#"$repo"/}"
    else
        echo "FAIL CRD ${crd#"$repo"/}:"
        sed 's/^/     /' <<<"$out"
        failed=1
    fi
done
for ex in "$repo"/deploy/examples/*.yaml; do
    [[ -e $ex ]] || continue
    # Examples name their namespace; create it so the dry run checks the object itself.
    for ns in $(sed -n 's/^  namespace: *//p' "$ex" | sort -u); do
        kc create namespace "$ns" --dry-run=client -o yaml | kc apply -f - >/dev/null
    done
    if out=$(kc apply --dry-run=server -f "$ex" 2>&1); then
        echo "ok   example ${ex#"$repo"/}"
    else
        echo "FAIL example ${ex#"$repo"/}:"
        sed 's/^/     /' <<<"$out"
        failed=1
    fi
done

# Absurd values the API server itself must refuse, with a message naming the field (the CEL
# rules the local evaluator in crds/tests cannot judge like Go does, and the ones that guard the
# operator: a duration that overflows, a quantity that does not parse).
ib() {  # ib FIELD-YAML: an IngressBenchmark whose spec is the simple one plus FIELD-YAML
    printf 'apiVersion: netbench.io/v1alpha1\nkind: IngressBenchmark\nmetadata: {name: crd-check, namespace: default}\nspec:\n  target: {url: "%s"}\n  load: {%s}\n  workers: {%s}\n' "$1" "$2" "$3"
}
refuse() {  # refuse WHAT EXPECTED-SUBSTRING URL LOAD WORKERS
    local what=$1 expected=$2 out
    if out=$(ib "$3" "$4" "$5" | kc apply --dry-run=server -f - 2>&1); then
        echo "FAIL refused: $what was accepted"
        failed=1
    elif grep -qF -- "$expected" <<<"$out"; then
        echo "ok   refused: $what"
    else
        echo "FAIL refused: $what, but without \"$expected\":"
        sed 's/^/     /' <<<"$out"
        failed=1
    fi
}
accept() {  # accept WHAT URL LOAD WORKERS
    local out
    if out=$(ib "$2" "$3" "$4" | kc apply --dry-run=server -f - 2>&1); then
        echo "ok   accepted: $1"
    else
        echo "FAIL accepted: $1 was refused:"
        sed 's/^/     /' <<<"$out"
        failed=1
    fi
}
url=http://nginx-target.netbench-target.svc/
refuse "a URL without a host" "URL with a host" "http:///x" "" ""
refuse "an overflowing duration" "spec.load.duration" "$url" "duration: 99999999999999999999h" ""
refuse "a 1ns duration" "load.duration must be between 1s and 24h" "$url" "duration: 1ns" ""
refuse "a timeout of 0s" "load.timeout must be between 1ms and 5m" "$url" "timeout: 0s" ""
refuse "workers.cpu: banana" "workers.cpu must be a quantity" "$url" "" "cpu: banana"
refuse "workers.memory: 2Ti" "workers.memory must be a quantity" "$url" "" "memory: 2Ti"
refuse "100000 connections" "spec.load.connections" "$url" "connections: 100000" ""
accept "cpu as a number and as a string" "$url" "" "cpu: 2, memory: 256Mi"
accept "the bounds' edges" "$url" "duration: 24h, warmup: 1h, timeout: 5m, connections: 20000" "cpu: \"256\""
exit $failed
